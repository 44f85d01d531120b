// The mobile protocol v1 on the wire: frame types, limits, and the codec.
//
// Decoding is tolerant where the protocol grows (unknown `t` is ignored, unknown fields
// are dropped, unfamiliar card and media kinds are kept as strings) and strict where a
// frame could not be used at all (wrong field types, an unknown avatar state or error
// code): those are `bad_frame`, reported and dropped without closing the connection.
// Decoded frames are plain objects holding only the fields this version knows, with
// `false` flags and absent optionals left out, exactly as the server writes them.

import { decodeBase64Url } from "./base64.js";

/** Protocol limits; sizes are bytes of decoded payload. Mirrors `vectors/mobile-v1.json`. */
export const LIMITS = Object.freeze({
  MAX_FRAME_BYTES: 16 * 1024 * 1024,
  MAX_MEDIA_BYTES: 8 * 1024 * 1024,
  MEDIA_CHUNK_BYTES: 3 * 1024 * 1024,
  MAX_PARTS: 2048,
  MIN_CHUNK_BYTES: 4096,
  MAX_OPEN_UPLOADS: 8,
  DEDUP_IDS: 1024,
  DEDUP_TTL_SECS: 86_400,
  OUTBOX_FRAMES: 256,
  OUTBOX_BYTES: 8 * 1024 * 1024,
  OUTBOX_TTL_SECS: 600,
  PROMPT_TIMEOUT_SECS: 300,
  MAX_DEPTH: 32,
  MAX_ID_BYTES: 256,
  MAX_MESSAGE_CHARS: 4000,
});

/** Every error code, in the order of the spec. */
export const ERROR_CODES = [
  "auth_failed",
  "forbidden",
  "too_big",
  "bad_frame",
  "unsupported_frame",
  "device_offline",
  "not_ready",
  "rate_limited",
  "internal",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

// WebSocket close codes a client acts on.
/** From the server: another connection with the same device id replaced this one. */
export const CLOSE_NORMAL = 1000;
/** Server stopping, or keepalive timeout: reconnect with backoff. */
export const CLOSE_GOING_AWAY = 1001;
/** No access (wrong token, device not allowed, device id of another user): do not retry. */
export const CLOSE_NO_ACCESS = 1008;
/** A frame over `max_frame_bytes` (after `error{too_big}`): reconnect, do not send it again. */
export const CLOSE_TOO_BIG = 1009;

export type AvatarState = "idle" | "thinking" | "speaking";
export const AVATAR_STATES: readonly AvatarState[] = ["idle", "thinking", "speaking"];

/** Card kinds this version knows; a newer server may send others (shown generically). */
export type KnownPromptKind = "exec_approval" | "confirm" | "clarify";
export type PromptKind = KnownPromptKind | (string & {});
/** Media kinds from the agent; a newer server may send others (offered as a file). */
export type MediaKindDown = "image" | "voice" | "video" | "document" | "animation" | (string & {});
/** Media kinds an app may send. */
export type MediaKindUp = "image" | "video" | "document" | "audio";

/** The clarify option meaning "the user types an answer of their own". */
export const CLARIFY_OTHER = "other";

// ---- client → server ----

export interface DeviceInfo {
  /** Chosen by the app and constant: the session, delivery address and allowlist hang on it. */
  id: string;
  name?: string;
  platform?: string;
}

export interface HelloFrame {
  t: "hello";
  token?: string;
  device: DeviceInfo;
}
export interface TextFrame {
  t: "text";
  id: string;
  text: string;
  reply_to?: string;
}
export interface AudioFrame {
  t: "audio";
  id: string;
  format: string;
  data: string;
  text?: string;
}
export interface MediaUpFrame {
  t: "media";
  id: string;
  kind: MediaKindUp;
  mime?: string;
  filename?: string;
  caption?: string;
  data: string;
  part: number;
  parts: number;
}
export interface PromptAnswerFrame {
  t: "prompt";
  prompt_id: string;
  option_id?: string;
  text?: string;
}
export interface DeliverMedia {
  kind: MediaKindDown;
  mime?: string;
  filename?: string;
  caption?: string;
  data: string;
}
export interface DeliverFrame {
  t: "deliver";
  to: string;
  text?: string;
  media?: DeliverMedia[];
}
export interface PingFrame {
  t: "ping";
}
/** A Web Push subscription's keys, base64url: the app's P-256 public key and its 16-byte auth secret. */
export interface PushKeys {
  p256dh: string;
  auth: string;
}
/** Where Herald sends notifications while the app is closed (`PushSubscription.toJSON()`'s fields). */
export interface PushSubscribeFrame {
  t: "push_subscribe";
  endpoint: string;
  keys: PushKeys;
}
export interface PushUnsubscribeFrame {
  t: "push_unsubscribe";
}
/** Whether the app is in sight; a connected app counts as visible until it says otherwise. */
export interface VisibilityFrame {
  t: "visibility";
  visible: boolean;
}
export type ClientFrame =
  | HelloFrame
  | TextFrame
  | AudioFrame
  | MediaUpFrame
  | PromptAnswerFrame
  | DeliverFrame
  | PingFrame
  | PushSubscribeFrame
  | PushUnsubscribeFrame
  | VisibilityFrame;

/** The text of a client frame: optional fields that are `undefined` are left out. */
export function encodeClientFrame(frame: ClientFrame): string {
  return JSON.stringify(frame, (_key, value: unknown) => (value === null ? undefined : value));
}

// ---- server → client ----

/** `capabilities.push`: the server sends Web Push notifications, signed with this key. */
export interface PushCapability {
  /** The server's VAPID public key: an uncompressed P-256 point, base64url. */
  vapid_key: string;
}
export interface Capabilities {
  max_media_bytes: number;
  max_frame_bytes: number;
  media_chunk_bytes: number;
  max_message_chars: number;
  streaming: boolean;
  voice: boolean;
  prompts: PromptKind[];
  /** Present when the server sends notifications while the app is closed. */
  push?: PushCapability;
}
export interface ReadyFrame {
  t: "ready";
  session: string;
  avatar_url?: string;
  capabilities: Capabilities;
}
export interface Chunk {
  index: number;
  total: number;
}
export interface MessageFrame {
  t: "message";
  id: string;
  text: string;
  chunk?: Chunk;
  final: boolean;
  edit?: true;
  reply_to?: string;
}
export interface TypingFrame {
  t: "typing";
  stop?: true;
}
export interface AvatarFrame {
  t: "avatar";
  state: AvatarState;
}
export interface PromptOption {
  id: string;
  label: string;
  /** A presentation hint: `primary`, `danger`, or `""`; unknown styles are kept. */
  style: string;
}
export interface PromptFrame {
  t: "prompt";
  id: string;
  kind: PromptKind;
  text: string;
  options: PromptOption[];
  session: string;
  timeout_seconds: number;
  command?: string;
  description?: string;
}
export interface PromptDoneFrame {
  t: "prompt_done";
  prompt_id: string;
  option_id?: string;
  expired?: true;
}
export interface MediaDownFrame {
  t: "media";
  id: string;
  kind: MediaKindDown;
  mime: string;
  filename?: string;
  caption?: string;
  part: number;
  parts: number;
  final: boolean;
  size: number;
  data?: string;
  url?: string;
}
export interface ErrorFrame {
  t: "error";
  code: ErrorCode;
  message: string;
}
export interface PongFrame {
  t: "pong";
}
export interface PushSubscribedFrame {
  t: "push_subscribed";
}
export interface PushUnsubscribedFrame {
  t: "push_unsubscribed";
}
export type ServerFrame =
  | ReadyFrame
  | MessageFrame
  | TypingFrame
  | AvatarFrame
  | PromptFrame
  | PromptDoneFrame
  | MediaDownFrame
  | ErrorFrame
  | PongFrame
  | PushSubscribedFrame
  | PushUnsubscribedFrame;

/** What decoding a server frame gives. */
export type Decoded =
  | { ok: true; frame: ServerFrame }
  /** A frame type this version does not know: ignore it. */
  | { ok: false; ignored: true; t: string }
  /** Not a usable frame (`bad_frame`): drop it, keep the connection. */
  | { ok: false; ignored: false; reason: string };

class Malformed extends Error {}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Nesting depth of a parsed JSON value; objects and arrays count one level each. */
function depth(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  let max = 0;
  for (const child of Array.isArray(v) ? v : Object.values(v)) {
    const d = depth(child);
    if (d > max) max = d;
    if (max > LIMITS.MAX_DEPTH) break;
  }
  return max + 1;
}

function str(o: Json, key: string): string {
  const v = o[key];
  if (typeof v !== "string") throw new Malformed(`${key} must be a string`);
  return v;
}
function optStr(o: Json, key: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw new Malformed(`${key} must be a string`);
  return v;
}
function bool(o: Json, key: string): boolean {
  const v = o[key];
  if (typeof v !== "boolean") throw new Malformed(`${key} must be a boolean`);
  return v;
}
function optBool(o: Json, key: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw new Malformed(`${key} must be a boolean`);
  return v;
}
function uint(o: Json, key: string, fallback?: number): number {
  const v = o[key];
  if ((v === undefined || v === null) && fallback !== undefined) return fallback;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new Malformed(`${key} must be a non-negative integer`);
  }
  return v;
}
function obj(o: Json, key: string): Json {
  const v = o[key];
  if (!isObject(v)) throw new Malformed(`${key} must be an object`);
  return v;
}

/** Copies `value` into `out[key]` unless it is absent. */
function put<T extends object, K extends keyof T>(out: T, key: K, value: T[K] | undefined): void {
  if (value !== undefined) out[key] = value;
}

function capabilities(c: Json): Capabilities {
  const prompts = c["prompts"];
  if (prompts !== undefined && prompts !== null && !Array.isArray(prompts)) {
    throw new Malformed("capabilities.prompts must be a list");
  }
  const kinds = (prompts ?? []) as unknown[];
  if (!kinds.every((k) => typeof k === "string")) {
    throw new Malformed("capabilities.prompts must hold strings");
  }
  const caps: Capabilities = {
    max_media_bytes: uint(c, "max_media_bytes", 0),
    max_frame_bytes: uint(c, "max_frame_bytes", 0),
    media_chunk_bytes: uint(c, "media_chunk_bytes", 0),
    max_message_chars: uint(c, "max_message_chars", 0),
    streaming: optBool(c, "streaming"),
    voice: optBool(c, "voice"),
    prompts: kinds as string[],
  };
  if (c["push"] !== undefined && c["push"] !== null) caps.push = { vapid_key: str(obj(c, "push"), "vapid_key") };
  return caps;
}

function decodeKnown(t: string, o: Json): ServerFrame | undefined {
  switch (t) {
    case "ready": {
      const f: ReadyFrame = { t, session: str(o, "session"), capabilities: capabilities(obj(o, "capabilities")) };
      put(f, "avatar_url", optStr(o, "avatar_url"));
      return f;
    }
    case "message": {
      const f: MessageFrame = { t, id: str(o, "id"), text: str(o, "text"), final: bool(o, "final") };
      if (o["chunk"] !== undefined && o["chunk"] !== null) {
        const c = obj(o, "chunk");
        f.chunk = { index: uint(c, "index"), total: uint(c, "total") };
      }
      if (optBool(o, "edit")) f.edit = true;
      put(f, "reply_to", optStr(o, "reply_to"));
      return f;
    }
    case "typing": {
      const f: TypingFrame = { t };
      if (optBool(o, "stop")) f.stop = true;
      return f;
    }
    case "avatar": {
      const state = str(o, "state");
      if (!(AVATAR_STATES as readonly string[]).includes(state)) {
        throw new Malformed(`unknown avatar state ${JSON.stringify(state)}`);
      }
      return { t, state: state as AvatarState };
    }
    case "prompt": {
      const options = o["options"];
      if (!Array.isArray(options)) throw new Malformed("options must be a list");
      const f: PromptFrame = {
        t,
        id: str(o, "id"),
        kind: str(o, "kind"),
        text: str(o, "text"),
        options: options.map((opt: unknown) => {
          if (!isObject(opt)) throw new Malformed("an option must be an object");
          return { id: str(opt, "id"), label: str(opt, "label"), style: optStr(opt, "style") ?? "" };
        }),
        session: str(o, "session"),
        timeout_seconds: uint(o, "timeout_seconds"),
      };
      put(f, "command", optStr(o, "command"));
      put(f, "description", optStr(o, "description"));
      return f;
    }
    case "prompt_done": {
      const f: PromptDoneFrame = { t, prompt_id: str(o, "prompt_id") };
      put(f, "option_id", optStr(o, "option_id"));
      if (optBool(o, "expired")) f.expired = true;
      return f;
    }
    case "media": {
      const f: MediaDownFrame = {
        t,
        id: str(o, "id"),
        kind: str(o, "kind"),
        mime: str(o, "mime"),
        part: uint(o, "part"),
        parts: uint(o, "parts"),
        final: bool(o, "final"),
        size: uint(o, "size"),
      };
      put(f, "filename", optStr(o, "filename"));
      put(f, "caption", optStr(o, "caption"));
      put(f, "data", optStr(o, "data"));
      put(f, "url", optStr(o, "url"));
      return f;
    }
    case "error": {
      const code = str(o, "code");
      if (!(ERROR_CODES as readonly string[]).includes(code)) {
        throw new Malformed(`unknown error code ${JSON.stringify(code)}`);
      }
      return { t, code: code as ErrorCode, message: str(o, "message") };
    }
    case "pong":
    case "push_subscribed":
    case "push_unsubscribed":
      return { t };
    default:
      return undefined;
  }
}

/** Decodes one text frame from the server. Never throws. */
export function decodeServerFrame(text: string): Decoded {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, ignored: false, reason: `not JSON: ${(e as Error).message}` };
  }
  if (depth(value) > LIMITS.MAX_DEPTH) {
    return { ok: false, ignored: false, reason: `JSON nested deeper than ${LIMITS.MAX_DEPTH} levels` };
  }
  if (!isObject(value)) return { ok: false, ignored: false, reason: "frame is not a JSON object" };
  const t = value["t"];
  if (typeof t !== "string") return { ok: false, ignored: false, reason: 'frame has no string "t" field' };
  try {
    const frame = decodeKnown(t, value);
    return frame ? { ok: true, frame } : { ok: false, ignored: true, t };
  } catch (e) {
    if (e instanceof Malformed) return { ok: false, ignored: false, reason: `malformed ${t}: ${e.message}` };
    throw e;
  }
}

// ---- Web Push ----

/** A subscription (endpoint and keys) is refused over this many bytes. */
export const PUSH_MAX_SUBSCRIBE_BYTES = 1024;
/** The decrypted payload of a notification is at most this many bytes. */
export const PUSH_MAX_PAYLOAD_BYTES = 3072;

/**
 * Why Herald would refuse this subscription, or undefined if it looks right: the endpoint
 * is an absolute http(s) URL, `p256dh` an uncompressed P-256 point (65 bytes from 0x04),
 * `auth` 16 bytes, both base64url, and the three together at most 1 KiB. Whether a
 * plain-http or private endpoint is allowed is the server's to say (its owner may allow
 * them).
 */
export function pushSubscriptionProblem(frame: PushSubscribeFrame): string | undefined {
  if (typeof frame.endpoint !== "string" || !/^https?:\/\/[^/?#\s]+/i.test(frame.endpoint)) {
    return "the endpoint must be an absolute URL, https (or http where the owner allows it)";
  }
  if (!frame.keys || typeof frame.keys !== "object") return "keys must hold p256dh and auth";
  let p256dh: Uint8Array;
  let auth: Uint8Array;
  try {
    p256dh = decodeBase64Url(frame.keys.p256dh);
    auth = decodeBase64Url(frame.keys.auth);
  } catch {
    return "keys.p256dh and keys.auth must be base64url";
  }
  if (p256dh.length !== 65 || p256dh[0] !== 0x04) return "keys.p256dh must be an uncompressed P-256 point (65 bytes)";
  if (auth.length !== 16) return "keys.auth must be 16 bytes";
  // Herald counts the three strings, not the JSON around them.
  const size = utf8Length(frame.endpoint) + utf8Length(frame.keys.p256dh) + utf8Length(frame.keys.auth);
  if (size > PUSH_MAX_SUBSCRIBE_BYTES) return `the subscription is ${size} bytes, over ${PUSH_MAX_SUBSCRIBE_BYTES}`;
  return undefined;
}

/** What a notification is about; a newer server may send other kinds (shown with title and body). */
export type PushKind = "question" | "deliver" | "reply" | "event" | (string & {});

/** A notification's payload, once decrypted (the app's push service or the browser did that). */
export interface PushPayload {
  v: number;
  kind: PushKind;
  title: string;
  body: string;
  /** A newer notification with the same tag replaces the older. */
  tag?: string;
  /** The device it is for. */
  device?: string;
  /** A question: the card to answer, with `prompt` once connected. */
  prompt_id?: string;
  options?: { id: string; label: string }[];
  /** A reply: the message to show. */
  message_id?: string;
  /** `body` was cut; the whole text waits for the app. */
  truncated?: true;
}

/** Decodes a notification's payload. Never throws; unknown fields are dropped. */
export function decodePushPayload(text: string): { ok: true; payload: PushPayload } | { ok: false; reason: string } {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: `not JSON: ${(e as Error).message}` };
  }
  if (!isObject(o)) return { ok: false, reason: "the payload is not a JSON object" };
  try {
    const p: PushPayload = { v: uint(o, "v", 1), kind: str(o, "kind"), title: str(o, "title"), body: optStr(o, "body") ?? "" };
    put(p, "tag", optStr(o, "tag"));
    put(p, "device", optStr(o, "device"));
    put(p, "prompt_id", optStr(o, "prompt_id"));
    put(p, "message_id", optStr(o, "message_id"));
    if (o["options"] !== undefined && o["options"] !== null) {
      const options = o["options"];
      if (!Array.isArray(options)) throw new Malformed("options must be a list");
      p.options = options.map((opt: unknown) => {
        if (!isObject(opt)) throw new Malformed("an option must be an object");
        return { id: str(opt, "id"), label: str(opt, "label") };
      });
    }
    if (optBool(o, "truncated")) p.truncated = true;
    return { ok: true, payload: p };
  } catch (e) {
    if (e instanceof Malformed) return { ok: false, reason: e.message };
    throw e;
  }
}

// ---- small shared rules ----

/** The Hermes session of a device: `mobile:<device.id>`. */
export function sessionKey(deviceId: string): string {
  return `mobile:${deviceId}`;
}

/** The choice that counts when an answer to a card of `kind` is invalid. */
export function safeChoice(kind: PromptKind): string {
  return kind === "exec_approval" ? "deny" : "cancel";
}

/**
 * The user id the server gives a token: the first 16 hex characters of its SHA-256. Apps
 * show it so the owner can allow the user in advance (`MOBILE_ALLOWED_USERS`).
 */
export async function userIdForToken(token: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return Array.from(new Uint8Array(digest).subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Bytes of `text` as UTF-8, without encoding it. */
export function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3; // a lone surrogate is written as U+FFFD, 3 bytes
  }
  return n;
}
