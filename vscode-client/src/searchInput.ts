// "Search workspace": a focused input box whose results fill the Results tree as you type;
// Enter moves to the tree, Escape leaves the results where they are.
import * as vscode from "vscode";
import { errorText } from "./commands";
import { unlinked } from "./notify";
import { MAX_QUERY_CHARS, Requests, type SearchResponse } from "./protocol";
import { isStale } from "./results";
import type { ResultsTree } from "./resultsTree";
import type { RagServerApi } from "./serverApi";

/** Typing pauses shorter than this do not start a search. */
export const TYPING_PAUSE_MS = 200;

export class SearchController {
  private latest: string | undefined;
  private lastQuery = "";

  constructor(
    private readonly server: RagServerApi,
    private readonly tree: ResultsTree,
    private readonly pauseMs = TYPING_PAUSE_MS,
  ) {}

  /**
   * Runs one search and shows its answer, unless a newer one was asked meanwhile. Returns what
   * to tell the user in the input box ("" when all is said by the tree).
   */
  async search(query: string): Promise<string> {
    const trimmed = query.trim();
    this.latest = trimmed;
    if (!trimmed) return "";
    this.lastQuery = trimmed;
    try {
      const response = await this.server.request<SearchResponse>(Requests.search, { query: trimmed.slice(0, MAX_QUERY_CHARS) });
      if (isStale(trimmed, this.latest)) return "";
      const severalFolders = (this.server.status?.folders.length ?? 0) > 1;
      this.tree.show(trimmed, response, severalFolders);
      const files = this.tree.files.length;
      return files ? `${files} file${files === 1 ? "" : "s"}: Enter to browse them` : "No relevant results";
    } catch (err) {
      if (isStale(trimmed, this.latest)) return "";
      const message = `Search failed: ${errorText(err)}`;
      this.tree.message = message;
      return message;
    }
  }

  /** Shows the input box, focused, holding the last query (selected, so typing replaces it). */
  open(): vscode.InputBox {
    const input = vscode.window.createInputBox();
    input.title = "rag-lsp: Search the workspace";
    input.placeholder = "A question, a behaviour, or a name (results appear as you type)";
    input.value = this.lastQuery;
    input.valueSelection = [0, this.lastQuery.length];
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running: Promise<void> = Promise.resolve();
    const run = (value: string) => {
      input.busy = true;
      running = this.search(value).then((note) => {
        if (isStale(value.trim(), this.latest)) return;
        input.busy = false;
        input.prompt = unlinked(note); // (a prompt's Markdown links are live too)
      });
    };
    input.onDidChangeValue((value) => {
      clearTimeout(timer);
      timer = setTimeout(() => run(value), this.pauseMs);
    });
    input.onDidAccept(async () => {
      clearTimeout(timer);
      if (input.value.trim() !== this.latest) run(input.value);
      await running;
      input.hide();
      await this.tree.focusFirst();
    });
    input.onDidHide(() => {
      clearTimeout(timer);
      input.dispose();
    });
    input.show();
    return input;
  }
}
