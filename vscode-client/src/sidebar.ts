// The search sidebar: a webview view that asks the extension (never the server) for results.
// Messages both ways are the `{type, ...}` shapes of ./messages.

import * as vscode from "vscode";
import type { FromWebview, ToWebview } from "./messages";
import type { IndexStatus, SearchResponse } from "./protocol";
import { groupByFile, isStale } from "./results";
import { nonce, renderSidebarHtml } from "./sidebarHtml";

/** What the sidebar needs from the rest of the extension (the language client behind it). */
export interface SearchBackend {
  search(query: string): Promise<SearchResponse>;
  rebuild(): Promise<void>;
  onStatus(listener: (status: IndexStatus) => void): vscode.Disposable;
  lastStatus(): IndexStatus | undefined;
}

export class SearchViewProvider implements vscode.WebviewViewProvider {
  static readonly viewType = "ragLsp.searchView";

  private view: vscode.WebviewView | undefined;
  private latestQuery: string | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly backend: SearchBackend,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    const webview = view.webview;
    webview.options = { enableScripts: true, localResourceRoots: [media] };
    webview.html = renderSidebarHtml({
      nonce: nonce(),
      cspSource: webview.cspSource,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(media, "sidebar.js")).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(media, "sidebar.css")).toString(),
    });
    const subscriptions = [
      webview.onDidReceiveMessage((message: FromWebview) => this.handle(message)),
      this.backend.onStatus((status) => this.post({ type: "status", status })),
    ];
    // The view is disposed when hidden without retainContextWhenHidden; VS Code resolves it again.
    view.onDidDispose(() => {
      subscriptions.forEach((s) => s.dispose());
      if (this.view === view) this.view = undefined;
    });
  }

  /** Handles one message from the page; returns when its work is done (tests await it). */
  async handle(message: FromWebview): Promise<void> {
    switch (message.type) {
      case "ready": {
        const status = this.backend.lastStatus();
        if (status) this.post({ type: "status", status });
        return;
      }
      case "search":
        return this.search(message.query);
      case "open": {
        const { start, end } = message.range;
        const selection = new vscode.Range(start.line, start.character, end.line, end.character);
        await this.report(() => vscode.window.showTextDocument(vscode.Uri.parse(message.uri), { selection }));
        return;
      }
      case "rebuild":
        await this.report(() => this.backend.rebuild());
        return;
    }
  }

  private async search(query: string): Promise<void> {
    this.latestQuery = query;
    this.post({ type: "searching", query });
    try {
      const response = await this.backend.search(query);
      if (isStale(query, this.latestQuery)) return;
      const severalFolders = (this.backend.lastStatus()?.folders.length ?? 0) > 1;
      const groups = groupByFile(response.results, severalFolders || undefined);
      this.post({ type: "results", query, response, groups });
    } catch (err) {
      if (isStale(query, this.latestQuery)) return;
      this.post({ type: "error", query, message: errorMessage(err) });
    }
  }

  /** Runs an action whose failure the user should see (the page has no place for it). */
  private async report(action: () => Thenable<unknown>): Promise<void> {
    try {
      await action();
    } catch (err) {
      void vscode.window.showErrorMessage(`rag-lsp: ${errorMessage(err)}`);
    }
  }

  private post(message: ToWebview): void {
    void this.view?.webview.postMessage(message);
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
