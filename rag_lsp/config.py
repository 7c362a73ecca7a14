"""Settings: defaults and rules come from ``schemas/config.schema.json``; this module applies them.

Two ways in: :func:`load_settings` (strict, for the CLI: any problem raises ``ConfigError``) and
:func:`validate_settings` (lenient, for the language server: a bad setting is reported and falls
back to its default, so one typo never stops the server).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rag_lsp.confined import NotAFileError, open_regular
from rag_lsp.errors import ConfigError
from rag_lsp.globs import GLOB_HINT, pattern_problem
from rag_lsp.schema_messages import TYPE_WORDS, describe_rule, show_value, validator_class

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.json"
CONFIG_FILE_NAME = ".rag-lsp.json"
DEFAULT_INDEX_DIR_NAME = ".rag-lsp"
SETTINGS_FILE_MAX_BYTES = 1 << 20


@cache
def load_schema() -> dict[str, Any]:
    """The settings JSON Schema (read once)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _properties() -> dict[str, dict[str, Any]]:
    return load_schema()["properties"]


def _default(key: str) -> Any:
    value = _properties()[key]["default"]
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Settings:
    """Every setting, typed and defaulted. Field ``foo_bar`` is setting ``fooBar`` on the wire."""

    # Field defaults are read from the schema so the schema stays the single source of truth.
    extensions: tuple[str, ...] = _default("extensions")
    exclude: tuple[str, ...] = _default("exclude")
    use_gitignore: bool = _default("useGitignore")
    max_file_bytes: int = _default("maxFileBytes")
    chunk_tokens: int = _default("chunkTokens")
    chunk_overlap_tokens: int = _default("chunkOverlapTokens")
    chunk_headers: bool = _default("chunkHeaders")
    secret_filter: bool = _default("secretFilter")
    top_k: int = _default("topK")
    threshold: float = _default("threshold")
    answer_threshold: float = _default("answerThreshold")
    knowledge_threshold: float = _default("knowledgeThreshold")
    search_mode: str = _default("searchMode")
    # Ranking rules (rag_lsp.search.ranking): weights of evidence and priors of file roles.
    rank_lexical_weight: float = _default("rankLexicalWeight")
    rank_identifier_lexical_weight: float = _default("rankIdentifierLexicalWeight")
    rank_definition_boost: float = _default("rankDefinitionBoost")
    rank_path_boost: float = _default("rankPathBoost")
    rank_file_agreement: float = _default("rankFileAgreement")
    rank_test_prior: float = _default("rankTestPrior")
    rank_benchmark_prior: float = _default("rankBenchmarkPrior")
    rank_docs_prior: float = _default("rankDocsPrior")
    rank_example_prior: float = _default("rankExamplePrior")
    rank_legacy_prior: float = _default("rankLegacyPrior")
    rank_generated_prior: float = _default("rankGeneratedPrior")
    rank_data_prior: float = _default("rankDataPrior")
    rank_reexport_prior: float = _default("rankReexportPrior")
    rank_internal_prior: float = _default("rankInternalPrior")
    index_path: str | None = _default("indexPath")
    model_dir: str | None = _default("modelDir")
    embed_batch_size: int = _default("embedBatchSize")
    index_threads: int | None = _default("indexThreads")
    embedding_cache: bool = _default("embeddingCache")
    embedding_cache_megabytes: int = _default("embeddingCacheMegabytes")
    exact_queries: bool = _default("exactQueries")
    lexical_first: bool = _default("lexicalFirst")
    enabled: bool = _default("enabled")
    extra_modes: tuple[str, ...] = _default("extraModes")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """Build from camelCase keys (already validated); missing keys take their defaults."""
        values = {}
        for key, value in data.items():
            values[_snake(key)] = tuple(value) if isinstance(value, list) else value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """camelCase keys and JSON types, as in ``.rag-lsp.json``."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            out[_camel(field.name)] = list(value) if isinstance(value, tuple) else value
        return out

    def _resolve(self, root: Path, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else root / path

    def index_dir(self, root: Path) -> Path:
        """Where the index lives: ``indexPath`` resolved against ``root``, or ``root/.rag-lsp``."""
        if self.index_path is None:
            return root / DEFAULT_INDEX_DIR_NAME
        return self._resolve(root, self.index_path)

    def model_path(self, root: Path) -> Path | None:
        """``modelDir`` resolved against ``root``; ``None`` means "use the installed model"."""
        return None if self.model_dir is None else self._resolve(root, self.model_dir)

    def indexing_threads(self, cores: int | None = None) -> int:
        """Threads for indexing's model calls: ``indexThreads``, where ``null`` leaves one of
        ``cores`` (default: this machine's) free for the editor, and 0 takes them all."""
        cores = cores or os.cpu_count() or 1
        if self.index_threads is None:
            return max(1, cores - 1)
        return self.index_threads or cores


def _where(path: list[Any]) -> str:
    head, *rest = path
    return f"`{head}`" + "".join(f"[{p}]" for p in rest)


def _unknown_key_message(key: str, source: str) -> str:
    known = sorted(_properties())
    guess = _camel(key) if _camel(key) in known else None
    if guess is None:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        guess = close[0] if close else None
    hint = f" (did you mean `{guess}`?)" if guess else ""
    return f"unknown setting `{key}` in {source}{hint}; known settings: {', '.join(known)}"


def _check(raw: Mapping[str, Any], source_of: Mapping[str, str], source: str) -> tuple[
    dict[str, Any], list[str]
]:
    """Valid settings from ``raw`` (bad ones dropped) and one message per problem."""
    props = _properties()
    problems: list[str] = []
    bad: set[str] = set()
    for key in raw:
        if key not in props:
            problems.append(_unknown_key_message(key, source_of.get(key, source)))
            bad.add(key)
    known = {k: v for k, v in raw.items() if k in props}
    validator = validator_class()(load_schema())
    errors = sorted(validator.iter_errors(known), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        path = list(error.absolute_path)
        if not path:  # whole-object errors; unknown keys are reported above
            continue
        key = path[0]
        bad.add(key)
        message = f"{_where(path)} = {show_value(error.instance)} in {source_of.get(key, source)}: "
        message += describe_rule(error)
        default = json.dumps(props[key]["default"])
        if len(path) == 1 and len(default) <= 40:
            message += f" (default {show_value(props[key]['default'])})"
        problems.append(message)
    good = {k: v for k, v in known.items() if k not in bad}
    problems.extend(_bad_globs(good, source_of.get("exclude", source)))
    # Cross-field rule the schema cannot say: overlap must leave room for new text.
    chunk = good.get("chunkTokens", props["chunkTokens"]["default"])
    overlap = good.get("chunkOverlapTokens", props["chunkOverlapTokens"]["default"])
    if overlap >= chunk:
        key = "chunkOverlapTokens" if "chunkOverlapTokens" in good else "chunkTokens"
        fallback = min(props["chunkOverlapTokens"]["default"], chunk // 2)
        problems.append(
            f"`chunkOverlapTokens` = {overlap} in {source_of.get(key, source)}: must be less than "
            f"`chunkTokens` ({chunk})"
        )
        good["chunkOverlapTokens"] = fallback
    return good, problems


def _bad_globs(good: dict[str, Any], source: str) -> list[str]:
    """Drop ``exclude`` patterns that cannot be compiled (they would stop every scan), one
    message each; the readable ones stay."""
    patterns = good.get("exclude")
    if not patterns:
        return []
    problems, kept = [], []
    for i, pattern in enumerate(patterns):
        problem = pattern_problem(pattern)
        if problem:
            problems.append(f"{_where(['exclude', i])} = {show_value(pattern)} in {source}: not a "
                            f"gitignore-style pattern ({problem}). {GLOB_HINT}")
        else:
            kept.append(pattern)
    good["exclude"] = kept
    return problems


def validate_settings(
    raw: Any, *, source: str, sources: Mapping[str, str] | None = None
) -> tuple[Settings, list[str]]:
    """Lenient validation: returns settings with each invalid value replaced by its default,
    and one readable message per problem (naming setting, value, rule and ``source``).

    ``sources`` optionally names a different source per key (e.g. ``{"searchMode": "--mode"}``).
    """
    if not isinstance(raw, Mapping):
        kind = TYPE_WORDS.get(_json_type(raw), _json_type(raw))
        return Settings(), [f"settings in {source} must be an object, got {kind}"]
    good, problems = _check(raw, sources or {}, source)
    return Settings.from_dict(good), problems


def _json_type(value: Any) -> str:
    for name, kind in (("boolean", bool), ("integer", int), ("number", float), ("string", str),
                       ("array", list), ("object", Mapping)):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def read_settings_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``ConfigError`` naming file, line and column if malformed."""
    try:
        with open_regular(path) as source:  # a FIFO there would block a read forever
            raw = source.read(SETTINGS_FILE_MAX_BYTES + 1)
        if len(raw) > SETTINGS_FILE_MAX_BYTES:
            raise ConfigError([f"{path} is over {SETTINGS_FILE_MAX_BYTES >> 20} MB: not a "
                               "settings file"])
        text = raw.decode("utf-8-sig")
    except NotAFileError as exc:
        raise ConfigError([f"{path} is {exc.strerror}: settings are read from a JSON file of "
                           "that name; move it aside"]) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read {path}: {exc}"]) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"]
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: settings must be a JSON object, got {_json_type(data)}"])
    return data


def confine_folder_settings(
    file_settings: Mapping[str, Any], root: Path, path: Path, *, refused: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """A folder's own settings file comes with the folder (a cloned repository), so it may
    only place the index inside the folder: an ``indexPath`` outside is dropped, with a
    message (saying the default is used, or, when ``refused``, that nothing was done). The
    editor's settings and command-line flags may point anywhere."""
    settings = dict(file_settings)
    index_path = settings.get("indexPath")
    if not isinstance(index_path, str):
        return settings, []
    resolved = (root / Path(index_path).expanduser()).resolve()
    if resolved == root.resolve() or root.resolve() in resolved.parents:
        return settings, []
    del settings["indexPath"]
    return settings, [
        f"`indexPath` = {index_path!r} in {path}: a folder's settings file may only place the "
        f"index inside the folder ({root}); "
        + ("nothing was done. Remove it from that file, or pass --index-path instead."
           if refused else
           "the default is used. Set it in the editor's settings or with --index-path "
           "instead.")]


def load_settings(
    root: Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    override_sources: Mapping[str, str] | None = None,
) -> Settings:
    """Strict loading for the CLI: ``<root>/.rag-lsp.json`` (if present), then ``overrides``
    (camelCase keys; ``None`` values ignored) on top. Raises ``ConfigError`` listing every problem.

    ``override_sources`` maps an override key to how the user gave it (e.g. ``"--mode"``);
    unnamed overrides are reported as coming from "command line".
    """
    path = root / CONFIG_FILE_NAME
    merged, confined = confine_folder_settings(
        read_settings_file(path) if os.path.lexists(path) else {}, root, path, refused=True)
    if confined and (overrides or {}).get("indexPath") is None:  # a flag overrides it anyway
        raise ConfigError(confined)
    sources: dict[str, str] = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        merged[key] = value
        sources[key] = (override_sources or {}).get(key, "command line")
    settings, problems = validate_settings(merged, source=CONFIG_FILE_NAME, sources=sources)
    if problems:
        raise ConfigError(problems)
    return settings
