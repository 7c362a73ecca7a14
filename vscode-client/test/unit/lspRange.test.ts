import { describe, expect, it } from "vitest";
import { Location, Position, Range, Selection, Uri } from "vscode";
import { activeFileParam, itemLocation, toLspRange, toVscodeRange } from "../../src/lspRange";
import { fake } from "./vscode-stub";

const lsp = { start: { line: 11, character: 0 }, end: { line: 18, character: 0 } };

describe("range conversion", () => {
  it("keeps 0-based lines and characters both ways", () => {
    const range = toVscodeRange(lsp);
    expect(range.start.line).toBe(11);
    expect(range.end).toEqual(new Position(18, 0));
    expect(toLspRange(range)).toEqual(lsp);
  });

  it("sends a backwards selection start-first", () => {
    const selection = new Selection(new Position(9, 4), new Position(2, 1));
    expect(toLspRange(selection)).toEqual({ start: { line: 2, character: 1 }, end: { line: 9, character: 4 } });
  });
});

describe("active file for the server", () => {
  const uri = Uri.file("/work/repo/src/app.py");

  it("sends the selection when there is one", () => {
    const editor = fake.editor(uri, "a\nb\nc", new Selection(new Position(1, 0), new Position(2, 1)));
    expect(activeFileParam(editor as never)).toEqual({ uri: "file:///work/repo/src/app.py", selection: { start: { line: 1, character: 0 }, end: { line: 2, character: 1 } } });
  });

  it("sends only the file for a bare cursor", () => {
    expect(activeFileParam(fake.editor(uri, "a") as never)).toEqual({ uri: "file:///work/repo/src/app.py" });
  });

  it("sends nothing for unsaved or remote documents, or no editor", () => {
    expect(activeFileParam(fake.editor(Uri.parse("untitled:Untitled-1"), "a") as never)).toBeUndefined();
    expect(activeFileParam(undefined)).toBeUndefined();
  });
});

describe("locations of results", () => {
  it("is a Location with a range, else the file", () => {
    const location = itemLocation("file:///work/repo/a.py", lsp);
    expect(location).toBeInstanceOf(Location);
    expect((location as Location).range).toEqual(new Range(11, 0, 18, 0));
    expect(itemLocation("file:///work/repo/a.py", null)).toBeInstanceOf(Uri);
  });
});
