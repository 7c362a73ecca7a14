"""glibc's heaps are capped for the ``rag-lsp`` process (rag_lsp/memory.py; measured in
bench/server_memory.py): threads started afterwards share two heaps instead of one each, and
large buffers go back to the system when freed."""

from __future__ import annotations

import importlib
import json
import os
import platform
import subprocess
import sys
import threading
import time

import pytest

import rag_lsp.memory as memory

# The module: ``rag_lsp.cli.main`` read as an attribute is the function the package exports.
cli_main = importlib.import_module("rag_lsp.cli.main")

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")

# Starts 8 threads that each allocate with malloc (as LanceDB's and onnxruntime's threads do)
# and counts glibc's heaps in malloc_info's report.
PROBE = """
import ctypes, json, sys, tempfile, threading
from rag_lsp.memory import limit_malloc_arenas
if sys.argv[1] == "limit":
    limit_malloc_arenas()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
held, started, go = [], threading.Barrier(9), threading.Event()
def work():
    started.wait()
    held.append(libc.malloc(4096))
    go.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
started.wait()
while len(held) < 8:
    pass
with tempfile.NamedTemporaryFile("r", suffix=".xml") as report:
    fp = libc.fopen(report.name.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    heaps = report.read().count("<heap nr=")
go.set()
print(json.dumps(heaps))
"""


def _heaps(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_threads_share_at_most_two_heaps_once_limited():
    assert _heaps("default") > memory.MALLOC_ARENAS  # glibc's default: up to 8 per core
    assert _heaps("limit") <= memory.MALLOC_ARENAS


@pytest.mark.parametrize(("setting", "variable", "tunables", "option", "value"), [
    ("limit_malloc_arenas", "MALLOC_ARENA_MAX", "glibc.malloc.check=0:glibc.malloc.arena_max=6",
     memory._M_ARENA_MAX, memory.MALLOC_ARENAS),
    ("map_large_allocations", "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold=65536",
     memory._M_MMAP_THRESHOLD, memory.MMAP_THRESHOLD_BYTES),
])
def test_a_users_own_malloc_setting_is_left_alone(monkeypatch, setting, variable, tunables,
                                                  option, value):
    calls = []

    class FakeLibc:
        def mallopt(self, *args):
            calls.append(args)
            return 1

    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setenv(variable, "8")
    getattr(memory, setting)()
    monkeypatch.delenv(variable)
    monkeypatch.setenv("GLIBC_TUNABLES", tunables)
    getattr(memory, setting)()
    assert calls == []
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.check=0")  # other tunables: ours applies
    getattr(memory, setting)()
    assert calls == [(option, value)]


# Frees one 8 MiB buffer (glibc then raises its mmap threshold to 8 MiB), then makes 24 of
# 2 MiB, touched, frees every other one (each between two that stay: nothing at the heap's
# top to trim) and prints the MB the 24 took and the MB of the freed half still resident.
MMAP_PROBE = """
import ctypes, json, sys
from rag_lsp.memory import map_large_allocations
if sys.argv[1] == "mapped":
    map_large_allocations()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
libc.free(libc.malloc(8 << 20))
before = rss()
blocks = [libc.malloc(2 << 20) for _ in range(24)]
for block in blocks:
    ctypes.memset(block, 1, 2 << 20)
full = rss()
for block in blocks[::2]:
    libc.free(block)
print(json.dumps([full - before, rss() - (full - 24)]))
"""


def _held_after_free(mode: str) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", MMAP_PROBE, mode], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def test_large_buffers_go_back_to_the_system_when_freed():
    grown, held = _held_after_free("default")
    assert grown > 40 and held > 20  # glibc's rising threshold: the heap keeps them
    grown, held = _held_after_free("mapped")
    assert grown > 40 and held < 4


def test_the_command_sets_up_the_process_before_anything_else(monkeypatch):
    order = []
    monkeypatch.setattr(cli_main, "set_up_process", lambda: order.append("set up"))
    real_parser = cli_main.build_parser
    monkeypatch.setattr(cli_main, "build_parser", lambda: order.append("parser") or
                        real_parser())
    cli_main.main([])  # no command: prints the help
    assert order[:2] == ["set up", "parser"]


def test_setting_up_the_process_runs_every_part_in_order(monkeypatch):
    order = []
    for name in ("limit_malloc_arenas", "map_large_allocations", "arrow_on_system_allocator",
                 "cap_lance_read_ahead", "cap_lance_scan_batches"):
        monkeypatch.setattr(memory, name, lambda name=name: order.append(name))
    memory.set_up_process()
    assert order == ["limit_malloc_arenas", "map_large_allocations",
                     "arrow_on_system_allocator", "cap_lance_read_ahead",
                     "cap_lance_scan_batches"]


# Each Lance setting the command caps, with Lance's own default (which the cap is below).
LANCE_CAPS = [
    (memory.cap_lance_read_ahead, memory.LANCE_READ_AHEAD_VARIABLE,
     memory.LANCE_READ_AHEAD_BYTES, 2 ** 31),
    (memory.cap_lance_scan_batches, memory.LANCE_BATCH_ROWS_VARIABLE, memory.LANCE_BATCH_ROWS,
     8192),
]


@pytest.mark.parametrize(("cap", "variable", "ours", "lances"), LANCE_CAPS)
@pytest.mark.parametrize("user_choice", [None, "268435456"])  # a user's choice stands
def test_lancedb_settings_are_capped_unless_the_user_chose(monkeypatch, cap, variable, ours,
                                                           lances, user_choice):
    monkeypatch.delenv(variable, raising=False)
    if user_choice is not None:
        monkeypatch.setenv(variable, user_choice)
    cap()
    assert os.environ[variable] == (user_choice or str(ours))
    assert ours < lances


ARROW_PROBE = """
import sys
if sys.argv[1] == "imported first":
    import pyarrow
import rag_lsp.memory, rag_lsp.cli.main
rag_lsp.memory.arrow_on_system_allocator()
import pyarrow
print(pyarrow.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize(("case", "user_choice", "backend"), [
    ("command", None, "system"),
    ("command", "mimalloc", "mimalloc"),  # the user's choice stands
    ("imported first", None, "mimalloc"),  # too late to change: Arrow's default stays
])
def test_arrow_allocates_from_glibc_unless_the_user_chose(case, user_choice, backend):
    import pyarrow

    if "mimalloc" not in pyarrow.supported_memory_backends():
        pytest.skip("this pyarrow has no mimalloc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if user_choice:
        env["ARROW_DEFAULT_MEMORY_POOL"] = user_choice
    out = subprocess.run([sys.executable, "-c", ARROW_PROBE, case], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == backend


def test_handing_memory_back_imports_nothing():
    """The embedding child has no pyarrow, and must not load it (~27 MB) to hand memory back."""
    probe = ("import sys, rag_lsp.memory as m; m.return_freed_memory(); "
             "print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_a_new_model_session_hands_back_the_parsed_model_file(model_files, monkeypatch):
    """Loading parses the ~90 MB file into buffers freed afterwards: 29 MB stayed resident."""
    from rag_lsp.embedding import embedder as embedder_module

    calls: list[str] = []
    embedder = embedder_module.OnnxEmbedder(model_files, bulk_in_child=True)
    monkeypatch.setattr(embedder_module, "return_freed_memory", lambda: calls.append("trim"))
    embedder._new_session(1, spinning=False)
    assert calls == ["trim"]


def _trims_of(idle: memory._TrimWhenIdle, monkeypatch) -> list[float]:
    """When ``idle``'s thread hands memory back: not the process's own trim thread, which
    work done by earlier tests may set off meanwhile."""
    trims: list[float] = []

    def trim() -> None:
        if threading.current_thread() is idle._thread:
            trims.append(time.monotonic())

    monkeypatch.setattr(memory, "return_freed_memory", trim)
    return trims


def test_memory_is_handed_back_once_the_process_is_quiet(monkeypatch):
    """After a search or a write, freed memory goes back once: not between the searches of
    someone typing, but once they have stopped for IDLE_TRIM_SECONDS."""
    monkeypatch.setattr(memory, "IDLE_TRIM_SECONDS", 0.3)
    idle = memory._TrimWhenIdle()
    trims = _trims_of(idle, monkeypatch)
    started = time.monotonic()
    for _ in range(5):  # typing: a search every 0.1 s
        idle.worked()
        time.sleep(0.1)
    last = time.monotonic()
    deadline = last + 5
    while not trims and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(trims) == 1 and trims[0] - last >= 0.3 - 0.1 - 0.01
    time.sleep(0.5)
    assert len(trims) == 1  # nothing more until more work
    idle.worked()
    while len(trims) == 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(trims) == 2 and trims[0] > started


def test_work_wakes_the_trim_thread_once_until_it_has_trimmed(monkeypatch):
    """A stream of searches does not wake the thread after each one: it wakes when its wait
    for quiet ends, sees the later work, and waits again."""
    monkeypatch.setattr(memory, "IDLE_TRIM_SECONDS", 0.3)

    class CountedCondition(threading.Condition):
        notified = 0

        def notify(self, n: int = 1) -> None:
            CountedCondition.notified += 1
            super().notify(n)

    idle = memory._TrimWhenIdle()
    trims = _trims_of(idle, monkeypatch)
    idle._lock = CountedCondition()
    for _ in range(8):
        idle.worked()
        time.sleep(0.05)
    assert CountedCondition.notified == 1 and not trims
    deadline = time.monotonic() + 5
    while not trims and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(trims) == 1
    idle.worked()  # quiet again: the next work wakes it once more
    assert CountedCondition.notified == 2


def test_a_workspace_search_counts_as_work(workspace, monkeypatch):
    noted: list[str] = []
    monkeypatch.setattr("rag_lsp.workspace.after_work", lambda: noted.append("work"))
    workspace.search("follow redirects")
    assert noted
