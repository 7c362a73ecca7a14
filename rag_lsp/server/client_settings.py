"""Settings as the server sees them: the editor's (initializationOptions, then its ``ragLsp``
section) over each folder's ``.rag-lsp.json``, validated by the same rules as the CLI's."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

from rag_lsp.config import (
    CONFIG_FILE_NAME,
    Settings,
    confine_folder_settings,
    read_settings_file,
    validate_settings,
)
from rag_lsp.errors import ConfigError
from rag_lsp.server.methods import SETTINGS_SECTION

log = logging.getLogger(__name__)

# Settings read per search; changing only these needs no re-index.
SEARCH_SETTINGS = {"top_k", "threshold", "answer_threshold", "knowledge_threshold",
                   "search_mode"} | {
    f.name for f in dataclasses.fields(Settings) if f.name.startswith("rank_")}

Report = Callable[[list[str]], None]


def only_search_changed(old: Settings, new: Settings) -> bool:
    changed = {f.name for f in dataclasses.fields(Settings)
               if getattr(old, f.name) != getattr(new, f.name)}
    return changed <= SEARCH_SETTINGS


@dataclasses.dataclass
class ClientSettings:
    """The editor's settings as given (camelCase) and where each key came from."""

    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def merge(cls, init_options: Any, configuration: Any) -> tuple[Any, ClientSettings]:
        """initializationOptions, overridden by the editor's ``ragLsp`` settings section;
        returns what to validate (possibly not a dict: validation explains) and the merge."""
        init = init_options if isinstance(init_options, dict) else {}
        if set(init) == {SETTINGS_SECTION}:  # some clients nest options under the section
            init = init[SETTINGS_SECTION]
        if configuration is not None and not isinstance(configuration, dict):
            return configuration, cls()
        merged = {**init, **(configuration or {})}
        sources = {key: "initializationOptions" for key in init}
        sources.update({key: f"the editor's `{SETTINGS_SECTION}` settings"
                        for key in (configuration or {})})
        return merged, cls(merged, sources)

    def for_folder(self, root: Path, report: Report) -> Settings:
        """A folder's settings: its ``.rag-lsp.json`` (shared with the CLI, so both build the
        same index), overridden by the editor's. Each folder needs its own index: an absolute
        ``indexPath`` (say, the editor's storage folder) gets one subfolder per folder."""
        file_settings: dict[str, Any] = {}
        path = root / CONFIG_FILE_NAME
        if os.path.lexists(path):  # (a folder or FIFO there is reported, not passed over)
            try:
                file_settings, confined = confine_folder_settings(
                    read_settings_file(path), root, path)
                report(confined)
            except ConfigError as exc:
                report(exc.problems)
        settings, problems = validate_settings(
            {**file_settings, **self.values},
            source=str(path),
            sources={key: str(path) for key in file_settings} | self.sources,
        )
        report([p for p in problems if str(path) in p])
        index_path = settings.index_path
        if not index_path or not Path(index_path).expanduser().is_absolute():
            return settings
        return dataclasses.replace(settings,
                                   index_path=str(folder_index_dir(Path(index_path), root)))


async def fetch_configuration(server: Any) -> Any:
    """The editor's ``ragLsp`` settings, asked for (``workspace/configuration``) when the
    client can answer; ``None`` otherwise or when asking fails."""
    caps = server.client_capabilities.workspace
    if not (caps and caps.configuration):
        return None
    try:
        answer = await server.workspace_configuration_async(types.ConfigurationParams(
            items=[types.ConfigurationItem(section=SETTINGS_SECTION)]))
    except Exception as exc:
        log.warning("could not read the editor's %s settings: %s", SETTINGS_SECTION, exc)
        return None
    return answer[0] if answer else None


class SettingsProblems:
    """What is wrong in the editor's settings and in each folder's ``.rag-lsp.json``, as
    each was last read: a file fixed or deleted, or a folder closed, takes its problems
    with it."""

    def __init__(self) -> None:
        self.editor: list[str] = []
        self._folders: dict[Path, list[str]] = {}

    def set_folder(self, root: Path, problems: list[str]) -> None:
        self._folders[root.resolve()] = problems

    def forget_folder(self, root: Path) -> None:
        self._folders.pop(root.resolve(), None)

    def all(self) -> list[str]:
        found = list(self.editor)
        for problems in self._folders.values():
            found += [p for p in problems if p not in found]
        return found


def folder_index_dir(index_path: Path, root: Path) -> Path:
    """The folder's own subfolder of an absolute ``indexPath`` shared by every folder."""
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
    return index_path.expanduser() / f"{root.name or 'root'}-{digest}"
