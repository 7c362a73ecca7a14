// Sample server answers for the sidebar page, shaped like rag/search and rag/indexStatus.

import type { IndexStatus, Range, SearchResponse, SearchResult } from "../../src/protocol";

export function lines(start: number, endExclusive: number): Range {
  return { start: { line: start, character: 0 }, end: { line: endExclusive, character: 0 } };
}

function result(partial: Partial<SearchResult> & Pick<SearchResult, "uri" | "path" | "folder">): SearchResult {
  const range = partial.range ?? lines(0, 1);
  const score = partial.score ?? 0.5;
  return {
    range,
    ranges: [{ range, score }],
    score,
    kind: "function",
    symbol: "",
    language: "python",
    snippet: "",
    ...partial,
  };
}

const repo = "file:///work/repo";
const docs = "file:///work/docs";

export const clientUri = `${repo}/src/http/client.py`;

export const sampleResponse: SearchResponse = {
  results: [
    result({
      uri: clientUri,
      path: "src/http/client.py",
      folder: repo,
      range: lines(11, 18),
      ranges: [
        { range: lines(11, 18), score: 0.50921 },
        { range: lines(39, 52), score: 0.31234 },
      ],
      score: 0.50921,
      symbol: "follow_redirects",
      snippet: [
        "def follow_redirects(response, max_hops=5):",
        '    """Follow Location headers until a non-redirect answer."""',
        "    for _ in range(max_hops):",
        "        if response.status not in (301, 302, 307, 308):",
        "            return response",
        '        response = get(response.headers["Location"])',
        '    raise TooManyRedirects(f"more than {max_hops} hops")',
      ].join("\n"),
    }),
    result({
      uri: `${docs}/guide/redirects.md`,
      path: "guide/redirects.md",
      folder: docs,
      range: lines(2, 9),
      score: 0.44107,
      kind: "section",
      symbol: "Redirects",
      language: "markdown",
      snippet: "## Redirects\n\nThe client follows up to five redirects, then raises TooManyRedirects.",
    }),
    result({
      uri: `${repo}/tests/test_client.py`,
      path: "tests/test_client.py",
      folder: repo,
      range: lines(80, 81),
      score: 0.28,
      symbol: "test_redirect_loop",
      snippet: "def test_redirect_loop(server): assert_raises(TooManyRedirects, get, server.loop_url)",
    }),
  ],
  tookMs: 31.4,
  partial: false,
  mode: "hybrid",
  warnings: [],
};

export function status(state: IndexStatus["state"], message = "", extra: Record<string, unknown> = {}): IndexStatus {
  return { state, files: 1234, chunks: 5678, message, folders: [], ...extra };
}
