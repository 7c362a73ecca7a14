"""`rag-lsp mcp` for agents: how fast it starts, and how many tokens an agent reads to reach
the first relevant file — with `rag-lsp mcp`'s search_code versus a plain `rg -n` of the
query's words, on the code-retrieval benchmark's repositories.

Start-up (``--startup``, the real process through the MCP SDK's client, 5 spawns): time to the
``initialize`` answer, to ``tools/list``, and to the first ``search_code`` answer on an indexed
benchmark repository; beside it, in the same run, a bare ``python -c pass`` and ``python -c
"import mcp.server.lowlevel"`` — the floor the interpreter and the SDK's own import set.

Tokens (``--tokens``): for every benchmark query, the search_code answer at its defaults
(top 10, 8 snippet lines, 2,000-token cap) made by the same function the tool uses
(``agents.answers.search_answer`` on ``Workspace.search``); tokens read = the answer up to and
including the first block of a relevant file (all of it when none is there). For rg: ``rg -n
-i -F --sort path`` with one ``-e`` per query word (3+ letters, not a stop word) over the
source tree; tokens read = output up to the first line of a relevant file (all output when
none). Tokens are estimated as characters / 4 for both.

    .venv/bin/python bench/mcp_agent.py                 # both parts, ~5 minutes with caches
    .venv/bin/python bench/mcp_agent.py --startup --repo cobra
    .venv/bin/python bench/mcp_agent.py --tokens --json
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codebench.data import annotated_repos, load_repo_specs, load_tasks, source_tree  # noqa: E402
from codebench.engine import (  # noqa: E402
    add_common_options,
    benchmark_workspace,
    write_results,
)
from codebench.scoring import path_matches  # noqa: E402

from rag_lsp.agents.answers import estimate_tokens, search_answer  # noqa: E402
from rag_lsp.terms import STOP_WORDS  # noqa: E402

CATEGORIES = ("architecture", "semantic", "symbol")
DEFAULTS = {"top_k": 10, "max_tokens": 2000, "snippet_lines": 8}


# ---- start-up -------------------------------------------------------------------------


def _timed_python(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


async def _one_start(root: Path, index_dir: Path, query: str) -> dict[str, float]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "rag_lsp", "mcp", str(root), "--index-path", str(index_dir), "--no-watch"])
    started = time.perf_counter()
    with open("/dev/null", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                initialized = time.perf_counter()
                await session.list_tools()
                listed = time.perf_counter()
                first = await session.call_tool("search_code", {"query": query})
                searched = time.perf_counter()
                assert not first.is_error, first.content[0].text
                warm = []
                for _ in range(5):
                    t = time.perf_counter()
                    await session.call_tool("search_code", {"query": query})
                    warm.append(time.perf_counter() - t)
    return {"initialize": initialized - started, "tools_list": listed - started,
            "first_search": searched - started, "warm_search": statistics.median(warm)}


def startup(args: argparse.Namespace) -> dict:
    repo = args.repo or "cobra"
    benchmark_workspace(repo, args).close()  # the index exists and is current
    spec = load_repo_specs(args.data)[repo]
    tree = source_tree(spec, args.mirrors, args.cache)
    index_dir = args.cache / "index" / args.index_variant / repo
    runs = []
    for _ in range(args.spawns):
        runs.append({
            "python_pass": _timed_python("pass"),
            "import_mcp_sdk": _timed_python("import mcp.server.lowlevel"),
            **asyncio.run(_one_start(tree, index_dir, "how are flags parsed")),
        })
    keys = list(runs[0])
    print(f"\nStart-up of `rag-lsp mcp` on {repo} (indexed), {len(runs)} spawns, seconds "
          "from spawn (median / max):")
    summary = {}
    for key in keys:
        values = [r[key] for r in runs]
        summary[key] = {"median": round(statistics.median(values), 3),
                        "max": round(max(values), 3)}
        print(f"  {key:<16}{summary[key]['median']:>8.3f}{summary[key]['max']:>8.3f}")
    return {"repo": repo, "runs": runs, "summary": summary}


# ---- tokens to the first relevant file --------------------------------------------------


def _is_relevant(path: str, task) -> bool:
    return any(path_matches(path, t.path) for t in task.targets)


def rag_tokens(ws, task) -> tuple[int, bool, int]:
    """(tokens read to the first relevant file, found, tokens of the whole answer)."""
    text = search_answer(ws.search(task.query, top_k=DEFAULTS["top_k"]),
                         max_tokens=DEFAULTS["max_tokens"],
                         snippet_lines=DEFAULTS["snippet_lines"])
    blocks = text.split("\n\n")
    for i, block in enumerate(blocks[1:], start=1):
        path = block.split("\n", 1)[0].split(":", 1)[0]
        if _is_relevant(path, task):
            return estimate_tokens("\n\n".join(blocks[:i + 1])), True, estimate_tokens(text)
    return estimate_tokens(text), False, estimate_tokens(text)


def query_words(query: str) -> list[str]:
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)
    return list(dict.fromkeys(w for w in words if len(w) >= 3 and w.lower() not in STOP_WORDS))


def rg_tokens(rg: str, tree: Path, task) -> tuple[int, bool, int]:
    words = query_words(task.query) or [task.query]
    command = [rg, "-n", "-i", "-F", "--sort", "path", "--no-heading", "--glob", "!.git"]
    for word in words:
        command += ["-e", word]
    out = subprocess.run([*command, "."], cwd=tree, capture_output=True, text=True,
                         timeout=120, check=False).stdout
    read = 0
    for line in out.splitlines(keepends=True):
        read += len(line)
        path = line.split(":", 1)[0].removeprefix("./")
        if _is_relevant(path, task):
            return -(-read // 4), True, estimate_tokens(out)
    return estimate_tokens(out), False, estimate_tokens(out)


def tokens(args: argparse.Namespace) -> dict:
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("the rg comparison needs `rg` (Debian: apt-get install ripgrep)")
    specs = load_repo_specs(args.data)
    rows: list[dict] = []
    for repo in ([args.repo] if args.repo else annotated_repos(args.data)):
        ws = benchmark_workspace(repo, args)
        tree = source_tree(specs[repo], args.mirrors, args.cache)
        for task in load_tasks(args.data, repo, specs[repo]):
            rag_read, rag_found, rag_answer = rag_tokens(ws, task)
            rg_read, rg_found, rg_output = rg_tokens(rg, tree, task)
            rows.append({"repo": repo, "category": task.category, "query": task.query,
                         "rag_read": rag_read, "rag_found": rag_found, "rag_answer": rag_answer,
                         "rg_read": rg_read, "rg_found": rg_found, "rg_output": rg_output})
        ws.close()
    groups = {c: [r for r in rows if r["category"] == c] for c in CATEGORIES}
    groups["all"] = rows
    print(f"\nTokens an agent reads to reach the first relevant file ({len(rows)} queries; "
          "median, and share of queries where it is there at all)")
    print(f"{'category':<14}{'queries':>8}{'rag-lsp':>10}{'found':>8}{'rg -n':>10}"
          f"{'found':>8}{'rag answer':>12}")
    summary = {}
    for name, members in groups.items():
        if not members:
            continue
        s = {"queries": len(members),
             "rag_read_median": statistics.median(r["rag_read"] for r in members),
             "rag_found": sum(r["rag_found"] for r in members) / len(members),
             "rg_read_median": statistics.median(r["rg_read"] for r in members),
             "rg_found": sum(r["rg_found"] for r in members) / len(members),
             "rag_answer_median": statistics.median(r["rag_answer"] for r in members),
             "rag_answer_max": max(r["rag_answer"] for r in members)}
        summary[name] = s
        print(f"{name:<14}{s['queries']:>8}{s['rag_read_median']:>10,.0f}"
              f"{s['rag_found']:>8.0%}{s['rg_read_median']:>10,.0f}{s['rg_found']:>8.0%}"
              f"{s['rag_answer_median']:>12,.0f}")
    return {"defaults": DEFAULTS, "summary": summary, "queries": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser)
    parser.add_argument("--startup", action="store_true", help="only the start-up part")
    parser.add_argument("--tokens", action="store_true", help="only the tokens part")
    parser.add_argument("--repo", help="one benchmark repository (default: all; start-up: "
                        "cobra)")
    parser.add_argument("--spawns", type=int, default=5, help="start-up runs (default 5)")
    args = parser.parse_args(argv)
    both = not (args.startup or args.tokens)
    out = {}
    if args.startup or both:
        out["startup"] = startup(args)
    if args.tokens or both:
        out["tokens"] = tokens(args)
    write_results("mcp_agent", out, print_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
