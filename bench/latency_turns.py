"""``server_latency.py --baseline DIR``: this checkout and another in turns on one workdir.

This machine's speed drifts within the hour by more than most changes move a search (the
seventy-third to seventy-sixth sessions: idle medians 9.6-11.7 ms in one hour, 14.3-20.7 in
another, same code and workdir). So a change is measured against the code before in one
command: the whole of ``server_latency.py`` runs once a turn, in a fresh process whose
import path puts that turn's checkout first (its server inherits it), on a fresh copy of
the workdir's built index. The checkouts take turns, the order swapped each round
(baseline, this, this, baseline for two rounds), so drift falls on both alike. The table
sets each phase's figures side by side, turn by turn, with the median of each checkout's
turns and their ratio. The results are written after every turn, so a turn that fails
keeps those before it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_basics import checkouts, emit, log, workdir_problem
from engine_latency import run_in_checkout

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "server_latency.py"
TURN_TIMEOUT = 6 * 3600.0  # a turn takes ~10 minutes here, at ~12k or 100k; a stuck one, forever
# The search phases of one run: the result's key, and what the table calls it.
PHASES = (("search_alone", "idle, back to back"),
          ("search_alone_spaced", "idle, 0.3 s apart"),
          ("search_idle", "idle, beside in-process searches"),
          ("search_reindex", "first re-index, beside in-process searches"),
          ("search_reindex_alone", "second re-index, server alone"),
          ("search_after_spaced", "idle after the runs, 0.3 s apart"))
# The server's peak RSS: loaded and idle, during the first re-index, during the second.
RSS_PHASES = {"search_alone": "loaded, idle searches", "search_reindex": "first re-index",
              "search_reindex_alone": "second re-index"}
FRESHNESS = {"fresh_client": "an edit searchable, client's file events",
             "fresh_watcher": "an edit searchable, the server's own watcher"}


def baseline_problem(baseline: Path) -> str | None:
    """What keeps ``baseline`` from being measured as a checkout of rag-lsp, or ``None``."""
    if not (baseline / "rag_lsp" / "__init__.py").is_file():
        return (f"--baseline {baseline} is not a checkout of rag-lsp (no rag_lsp/ in it): "
                f"make one with `git worktree add {baseline} <commit>`")
    if not any((baseline / "models").glob("*/*.onnx")):
        # The model's folder is not in git (models/manifest.json names it): link this one's.
        ours = sorted({p.parent for p in (HERE.parent / "models").glob("*/*.onnx")})
        link = (f"`ln -s {ours[0]} {baseline / 'models'}/`" if ours
                else "`make setup` there")
        return (f"--baseline {baseline} has no model under models/, so its server could not "
                f"search: {link}")
    return None


def turn_order(names: list[str], rounds: int) -> list[str]:
    """The checkouts' turns: each round all of them, the order swapped every other round."""
    order: list[str] = []
    for round_ in range(rounds):
        order += names if round_ % 2 == 0 else names[::-1]
    return order


def child_args(args: argparse.Namespace, copy: Path) -> list[str]:
    """``server_latency.py``'s arguments for one turn on ``copy``: the workload's own
    (queries, edits, share rewritten, seed, paced model) as given, on the copy's index."""
    forwarded = ["--edits", str(args.edits), "--queries", str(args.queries),
                 "--rewrite", str(args.rewrite), "--seed", str(args.seed)]
    if args.model_sleep is not None:
        forwarded += ["--model-sleep", repr(args.model_sleep)]
    return [str(SCRIPT), *forwarded, "--workdir", str(copy), "--reuse", "--json",
            "--out", str(copy / "server_latency.json")]


def run_turn(args: argparse.Namespace, name: str, code: Path) -> dict:
    """One whole ``server_latency.py`` run of checkout ``code`` on a fresh copy of the
    workdir beside it (removed after); its result, checked to be that checkout's, the
    bench's and its server's both."""
    turn_dir = Path(tempfile.mkdtemp(prefix=f"{args.workdir.name}-turn-",
                                     dir=args.workdir.parent))
    try:
        copy = turn_dir / "work"
        # copy2 keeps the files' times: the server compares them with its index's
        shutil.copytree(args.workdir, copy, symlinks=True)
        log(f"{name}'s turn on a fresh copy of the workdir, {copy}")
        result = run_in_checkout(child_args(args, copy), code, cwd=code,
                                 timeout=TURN_TIMEOUT, progress=True)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{name}'s turn ran past {TURN_TIMEOUT:.0f} s: stopped, with its "
                         "server") from None
    finally:
        shutil.rmtree(turn_dir, ignore_errors=True)
    for who, package in (("bench", result.get("code")), ("server", result.get("server_code"))):
        ran = Path(package).resolve().parent if package else None
        if ran != code.resolve():
            raise SystemExit(f"{name}'s turn: its {who} ran the code in "
                             f"{ran or 'the installed package'}, not {code}")
    return result


def run_turns(args: argparse.Namespace, save: Callable[[dict], None] | None = None) -> dict:
    """Every turn of ``--rounds`` rounds; the turns' results and their summary, handed to
    ``save`` after each turn as well."""
    codes = checkouts(HERE.parent, args.baseline)
    order = turn_order(list(codes), args.rounds)
    left = sorted(args.workdir.parent.glob(f"{args.workdir.name}-turn-*"))
    if left:  # (a run killed outright, kill -9, cannot remove its copy)
        log(f"copies left by an earlier run, not removed (another run may be using them): "
            f"{', '.join(map(str, left))}")
    result: dict = {"checkouts": {name: str(path) for name, path in codes.items()},
                    "order": order, "turns": []}
    for number, name in enumerate(order, 1):
        log(f"turn {number} of {len(order)}: {name} ({codes[name]})")
        started = time.perf_counter()
        turn = run_turn(args, name, codes[name])
        result["turns"].append({**turn, "checkout": name,
                                "seconds": round(time.perf_counter() - started, 1)})
        result["summary"] = summarize(result["turns"], list(codes))
        if save is not None:
            save(result)
    return result


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def summarize(turns: list[dict], names: list[str]) -> dict:
    """Per phase and checkout: each turn's round-trip p50, p95 and p99 and the server's
    ``tookMs`` p95 (``None`` for a phase without searches, e.g. a re-index that ended
    before the first), their medians, and this tree's median p95 over the baseline's; the
    server's peak RSS per phase (the largest of the checkout's turns)."""
    phases: dict = {}
    for key, _label in PHASES:
        per: dict = {}
        for name in names:
            mine = [turn[key] for turn in turns if turn["checkout"] == name]
            p50 = [t["lsp"].get("p50_ms") for t in mine]
            p95 = [t["lsp"].get("p95_ms") for t in mine]
            p99 = [t["lsp"].get("p99_ms") for t in mine]
            took = [t["server_took"].get("p95_ms") for t in mine]
            per[name] = {"p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "took_p95_ms": took,
                         "median_p50_ms": _median([v for v in p50 if v is not None]),
                         "median_p95_ms": _median([v for v in p95 if v is not None])}
        this, base = (per.get(n, {}).get("median_p95_ms") for n in ("this tree", "baseline"))
        if this is not None and base:
            per["p95_this_over_baseline"] = round(this / base, 3)
        for name in names:
            for median in ("median_p50_ms", "median_p95_ms"):
                per[name][median] = _round(per[name][median])
        phases[key] = per
    rss = {name: {key: max((t[key]["server_peak_rss_mb"] for t in turns
                            if t["checkout"] == name), default=None)  # (no turn yet)
                  for key in RSS_PHASES} for name in names}
    return {"phases": phases, "server_peak_rss_mb": rss}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_turns(r: dict) -> None:
    """The phases side by side: each turn's round trip p50 / p95, then each checkout's
    median p95 over its turns (and this tree's over the baseline's)."""
    turns, names = r["turns"], list(r["checkouts"])
    first = turns[0]
    print(f"server_latency.py in turns: {first['files']} files, {first['chunks']} chunks, "
          f"{first.get('cpu_count', '?')} CPUs; checkouts: "
          + "; ".join(f"{name} = {path}" for name, path in r["checkouts"].items()))
    heads = [f"{i} {t['checkout']}" for i, t in enumerate(turns, 1)]
    width = max(15, *(len(h) for h in heads))

    def block(title: str, rows: list[tuple[str, list[str]]]) -> None:
        print(f"\n{title:<46}" + "".join(f" {h:>{width}}" for h in heads))
        for label, cells in rows:
            print(f"  {label:<44}" + "".join(f" {c:>{width}}" for c in cells))

    medians = "".join(f" {name + ' median p95':>22}" for name in names)
    print(f"\n{'rag/search round trip, p50 / p95 ms':<46}"
          + "".join(f" {h:>{width}}" for h in heads) + medians
          + (f" {'this / base':>11}" if len(names) > 1 else ""))
    for key, label in PHASES:
        per = r["summary"]["phases"][key]
        cells = [f"{_ms(t[key]['lsp'].get('p50_ms'))} / {_ms(t[key]['lsp'].get('p95_ms'))}"
                 for t in turns]
        ratio = per.get("p95_this_over_baseline")
        print(f"  {label:<44}" + "".join(f" {c:>{width}}" for c in cells)
              + "".join(f" {_ms(per[name]['median_p95_ms']):>22}" for name in names)
              + (f" {'-' if ratio is None else f'{ratio:.3f}':>11}" if len(names) > 1
                 else ""))
    block("rag/search round trip p99, ms",
          [(label, [_ms(t[key]["lsp"].get("p99_ms")) for t in turns]) for key, label in PHASES])
    block("server-side tookMs p95, ms",
          [(label, [_ms(t[key]["server_took"].get("p95_ms")) for t in turns])
           for key, label in PHASES])
    block("freshness (write -> found), p50 / p95 ms",
          [(label, [f"{_ms(t[key].get('p50_ms'))} / {_ms(t[key].get('p95_ms'))}"
                    for t in turns]) for key, label in FRESHNESS.items()])
    block("server peak RSS, MB",
          [(label, [str(t[key]["server_peak_rss_mb"]) for t in turns])
           for key, label in RSS_PHASES.items()])
    block("how long, s", [
        ("the two re-indexes", [f"{t['search_reindex']['run_seconds']}, "
                                f"{t['search_reindex_alone']['run_seconds']}" for t in turns]),
        ("the whole turn", [str(t["seconds"]) for t in turns])])
    print(f"\nturns (order swapped each round): {', '.join(r['order'])}; each turn's "
          "figures in full in the JSON (--json, --out)")


def main(args: argparse.Namespace) -> int:
    """``server_latency.py --baseline``: check, run the turns, print and write the table."""
    if workdir_problem(args.workdir):
        raise SystemExit(f"{args.workdir} has no ws/ and index/ to copy: build it once with "
                         f"bench/server_latency.py --workdir {args.workdir} (without "
                         "--baseline; --stand-in-vectors at 100k chunks)")
    problem = baseline_problem(args.baseline)
    if problem:
        raise SystemExit(problem)

    # Stopped with `kill` as with Ctrl-C: the turn's processes are stopped, its copy removed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    started = time.strftime("%Y-%m-%d %H:%M")

    def save(so_far: dict) -> None:
        """The turns so far, whole or not at all: a turn that fails later keeps them."""
        args.out.parent.mkdir(parents=True, exist_ok=True)
        partial = args.out.with_name(args.out.name + ".partial")
        partial.write_text(json.dumps({**so_far, "started": started,
                                       "command": " ".join(sys.argv)}, indent=2),
                           encoding="utf-8")
        os.replace(partial, args.out)

    result = run_turns(args, save)
    emit(result, args, print_turns)
    return 0


if __name__ == "__main__":
    sys.exit("run this through bench/server_latency.py --baseline DIR")
