// Gadget protocol v1, the parts a device needs that are pure data: identity and the
// handshake MAC (WebCrypto), the 4-byte binary frame header, RGB565 pixels, PCM16
// samples and the protocol's numbers. Nothing here touches the DOM or the network, so
// the same module runs in the page and in node (the tests pin it to vectors/gadget-v1.json).

export const PROTO = 1;
export const SUBPROTOCOL = "hermes-gadget.v1";
/** The default gadget listener: port and path. */
export const DEFAULT_PORT = 8765;
export const DEFAULT_PATH = "/gadget";

/** The protocol's numbers as vectors/gadget-v1.json gives them; the build puts them in
 * (web/limits.mjs), so no number here is copied by hand. */
declare const HERALD_GADGET_LIMITS: {
  readonly max_text: number;
  readonly handshake_timeout_s: number;
  readonly heartbeat_default_s: number;
  readonly heartbeat_min_s: number;
  readonly heartbeat_max_s: number;
  readonly dead_after_heartbeats: number;
  readonly audio_frame_ms: number;
  readonly connect_timeout_s: number;
  readonly reconnect_backoff_s: readonly number[];
  readonly backoff_reset_after_s: number;
  readonly min_press_ms: number;
  readonly max_recording_s: number;
  readonly prompt_guard_ms: number;
  readonly session_new_hold_ms: number;
  readonly no_reply_s: number;
  readonly card_ttl_s: number;
  readonly image_ttl_s: number;
  readonly notice_ttl_s: number;
};
const LIMITS = HERALD_GADGET_LIMITS;

export const KEY_LEN = 32;
export const MAX_TEXT = LIMITS.max_text;

/** Binary channels. */
export const CHANNEL = { audio: 1, image: 2, firmware: 3 } as const;
export type Channel = (typeof CHANNEL)[keyof typeof CHANNEL];

/** The device's clocks, in the units their names say. */
export const TIMING = {
  connectTimeoutMs: LIMITS.connect_timeout_s * 1000,
  handshakeTimeoutMs: LIMITS.handshake_timeout_s * 1000,
  backoffS: LIMITS.reconnect_backoff_s,
  backoffResetAfterS: LIMITS.backoff_reset_after_s,
  heartbeatDefaultS: LIMITS.heartbeat_default_s,
  heartbeatMinS: LIMITS.heartbeat_min_s,
  heartbeatMaxS: LIMITS.heartbeat_max_s,
  deadAfterHeartbeats: LIMITS.dead_after_heartbeats,
  audioFrameMs: LIMITS.audio_frame_ms,
  minPressMs: LIMITS.min_press_ms,
  maxRecordingS: LIMITS.max_recording_s,
  promptGuardMs: LIMITS.prompt_guard_ms,
  sessionNewHoldMs: LIMITS.session_new_hold_ms,
  noReplyS: LIMITS.no_reply_s,
  cardTtlS: LIMITS.card_ttl_s,
  imageTtlS: LIMITS.image_ttl_s,
  noticeTtlS: LIMITS.notice_ttl_s,
} as const;

/** Error codes after which retrying cannot help: the owner has to act. */
export const SETUP_CODES: ReadonlySet<string> = new Set(["auth_failed", "bad_token", "protocol"]);

// ---- bytes ----

export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

export function fromHex(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) throw new Error("not hex");
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard base64 with padding. */
export function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] ?? 0;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    const n = (a << 16) | ((b ?? 0) << 8) | (c ?? 0);
    s += B64[(n >> 18) & 63]! + B64[(n >> 12) & 63]!;
    s += b === undefined ? "=" : B64[(n >> 6) & 63]!;
    s += c === undefined ? "=" : B64[n & 63]!;
  }
  return s;
}

/** Strict standard base64: padding required, no whitespace, canonical trailing bits. */
export function fromBase64(text: string): Uint8Array {
  if (text.length % 4 !== 0) throw new Error("base64 length");
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const body = text.slice(0, text.length - pad);
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let bits = 0;
  let acc = 0;
  let at = 0;
  for (const ch of body) {
    const v = B64.indexOf(ch);
    if (v < 0) throw new Error("base64 character");
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = (acc >> bits) & 0xff;
    }
  }
  if ((acc & ((1 << bits) - 1)) !== 0) throw new Error("base64 trailing bits");
  return out;
}

// ---- identity and the handshake ----

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error("WebCrypto is not available: open this page from localhost or over https");
  return s;
}

/** A fresh random device key. */
export function newKey(): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(KEY_LEN));
}

/** `"hg-"` and the first 16 hex characters of SHA-256 of the key. */
export async function deviceIdOf(key: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await subtle().digest("SHA-256", new Uint8Array(key)));
  return `hg-${toHex(digest).slice(0, 16)}`;
}

async function hmac(key: Uint8Array, message: string): Promise<Uint8Array> {
  const k = await subtle().importKey("raw", new Uint8Array(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", k, new TextEncoder().encode(message)));
}

/** The `auth.mac` answering a challenge: HMAC-SHA256 over `hermes-gadget/v1|ID|NONCE`. */
export async function authMac(key: Uint8Array, deviceId: string, nonce: string): Promise<string> {
  return toBase64(await hmac(key, `hermes-gadget/v1|${deviceId}|${nonce}`));
}

/** The MAC an `ota.begin` carries (a browser installs no firmware; kept for the vectors). */
export async function otaMac(key: Uint8Array, deviceId: string, nonce: string, sha256Hex: string, size: number): Promise<string> {
  return toBase64(await hmac(key, `hermes-gadget/v1|ota|${deviceId}|${nonce}|${sha256Hex}|${size}`));
}

// ---- binary frames ----

export interface Frame {
  channel: Channel;
  stream: number;
  seq: number;
  payload: Uint8Array;
}

export function encodeFrame(channel: Channel, stream: number, seq: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + payload.length);
  out[0] = channel;
  out[1] = stream & 0xff;
  out[2] = seq & 0xff;
  out[3] = (seq >> 8) & 0xff;
  out.set(payload, 4);
  return out;
}

/** The frame in `bytes`, or `null` when it is shorter than its header or on no known channel. */
export function decodeFrame(bytes: Uint8Array): Frame | null {
  if (bytes.length < 4) return null;
  const channel = bytes[0];
  if (channel !== CHANNEL.audio && channel !== CHANNEL.image && channel !== CHANNEL.firmware) return null;
  return {
    channel,
    stream: bytes[1]!,
    seq: bytes[2]! | (bytes[3]! << 8),
    payload: bytes.subarray(4),
  };
}

// ---- JSON messages ----

/** A text frame: a JSON object with a `type`. Fields are read with the helpers below. */
export type Message = { type: string } & Record<string, unknown>;

/** The message in `text`, or `null` when it is not a JSON object with a string `type`. */
export function decodeMessage(text: string): Message | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const type = (value as Record<string, unknown>)["type"];
  return typeof type === "string" ? (value as Message) : null;
}

export function str(m: Record<string, unknown>, key: string): string | undefined {
  const v = m[key];
  return typeof v === "string" ? v : undefined;
}

export function num(m: Record<string, unknown>, key: string): number | undefined {
  const v = m[key];
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

export function obj(m: Record<string, unknown>, key: string): Record<string, unknown> | undefined {
  const v = m[key];
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** A device → server message; fields that are `undefined` are left out when sent. */
export type Outgoing = { type: string } & Record<string, unknown>;

export function encodeMessage(m: Outgoing): string {
  return JSON.stringify(m);
}

// ---- pixels and samples ----

/** RGB565 little-endian pixels as RGBA bytes (for `ImageData`); missing bytes read as black. */
export function rgb565ToRgba(data: Uint8Array, width: number, height: number): Uint8ClampedArray<ArrayBuffer> {
  const out = new Uint8ClampedArray(new ArrayBuffer(width * height * 4));
  for (let i = 0; i < width * height; i++) {
    const v = (data[2 * i] ?? 0) | ((data[2 * i + 1] ?? 0) << 8);
    const r = (v >> 11) & 0x1f;
    const g = (v >> 5) & 0x3f;
    const b = v & 0x1f;
    out[4 * i] = (r << 3) | (r >> 2);
    out[4 * i + 1] = (g << 2) | (g >> 4);
    out[4 * i + 2] = (b << 3) | (b >> 2);
    out[4 * i + 3] = 255;
  }
  return out;
}

/** One RGB pixel as RGB565. */
export function rgb565(r: number, g: number, b: number): number {
  return ((r & 0xf8) << 8) | ((g & 0xfc) << 3) | (b >> 3);
}

/** Samples from -1..1 as PCM16 little-endian bytes. */
export function floatToPcm16(samples: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(samples.length * 2);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i] ?? 0));
    const v = Math.round(s < 0 ? s * 0x8000 : s * 0x7fff);
    out[2 * i] = v & 0xff;
    out[2 * i + 1] = (v >> 8) & 0xff;
  }
  return out;
}

/** PCM16 little-endian bytes as samples from -1..1 (an odd last byte is ignored). */
export function pcm16ToFloat(bytes: Uint8Array): Float32Array<ArrayBuffer> {
  const out = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) {
    const v = (bytes[2 * i]! | (bytes[2 * i + 1]! << 8)) << 16 >> 16;
    out[i] = v / 0x8000;
  }
  return out;
}

/**
 * Converts a stream of blocks at one rate to another: each output sample is the mean of
 * the input over its own interval (a box filter, enough against aliasing for speech
 * going down from 44.1 or 48 kHz), or an interpolation when going up. Keeps its state
 * between blocks, so block boundaries do not click.
 */
export class Resampler {
  private readonly step: number;
  /** Input position (in input samples, relative to the next block) of the next output. */
  private pos = 0;
  private carry: number[] = [];

  constructor(
    readonly from: number,
    readonly to: number,
  ) {
    this.step = from / to;
  }

  push(block: ArrayLike<number>): Float32Array {
    const input = this.carry.length ? [...this.carry, ...Array.from(block)] : Array.from(block);
    const out: number[] = [];
    const step = this.step;
    for (;;) {
      const start = this.pos;
      const end = start + step;
      if (Math.ceil(end) + 1 > input.length) break;
      if (step <= 1) {
        const i = Math.floor(start);
        const f = start - i;
        out.push((input[i] ?? 0) * (1 - f) + (input[i + 1] ?? 0) * f);
      } else {
        let sum = 0;
        let weight = 0;
        for (let i = Math.floor(start); i < Math.ceil(end); i++) {
          const w = Math.min(end, i + 1) - Math.max(start, i);
          sum += (input[i] ?? 0) * w;
          weight += w;
        }
        out.push(weight > 0 ? sum / weight : 0);
      }
      this.pos = end;
    }
    const keep = Math.floor(this.pos);
    this.carry = input.slice(keep);
    this.pos -= keep;
    return Float32Array.from(out);
  }
}
