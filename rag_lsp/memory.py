"""Giving memory back to the system after large, short-lived work."""

from __future__ import annotations

import ctypes
import sys


def return_freed_memory() -> None:
    """Hand freed heap back to the system. glibc (and Arrow's own allocator) keep it for
    reuse, so the buffers a big read went through, or a model session let go, stay resident
    otherwise: 180 MB after loading 100k vectors (bench/server_memory.py). The glibc part is
    a no-op off Linux or on another C library."""
    try:  # Arrow's allocator (mimalloc) keeps what a large read freed, on every platform
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except ImportError:
        pass
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
