"""One BLAS thread per process, unless the user's environment says otherwise.

NumPy's OpenBLAS runs the vector search's matrix-vector product on every core, and its
threads then spin, waiting for more work, on cores the rest of the search (full-text lookups,
ranking, the query's embedding) and any other process need. On the 2-core reference machine
one thread made every search faster, although the product alone takes twice as long
(``bench/README.md``, "BLAS threads"): in-process p95 at 12k chunks 25.2 -> 23.7 ms, at 100k
46.0 -> 34.2 ms, two processes searching at once at 12k 62.2 -> 35.0 ms, and the server
beside another searching process 53.5 -> 17.6 ms.

The limit is process-wide: a program that opens a :class:`~rag_lsp.workspace.Workspace` gets
it too, unless it sets one of :data:`USER_SETTINGS` (any value, ``1`` included, is kept).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

# Set by a user who chose the BLAS thread count: theirs wins.
USER_SETTINGS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS",
                 "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
_done = False


def use_one_blas_thread() -> None:
    """Limit the BLAS libraries loaded in this process to one thread (once per process)."""
    global _done
    if _done or any(os.environ.get(name) for name in USER_SETTINGS):
        return
    _done = True
    try:
        import numpy  # noqa: F401  (threadpoolctl limits the libraries already loaded)
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")
    except Exception as exc:  # a missing or unknown BLAS: searches still work, only slower
        log.warning("could not limit BLAS to one thread: %s", exc)
