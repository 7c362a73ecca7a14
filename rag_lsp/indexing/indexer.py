"""Incremental indexing: scan → read → chunk → embed only new content → write in batches.

A file is skipped when its size and mtime match the files table, or when its bytes hash to
the stored sha256. A changed file is re-chunked; a chunk whose content hash already has a
vector anywhere in the index reuses it (so renames and edits re-embed only what is new).
Writes land in batches, so searches see the index grow while it is built.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from rag_lsp.chunking import Chunk, ChunkOptions, chunk_document
from rag_lsp.chunking.definitions import defined_names
from rag_lsp.config import Settings
from rag_lsp.embedding.shared_cache import EmbeddingCache
from rag_lsp.embedding.tokenizer import ModelTokenCounter
from rag_lsp.indexing.file_text import read_for_index, text_to_index
from rag_lsp.indexing.lexical_text import lexical_text
from rag_lsp.indexing.progress import IndexProgress, IndexReport, ProgressCallback
from rag_lsp.indexing.scan import (
    FOLDER,
    FileContent,
    ScannedFile,
    WorkspaceFilter,
    check_path,
    scan_folder,
    scan_workspace,
)
from rag_lsp.store.chunk_ids import ChunkIds
from rag_lsp.store.draft import DraftIndex
from rag_lsp.store.lance_store import ChunkStore, FileRecord
from rag_lsp.store.stored_places import STORED_COLUMNS, read_stored
from rag_lsp.terms import text_terms

log = logging.getLogger(__name__)

# Chunks gathered before one embed + write round (below POSTINGS_MAX_ROWS; past it, the
# chunks of one replace: see LARGE_INDEX_BATCH_CHUNKS): large enough to batch well, small
# enough that search sees progress often and a crash loses little.
WRITE_BATCH_CHUNKS = 512
# Past the size where searches answer from postings in memory (POSTINGS_MAX_ROWS), every
# lexical search reads LanceDB's full-text index, which reads each row outside it one by one
# (at 100k chunks a search's median went from 35 ms to 46, 59 and 74 after one, two and three
# batches; bench/README.md, "Full-text index folded after every batch past 50k chunks"). So
# there each batch is folded in as soon as it is written, and batches are this large: a fold
# merges the whole full-text index (at 100k chunks 0.8-1.2 s for ~2,048 rows, 0.8-1.1 for
# 512), the searches beside it are the slowest of a run, and each one adds a segment to the
# ANN index, which is trained again past MAX_SEGMENTS. One fold per ~2,048 chunks: as often
# as a run nobody searched folded with batches of 512, four times less often than a searched
# one did (through the server at 100k, over two re-indexes and ten saves, 5 folds and one
# training against 16 and 4, and RSS while re-indexing 384-403 MB against 385-412;
# bench/README.md, "Fewer, larger batches past 50k chunks, now that a batch's texts are held
# as ids"). Such a batch is embedded at once and written in groups of at least
# WRITE_BATCH_CHUNKS (a file is not split), back to back (one replace each: in the
# sixty-eighth session a replace of 2,048 rows peaked 24-28 MB over its start, one of 512
# 3-10), then folded. What its files hold meanwhile is searched as it was, their new words
# through the draft (rag_lsp.store.draft: with lexicalFirst, in runs of DRAFT_MIN_FILES files
# or more, up to draft.MAX_BYTES of text). The price: a batch's chunks reach the index and
# the shared embedding cache only once all of them are embedded, ~2.5 minutes through the
# server at 100k chunks (its model on one core, 13-14 chunks a second), so a crash loses
# that much of the model's work, and files the draft does not hold (past its cap, in a
# monorepo's first index) become searchable in steps four times as large.
LARGE_INDEX_BATCH_CHUNKS = 2048
# Renamed or deleted paths dropped in the same replace as the next write (at most one `in`
# batch), which readers see as one step.
REMOVALS_WITH_WRITE = 100
# Below POSTINGS_MAX_ROWS, during a long run, fold new rows into the full-text index and
# compact every this many batches: searches meanwhile scan unindexed rows and small
# fragments, which grows their latency with every batch (bench/server_latency.py, search
# during a re-index). Past it, after every batch (see LARGE_INDEX_BATCH_CHUNKS).
OPTIMIZE_EVERY_BATCHES = 4
# New or changed files a pass must have before it drafts them (see rag_lsp.store.draft): a
# few files are embedded within seconds anyway.
DRAFT_MIN_FILES = 20
# Changed files whose stored chunks a draft ahead reads at once (what a drafted file still
# holds stays searchable with its vectors: see DraftIndex.add).
STORED_LOOKUP_FILES = 100

# Share of a changed file's progress weight credited once it is read and chunked; the rest
# follows its chunks through the model. Chunking took about a tenth of a first index of
# rag_lsp's own sources, embedding nearly all the rest.
PREPARE_SHARE = 0.1

# embed(texts, checkpoint, embedded): checkpoint() runs before each model call, so a
# cancelled run (its progress callback raises) stops within one batch, not one write batch;
# embedded(n) after each, with the number of texts it embedded.
Embed = Callable[[list[str], Callable[[], None], Callable[[int], None]], np.ndarray]


@dataclass
class _Pending:
    record: FileRecord
    chunks: list[Chunk]
    language: str
    weight: int  # its share of the run's work (see _Meter)


def _write_groups(pending: list[_Pending], chunks: int) -> Iterator[list[_Pending]]:
    """``pending`` in consecutive groups of at least ``chunks`` chunks (the last may have
    fewer)."""
    group: list[_Pending] = []
    gathered = 0
    for item in pending:
        group.append(item)
        gathered += len(item.chunks)
        if gathered >= chunks:
            yield group
            group, gathered = [], 0
    if group:
        yield group


def _weight(scanned: ScannedFile) -> int:
    """A changed file's share of the work: its bytes (an empty file still takes a step)."""
    return max(1, scanned.size)


class _Meter:
    """The run's progress by work done: bytes of the files that need work, credited as
    they are chunked and embedded; only ever grows. Unchanged files weigh nothing, so a run
    with little to do is not at 99% before its one big file is embedded."""

    def __init__(self, notify: ProgressCallback, report: IndexReport, files_total: int,
                 work_total: int):
        self._notify = notify
        self._report = report
        self.files_total = files_total
        self.work_total = work_total
        self.files_done = 0
        self.work_done = 0.0

    def credit(self, amount: float) -> None:
        self.work_done = min(self.work_total, self.work_done + max(0.0, amount))

    def notify(self) -> None:
        self._notify(IndexProgress(
            "index", self.files_done, self.files_total, self._report.chunks_embedded,
            work_done=self.work_done, work_total=self.work_total))


SKIPPED_NAMED = 20  # of each reason, in the log (`-v`): enough to find what a count is about


def _log_skipped(skipped: dict[str, list[str]]) -> None:
    """Name what the counts of a run's report are about (a few of each reason)."""
    for reason, paths in sorted(skipped.items()):
        if paths:
            more = len(paths) - SKIPPED_NAMED
            log.info("skipped (%s): %s%s", reason, ", ".join(map(repr, paths[:SKIPPED_NAMED])),
                     f", and {more} more" if more > 0 else "")


def _under(paths_in_order: list[str], folder: str) -> list[str]:
    """The paths of ``paths_in_order`` (sorted) inside ``folder``: one run of the order."""
    prefix = folder + "/"
    start = bisect.bisect_left(paths_in_order, prefix)
    end = bisect.bisect_left(paths_in_order, folder + "0")  # "0" sorts just after "/"
    return paths_in_order[start:end]


def _same_stat(known: dict[str, FileRecord], scanned: ScannedFile) -> bool:
    old = known.get(scanned.path)
    return old is not None and old.size == scanned.size and old.mtime_ns == scanned.mtime_ns


class Indexer:
    """Keeps one workspace's :class:`ChunkStore` in step with its files."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        store: ChunkStore,
        embed: Embed,
        counter: ModelTokenCounter,
        index_dir: Path,
        *,
        rechunk: bool = False,
        shared_cache: EmbeddingCache | None = None,
        draft: DraftIndex | None = None,
        pause: Callable[[], None] = lambda: None,
        around_rewrite: Callable[[], AbstractContextManager[object]] = nullcontext,
    ):
        """``pause()`` is called before each file and each chunk of the Python work a run
        does (reading, chunking, deriving terms): it waits while searches run, so that on a
        small machine the run does not hold the interpreter a search needs (the model's
        batches are interrupted separately, see ``embed``). ``around_rewrite`` goes to each
        ``ChunkStore.optimize`` (between two batches, or at the end)."""
        self.root = root
        self._pause = pause
        self._around_rewrite = around_rewrite
        # Re-chunk every file even if unchanged (the chunk settings changed).
        self.rechunk = rechunk
        self.settings = settings
        self.store = store
        self._embed = embed
        # Vectors other workspaces (branches, worktrees, clones) already computed.
        self._shared_cache = shared_cache
        # New and changed files, searchable by their (new) words until their chunks are
        # embedded and written.
        self._draft = draft
        self._counter = counter
        self._index_dir = index_dir
        self._batches_written = 0
        self._folds = 0  # compactions before the run's end (see _finish)
        self._draft_mark = 0  # see _index_files
        # Paths to drop in the next write's commit (a rename's old name), see update_paths.
        self._removals: list[str] = []
        self._options = ChunkOptions(
            max_tokens=settings.chunk_tokens,
            window_tokens=settings.chunk_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            headers=settings.chunk_headers,
        )

    # ---- whole workspace -----------------------------------------------------------------

    def run(self, progress: ProgressCallback | None = None) -> IndexReport:
        """Bring the index up to date with the whole workspace."""
        started = time.monotonic()
        before_scan = self._draft.mark() if self._draft is not None else 0
        notify = progress or (lambda _p: None)
        notify(IndexProgress("scan", message="scanning workspace"))
        scan = scan_workspace(self.root, self.settings, index_dir=self._index_dir)
        report = IndexReport(files_scanned=len(scan.files))
        for reason, paths in scan.skipped.items():
            report.skip(reason, len(paths))
        _log_skipped(scan.skipped)
        known = self.store.file_records()
        self._index_files(scan.files, known, report, notify)
        # Removed last, so a renamed file's chunks can still lend their vectors above.
        gone = sorted(set(known) - {f.path for f in scan.files})
        if gone:
            self.store.remove_files(gone)
            report.files_removed += len(gone)
        self._finish(report, started, notify)
        if self._draft is not None:
            # Saved files drafted before the scan: the index has them now (deleted ones
            # removed). A run that stops keeps them: their updates are still to come.
            self._draft.discard(drafted_before=before_scan)
        return report

    # ---- a few paths (file events) -------------------------------------------------------

    def update_paths(self, paths: Iterable[str]) -> IndexReport:
        """Re-check just these paths (workspace-relative or absolute): created, changed or
        deleted files, or deleted folders (everything indexed under them is removed)."""
        started = time.monotonic()
        report = IndexReport()
        rules = WorkspaceFilter(self.root, self.settings, index_dir=self._index_dir)
        known = self.store.file_records()
        in_order: list[str] = []  # the known paths sorted, once a folder needs them

        def known_under(folder: str) -> list[str]:
            if not in_order:
                in_order.extend(sorted(known))
            return _under(in_order, folder)

        present: list[ScannedFile] = []
        removed: set[str] = set()
        # "" is the root itself: an event for it says nothing about any one file.
        for rel in sorted({r for r in map(rules.relative, paths) if r}):
            verdict = check_path(rules, rel)
            if verdict == FOLDER:  # created, or moved here: its files, which no event may name
                scan = scan_folder(rules, rel)
                present.extend(scan.files)
                for reason, skipped in scan.skipped.items():
                    report.skip(reason, len(skipped))
                _log_skipped(scan.skipped)
                found = {f.path for f in scan.files}
                removed.update(p for p in known_under(rel) if p not in found)
            else:
                # Not a folder now: nothing indexed beneath it is there any more (a folder
                # deleted, or a file now). A file indexed as one held nothing beneath it.
                if rel not in known:
                    removed.update(known_under(rel))
                if isinstance(verdict, ScannedFile):
                    present.append(verdict)
                    continue
                if verdict != "missing":
                    report.skip(verdict)
                    _log_skipped({verdict: [rel]})
            if rel in known:
                removed.add(rel)
        present = list({f.path: f for f in present}.values())  # (a folder and its file both)
        report.files_scanned = len(present)
        # A rename arrives as the new path and the old one together: the old name's chunks go
        # in the same replace as the new name's (one step to readers), so no search sees the
        # file twice (or not at all). Many removals (a deleted folder) are their own commits.
        with_write = len(removed) <= REMOVALS_WITH_WRITE
        self._removals = sorted(removed) if with_write else []
        self._index_files(present, known, report, lambda _p: None)
        left = self._removals if with_write else sorted(removed)  # no write took them
        self._removals = []
        if left:
            self.store.remove_files(left)
        report.files_removed += len(removed)
        report.chunks_total = self.store.count_chunks()
        report.seconds = time.monotonic() - started
        return report

    # ---- shared pipeline -----------------------------------------------------------------

    def _index_files(
        self,
        files: list[ScannedFile],
        known: dict[str, FileRecord],
        report: IndexReport,
        notify: ProgressCallback,
    ) -> None:
        unchanged: list[FileRecord] = []
        to_check = {f.path for f in files if self.rechunk or not _same_stat(known, f)}
        meter = _Meter(notify, report, len(files),
                       sum(_weight(f) for f in files if f.path in to_check))
        drafted: list[str] = []
        try:
            try:
                # (Not a file only chunked again: its stored chunks hold its words.)
                self._draft_ahead([f for f in files if not _same_stat(known, f)], known,
                                  notify, drafted)
            finally:  # the files to check are read after this: a draft from before is no newer
                self._draft_mark = self._draft.mark() if self._draft is not None else 0
            self._index_checked(files, to_check, known, report, meter, unchanged)
        except BaseException:
            if self._draft is not None:  # stopped: this pass's own drafts go, saved ones stay
                self._draft.discard(drafted, drafted_before=self._draft_mark)
            raise
        if self._draft is not None:  # (written files went as their chunks landed)
            self._draft.discard(to_check, drafted_before=self._draft_mark)
        if unchanged:
            self.store.touch_files(unchanged)

    def _draft_ahead(self, files: list[ScannedFile], known: dict[str, FileRecord],
                     notify: ProgressCallback, drafted: list[str]) -> None:
        """Make new and changed files searchable by their words before the model reads them
        (a checkout's changed files too: their stored chunks are of the old text). Each one
        also goes into ``drafted``; a file drafted already (saved, ahead of this update) is
        left as it is."""
        if self._draft is None:
            return
        held = self._draft.paths()
        files = [f for f in files if f.path not in held]
        if len(files) < DRAFT_MIN_FILES:
            return
        new = sum(1 for f in files if f.path not in known)
        what = (f"{new:,} new files" if new == len(files) else
                f"{len(files) - new:,} changed files" if not new else
                f"{len(files):,} new and changed files")
        notify(IndexProgress("draft", files_total=len(files),
                             message=f"making {what} searchable by their words"))
        stored: dict[str, list[dict]] = {}
        for at, scanned in enumerate(files):
            self._pause()
            if at % STORED_LOOKUP_FILES == 0:  # what the changed files of the next few hold
                changed = [f.path for f in files[at:at + STORED_LOOKUP_FILES] if f.path in known]
                stored = read_stored(partial(self.store.chunks_of, changed, STORED_COLUMNS))
            content, language = read_for_index(scanned, self.settings)
            if not isinstance(content, FileContent):
                continue  # the run skips it too, and says why
            old = known.get(scanned.path)
            if old is not None and old.sha256 == content.sha256:
                continue  # touched, not changed: its stored chunks hold these words
            if self._draft.holds(scanned.path):
                continue  # saved meanwhile: its own draft is as new as this one, or newer
            # (A changed file counts as saved: ``drafted_files`` counts new files only.)
            if not self._draft.add(scanned.path, text_to_index(content, self.settings), language,
                                   saved=scanned.path in known,
                                   stored=stored.get(scanned.path, ())):
                log.info("draft index full: later files are searchable once embedded")
                return
            drafted.append(scanned.path)

    def _index_checked(self, files: list[ScannedFile], to_check: set[str],
                       known: dict[str, FileRecord], report: IndexReport, meter: _Meter,
                       unchanged: list[FileRecord]) -> None:
        pending: list[_Pending] = []
        pending_chunks = 0
        batch_chunks = self._batch_chunks()
        total = len(files)
        for done, scanned in enumerate(files, start=1):
            if scanned.path not in to_check:
                report.files_unchanged += 1
            else:
                self._pause()
                item = self._prepare(scanned, known.get(scanned.path), report, unchanged)
                if item is None:  # skipped, or the same bytes: nothing more to do
                    meter.credit(_weight(scanned))
                    if self._draft is not None:  # what the index holds of it answers now
                        self._draft.discard([scanned.path], drafted_before=self._draft_mark)
                else:
                    meter.credit(item.weight * PREPARE_SHARE)
                    pending.append(item)
                    pending_chunks += len(item.chunks)
            meter.files_done = done
            if pending_chunks >= batch_chunks or (done == total and pending):
                full = pending_chunks >= batch_chunks
                self._write(pending, report, meter)
                pending, pending_chunks = [], 0
                self._fold_if_due(full)
                batch_chunks = self._batch_chunks()  # a first index may grow past the size
            if done % 25 == 0 or done == total:
                meter.notify()

    def _prepare(
        self,
        scanned: ScannedFile,
        old: FileRecord | None,
        report: IndexReport,
        unchanged: list[FileRecord],
    ) -> _Pending | None:
        content, language = read_for_index(scanned, self.settings)
        if not isinstance(content, FileContent):
            _log_skipped({str(content): [scanned.path]})
            report.skip(content)
            if old is not None:
                self.store.remove_files([scanned.path])
                report.files_removed += 1
            return None
        if content.had_invalid_utf8:
            log.warning("%s is not valid UTF-8; undecodable bytes were replaced", scanned.path)
        if old is not None and old.sha256 == content.sha256 and not self.rechunk:
            unchanged.append(FileRecord(scanned.path, scanned.size, scanned.mtime_ns,
                                        old.sha256, old.chunks))
            report.files_unchanged += 1
            return None
        chunks = chunk_document(text_to_index(content, self.settings), language, self._counter,
                                self._options, path=scanned.path)
        record = FileRecord(scanned.path, scanned.size, scanned.mtime_ns, content.sha256,
                            len(chunks))
        report.files_indexed += 1
        return _Pending(record, chunks, language, _weight(scanned))

    def _write(self, pending: list[_Pending], report: IndexReport, meter: _Meter) -> None:
        embed_texts = [c.embed_text for item in pending for c in item.chunks]
        hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in embed_texts]
        stored = self.store.stored_for_hashes(hashes)
        missing = sorted({h for h in hashes if h not in stored})
        report.chunks_reused += len(hashes) - len(missing)
        fresh: dict[str, np.ndarray] = {}
        if missing and self._shared_cache is not None:
            fresh = self._shared_cache.get(missing)
            report.chunks_cached += len(fresh)
            missing = [h for h in missing if h not in fresh]
        # What is left of these files' weight, credited chunk by chunk as the model goes.
        rest = sum(item.weight for item in pending) * (1 - PREPARE_SHARE)
        credited = 0.0
        if missing:
            text_of = dict(zip(hashes, embed_texts, strict=True))
            texts = [text_of[h] for h in missing]

            def embedded(count: int) -> None:
                nonlocal credited
                report.chunks_embedded += count
                share = rest * count / len(missing)
                credited += share
                meter.credit(share)

            new = dict(zip(missing, self._embed(texts, meter.notify, embedded), strict=True))
            if self._shared_cache is not None:
                self._shared_cache.put(new.items())
            fresh.update(new)
        # In groups of at least WRITE_BATCH_CHUNKS chunks (see LARGE_INDEX_BATCH_CHUNKS).
        hash_of = iter(hashes)
        removals, self._removals = self._removals, []
        for group in _write_groups(pending, WRITE_BATCH_CHUNKS):
            rows: list[dict] = []
            for item in group:
                ids = ChunkIds(item.record.path)  # unique within the file
                rows.extend(self._row(item, chunk, ids, next(hash_of), stored, fresh)
                            for chunk in item.chunks)
            self.store.replace_files([item.record for item in group], rows, removals)
            removals = []
            report.chunks_written += len(rows)
            del rows
            # Build the full-text index with the first batch, so lexical search works while
            # the rest is indexed (later rows are searched unindexed until optimize folds
            # them in).
            self.store.ensure_fts_index()
            if self._draft is not None:  # the real chunks answer from now on
                self._draft.discard((item.record.path for item in group),
                                    drafted_before=self._draft_mark)
        meter.credit(rest - credited)  # all reused, or float rounding: the batch is done
        self._batches_written += 1

    def _row(self, item: _Pending, chunk: Chunk, ids: ChunkIds, content_hash: str,
             stored: dict, fresh: dict[str, np.ndarray]) -> dict:
        """The chunks table's row of one of ``item``'s chunks (its vector from ``fresh``,
        or with what ``stored`` holds of the same text)."""
        self._pause()  # a chunk's columns take ~0.5 ms of the interpreter
        known = stored.get(content_hash)
        return {
            "id": ids.next(chunk.start_line, content_hash),
            "path": item.record.path,
            "start_line": chunk.start_line,
            "end_line": chunk.end_line,
            "language": item.language,
            "kind": chunk.kind,
            "symbol": chunk.symbol,
            "text": chunk.text,
            "search_text": lexical_text(chunk.text, item.record.path, chunk.context),
            # Derived from the embedded text alone, so a known hash has them.
            "defines": known.defines if known else " ".join(
                defined_names(chunk.text, item.language, chunk.symbol)),
            "terms": known.terms if known else " ".join(
                sorted(text_terms(f"{chunk.context}\n{chunk.text}"))),
            "content_hash": content_hash,
            "vector": known.vector if known else fresh[content_hash],
        }

    def _fold_if_due(self, full: bool) -> None:
        """Fold the batches written into the indexes and compact, when due: every
        OPTIMIZE_EVERY_BATCHES batches, and past POSTINGS_MAX_ROWS after each ``full`` one
        (see LARGE_INDEX_BATCH_CHUNKS). A run's last batch is folded when the run ends, if
        that is due (ChunkStore.needs_optimize), and the few chunks of a save once the
        server's updates settle (rag_lsp.server.features.compaction): searches read them
        unindexed meanwhile, ~25 us a chunk at 100k. After the batch's rows are let go of,
        as a fold's peak is a run's highest."""
        if (self._batches_written % OPTIMIZE_EVERY_BATCHES == 0
                or (full and self.store.searches_read_full_text_index())):
            self._optimize()
            self._folds += 1

    def _optimize(self, max_segments: int | None = None) -> None:
        """Compact, and say when and for how long: the heaviest step of a run, and the
        searches beside it are its slowest (see CompactionTimes)."""
        times = self.store.optimize(self._around_rewrite, max_segments=max_segments)
        log.info("%s: %s while indexing", self.root.name or self.root, times.describe())

    def _batch_chunks(self) -> int:
        """Chunks the next write gathers (see LARGE_INDEX_BATCH_CHUNKS)."""
        if self.store.searches_read_full_text_index():
            return LARGE_INDEX_BATCH_CHUNKS
        return WRITE_BATCH_CHUNKS

    def _finish(self, report: IndexReport, started: float, notify: ProgressCallback) -> None:
        notify(IndexProgress("finish", message="building the full-text index"))
        # Also when nothing changed: a run killed between its last write and this build left
        # every file recorded and no full-text index (a no-op when there is one).
        self.store.ensure_fts_index()
        # An index from before the packed fields' column gets it (under a second at 100k
        # chunks): after the run's writes, so their rows have it too, and before a compaction,
        # which then merges the files it adds.
        self.store.ensure_packed_column()
        # Only when due (see ChunkStore.needs_optimize: a compaction rewrites the whole
        # table), and also when nothing changed: a large index without its vector index
        # (written by an older rag-lsp, or grown past what its index was trained on), or
        # with writes that were never compacted.
        # A run that folded batches of its own as it went left the ANN index a segment for
        # each (past MATRIX_MAX_ROWS), and every vector query searches each segment: at 100k
        # chunks, in process, four of them after two runs took 14.6 ms at the median against
        # 11.5 in one (bench/README.md, "Where in a 100k re-index the searches slow down").
        # Left as they are, the searches after the run and in the next one pay for them
        # until a fold passes MAX_SEGMENTS. So such a run ends with the index trained again
        # as one; a save's few rows, folded once saves settle, do not.
        one_segment = self._folds > 0 and self.store.needs_vector_index(max_segments=1)
        if one_segment or self.store.needs_optimize():
            self._optimize(max_segments=1 if self._folds else None)  # (None: MAX_SEGMENTS)
        self.store.settle_copy()  # the run's patches no longer cost each search
        report.chunks_total = self.store.count_chunks()
        report.seconds = time.monotonic() - started
