import { describe, expect, it } from "vitest";
import type { Range, SearchResult } from "../../src/protocol";
import { folderName, formatRange, groupByFile, isStale } from "../../src/results";

function lines(start: number, endExclusive: number): Range {
  return { start: { line: start, character: 0 }, end: { line: endExclusive, character: 0 } };
}

function result(uri: string, folder: string, ranges: [Range, number][]): SearchResult {
  const [range, score] = ranges[0];
  return {
    uri, folder, path: uri.slice(folder.length + 1), range, score,
    ranges: ranges.map(([r, s]) => ({ range: r, score: s })),
    kind: "function", symbol: `sym${score}`, language: "python", snippet: `snippet ${score}`,
  };
}

describe("formatRange", () => {
  it("shows whole lines 1-based, the end being the start of the next line", () => {
    expect(formatRange(lines(11, 18))).toBe("L12–18");
  });
  it("shows a single line without a dash", () => {
    expect(formatRange(lines(80, 81))).toBe("L81");
  });
  it("counts an end inside a line as that line", () => {
    expect(formatRange({ start: { line: 4, character: 2 }, end: { line: 6, character: 10 } })).toBe("L5–7");
    expect(formatRange({ start: { line: 4, character: 2 }, end: { line: 4, character: 9 } })).toBe("L5");
  });
});

describe("folderName", () => {
  it("takes the last segment, decoded", () => {
    expect(folderName("file:///work/my%20repo")).toBe("my repo");
    expect(folderName("file:///work/repo/")).toBe("repo");
  });
});

describe("isStale", () => {
  it("is stale once a newer query was asked", () => {
    expect(isStale("fo", "foo")).toBe(true);
    expect(isStale("foo", "foo")).toBe(false);
    expect(isStale("foo", undefined)).toBe(true);
  });
});

describe("groupByFile", () => {
  const repo = "file:///w/repo";
  const docs = "file:///w/docs";

  it("groups by file in the engine's order, keeping the engine's order of ranges", () => {
    const groups = groupByFile([
      result(`${repo}/a.py`, repo, [[lines(0, 5), 0.4], [lines(10, 12), 0.7]]),
      result(`${repo}/b.py`, repo, [[lines(3, 4), 0.6]]),
      result(`${repo}/a.py`, repo, [[lines(20, 30), 0.9]]),
    ]);
    expect(groups.map((g) => g.path)).toEqual(["a.py", "b.py"]);
    expect(groups[0].rows.map((r) => [r.label, r.score])).toEqual([["L1–5", 0.4], ["L11–12", 0.7], ["L21–30", 0.9]]);
    expect(groups[0]).toMatchObject({ score: 0.9, folderName: null });
  });

  it("[defect 1] labels each row by its own chunk: the file's symbol and snippet go to its primary range only", () => {
    const server = result(`${repo}/a.py`, repo, [[lines(0, 5), 0.8], [lines(10, 12), 0.5]]);
    server.ranges[1] = { ...server.ranges[1], symbol: "Client.close", kind: "method", preview: "def close(self):" };
    const older = result(`${repo}/b.py`, repo, [[lines(3, 4), 0.6], [lines(8, 9), 0.3]]); // no per-range fields
    const [a, b] = groupByFile([server, older]);
    expect(a.rows.map((r) => [r.label, r.symbol, r.preview, r.snippet])).toEqual([
      ["L1–5", "sym0.8", "snippet 0.8", "snippet 0.8"],
      ["L11–12", "Client.close", "def close(self):", undefined],
    ]);
    expect(b.rows.map((r) => [r.label, r.symbol, r.preview])).toEqual([["L4", "sym0.6", "snippet 0.6"], ["L9", "", ""]]);
  });

  it("lists a range reported twice once, with its best score", () => {
    const groups = groupByFile([
      result(`${repo}/a.py`, repo, [[lines(0, 5), 0.4]]),
      result(`${repo}/a.py`, repo, [[lines(0, 5), 0.8]]),
    ]);
    expect(groups[0].rows.map((r) => [r.label, r.score])).toEqual([["L1–5", 0.8]]);
  });

  it("falls back to the result's own range when `ranges` is empty", () => {
    const bare = { ...result(`${repo}/a.py`, repo, [[lines(2, 3), 0.5]]), ranges: [] };
    expect(groupByFile([bare])[0].rows.map((r) => r.label)).toEqual(["L3"]);
  });

  it("names the folder only when results span several folders (or when asked)", () => {
    const mixed = [result(`${repo}/a.py`, repo, [[lines(0, 1), 0.5]]), result(`${docs}/b.md`, docs, [[lines(0, 1), 0.4]])];
    expect(groupByFile(mixed).map((g) => g.folderName)).toEqual(["repo", "docs"]);
    expect(groupByFile(mixed.slice(0, 1)).map((g) => g.folderName)).toEqual([null]);
    expect(groupByFile(mixed.slice(0, 1), true).map((g) => g.folderName)).toEqual(["repo"]);
  });
});
