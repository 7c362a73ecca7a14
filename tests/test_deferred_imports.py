"""A package's ``__init__`` deferred to the first use of its names (rag_lsp.store.deferred_imports):
on a package made here, and on LanceDB's REST client as the engine imports it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from rag_lsp.store.deferred_imports import DEFERRED_PACKAGE, defer_package_init


def _run(code: str, *paths: Path) -> str:
    """``code`` in a fresh interpreter (imports are process-wide), with ``paths`` importable."""
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path[:0] = {[str(p) for p in paths]!r}\n"
         + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture
def packages(tmp_path: Path) -> Path:
    """``slowpkg``: an ``__init__`` that counts its runs in a file, takes a moment and
    defines ``VALUE``; a submodule of its own; ``plainmod``: a module, not a package."""
    pkg = tmp_path / "slowpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(f"""
        import time
        from pathlib import Path
        runs = Path({str(tmp_path / 'runs.txt')!r})
        runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
        time.sleep(0.2)
        from slowpkg.part import PART
        VALUE = PART + 1
    """))
    (pkg / "part.py").write_text("PART = 41\n")
    (tmp_path / "plainmod.py").write_text("NAME = 'plain'\n")
    return tmp_path


def test_submodules_import_without_init_and_init_runs_once_on_first_name(packages: Path):
    out = _run("""
        from pathlib import Path
        from rag_lsp.store.deferred_imports import defer_package_init
        defer_package_init("slowpkg")
        from slowpkg.part import PART
        runs = Path("RUNS")
        print(PART, runs.exists())
        import slowpkg
        print(slowpkg.VALUE, runs.read_text())
        print(slowpkg.VALUE, runs.read_text())
    """.replace("RUNS", str(packages / "runs.txt")), packages)
    assert out.splitlines() == ["41 False", "42 x", "42 x"]


def test_threads_asking_at_once_all_get_the_name_and_init_runs_once(packages: Path):
    out = _run("""
        import threading
        from rag_lsp.store.deferred_imports import defer_package_init
        defer_package_init("slowpkg")
        import slowpkg
        got, barrier = [], threading.Barrier(8)
        def ask():
            barrier.wait()
            got.append(slowpkg.VALUE)
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(sorted(got), open("RUNS").read())
    """.replace("RUNS", str(packages / "runs.txt")), packages)
    assert out == f"{[42] * 8} x"


def test_missing_names_modules_and_absent_packages_behave_as_without_it(packages: Path):
    out = _run("""
        from rag_lsp.store.deferred_imports import defer_package_init
        for name in ("slowpkg", "plainmod", "no_such_package_here"):
            defer_package_init(name)
        import slowpkg, plainmod
        print(hasattr(slowpkg, "NOT_THERE"), plainmod.NAME)
        try:
            import no_such_package_here
        except ModuleNotFoundError as exc:
            print("missing", exc.name)
    """, packages)
    assert out.splitlines() == ["False plain", "missing no_such_package_here"]


def test_installing_twice_adds_one_finder():
    before = len(sys.meta_path)
    defer_package_init(DEFERRED_PACKAGE)  # installed by `import rag_lsp` already
    defer_package_init("another_package_for_this_test")
    defer_package_init("another_package_for_this_test")
    assert len(sys.meta_path) == before + 1
    sys.meta_path[:] = [f for f in sys.meta_path
                        if getattr(f, "package", None) != "another_package_for_this_test"]


def test_engine_imports_lancedb_without_its_rest_client_and_the_client_still_loads():
    plain = _run(f"""
        import sys, lancedb
        print("{DEFERRED_PACKAGE}.api" in sys.modules)
    """)
    if plain != "True":
        pytest.skip("this lancedb no longer loads its REST client on import: the deferral "
                    "has nothing left to do and can go")
    out = _run(f"""
        import sys, tempfile
        import pyarrow as pa
        import rag_lsp.store.lance_store, lancedb
        print("{DEFERRED_PACKAGE}.api" in sys.modules)
        db = lancedb.connect(tempfile.mkdtemp())
        vectors = pa.array([[1.0, 0.0], [0.0, 1.0]], pa.list_(pa.float32(), 2))
        table = db.create_table("t", pa.table({{"id": ["a", "b"], "vector": vectors}}))
        print(table.search([0.0, 1.0]).limit(1).to_list()[0]["id"])
        from {DEFERRED_PACKAGE} import ApiClient, Configuration
        print(ApiClient.__name__, "{DEFERRED_PACKAGE}.api" in sys.modules)
        import lancedb.namespace
    """)
    assert out.splitlines() == ["False", "b", "ApiClient True"]


def test_the_server_process_imports_it_deferred(tmp_path: Path):
    """The language server's own imports (what `rag-lsp serve` loads before a search)."""
    out = _run(f"""
        import sys
        import rag_lsp.server.app, rag_lsp.workspace
        print("lancedb" in sys.modules, "{DEFERRED_PACKAGE}.api" in sys.modules)
    """)
    assert out == "True False"


def test_a_thread_reading_during_the_load_waits_for_it():
    """Without the lock a second thread would find the state gone and no names yet."""
    from rag_lsp.store import deferred_imports as d

    class SlowLoader:
        def exec_module(self, module):
            started.set()
            release.wait(5)
            module.NAME = "loaded"

    started, release = threading.Event(), threading.Event()
    module = d._DeferredPackage("made_here")
    d._DeferringLoader(SlowLoader()).exec_module(module)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(module.NAME))
    reader.start()
    started.wait(5)
    second: list[object] = []
    other = threading.Thread(target=lambda: second.append(getattr(module, "NAME", None)))
    other.start()
    release.set()
    reader.join(5)
    other.join(5)
    assert first == ["loaded"] and second == ["loaded"]


def test_a_submodule_that_imports_from_its_package_imports_first(tmp_path: Path):
    """``cpkg/__init__`` imports ``cpkg.api``, which does ``from cpkg import rest``: importing
    ``cpkg.api`` first must not run ``__init__`` halfway (a circular import), and the package
    loads whole afterwards. LanceDB's REST client is built this way (``api_client``)."""
    pkg = tmp_path / "cpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from cpkg.api import Api\nNAME = 'cpkg'\n")
    (pkg / "api.py").write_text("from cpkg import rest\nclass Api:\n    rest = rest.REST\n")
    (pkg / "rest.py").write_text("REST = 'rest'\n")
    out = _run("""
        from rag_lsp.store.deferred_imports import defer_package_init
        defer_package_init("cpkg")
        from cpkg.api import Api
        import cpkg
        print(Api.rest, cpkg.NAME, cpkg.Api is Api)
    """, tmp_path)
    assert out == "rest cpkg True"
    out = _run(f"""
        import rag_lsp
        from {DEFERRED_PACKAGE}.api_client import ApiClient
        from {DEFERRED_PACKAGE} import ApiClient as again, Configuration
        print(ApiClient is again)
    """)
    assert out == "True"


def test_an_init_that_fails_fails_at_every_access(tmp_path: Path):
    """As a plain import would fail at every import; an AttributeError inside ``__init__``
    becomes an ImportError with its cause (``hasattr`` would otherwise say the name is just
    not there)."""
    for name, body in (("failpkg", "raise ImportError('needs a newer dependency')\n"),
                       ("attrfailpkg", "import os\nX = os.no_such_function\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(body)
    out = _run("""
        from rag_lsp.store.deferred_imports import defer_package_init
        for name in ("failpkg", "attrfailpkg"):
            defer_package_init(name)
        import failpkg, attrfailpkg
        for module in (failpkg, failpkg, attrfailpkg):
            try:
                module.ANYTHING
            except ImportError as exc:
                print(type(exc.__cause__).__name__, exc)
    """, tmp_path)
    assert out.splitlines() == [
        "NoneType needs a newer dependency", "NoneType needs a newer dependency",
        "AttributeError attrfailpkg failed to load: module 'os' has no attribute "
        "'no_such_function'"]
