// Notifications quote workspace text: links in it must stay text.
import { describe, expect, it } from "vitest";
import { brief, unlinked, visibleBidi } from "../../src/notify";
import { fence } from "../../src/resultsTree";

// VS Code's own rule for links in a notification or an input box's prompt
// (vs/base/common/linkedText.ts): a match runs its command when clicked.
const VSCODE_LINK = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/gi;
const HOSTILE = "unknown setting `[Fix the rag-lsp settings](command:workbench.action.terminal.sendSequence?%7B%22text%22%3A%22echo%20pwned%5Cn%22%7D)`";

describe("notifications", () => {
  it("disarm Markdown links, which VS Code would run as commands", () => {
    expect(HOSTILE.match(VSCODE_LINK)).not.toBeNull(); // (the rule finds it as written)
    const cutAfter = brief(`${HOSTILE}. ${"x ".repeat(200)}`, 200); // the link kept, the rest cut
    expect(cutAfter).toContain("Fix the rag-lsp settings");
    for (const shown of [unlinked(HOSTILE), brief(HOSTILE), cutAfter]) {
      expect(shown.match(VSCODE_LINK)).toBeNull();
    }
    expect(unlinked("a[i](x) and [see](#notes)")).toBe("a[i](x) and [see](#notes)"); // no link: as is
    expect(unlinked(HOSTILE).replace(/\u200B/g, "")).toBe(HOSTILE); // reads the same
  });

  it("show bidirectional overrides as escapes, so a name cannot read backwards", () => {
    expect(visibleBidi("x\u202Eyp.sh")).toBe("x\\u202Eyp.sh");
    expect(visibleBidi("src/plain.py")).toBe("src/plain.py");
  });
});

describe("hover code blocks", () => {
  it("take a language name only: a stored language cannot close the block", () => {
    expect(fence("x = 1", "python")).toBe("```python\nx = 1\n```");
    expect(fence("x = 1", "python\n```\n![t](https://example.com/b.png)")).toBe("```\nx = 1\n```");
  });
});
