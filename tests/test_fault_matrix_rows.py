"""Every row of the fault matrix (bench/fault_matrix.py) names tests that exist."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from fault_matrix import MATRIX  # noqa: E402


def test_every_row_names_existing_tests():
    missing = []
    for _area, probe, _expected, tests in MATRIX:
        assert tests, probe
        for node in tests:
            path, _, name = node.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).is_file() else ""
            if not source or (name and not re.search(rf"def {re.escape(name)}\(", source)):
                missing.append(node)
    assert missing == []
