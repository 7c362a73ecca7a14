"""Where the model lives, and whether its files check out against ``models/manifest.json``.

Lookup order: an explicit directory (setting ``modelDir`` / ``--model-dir``) → the
project's ``models/all-MiniLM-L6-v2/`` → the Hugging Face cache (never a download).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from rag_lsp.errors import ModelIntegrityError, ModelNotFoundError

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
MANIFEST_PATH = MODELS_DIR / "manifest.json"
ONNX_NAME = "model.onnx"
TOKENIZER_NAME = "tokenizer.json"
# The same model with 8-bit weights, for search queries only (see
# models/quantize_query_model.py); made by `rag-lsp model install`, optional.
QUERY_ONNX_NAME = "query_model.onnx"
INSTALL_RECORD = "INSTALLED.json"  # written by `rag-lsp model install`: source, time, hashes

INSTALL_HINT = "Run `rag-lsp model install` (offline) or pass --model-dir / set `modelDir`."


def load_manifest() -> dict:
    return json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ModelFiles:
    """The two files the embedder needs, and where they were found; with the query model
    when the folder has one."""

    directory: Path
    onnx_path: Path
    tokenizer_path: Path
    origin: str  # "explicit" | "models" | "hf-cache"
    query_onnx_path: Path | None = None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_in(directory: Path, origin: str) -> ModelFiles | None:
    """The model files in ``directory`` (with the query model if it is there), or ``None``
    without ``model.onnx`` and ``tokenizer.json``."""
    onnx_path, tokenizer_path = directory / ONNX_NAME, directory / TOKENIZER_NAME
    if onnx_path.is_file() and tokenizer_path.is_file():
        query = directory / QUERY_ONNX_NAME
        return ModelFiles(directory, onnx_path, tokenizer_path, origin,
                          query if query.is_file() else None)
    return None


def _from_hf_cache(repo_id: str) -> ModelFiles | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    onnx = try_to_load_from_cache(repo_id, "onnx/model.onnx")
    tokenizer = try_to_load_from_cache(repo_id, TOKENIZER_NAME)
    if isinstance(onnx, str) and isinstance(tokenizer, str):
        return ModelFiles(Path(onnx).parent, Path(onnx), Path(tokenizer), "hf-cache")
    return None


def find_model(explicit_dir: str | Path | None = None) -> ModelFiles:
    """Locate the model files, or raise :class:`ModelNotFoundError` saying how to get them."""
    if explicit_dir is not None:
        found = files_in(Path(explicit_dir).expanduser(), "explicit")
        if found is None:
            raise ModelNotFoundError(
                f"no {ONNX_NAME} and {TOKENIZER_NAME} in model directory {explicit_dir}. "
                f"Point modelDir at a folder holding both, or drop the setting. {INSTALL_HINT}"
            )
        return found
    manifest = load_manifest()
    found = files_in(MODELS_DIR / manifest["directory"], "models") or _from_hf_cache(
        manifest["model_id"]
    )
    if found is None:
        raise ModelNotFoundError(
            f"the embedding model {manifest['model_id']} is not installed "
            f"(looked in {MODELS_DIR / manifest['directory']} and the Hugging Face cache). "
            + INSTALL_HINT
        )
    return found


def verify_files(files: ModelFiles) -> dict[str, str]:
    """Hash the files; raise :class:`ModelIntegrityError` if a pinned hash does not match.

    Returns the hashes. Files in the models folder must match the manifest, except a
    ``model.onnx`` installed ``--from-hub`` (the hub's own export, a different file): it must
    match the hash recorded when it passed the reference-vector check at install time.
    Files from elsewhere (an explicit folder, the HF cache) are hashed and reported only.
    """
    hashes = {
        ONNX_NAME: sha256_file(files.onnx_path),
        TOKENIZER_NAME: sha256_file(files.tokenizer_path),
    }
    if files.origin != "models":
        return hashes
    pinned = {name: meta["sha256"] for name, meta in load_manifest()["files"].items()}
    record = files.directory / INSTALL_RECORD
    if record.is_file():
        installed = json.loads(record.read_text(encoding="utf-8"))
        if installed.get("source") == "hub":
            pinned[ONNX_NAME] = installed.get("sha256", {}).get(ONNX_NAME, "")
    for name, actual in hashes.items():
        expected = pinned[name]
        if actual != expected:
            raise ModelIntegrityError(
                f"{files.directory / name} has sha256 {actual[:12]}…, the manifest pins "
                f"{expected[:12]}…. Run `rag-lsp model install --force` to rebuild it."
            )
    return hashes


def verify_query_model(files: ModelFiles) -> str:
    """Hash the query model; raise :class:`ModelIntegrityError` if the folder's install
    record holds another hash for it (it is checked against the reference vectors when
    installed, then recorded: the 8-bit rounding is not pinned by the manifest). Returns the
    hash. Query models from elsewhere (an explicit folder) are hashed and reported only."""
    assert files.query_onnx_path is not None
    actual = sha256_file(files.query_onnx_path)
    if files.origin != "models":
        return actual
    record = files.directory / INSTALL_RECORD
    installed = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
    expected = installed.get("sha256", {}).get(QUERY_ONNX_NAME, "")
    if actual != expected:
        raise ModelIntegrityError(
            f"{files.query_onnx_path} has sha256 {actual[:12]}…, its install recorded "
            f"{expected[:12] or 'none'}…. Run `rag-lsp model install --force` to rebuild it."
        )
    return actual
