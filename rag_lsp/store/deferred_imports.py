"""LanceDB without the start-up cost of a client it never uses here.

``import lancedb`` imports ``lance_namespace``, which imports the generated client of Lance's
REST namespace service, ``lance_namespace_urllib3_client``. That package's ``__init__`` loads
its nine API classes (hundreds of methods, each wrapped by pydantic's validator when its
class is made) and an HTTP client (urllib3): ~1.3 s and ~13 MB of a process's memory
(bench/README.md, "LanceDB's REST client loaded when first used"), for a service an index on
local disk never talks to. What ``lance_namespace`` needs of it at import time is the request
and response models, a subpackage of their own.

:func:`defer_lance_rest_client` makes that package's ``__init__`` run when one of its own
names is first asked for, instead of when it is imported; its subpackages import as before.
Nothing else changes: the first use of the client (a remote or namespace connection) loads
it whole. A package that is not there, or that is not a package, is left to the import system
as it is."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types

DEFERRED_PACKAGE = "lance_namespace_urllib3_client"


class _Deferred:
    """The package's own loader, until its ``__init__`` has run to the end."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader: importlib.abc.Loader | None = loader
        self.running = False  # __init__ under way (its own reads of names it lacks yet)
        self.lock = threading.RLock()


class _DeferredPackage(types.ModuleType):
    """A package module whose ``__init__`` code runs at the first access of a name it does
    not have yet (the import system gives it ``__path__`` and ``__spec__`` beforehand, so its
    submodules import without it)."""

    def __getattr__(self, name: str):
        deferred = self.__dict__.get("_rag_lsp_deferred")
        if deferred is not None and not self._is_submodule(name):
            with deferred.lock:  # another thread asking meanwhile waits for the names
                if deferred.loader is not None and not deferred.running:
                    self._run_init(deferred)
            if name in self.__dict__:
                return self.__dict__[name]
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def _is_submodule(self, name: str) -> bool:
        """A submodule's name is left to the import system, which asks for it before it
        imports it (``from package import submodule``, in one of the package's own
        submodules too): running ``__init__`` from there would import that half-loaded
        submodule again, a circular import, or wait on a thread holding its import lock."""
        fullname, path = f"{self.__name__}.{name}", self.__dict__.get("__path__")
        return fullname in sys.modules or (
            path is not None and not name.startswith("__")
            and importlib.machinery.PathFinder.find_spec(fullname, path) is not None)

    def _run_init(self, deferred: _Deferred) -> None:
        deferred.running = True
        try:
            deferred.loader.exec_module(self)
        except AttributeError as exc:  # not "no such name": hasattr() would swallow it
            raise ImportError(f"{self.__name__} failed to load: {exc}",
                              name=self.__name__) from exc
        finally:  # after a failure the next access runs it again, and fails as loud
            deferred.running = False
        deferred.loader = None
        self.__dict__.pop("_rag_lsp_deferred", None)


class _DeferringLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _DeferredPackage(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["_rag_lsp_deferred"] = _Deferred(self._loader)

    def __getattr__(self, name: str):  # what else the import system may ask of a loader
        return getattr(self._loader, name)


class _DeferringFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname, path, target=None):
        if fullname != self.package:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return None  # not there, or not a package: as the import system has it
        spec.loader = _DeferringLoader(spec.loader)
        return spec


def defer_package_init(package: str) -> None:
    """From now on, importing top-level ``package`` leaves its ``__init__`` code for the first
    access of a name it defines (once; a package imported before keeps what it has)."""
    if not any(isinstance(finder, _DeferringFinder) and finder.package == package
               for finder in sys.meta_path):
        sys.meta_path.insert(0, _DeferringFinder(package))


def defer_lance_rest_client() -> None:
    """The deferral for lancedb (before ``lancedb`` is imported, or it changes nothing)."""
    defer_package_init(DEFERRED_PACKAGE)
