"""The code-retrieval benchmark's data: annotated queries, pinned repositories, their trees.

Reads Semble's public benchmark files (``annotations/<repo>.json``, ``repos.json``,
``published/published.json``) from a data folder outside this repository, and extracts each
pinned revision's ``benchmark_root`` from a local bare git mirror into a git-ignored cache.
Third-party sources are never committed.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "semble"
DEFAULT_MIRRORS = REPO.parent / ".mirror"
DEFAULT_CACHE = REPO / "bench" / "cache"
CATEGORIES = ("architecture", "semantic", "symbol")
_SPAN = re.compile(r"^(.*):(\d+)-(\d+)$")


@dataclass(frozen=True)
class Target:
    """A file (and optionally a line span, 1-based inclusive) that answers a query."""

    path: str
    start_line: int | None = None
    end_line: int | None = None

    @property
    def has_span(self) -> bool:
        return self.start_line is not None and self.end_line is not None


@dataclass(frozen=True)
class Task:
    repo: str
    language: str
    query: str
    category: str
    targets: tuple[Target, ...]  # relevant + secondary, equal weight


@dataclass(frozen=True)
class RepoSpec:
    name: str
    language: str
    url: str
    revision: str
    benchmark_root: str | None = None

    @property
    def owner_and_name(self) -> tuple[str, str]:
        parts = self.url.rstrip("/").removesuffix(".git").split("/")
        return parts[-2], parts[-1]


def infer_category(query: str) -> str:
    """Semble's rule for queries without a category."""
    if " " not in query.strip():
        return "symbol"
    return "architecture" if query.lower().startswith("how ") else "semantic"


def parse_target(raw: str | dict) -> Target:
    """``"path"``, ``"path:START-END"`` or ``{"path", "start_line", "end_line"}``."""
    if isinstance(raw, dict):
        start, end = raw.get("start_line"), raw.get("end_line")
        return Target(str(raw["path"]), None if start is None else int(start),
                      None if end is None else int(end))
    match = _SPAN.match(raw)
    if match:
        return Target(match.group(1), int(match.group(2)), int(match.group(3)))
    return Target(raw)


def load_repo_specs(data: Path) -> dict[str, RepoSpec]:
    raw = json.loads((data / "repos.json").read_text(encoding="utf-8"))
    return {item["name"]: RepoSpec(**item) for item in raw}


def annotated_repos(data: Path) -> list[str]:
    """The repositories that have annotations in ``data`` (the development set)."""
    return sorted(p.stem for p in (data / "annotations").glob("*.json"))


def load_tasks(data: Path, repo: str, spec: RepoSpec) -> list[Task]:
    raw = json.loads((data / "annotations" / f"{repo}.json").read_text(encoding="utf-8"))
    tasks = []
    for item in raw:
        category = item.get("category")
        targets = [parse_target(t) for t in (*item.get("relevant", ()),
                                             *item.get("secondary", ()))]
        tasks.append(Task(repo, spec.language, item["query"],
                          category if isinstance(category, str) else infer_category(item["query"]),
                          tuple(targets)))
    return tasks


def load_published(data: Path) -> dict[str, dict]:
    """Published figures per method: ``{method: {"per_repo": {repo: {"ndcg10", ...}}}}``."""
    path = data / "published" / "published.json"
    return json.loads(path.read_text(encoding="utf-8"))["methods"] if path.exists() else {}


def find_mirror(mirrors: Path, spec: RepoSpec) -> Path:
    """The bare git mirror of ``spec`` under ``mirrors`` (``owner+name/repo``, ``name.git``…)."""
    owner, name = spec.owner_and_name
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}",
                      mirrors / f"{name}.git", mirrors / name, mirrors / f"{owner}/{name}.git"):
        if (candidate / "HEAD").exists() or (candidate / ".git" / "HEAD").exists():
            return candidate
    raise SystemExit(
        f"no git mirror of {owner}/{name} under {mirrors} (looked for {owner}+{name}/repo, "
        f"{name}.git, {name}). Fetch it (e.g. the fetch tool with github:{owner}/{name}) "
        "or pass --mirrors.")


def source_tree(spec: RepoSpec, mirrors: Path, cache: Path) -> Path:
    """The folder to index for ``spec``: its ``benchmark_root`` at the pinned revision,
    extracted once into ``cache/src/<repo>@<rev12>/`` (kept between runs)."""
    base = cache / "src" / f"{spec.name}@{spec.revision[:12]}"
    root = base / spec.benchmark_root if spec.benchmark_root else base
    if (base / ".complete").exists():
        return root
    mirror = find_mirror(mirrors, spec)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    command = ["git", f"--git-dir={mirror}", "archive", "--format=tar", spec.revision]
    if spec.benchmark_root:
        command.append(spec.benchmark_root)
    archive = subprocess.run(command, capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive failed for {spec.name} at {spec.revision}: "
                         f"{archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(base, filter="data")
    (base / ".complete").write_text(spec.revision + "\n", encoding="utf-8")
    return root


def tree_files(mirror: Path, revision: str, paths: Sequence[str] = ()) -> dict[str, str]:
    """Regular files of ``revision`` in ``mirror`` (under ``paths``, when given): path → blob
    id. Symbolic links and submodules are left out."""
    listing = subprocess.run(["git", f"--git-dir={mirror}", "ls-tree", "-r", "-z", revision,
                              "--", *paths], capture_output=True, check=False)
    if listing.returncode != 0:
        raise SystemExit(f"git ls-tree failed for {revision} in {mirror}: "
                         f"{listing.stderr.decode(errors='replace').strip()}")
    files = {}
    for entry in filter(None, listing.stdout.split(b"\0")):
        meta, _, path = entry.partition(b"\t")
        mode, kind, blob = meta.split()
        if kind == b"blob" and mode != b"120000":
            files[path.decode("utf-8", "surrogateescape")] = blob.decode()
    return files


def sync_tree(mirror: Path, revision: str, paths: Sequence[str], dest: Path) -> dict:
    """Make ``dest`` hold ``revision``'s files under ``paths`` and nothing else, as a
    ``git checkout`` would, writing only the files that differ. A mirror may lack its
    largest blobs: those files are left out (counted as ``missing``). Returns the counts of
    files written, removed, kept as they were, and missing."""
    wanted = tree_files(mirror, revision, paths)
    present = {p.relative_to(dest).as_posix() for p in dest.rglob("*")
               if p.is_file() and ".git" not in p.relative_to(dest).parts}
    removed = 0
    for path in sorted(present - wanted.keys()):
        (dest / path).unlink()
        removed += 1
    written = kept = missing = 0
    # One `git cat-file --batch` for every blob: ~1,000 files in a second.
    batch = subprocess.run(["git", f"--git-dir={mirror}", "cat-file", "--batch"],
                           input="".join(f"{blob}\n" for blob in wanted.values()).encode(),
                           capture_output=True, check=True).stdout
    at = 0
    for path in wanted:  # in the order asked for
        header_end = batch.index(b"\n", at)
        header = batch[at:header_end].split()
        at = header_end + 1
        if header[-1] == b"missing":
            missing += 1
            continue
        size = int(header[2])
        content, at = batch[at:at + size], at + size + 1
        target = dest / path
        if target.is_file() and target.read_bytes() == content:
            kept += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        written += 1
    return {"written": written, "removed": removed, "kept": kept, "missing": missing}
