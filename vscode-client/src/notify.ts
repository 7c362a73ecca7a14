// Notifications stay short: a toast of a thousand characters is unreadable and hides the
// editor. The first sentences that fit are shown; the whole text goes to the log, which the
// notification offers to open.

/** The most a notification shows; the rest is in the log. */
export const NOTIFICATION_MAX_CHARS = 240;

/** `text` cut at a sentence end within `max` characters, else at a word, marked with "…";
 * links disarmed (see `unlinked`). */
export function brief(text: string, max = NOTIFICATION_MAX_CHARS): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return unlinked(flat);
  const room = flat.slice(0, max - 1);
  const sentence = Math.max(room.lastIndexOf(". "), room.lastIndexOf("; "));
  if (sentence >= 40) return unlinked(`${room.slice(0, sentence + 1)} …`);
  const word = room.lastIndexOf(" ");
  return unlinked(`${room.slice(0, word > max / 2 ? word : room.length)}…`);
}

/**
 * `text` with its Markdown links disarmed. VS Code turns `[label](command:id?args)` in a
 * notification or an input box's prompt into a link that runs the command when clicked, and
 * these messages quote workspace text (a settings key, a file name, a line of code) that a
 * cloned repository chooses. A zero-width space between `]` and `(` leaves the text as it
 * reads and makes no link.
 */
export function unlinked(text: string): string {
  return text.replace(/\]\((?=(?:command|file|https?):)/gi, "]\u200B(");
}

/** Bidirectional-override characters shown as escapes: a name holding U+202E reads backwards
 * (`x\u202Eyp.sh` displays as "xhs.py"). */
export function visibleBidi(text: string): string {
  return text.replace(/[\u202A-\u202E\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** True when `brief` had to cut `text`: then the notification should offer the log. */
export function isCut(text: string, max = NOTIFICATION_MAX_CHARS): boolean {
  return text.replace(/\s+/g, " ").trim().length > max;
}
