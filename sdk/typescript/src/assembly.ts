// Putting replies and files from the agent back together, as pure functions.

import { decodeBase64 } from "./base64.js";
import type { MediaDownFrame, MediaKindDown, MessageFrame } from "./protocol.js";

/** A reply as the app shows it: all chunks so far, or the latest streaming edit. */
export interface Reply {
  readonly id: string;
  readonly text: string;
  /** The reply is complete. */
  readonly final: boolean;
  /** The text came from streaming edits. */
  readonly streamed: boolean;
  /** Chunks received of `total` (1 for an unsplit or streamed reply). */
  readonly received: number;
  readonly total: number;
  readonly replyTo?: string;
  /** Internal: the chunks by index. */
  readonly chunks: readonly (string | undefined)[];
}

/** Applies one `message` frame to the reply with its id (undefined if new). */
export function applyMessage(prev: Reply | undefined, frame: MessageFrame): Reply {
  const replyTo = frame.reply_to ?? prev?.replyTo;
  const base = replyTo === undefined ? {} : { replyTo };
  if (frame.edit) {
    return { ...base, id: frame.id, text: frame.text, final: frame.final, streamed: true, received: 1, total: 1, chunks: [frame.text] };
  }
  const total = Math.max(1, frame.chunk?.total ?? prev?.total ?? 1);
  const index = frame.chunk?.index ?? 0;
  const chunks = prev && !prev.streamed ? [...prev.chunks] : [];
  chunks.length = Math.max(chunks.length, total, index + 1);
  chunks[index] = frame.text;
  const received = chunks.filter((c) => c !== undefined).length;
  return {
    ...base,
    id: frame.id,
    text: chunks.map((c) => c ?? "").join(""),
    final: frame.final || (prev?.final ?? false),
    streamed: false,
    received,
    total,
    chunks,
  };
}

/** What every frame of a file from the agent says about it. */
export interface MediaInfo {
  readonly id: string;
  readonly kind: MediaKindDown;
  readonly mime: string;
  readonly filename?: string;
  readonly caption?: string;
  /** The whole file's size, as the server announced it. */
  readonly size: number;
}

/** A file from the agent being received. */
export interface Download extends MediaInfo {
  readonly parts: number;
  readonly receivedBytes: number;
  readonly pieces: readonly (Uint8Array | undefined)[];
  readonly url?: string;
  readonly final: boolean;
}

/** A complete file from the agent: its bytes, or a URL to fetch it from. */
export interface ReceivedMedia extends MediaInfo {
  readonly data?: Uint8Array;
  readonly url?: string;
}

/** Applies one `media` frame to the download with its id. Throws if `data` is not base64. */
export function applyMedia(prev: Download | undefined, frame: MediaDownFrame): Download {
  const pieces = prev ? [...prev.pieces] : [];
  const bytes = frame.data === undefined ? undefined : decodeBase64(frame.data);
  if (bytes) pieces[frame.part] = bytes;
  const filename = frame.filename ?? prev?.filename;
  const caption = frame.caption ?? prev?.caption;
  const url = frame.url ?? prev?.url;
  return {
    id: frame.id,
    kind: frame.kind,
    mime: frame.mime,
    ...(filename === undefined ? {} : { filename }),
    ...(caption === undefined ? {} : { caption }),
    ...(url === undefined ? {} : { url }),
    size: frame.size,
    parts: Math.max(1, frame.parts),
    receivedBytes: pieces.reduce((n, p) => n + (p?.length ?? 0), 0),
    pieces,
    final: frame.final,
  };
}

/** The finished file, once the final frame arrived; undefined before. */
export function completed(d: Download): ReceivedMedia | undefined {
  if (!d.final) return undefined;
  const base: MediaInfo = {
    id: d.id,
    kind: d.kind,
    mime: d.mime,
    size: d.size,
    ...(d.filename === undefined ? {} : { filename: d.filename }),
    ...(d.caption === undefined ? {} : { caption: d.caption }),
  };
  if (d.url !== undefined && d.receivedBytes === 0) return { ...base, url: d.url };
  const data = new Uint8Array(d.receivedBytes);
  let at = 0;
  for (const p of d.pieces) {
    if (p) {
      data.set(p, at);
      at += p.length;
    }
  }
  return { ...base, data, ...(d.url === undefined ? {} : { url: d.url }) };
}
