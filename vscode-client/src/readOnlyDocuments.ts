// Read-only documents the extension writes: one per assistant mode for its packed context
// (activating a mode again refreshes that same tab instead of opening another Untitled one),
// and one per knowledge-base entry without an anchor. Markdown, named by their last segment.
import * as vscode from "vscode";

export const SCHEME = "rag-lsp";

export function contextDocumentUri(mode: string): vscode.Uri {
  return vscode.Uri.parse(`${SCHEME}:/context/${encodeURIComponent(mode)}.md`);
}

export function knowledgeDocumentUri(mode: string, id: string): vscode.Uri {
  return vscode.Uri.parse(`${SCHEME}:/knowledge/${encodeURIComponent(mode)}/${encodeURIComponent(id)}.md`);
}

export class ReadOnlyDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly registration = vscode.workspace.registerTextDocumentContentProvider(SCHEME, this);

  /** Sets a document's text and opens it (the same tab when it is already open). */
  async show(uri: vscode.Uri, text: string): Promise<vscode.TextEditor> {
    const known = this.texts.has(uri.toString());
    this.texts.set(uri.toString(), text);
    if (known) this.changed.fire(uri); // an open tab shows the new text
    const document = await vscode.workspace.openTextDocument(uri);
    return vscode.window.showTextDocument(document, { preview: false });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "This rag-lsp document is gone (VS Code was restarted). Run the command again.";
  }

  dispose(): void {
    this.registration.dispose();
    this.changed.dispose();
  }
}
