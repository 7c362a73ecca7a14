"""The ripgrep baseline Semble publishes: files ranked by count of lines containing the
query as a fixed string, case-insensitive. Used to check the scorer against published figures."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from codebench.scoring import K, RankedFile


def ripgrep_files(query: str, tree: Path) -> list[RankedFile]:
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("the ripgrep baseline needs `rg` (Debian: apt-get install ripgrep)")
    command = [rg, "--count", "--no-heading", "--ignore-case", "--hidden", "--glob", "!.git",
               "--fixed-strings", "--", query, str(tree)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    counts: list[tuple[str, int]] = []
    for line in proc.stdout.splitlines():
        path, _, count = line.rpartition(":")
        if count.isdigit():
            counts.append((Path(path).relative_to(tree).as_posix(), int(count)))
    counts.sort(key=lambda item: (-item[1], item[0]))
    return [RankedFile(path) for path, _ in counts[:K]]
