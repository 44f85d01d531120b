// What was sent and not yet answered, as pure functions over a plain value.
//
// Every message the app sends (text, voice, a file, a card answer) stays here until the
// server shows it was handled, and is sent again, with the same id, after a reconnect.
// Resending is always safe while the server runs: it drops ids it has seen. It is not
// safe across a server restart (the memory of ids goes with the process), so an entry
// leaves as soon as there is a sign of an answer:
// - a card answer, when `prompt_done` for that card arrives;
// - anything else, in the order sent, when the server starts answering: the typing
//   indicator turning on (a turn began), a card or a reply with a new id outside a turn
//   (e.g. `/ask`, or the pairing message), or an error about a frame.
// Entries older than the server's outbox lifetime are not resent: their moment passed.

import { LIMITS, type ServerFrame } from "./protocol.js";

export type PendingKind = "text" | "audio" | "media" | "prompt";

export interface Pending {
  /** The message id (for a card answer, the card's id). */
  readonly id: string;
  readonly kind: PendingKind;
  /** The encoded frames, sent in order: one, or the parts of an upload. */
  readonly frames: readonly string[];
  /** Bytes of payload the frames carry (a file's size), for progress. */
  readonly bytes: number;
  readonly queuedAt: number;
  /** Handed to the current connection. */
  readonly sent: boolean;
}

export interface Outbox {
  readonly entries: readonly Pending[];
  /** The typing indicator is on: a turn is running. */
  readonly typing: boolean;
}

export const EMPTY_OUTBOX: Outbox = Object.freeze({ entries: [], typing: false });

/** At most this many entries and frame bytes are kept; the oldest go first. */
export const OUTBOX_MAX_ENTRIES = LIMITS.OUTBOX_FRAMES;
export const OUTBOX_MAX_CHARS = 64 * 1024 * 1024;
/** Entries older than this are not resent. */
export const RESEND_TTL_MS = LIMITS.OUTBOX_TTL_SECS * 1000;

/** Errors that answer a frame the client sent (rather than, say, a `deliver`). */
const FRAME_ERRORS = new Set(["too_big", "bad_frame", "unsupported_frame", "forbidden", "rate_limited", "internal"]);

function chars(p: Pending): number {
  return p.frames.reduce((n, f) => n + f.length, 0);
}

/** Adds an entry to send; drops the oldest beyond the bounds. */
export function enqueue(outbox: Outbox, entry: Pending): Outbox {
  const entries = [...outbox.entries, entry];
  let total = entries.reduce((n, p) => n + chars(p), 0);
  while (entries.length > 1 && (entries.length > OUTBOX_MAX_ENTRIES || total > OUTBOX_MAX_CHARS)) {
    total -= chars(entries.shift()!);
  }
  return { ...outbox, entries };
}

/** Entries still to hand to the connection, oldest first. */
export function due(outbox: Outbox): Pending[] {
  return outbox.entries.filter((p) => !p.sent);
}

/** Marks an entry as handed to the connection. */
export function markSent(outbox: Outbox, id: string, kind: PendingKind): Outbox {
  return {
    ...outbox,
    entries: outbox.entries.map((p) => (p.id === id && p.kind === kind ? { ...p, sent: true } : p)),
  };
}

/** Open uploads: files sent or queued and not yet answered. */
export function openUploads(outbox: Outbox): number {
  return outbox.entries.filter((p) => p.kind === "media").length;
}

/**
 * The outbox after a server frame. `fresh` says whether a `message` frame's id is one
 * not seen before. Returns the entry answered, if any.
 */
export function acknowledge(outbox: Outbox, frame: ServerFrame, fresh: boolean): { outbox: Outbox; answered?: Pending | undefined } {
  const answerOldest = (typing: boolean) => {
    const i = outbox.entries.findIndex((p) => p.sent && p.kind !== "prompt");
    if (i < 0) return { outbox: { ...outbox, typing } };
    const entries = [...outbox.entries];
    const [answered] = entries.splice(i, 1);
    return { outbox: { entries, typing }, answered };
  };
  switch (frame.t) {
    case "typing":
      if (frame.stop) return { outbox: { ...outbox, typing: false } };
      return outbox.typing ? { outbox } : answerOldest(true);
    case "prompt_done": {
      const i = outbox.entries.findIndex((p) => p.kind === "prompt" && p.id === frame.prompt_id);
      if (i < 0) return { outbox };
      const entries = [...outbox.entries];
      const [answered] = entries.splice(i, 1);
      return { outbox: { ...outbox, entries }, answered };
    }
    case "message":
      return !outbox.typing && fresh ? answerOldest(false) : { outbox };
    case "prompt":
      return outbox.typing ? { outbox } : answerOldest(false);
    case "error":
      return FRAME_ERRORS.has(frame.code) ? answerOldest(outbox.typing) : { outbox };
    default:
      return { outbox };
  }
}

/** The outbox after the connection was lost: everything unanswered and fresh is due again. */
export function afterDisconnect(outbox: Outbox, now: number): Outbox {
  return {
    typing: false,
    entries: outbox.entries.filter((p) => now - p.queuedAt < RESEND_TTL_MS).map((p) => (p.sent ? { ...p, sent: false } : p)),
  };
}
