"""Running rag-lsp itself on benchmark trees: one index per repository, kept in the cache,
searched through the public ``Workspace`` API with default settings unless told otherwise."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from codebench.data import (
    DEFAULT_CACHE,
    DEFAULT_DATA,
    DEFAULT_MIRRORS,
    REPO,
    load_repo_specs,
    source_tree,
)
from codebench.scoring import RankedFile
from rag_lsp import Workspace
from rag_lsp.config import Settings, validate_settings
from rag_lsp.search.ranking import RULE_SETTINGS
from rag_lsp.workspace import load_embedder

PROJECT = "rag-lsp"  # this repository, as one more workspace
# Left out of this project's index: bench/ holds the off-topic question lists and tests/ the
# ranking tests' nonsense queries, so in a workspace that contains them those very words are
# on-topic; the off-topic figure would measure our own fixtures.
PROJECT_EXCLUDE = ["bench/", "tests/"]
_EMBEDDERS: dict = {}  # exactQueries -> the model


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="benchmark data folder (annotations/, repos.json, published/)")
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS,
                        help="folder of bare git mirrors (owner+name/repo or name.git)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="where extracted trees and indexes are kept (git-ignored)")
    parser.add_argument("--threshold", type=float, help="override the threshold setting")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="search settings to override, e.g. rankTestPrior=1")
    parser.add_argument("--ablate", action="store_true",
                        help="also run with each ranking rule switched off, one at a time")
    parser.add_argument("--index-variant", default="default",
                        help="name of the index folder (to keep indexes built differently)")
    parser.add_argument("--index-set", action="append", default=[], metavar="SETTING=VALUE",
                        help="index settings for this variant, e.g. chunkHeaders=false "
                             "(use with --index-variant)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def benchmark_parser(doc: str) -> argparse.ArgumentParser:
    """A bench's options over the benchmark repositories: ``doc``'s first paragraph as the
    description, the rest as the epilog, the common options and ``--repo``."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog="\n\n".join(doc.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_options(parser)
    parser.add_argument("--repo", action="append", default=[], help="only these repositories")
    return parser


def shared_embedder(exact_queries: bool = False):
    """One model for every workspace of the run (two, when a variant sets exactQueries)."""
    if exact_queries not in _EMBEDDERS:
        embedder, error = load_embedder(Settings(exact_queries=exact_queries))
        if embedder is None:
            raise SystemExit(f"the embedding model is needed: {error}")
        _EMBEDDERS[exact_queries] = embedder
    return _EMBEDDERS[exact_queries]


def parse_overrides(pairs: list[str]) -> dict:
    """``["rankDefinitionBoost=0", "threshold=0.1"]`` → validated camelCase settings."""
    raw = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            raw[key] = json.loads(value)
        except ValueError:
            raw[key] = value
    _settings, problems = validate_settings(raw, source="--set")
    if problems:
        raise SystemExit("\n".join(problems))
    return raw


def variants(args: argparse.Namespace) -> dict[str, dict]:
    """Label → settings overrides: the run as asked, then each rule off if ``--ablate``."""
    base = parse_overrides(args.set)
    runs = {"default": base}
    if args.ablate:
        runs.update({f"-{rule}": {**base, rule: off} for rule, off in RULE_SETTINGS.items()})
    return runs


def open_workspace(tree: Path, index_dir: Path, overrides: dict | None = None) -> Workspace:
    settings, problems = validate_settings({"indexPath": str(index_dir), **(overrides or {})},
                                           source="benchmark")
    if problems:
        raise SystemExit("\n".join(problems))
    return Workspace.open(tree, settings, embedder=shared_embedder())


def benchmark_workspace(repo: str, args: argparse.Namespace) -> Workspace:
    """The indexed workspace of a benchmark repository (or of this project: ``rag-lsp``),
    built or brought up to date on first use."""
    overrides = parse_overrides(getattr(args, "index_set", []))
    if repo == PROJECT:
        tree = REPO
        overrides = {**overrides, "exclude": [*overrides.get("exclude", []), *PROJECT_EXCLUDE]}
    else:
        spec = load_repo_specs(args.data)[repo]
        tree = source_tree(spec, args.mirrors, args.cache)
    ws = open_workspace(tree, args.cache / "index" / args.index_variant / repo, overrides)
    info = ensure_index(ws, repo)
    if info["embedded"]:
        print(f"{repo}: {info['chunks']} chunks (indexed in {info['seconds']} s, "
              f"{info['embedded']} embedded)", file=sys.stderr)
    wait_for_memory_copy(ws)
    return ws


def wait_for_memory_copy(ws: Workspace, timeout: float = 180.0) -> None:
    """Wait until the index's vectors and postings are in memory (a background load). Until
    then searches are answered by LanceDB, whose full-text ranking differs from the postings':
    measuring before the load ends would make a figure depend on timing."""
    store = ws._index.store()  # noqa: SLF001 (a bench waits for the background load)
    if store.large():  # nothing is loaded: LanceDB's indexes answer
        return
    deadline = time.monotonic() + timeout
    while (matrix := store.vectors_in_memory()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if matrix is None or matrix.terms is None:
        print(f"warning: {ws.root}: the in-memory copy "
              f"{'did not load' if matrix is None else 'has no postings'}; searches are "
              "answered by LanceDB and figures may differ from run to run", file=sys.stderr)


# Variants of recent workspaces, each with its in-memory copy loaded; keyed by the workspace
# itself (not its id, which a later workspace may reuse) and bounded: an ablation opens 13
# variants for each of 11 workspaces.
_VARIANTS: dict[tuple[Workspace, str], Workspace] = {}
MAX_VARIANTS = 16


def with_settings(ws: Workspace, overrides: dict) -> Workspace:
    """The same index searched with other (search-time) settings: one workspace per
    variant, its in-memory copy loaded before it is used."""
    if not overrides:
        return ws
    key = (ws, json.dumps(overrides, sort_keys=True))
    if key not in _VARIANTS:
        if len(_VARIANTS) >= MAX_VARIANTS:
            _VARIANTS.pop(next(iter(_VARIANTS))).close()  # the oldest
        merged = Settings.from_dict({**ws.settings.to_dict(), **overrides})
        # The same index, so the same documents' vectors; queries as the variant says
        embedder = (shared_embedder(merged.exact_queries)
                    if merged.exact_queries != ws.settings.exact_queries else ws.embedder)
        variant = Workspace(ws.root, merged, embedder, ws.model_error, ws.priority)
        wait_for_memory_copy(variant)
        _VARIANTS[key] = variant
    return _VARIANTS[key]


def ensure_index(ws: Workspace, label: str) -> dict:
    started = time.perf_counter()
    report = ws.index(progress=_progress(label))
    sys.stderr.write("\r" + " " * 70 + "\r")
    return {"seconds": round(time.perf_counter() - started, 1),
            "chunks": report.chunks_total, "embedded": report.chunks_embedded}


def _progress(label: str):
    def show(p) -> None:
        if p.phase == "index" and p.files_total:
            sys.stderr.write(f"\r  indexing {label}: {p.files_done}/{p.files_total} files, "
                             f"{p.chunks_embedded} chunks embedded   ")
            sys.stderr.flush()
    return show


def indexed_paths(ws: Workspace) -> list[str]:
    return list(ws._open_store().file_records())


def search_files(ws: Workspace, query: str, *, mode: str = "hybrid", top_k: int = 10,
                 threshold: float | None = None) -> tuple[list[RankedFile], float]:
    started = time.perf_counter()
    response = ws.search(query, top_k=top_k, mode=mode, threshold=threshold)
    ms = (time.perf_counter() - started) * 1000
    return [RankedFile(r.path, tuple((x.start_line, x.end_line) for x in r.ranges))
            for r in response.results], ms


def write_results(name: str, payload: dict, *, print_json: bool = False) -> Path:
    """Keep ``payload`` in ``bench/results/<name>.json`` (git-ignored), print it too when
    ``print_json``, and say where it went on stderr."""
    out = REPO / "bench" / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    text = json.dumps(payload, indent=2)
    out.write_text(text + "\n", encoding="utf-8")
    if print_json:
        print(text)
    print(f"wrote {out}", file=sys.stderr)
    return out
