"""What the in-memory copy's 8-bit vectors cost a search, against the float32 matrix before
them, side by side in one process on the same vectors and queries.

For each size, the vectors as the copy held them before (one float32 matrix, every cosine
from one product), and the two ways ``rag_lsp.store.packed_vectors`` holds them now: 8-bit
codes in memory with the float32 vectors in a file (the exact cosines of only the rows that
can be among the nearest), which a load uses from ``FILE_MIN_ROWS`` rows, and below that the
float32 vectors kept in memory beside the codes (one product, as before, through the slots).
Each query runs every way in turn. Prints the time of a nearest-rows call (p50 /
p95, ms), the bytes each way holds in memory, how many rows' exact vectors a search read,
and whether both gave the same rows in the same order (and the largest cosine difference).

Vectors: random unit vectors (the hardest case: cosines crowd together), or with ``--index``
the vectors of a rag-lsp index (its chunks table), its rows repeated with a little noise up to
the size asked. Queries: rows of the same vectors moved a little (near neighbours, as a query
about a chunk is), and random directions.

    .venv/bin/python bench/packed_vectors.py                    # 1.5k, 12k, 24k, 47.5k rows
    .venv/bin/python bench/packed_vectors.py --index bench/cache/indexes/cobra --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rag_lsp.store import packed_vectors  # noqa: E402
from rag_lsp.store.packed_vectors import (  # noqa: E402
    FILE_MIN_ROWS,
    ExactVectors,
    HeldVectors,
    pack,
    packed_width,
)

DIM = 384
LIMIT = 70  # rows a retriever asks for (the ranking's candidates)


def float_nearest(vectors: np.ndarray, query: np.ndarray, limit: int, dead: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The copy's search before the 8-bit codes: one product, the top ``limit``, ties kept
    in row order."""
    scores = vectors @ query
    scores[dead] = -np.inf
    top = np.argpartition(-scores, limit - 1)[:limit]
    top = np.flatnonzero(scores >= scores[top].min())
    top = top[np.lexsort((top, -scores[top]))][:limit]
    return top, scores[top]


def unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def index_vectors(index: Path) -> np.ndarray:
    import lancedb

    table = lancedb.connect(index).open_table("chunks")
    column = table.search().select(["vector"]).limit(None).to_arrow().column("vector")
    return column.combine_chunks().flatten().to_numpy().reshape(-1, DIM).astype(np.float32)


def vectors_of(rows: int, rng: np.random.Generator, real: np.ndarray | None) -> np.ndarray:
    if real is None:
        return unit(rng.standard_normal((rows, DIM)))
    picked = real[np.arange(rows) % len(real)]
    noise = 0.0 if rows <= len(real) else 0.05  # repeats are near copies, not equal ones
    return unit(picked + noise * rng.standard_normal((rows, DIM)) * (np.arange(rows)[:, None]
                                                                     >= len(real)))


def measure(rows: int, queries: int, rng: np.random.Generator, real: np.ndarray | None,
            folder: Path) -> dict:
    vectors = vectors_of(rows, rng, real)
    exact, held = ExactVectors(DIM, folder), HeldVectors(DIM)
    packed = np.empty((rows, packed_width(DIM)), dtype=np.int8)
    for start in range(0, rows, 2048):  # as a load packs them, batch by batch
        block = vectors[start:start + 2048]
        held.append(block)
        pack(block, exact.append(block), packed[start:start + 2048])
    dead = rng.choice(rows, rows // 50, replace=False)  # rows a patch masked out
    near = unit(vectors[rng.integers(0, rows, queries // 2)]
                + 0.6 * unit(rng.standard_normal((queries // 2, DIM))))
    asked = np.concatenate([near, unit(rng.standard_normal((queries - len(near), DIM)))])
    ways = {"float32 matrix (before)": None, "codes + float32 in memory": held,
            "codes + float32 in a file": exact}
    times: dict[str, list[float]] = {way: [] for way in ways}
    read, same, near_ties, worst = [], 0, 0, 0.0
    real_read = exact.read

    def counting_read(at):
        read.append(len(at))
        return real_read(at)

    exact.read = counting_read
    for n, query in enumerate(asked):
        order = list(ways) if n % 2 == 0 else list(ways)[::-1]  # alternating which goes first
        found = {}
        for way in order:
            start = time.perf_counter()
            if ways[way] is None:
                found[way] = float_nearest(vectors, query, LIMIT, dead)
            else:
                found[way] = packed_vectors.nearest(packed, DIM, ways[way], query, LIMIT, dead)
            times[way].append((time.perf_counter() - start) * 1000)
        before, *now = found.values()
        if all(before[0].tolist() == way[0].tolist() for way in now):
            same += 1
        elif all(np.abs(before[1] - way[1]).max() < 1e-6 for way in now):
            near_ties += 1  # two rows whose cosines differ in the float32 rounding swapped
        worst = max([worst] + [float(np.abs(before[1] - way[1]).max()) for way in now])
    exact.read = real_read

    def percentiles(values: list[float]) -> dict:
        ordered = sorted(values)
        return {"p50": statistics.median(ordered),
                "p95": ordered[int(0.95 * (len(ordered) - 1))]}

    return {
        "rows": rows, "queries": len(asked),
        "ms": {way: percentiles(values) for way, values in times.items()},
        "a_load_uses": "codes + float32 " + ("in a file" if rows >= FILE_MIN_ROWS
                                             else "in memory"),
        "bytes_in_memory": {"float32 matrix (before)": vectors.nbytes,
                            "codes + float32 in memory": packed.nbytes + vectors.nbytes,
                            "codes + float32 in a file": packed.nbytes},
        "exact_rows_read": {"median": statistics.median(read), "max": max(read)},
        "same_rows_and_order": f"{same}/{len(asked)}",
        # The other queries' rows differ only where two cosines are within 1e-6 (the k-th
        # cosine is the same at every k): a file's rows are summed one by one, a float32
        # matrix's in one product, which can round a last bit differently.
        "order_differs_within_rounding": near_ties,
        "largest_cosine_difference": worst,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_500, 12_000, 24_000, 47_500])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--index", type=Path, help="a rag-lsp index whose vectors to use")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    if args.index is not None and not (args.index / "chunks.lance").is_dir():
        parser.error(f"{args.index} is not a rag-lsp index (no chunks.lance in it)")
    rng = np.random.default_rng(args.seed)
    real = index_vectors(args.index) if args.index else None
    with tempfile.TemporaryDirectory() as folder:
        results = [measure(rows, args.queries, rng, real, Path(folder)) for rows in args.rows]
    if args.json:
        print(json.dumps({"vectors": str(args.index or "random"), "results": results}, indent=1))
        return 0
    print(f"vectors: {args.index or 'random unit vectors'}; {LIMIT} nearest rows a query")
    for r in results:
        print(f"\n{r['rows']:,} rows, {r['queries']} queries (a load uses {r['a_load_uses']})")
        for way, ms in r["ms"].items():
            print(f"  {way:<26} p50 {ms['p50']:6.2f} ms  p95 {ms['p95']:6.2f} ms  "
                  f"{r['bytes_in_memory'][way] / 2**20:6.1f} MB in memory")
        read = r["exact_rows_read"]
        print(f"  rows read from the file a query: median {read['median']:.0f}, max {read['max']}; "
              f"same rows in the same order all ways: {r['same_rows_and_order']} "
              f"(else within float32 rounding: {r['order_differs_within_rounding']}); "
              f"largest cosine difference {r['largest_cosine_difference']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
