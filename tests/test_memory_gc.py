"""A long-running server keeps its long-lived objects out of full garbage collections
(rag_lsp/memory.py; the pause it removes is measured in bench/server_latency.py)."""

from __future__ import annotations

import gc
import weakref

from rag_lsp.memory import freeze_long_lived_objects


class _Node:
    pass


def test_long_lived_objects_leave_the_collector_and_old_cycles_are_still_freed():
    node = _Node()
    node.me = node  # a reference cycle: only the cyclic collector frees it
    alive = weakref.ref(node)
    freeze_long_lived_objects()
    try:
        assert gc.get_freeze_count() > 0
        del node
        gc.collect()
        assert alive() is not None  # frozen: full collections no longer walk (or free) it
        freeze_long_lived_objects()  # after replacing long-lived state: the old is collected
        assert alive() is None
    finally:
        gc.unfreeze()
