// Notifications stay short: a toast of a thousand characters is unreadable and hides the
// editor. The first sentences that fit are shown; the whole text goes to the log, which the
// notification offers to open.

/** The most a notification shows; the rest is in the log. */
export const NOTIFICATION_MAX_CHARS = 240;

/** `text` cut at a sentence end within `max` characters, else at a word, marked with "…". */
export function brief(text: string, max = NOTIFICATION_MAX_CHARS): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  const room = flat.slice(0, max - 1);
  const sentence = Math.max(room.lastIndexOf(". "), room.lastIndexOf("; "));
  if (sentence >= 40) return `${room.slice(0, sentence + 1)} …`;
  const word = room.lastIndexOf(" ");
  return `${room.slice(0, word > max / 2 ? word : room.length)}…`;
}

/** True when `brief` had to cut `text`: then the notification should offer the log. */
export function isCut(text: string, max = NOTIFICATION_MAX_CHARS): boolean {
  return text.replace(/\s+/g, " ").trim().length > max;
}
