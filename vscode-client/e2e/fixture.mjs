// The workspace the real-VS-Code test opens: a few Python and TypeScript files, each about
// something different, so one query has one clear answer and the test knows its lines.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const FILES = {
  "net/retry.py": `"""Calling flaky services."""
import random
import time


def retry_with_backoff(call, attempts=5, base_delay=0.2):
    """Call \`call\` until it succeeds, sleeping twice as long after each failure (exponential backoff)."""
    for attempt in range(attempts):
        try:
            return call()
        except ConnectionError:
            delay = base_delay * (2 ** attempt) * (1 + random.random() / 10)
            time.sleep(delay)
    raise RuntimeError(f"gave up after {attempts} attempts")
`,
  "billing/invoices.py": `"""Invoices: totals, taxes and discounts."""
from decimal import Decimal


def invoice_total(lines, tax_rate):
    """Sum quantity times unit price over the invoice lines, then add the tax."""
    subtotal = sum(Decimal(line["quantity"]) * Decimal(line["unit_price"]) for line in lines)
    return subtotal * (1 + Decimal(tax_rate))


def apply_discount(total, percent):
    """Take a percentage off a total, never below zero."""
    return max(Decimal(0), total * (1 - Decimal(percent) / 100))
`,
  "web/src/colors.ts": `// Colour helpers for the theme editor.

/** Parses "#rrggbb" into its red, green and blue channels. */
export function hexToRgb(hex: string): [number, number, number] {
  const value = parseInt(hex.replace(/^#/, ""), 16);
  return [(value >> 16) & 255, (value >> 8) & 255, value & 255];
}

/** Mixes a colour with white: amount 0 keeps it, 1 gives white. */
export function lighten(rgb: [number, number, number], amount: number): [number, number, number] {
  return rgb.map((channel) => Math.round(channel + (255 - channel) * amount)) as [number, number, number];
}
`,
  "web/src/router.ts": `// Client-side routing.

export interface Route { pattern: string; view: string }

/** Finds the route whose pattern ("/users/:id") matches a URL path, with its parameters. */
export function matchRoute(path: string, routes: Route[]): { route: Route; params: Record<string, string> } | undefined {
  for (const route of routes) {
    const names: string[] = [];
    const regex = new RegExp("^" + route.pattern.replace(/:(\\w+)/g, (_m, name) => { names.push(name); return "([^/]+)"; }) + "$");
    const match = regex.exec(path);
    if (match) return { route, params: Object.fromEntries(names.map((name, i) => [name, match[i + 1]])) };
  }
  return undefined;
}
`,
  "README.md": "# Shop\n\nA small shop: billing, a web front end and a client for flaky services.\n",
};

/** What the test asks, and what must answer it. */
export const QUERY = "retry a failing call with exponential backoff";
export const EXPECTED = {
  file: "net/retry.py",
  fileName: "retry.py",
  symbol: "retry_with_backoff",
  /** 1-based lines of the function, as an editor shows them. */
  startLine: 6,
  endLine: 14,
};
/** For the mode and knowledge-base steps: lines to select in an open file. */
export const KB_FILE = "billing/invoices.py";
export const KB_LINES = { start: 11, end: 13 };
export const KB_TITLE = "apply_discount clamps at zero";

/** Writes the workspace into `folder` (created). */
export function writeFixture(folder) {
  for (const [path, text] of Object.entries(FILES)) {
    mkdirSync(dirname(join(folder, path)), { recursive: true });
    writeFileSync(join(folder, path), text);
  }
}
