// VS Code and LSP both count lines and characters from 0, so conversion is field by field;
// what needs care is which selections mean "nothing selected" and which URIs the server takes.
import * as vscode from "vscode";
import type { Range } from "./protocol";

export function toLspRange(range: vscode.Range): Range {
  return {
    start: { line: range.start.line, character: range.start.character },
    end: { line: range.end.line, character: range.end.character },
  };
}

export function toVscodeRange(range: Range): vscode.Range {
  return new vscode.Range(range.start.line, range.start.character, range.end.line, range.end.character);
}

/** The server only reads files on disk (its schemas require file:// URIs). */
export function isFileUri(uri: vscode.Uri): boolean {
  return uri.scheme === "file";
}

/** `activeFile` for rag/injectContext: the editor's file, and its selection when there is one. */
export function activeFileParam(editor: { document: { uri: vscode.Uri }; selection: vscode.Selection } | undefined):
  { uri: string; selection?: Range } | undefined {
  if (!editor || !isFileUri(editor.document.uri)) return undefined;
  const selection = editor.selection.isEmpty ? undefined : toLspRange(editor.selection);
  return selection ? { uri: editor.document.uri.toString(), selection } : { uri: editor.document.uri.toString() };
}

/** `uri` when it names a file in an open workspace folder, the only places results come
 * from; anything else (another scheme, a path outside) is refused rather than opened. */
export function workspaceFile(uri: string): vscode.Uri {
  const parsed = vscode.Uri.parse(uri);
  const climbs = parsed.path.split("/").some((part) => part === "." || part === ".."); // (matched by prefix)
  if (parsed.scheme !== "file" || climbs || !vscode.workspace.getWorkspaceFolder(parsed)) {
    throw new Error(`not a file in the workspace: ${uri}`);
  }
  return parsed;
}

/** True when `uri` names a file in an open workspace folder (see `workspaceFile`). */
export function isWorkspaceFile(uri: string): boolean {
  try {
    workspaceFile(uri);
    return true;
  } catch {
    return false;
  }
}

/** Where a context item or result points: a Location with lines, else the whole file. */
export function itemLocation(uri: string, range: Range | null | undefined): vscode.Location | vscode.Uri {
  const parsed = vscode.Uri.parse(uri);
  return range ? new vscode.Location(parsed, toVscodeRange(range)) : parsed;
}

/**
 * Opens `uri` with exactly `range` selected, the cursor on its first line (as going to a
 * definition does) and that line in view. An LSP range ending at column 0 of a later line ends
 * with the line before; a range past the end of a file that has since shrunk is clamped.
 */
export async function openRange(uri: string, range: Range, options: { preview?: boolean } = {}): Promise<vscode.TextEditor> {
  const document = await vscode.workspace.openTextDocument(workspaceFile(uri));
  const lastLine = Math.max(0, document.lineCount - 1);
  const startLine = Math.min(range.start.line, lastLine);
  const endLine = Math.min(range.end.character === 0 && range.end.line > range.start.line ? range.end.line - 1 : range.end.line, lastLine);
  const start = new vscode.Position(startLine, startLine === range.start.line ? range.start.character : 0);
  const end = document.lineAt(Math.max(startLine, endLine)).range.end;
  const editor = await vscode.window.showTextDocument(document, { preview: options.preview ?? true });
  editor.selection = new vscode.Selection(end, start);
  editor.revealRange(new vscode.Range(start, start), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  return editor;
}
