"""``server_latency.py --baseline DIR``: this checkout and another in turns on one workdir.

This machine's speed drifts within the hour by more than most changes move a search (the
seventy-third to seventy-sixth sessions: idle medians 9.6-11.7 ms in one hour, 14.3-20.7 in
another, same code and workdir). So a change is measured against the code before in one
command: the whole of ``server_latency.py`` runs once a turn, in a fresh process importing
that turn's checkout (its server too), on a fresh copy of the workdir's built index. The
checkouts take turns, the order swapped each round (baseline, this, this, baseline for two
rounds), so drift falls on both alike. The table sets each phase's figures side by side,
turn by turn, with the median of each checkout's turns and their ratio.

Imports nothing heavy: each turn's process sets itself up as the server would.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench_basics import checkouts, log, workdir_problem
from engine_latency import run_in_checkout

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "server_latency.py"
TURN_TIMEOUT = 6 * 3600.0  # a 100k-chunk turn takes ~25 minutes here; a stuck one, forever
# The search phases of one run: the result's key, and what the table calls it.
PHASES = (("search_alone", "idle, back to back"),
          ("search_alone_spaced", "idle, 0.3 s apart"),
          ("search_reindex", "first re-index (beside in-process searches)"),
          ("search_reindex_alone", "second re-index, server alone"),
          ("search_after_spaced", "idle after the runs, 0.3 s apart"))
# The server's peak RSS: loaded and idle, during the first re-index, during the second.
RSS_PHASES = {"search_alone": "loaded, idle searches", "search_reindex": "first re-index",
              "search_reindex_alone": "second re-index"}


def baseline_problem(baseline: Path) -> str | None:
    """What keeps ``baseline`` from being measured as a checkout of rag-lsp, or ``None``."""
    if not (baseline / "rag_lsp" / "__init__.py").is_file():
        return (f"--baseline {baseline} is not a checkout of rag-lsp (no rag_lsp/ in it): "
                "make one with `git worktree add /tmp/before <commit>`")
    if not any((baseline / "models").glob("*/*.onnx")):
        return (f"--baseline {baseline} has no model under models/, so its server could not "
                "search: link this tree's, e.g. `mkdir -p /tmp/before/models && ln -s "
                f"{HERE.parent / 'models'}/* /tmp/before/models/`")
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


def run_turn(args: argparse.Namespace, name: str, code: Path, copy: Path) -> dict:
    """One whole ``server_latency.py`` run of checkout ``code`` on a fresh copy of the
    workdir (removed after); its result, checked to be that checkout's."""
    shutil.rmtree(copy, ignore_errors=True)
    # copy2 keeps the files' times: the server compares them with its index's
    shutil.copytree(args.workdir, copy, symlinks=True)
    try:
        result = run_in_checkout(child_args(args, copy), code, cwd=code,
                                 timeout=TURN_TIMEOUT, progress=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    ran = Path(result["code"]).resolve().parent  # the rag_lsp package it imported
    if ran != code.resolve():
        raise SystemExit(f"the {name} turn ran the code in {ran}, not {code}")
    return result


def run_turns(args: argparse.Namespace) -> dict:
    """Every turn of ``--rounds`` rounds; the turns' results and their summary."""
    codes = checkouts(HERE.parent, args.baseline)
    order = turn_order(list(codes), args.rounds)
    copy = args.workdir.with_name(f"{args.workdir.name}-turn")
    turns = []
    for number, name in enumerate(order, 1):
        log(f"turn {number} of {len(order)}: {name} ({codes[name]}) on a fresh copy, {copy}")
        started = time.perf_counter()
        result = run_turn(args, name, codes[name], copy)
        turns.append({"checkout": name, "seconds": round(time.perf_counter() - started, 1),
                      **result})
    return {"checkouts": {name: str(path) for name, path in codes.items()}, "order": order,
            "turns": turns, "summary": summarize(turns, list(codes))}


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def summarize(turns: list[dict], names: list[str]) -> dict:
    """Per phase and checkout: each turn's round-trip p50 and p95 and the server's
    ``tookMs`` p95, their medians, and this tree's median p95 over the baseline's; the
    server's peak RSS per phase (the largest of the checkout's turns)."""
    phases: dict = {}
    for key, _label in PHASES:
        if not all(key in turn for turn in turns):  # (a phase newer than a turn's bench)
            continue
        per: dict = {}
        for name in names:
            mine = [turn[key] for turn in turns if turn["checkout"] == name]
            p50 = [t["lsp"]["p50_ms"] for t in mine]
            p95 = [t["lsp"]["p95_ms"] for t in mine]
            took = [t["server_took"]["p95_ms"] for t in mine]
            per[name] = {"p50_ms": p50, "p95_ms": p95, "took_p95_ms": took,
                         "median_p50_ms": _median(p50), "median_p95_ms": _median(p95)}
        if "baseline" in per and per["baseline"]["median_p95_ms"]:
            per["p95_this_over_baseline"] = round(
                per["this tree"]["median_p95_ms"] / per["baseline"]["median_p95_ms"], 3)
        phases[key] = per
    rss = {name: {key: max((t[key]["server_peak_rss_mb"] for t in turns
                            if t["checkout"] == name and key in t), default=None)
                  for key in RSS_PHASES} for name in names}
    return {"phases": phases, "server_peak_rss_mb": rss}


def print_turns(r: dict) -> None:
    """The phases side by side: each turn's round trip p50 / p95, then each checkout's
    median p95 (and this tree's over the baseline's)."""
    turns, names = r["turns"], list(r["checkouts"])
    first = turns[0]
    print(f"server_latency.py in turns: {first['files']} files, {first['chunks']} chunks, "
          f"{first.get('cpu_count', '?')} CPUs; checkouts: "
          + "; ".join(f"{name} = {path}" for name, path in r["checkouts"].items()))
    heads = [f"{i} {t['checkout']}" for i, t in enumerate(turns, 1)]
    width = max(15, *(len(h) for h in heads))
    print(f"\n{'rag/search round trip, p50 / p95 ms':<46}"
          + "".join(f" {h:>{width}}" for h in heads)
          + "".join(f" {name + ' p95':>16}" for name in names)
          + (f" {'this / base':>11}" if len(names) > 1 else ""))
    for key, label in PHASES:
        per = r["summary"]["phases"].get(key)
        if per is None:
            continue
        cells = [f"{t[key]['lsp']['p50_ms']:.1f} / {t[key]['lsp']['p95_ms']:.1f}"
                 for t in turns]
        print(f"  {label:<44}" + "".join(f" {c:>{width}}" for c in cells)
              + "".join(f" {per[name]['median_p95_ms']:>16}" for name in names)
              + (f" {per['p95_this_over_baseline']:>11}"
                 if "p95_this_over_baseline" in per else ""))
    print(f"\n{'server-side tookMs p95, ms':<46}"
          + "".join(f" {h:>{width}}" for h in heads))
    for key, label in PHASES:
        if key in r["summary"]["phases"]:
            print(f"  {label:<44}" + "".join(
                f" {t[key]['server_took']['p95_ms']:>{width}.1f}" for t in turns))
    print(f"\n{'server peak RSS, MB':<46}" + "".join(f" {h:>{width}}" for h in heads))
    for key, label in RSS_PHASES.items():
        print(f"  {label:<44}" + "".join(
            f" {t.get(key, {}).get('server_peak_rss_mb', '-'):>{width}}" for t in turns))
    runs = [f"{t['search_reindex']['run_seconds']}, {t['search_reindex_alone']['run_seconds']}"
            for t in turns]
    print(f"  {'the re-indexes took, s':<44}" + "".join(f" {c:>{width}}" for c in runs))
    print(f"  {'the whole turn took, s':<44}" + "".join(
        f" {t['seconds']:>{width}}" for t in turns))
    print(f"\nturns (order swapped each round): {', '.join(r['order'])}; each turn's "
          "figures in full in the JSON (--json, --out)")


def main(args: argparse.Namespace) -> int:
    """``server_latency.py --baseline``: check, run the turns, print and write the table."""
    from bench_basics import emit

    problem = workdir_problem(args.workdir) or baseline_problem(args.baseline)
    if problem:
        raise SystemExit(f"{problem}\n(--baseline compares checkouts on copies of one built "
                         "workdir: build it once with server_latency.py --workdir DIR)")
    result = run_turns(args)
    emit(result, args, print_turns)
    return 0


if __name__ == "__main__":
    sys.exit("run this through bench/server_latency.py --baseline DIR")
