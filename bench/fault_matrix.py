"""The fault matrix: hostile and careless use of rag-lsp, each probe run for real, one table.

Every row is a test in ``tests/`` (real server process, real model, real LanceDB on disk; the
fast ones also run in the README's test command). This script runs exactly those tests in one
pytest session and prints probe, expected and observed side by side; the exit status is 0 only
when every row passes. A row whose test is missing counts as a failure.

    .venv/bin/python bench/fault_matrix.py            # ~5 minutes on 2 cores
    .venv/bin/python bench/fault_matrix.py --json     # rows as JSON, for scripts
    .venv/bin/python bench/fault_matrix.py -k framing # only rows whose probe matches
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
T = "tests/"

# (area, probe, expected, test node ids: a file::function runs all its parameters)
MATRIX: list[tuple[str, str, str, list[str]]] = [
    ("writers", "two `rag-lsp index` on one folder at once",
     "both exit 0, one waits and says for whom; no duplicate rows",
     [T + "test_concurrent_writers.py::test_two_cli_index_runs_at_once_leave_no_duplicates"]),
    ("writers", "`rag-lsp index --full` during another run", "no duplicate rows",
     [T + "test_concurrent_writers.py::"
          "test_a_full_rebuild_during_another_run_leaves_no_duplicates"]),
    ("writers", "two `rag-lsp serve` on one folder under edits",
     "both see the edits; no duplicate rows",
     [T + "test_concurrent_writers.py::test_two_servers_on_one_folder_under_edits_converge"]),
    ("writers", "two engines in one process writing at once", "converge, no duplicates",
     [T + "test_concurrent_writers.py::test_two_workspaces_writing_at_once_converge"]),
    ("writers", "an LSP server and an MCP server (`rag-lsp mcp`) on one folder under edits",
     "both follow the edits; one index, no duplicate rows",
     [T + "test_mcp.py::test_an_lsp_server_and_an_mcp_server_share_one_index_under_edits"]),
    ("writers", "two processes adding and deleting knowledge entries at once",
     "every acknowledged add kept, except those deleted; no duplicates",
     [T + "test_knowledge_durability.py::"
          "test_two_processes_writing_knowledge_at_once_lose_nothing"]),
    ("writers", "a reader process while another writes", "follows the new version",
     [T + "test_concurrent_writers.py::test_a_reader_follows_another_writers_changes"]),
    ("writers", "the in-memory copy cannot be patched after a write",
     "stale: searches ask LanceDB, a reload catches up",
     [T + "test_patched_matrix.py::"
          "test_a_failed_patch_leaves_the_copy_stale_and_a_reload_catches_up"]),
    ("writers", "writer lock held by a live / a kill -9'd process",
     "busy error naming the pid / lock taken over",
     [T + "test_concurrent_writers.py::"
          "test_the_lock_names_its_holder_and_a_dead_holder_is_taken_over",
      T + "test_concurrent_writers.py::test_a_server_waits_for_another_writer_and_says_for_whom"]),
    ("crash", "kill -9 at 4 points of indexing (one a --full), then index",
     "no duplicates or orphans, every file indexed, search answers",
     [T + "test_crash.py::test_kill_9_at_several_points_of_indexing_then_a_run_converges"]),
    ("crash", "kill -9 right after kb.add is acknowledged", "the entry survives restart",
     [T + "test_knowledge.py::test_an_added_entry_survives_kill_9",
      T + "test_knowledge_durability.py::test_entries_survive_restart_and_kill_9"]),
    ("disk", "disk full during indexing (1 MiB tmpfs), then space returns",
     "\"no space left … free some space\", not \"damaged\"; next run completes",
     [T + "test_disk_full.py"]),
    ("damage", "damaged manifest / missing table / lost data files",
     "search: clear message with the fix; next index run rebuilds by itself",
     [T + "test_indexing.py::test_corrupt_manifest_is_reported_and_full_rebuilds",
      T + "test_indexing.py::test_missing_table_is_damage_not_an_empty_index",
      T + "test_indexing.py::test_damaged_index_is_reported_and_rebuilt_on_request",
      T + "test_indexing.py::test_a_corrupt_manifest_is_rebuilt_by_the_next_index_run"]),
    ("damage", "index data files deleted while the server runs",
     "search: index-corrupt, \"being rebuilt\"; ready again, search answers",
     [T + "test_server_degraded.py::"
          "test_an_index_damaged_under_the_server_is_reported_and_rebuilt"]),
    ("damage", "garbage in the middle of a data file (read back as vectors and text, "
               "no LanceDB error), size and mtime kept or not",
     "search: exit 1, the file named and the fix; index/server run rebuilds by itself, "
     "same answers; no false alarm from updates, compaction, a copy, a reader process",
     [T + "test_integrity.py::" + name for name in (
         "test_garbage_in_the_middle_of_a_data_file_is_damage_then_rebuilt",
         "test_bit_rot_that_keeps_size_and_mtime_is_found_by_the_next_index_run",
         "test_a_full_rebuild_of_a_damaged_index_is_made_in_place",
         "test_cli_search_refuses_a_damaged_index_and_index_rebuilds_it",
         "test_a_server_opening_a_damaged_index_rebuilds_it_before_answering_wrong",
         "test_updates_compaction_and_cleanup_keep_the_check_passing",
         "test_a_copied_index_whose_mtimes_moved_is_not_damage",
         "test_a_reader_process_sees_no_damage_while_another_writes")]),
    ("damage", "garbage in the middle of a knowledge base file",
     "every KB call: damaged, naming the file and the fix; nothing deleted; code search goes on",
     [T + "test_integrity.py::test_garbage_in_a_knowledge_file_is_reported_and_the_entries_kept"]),
    ("damage", "`.rag-lsp` is a regular file", "error naming the file and the fix",
     [T + "test_indexing.py::test_an_index_path_that_is_a_file_is_a_clear_error"]),
    ("damage", "garbage model.onnx / tokenizer.json in the model folder",
     "lexical search with the reason and the fix",
     [T + "test_degraded.py::test_unloadable_model_file_degrades_too",
      T + "test_degraded.py::test_a_garbage_tokenizer_degrades_with_the_fix_not_a_traceback"]),
    ("damage", "garbage or altered query_model.onnx in the model folder",
     "queries go through model.onnx, with a warning naming the file and the fix",
     [T + "test_embedding.py::"
      "test_a_query_model_that_does_not_load_leaves_queries_on_the_full_model",
      T + "test_embedding.py::test_a_query_model_other_than_the_installed_one_is_not_used"]),
    ("files", "a file name that is not UTF-8", "skipped and reported; the rest is indexed",
     [T + "test_indexing.py::test_a_file_name_that_is_not_utf8_is_skipped_not_fatal",
      T + "test_scan.py::test_names_that_are_not_utf8_are_skipped_and_reported"]),
    ("files", "binary, oversized, unreadable files, FIFOs, symlink loops and escapes",
     "skipped with a reason; indexing goes on",
     [T + "test_indexing.py::test_binary_and_oversized_files_are_skipped_and_reported",
      T + "test_scan.py::test_unreadable_and_missing_files_give_reasons",
      T + "test_scan.py::test_fifo_is_not_read", T + "test_scan.py::test_symlinks"]),
    ("files", "credentials in config files", "redacted before embedding, never in context",
     [T + "test_secrets.py"]),
    ("files", "index and knowledge folders", "created 0700, files not world-readable",
     [T + "test_indexing.py::test_the_index_folder_is_private_to_its_owner",
      T + "test_knowledge.py::test_a_new_knowledge_base_folder_is_private"]),
    ("confine", "manualContext / activeFile outside the workspace (../, %2e%2e, symlink)",
     "-32602, nothing read",
     [T + "test_server_context.py::test_manual_context_outside_the_workspace_is_refused",
      T + "test_server_context.py::test_an_active_file_outside_the_workspace_is_never_read"]),
    ("confine", "kb.add anchor outside the workspace", "-32602",
     [T + "test_server_context.py::test_an_anchor_outside_the_workspace_gets_32602"]),
    ("input", "a selection past the end of the active file", "-32602",
     [T + "test_server_context.py::test_a_selection_past_the_end_of_the_active_file_gets_32602"]),
    ("input", "a query far over the 10,000-character limit",
     "refused at once with a short message",
     [T + "test_server_context.py::test_a_huge_query_is_refused_quickly_with_a_short_message"]),
    ("protocol", "the same bad params to all 9 rag/* methods", "the same code and kind",
     [T + "test_error_model.py"]),
    ("protocol", "a mode declared in the folder's .rag-lsp.json (extraModes)",
     "accepted by the server as by the CLI",
     [T + "test_error_model.py::"
          "test_a_mode_declared_in_the_folder_settings_is_accepted_as_by_the_cli"]),
    ("protocol", "requests before initialize", "-32002 at once, from every method",
     [T + "test_error_model.py::test_every_method_before_initialize_gets_server_not_initialized"]),
    ("protocol", "an initialize holding a capability value lsprotocol cannot read",
     "answered; an error names the value; later requests answered (none before)",
     [T + "test_early_answer.py::"
          "test_an_initialize_pygls_cannot_read_is_reported_and_the_session_goes_on"]),
    ("protocol", "malformed frames: bad/lower-case/negative Content-Length, bad JSON, batch, "
                 "jsonrpc 1.0, object id, deep nesting, stalled or oversized body",
     "-32700/-32600 each, next message served, never wedged",
     [T + "test_server_framing.py"]),
    ("lifecycle", "a folder removed while rebuilds are queued on it",
     "the folder closes, no error shown",
     [T + "test_server_jobs.py::"
          "test_closing_a_folder_with_a_queued_rebuild_reports_no_error"]),
    ("lifecycle", "stdin closed mid-indexing", "server exits within seconds",
     [T + "test_server_stdio.py::test_the_server_exits_soon_after_its_client_goes_away_mid_index"]),
    ("network", "the LSP and the MCP server indexing and searching under strace",
     "no internet socket used",
     [T + "test_no_network.py"]),
]


@dataclass
class Row:
    area: str
    probe: str
    expected: str
    tests: list[str]
    observed: str = "not run"
    passed: bool = False
    failures: list[str] = field(default_factory=list)


class Collector:
    """A pytest plugin recording each test's outcome by node id."""

    def __init__(self) -> None:
        self.outcomes: dict[str, tuple[str, str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            detail = ""
            if report.failed:
                detail = str(report.longrepr).strip().splitlines()[-1][:160]
            elif report.skipped and isinstance(report.longrepr, tuple):
                detail = str(report.longrepr[2])[:160]
            previous = self.outcomes.get(report.nodeid, ("passed", ""))
            if previous[0] == "passed":
                self.outcomes[report.nodeid] = (report.outcome, detail)


def observe(row: Row, outcomes: dict[str, tuple[str, str]]) -> None:
    ran = {node: result for node, result in outcomes.items()
           if any(node == t or node.startswith(t + "[") or node.startswith(t + "::")
                  for t in row.tests)}
    missing = [t for t in row.tests if not any(
        n == t or n.startswith(t + "[") or n.startswith(t + "::") for n in ran)]
    failed = {n: d for n, (o, d) in ran.items() if o == "failed"}
    skipped = {n: d for n, (o, d) in ran.items() if o == "skipped"}
    row.failures = [f"{n}: {d}" for n, d in failed.items()] + [f"missing: {t}" for t in missing]
    row.passed = not row.failures and len(skipped) < len(ran)
    if row.failures:
        row.observed = f"FAIL ({len(failed)} failed, {len(missing)} missing of {len(ran)})"
    elif skipped:
        row.observed = (f"pass ({len(ran) - len(skipped)} of {len(ran)} ran; skipped: "
                        f"{next(iter(skipped.values()))})")
    else:
        row.observed = f"pass ({len(ran)} test{'s' if len(ran) != 1 else ''})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("-k", dest="only", help="only rows whose area or probe contains this")
    args = parser.parse_args()
    rows = [Row(*entry) for entry in MATRIX
            if not args.only or args.only.lower() in (entry[0] + entry[1]).lower()]
    tests = sorted({t for row in rows for t in row.tests})
    os.chdir(ROOT)
    collector = Collector()
    pytest.main(["-q", "-p", "no:cacheprovider", "--no-header", "-rN", *tests],
                plugins=[collector])
    for row in rows:
        observe(row, collector.outcomes)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(f"\n{'area':<9} {'probe':<58} {'expected':<52} observed")
        for row in rows:
            print(f"{row.area:<9} {row.probe[:58]:<58} {row.expected[:52]:<52} {row.observed}")
            for failure in row.failures:
                print(f"{'':<9}   ↳ {failure}")
        passed = sum(r.passed for r in rows)
        print(f"\n{passed} of {len(rows)} rows pass")
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
