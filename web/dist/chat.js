var __defProp = Object.defineProperty;
var __defNormalProp = (obj2, key, value) => key in obj2 ? __defProp(obj2, key, { enumerable: true, configurable: true, writable: true, value }) : obj2[key] = value;
var __publicField = (obj2, key, value) => __defNormalProp(obj2, typeof key !== "symbol" ? key + "" : key, value);

// ../sdk/typescript/src/base64.ts
var ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
var LOOKUP = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) LOOKUP[ALPHABET.charCodeAt(i)] = i;
function encodeBase64(bytes) {
  const parts = [];
  const SLICE = 3 * 16 * 1024;
  for (let start = 0; start < bytes.length; start += SLICE) {
    const end = Math.min(start + SLICE, bytes.length);
    let out = "";
    let i = start;
    for (; i + 2 < end; i += 3) {
      const n = bytes[i] << 16 | bytes[i + 1] << 8 | bytes[i + 2];
      out += ALPHABET[n >> 18] + ALPHABET[n >> 12 & 63] + ALPHABET[n >> 6 & 63] + ALPHABET[n & 63];
    }
    const left = end - i;
    if (left === 1) {
      const n = bytes[i] << 16;
      out += ALPHABET[n >> 18] + ALPHABET[n >> 12 & 63] + "==";
    } else if (left === 2) {
      const n = bytes[i] << 16 | bytes[i + 1] << 8;
      out += ALPHABET[n >> 18] + ALPHABET[n >> 12 & 63] + ALPHABET[n >> 6 & 63] + "=";
    }
    parts.push(out);
  }
  return parts.join("");
}
function decodeBase64(text) {
  const out = new Uint8Array(Math.floor(text.length * 3 / 4) + 3);
  let n = 0;
  let bits = 0;
  let acc = 0;
  let padding = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 32 || c === 10 || c === 13 || c === 9) continue;
    if (c === 61) {
      padding = true;
      continue;
    }
    const v = c < 128 ? LOOKUP[c] : -1;
    if (v < 0 || padding) throw new Error("data is not valid base64");
    acc = acc << 6 | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = acc >> bits & 255;
    }
  }
  if (bits >= 6) throw new Error("data is not valid base64");
  return out.subarray(0, n);
}
function base64Length(bytes) {
  return Math.ceil(bytes / 3) * 4;
}
function decodeBase64Url(text) {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(text)) throw new Error("not base64url");
  return decodeBase64(text.replace(/-/g, "+").replace(/_/g, "/"));
}

// ../sdk/typescript/src/protocol.ts
var LIMITS = Object.freeze({
  MAX_FRAME_BYTES: 16 * 1024 * 1024,
  MAX_MEDIA_BYTES: 8 * 1024 * 1024,
  MEDIA_CHUNK_BYTES: 3 * 1024 * 1024,
  MAX_PARTS: 2048,
  MIN_CHUNK_BYTES: 4096,
  MAX_OPEN_UPLOADS: 8,
  DEDUP_IDS: 1024,
  DEDUP_TTL_SECS: 86400,
  OUTBOX_FRAMES: 256,
  OUTBOX_BYTES: 8 * 1024 * 1024,
  OUTBOX_TTL_SECS: 600,
  PROMPT_TIMEOUT_SECS: 300,
  MAX_DEPTH: 32,
  MAX_ID_BYTES: 256,
  MAX_MESSAGE_CHARS: 4e3
});
var ERROR_CODES = [
  "auth_failed",
  "forbidden",
  "too_big",
  "bad_frame",
  "unsupported_frame",
  "device_offline",
  "not_ready",
  "rate_limited",
  "internal"
];
var CLOSE_NORMAL = 1e3;
var CLOSE_NO_ACCESS = 1008;
var AVATAR_STATES = ["idle", "thinking", "speaking"];
var CLARIFY_OTHER = "other";
function encodeClientFrame(frame) {
  return JSON.stringify(frame, (_key, value) => value === null ? void 0 : value);
}
var Malformed = class extends Error {
};
function isObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function depth(v) {
  if (typeof v !== "object" || v === null) return 0;
  let max = 0;
  for (const child of Array.isArray(v) ? v : Object.values(v)) {
    const d = depth(child);
    if (d > max) max = d;
    if (max > LIMITS.MAX_DEPTH) break;
  }
  return max + 1;
}
function str(o, key) {
  const v = o[key];
  if (typeof v !== "string") throw new Malformed(`${key} must be a string`);
  return v;
}
function optStr(o, key) {
  const v = o[key];
  if (v === void 0 || v === null) return void 0;
  if (typeof v !== "string") throw new Malformed(`${key} must be a string`);
  return v;
}
function bool(o, key) {
  const v = o[key];
  if (typeof v !== "boolean") throw new Malformed(`${key} must be a boolean`);
  return v;
}
function optBool(o, key) {
  const v = o[key];
  if (v === void 0 || v === null) return false;
  if (typeof v !== "boolean") throw new Malformed(`${key} must be a boolean`);
  return v;
}
function uint(o, key, fallback) {
  const v = o[key];
  if ((v === void 0 || v === null) && fallback !== void 0) return fallback;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new Malformed(`${key} must be a non-negative integer`);
  }
  return v;
}
function obj(o, key) {
  const v = o[key];
  if (!isObject(v)) throw new Malformed(`${key} must be an object`);
  return v;
}
function put(out, key, value) {
  if (value !== void 0) out[key] = value;
}
function capabilities(c) {
  const prompts = c["prompts"];
  if (prompts !== void 0 && prompts !== null && !Array.isArray(prompts)) {
    throw new Malformed("capabilities.prompts must be a list");
  }
  const kinds = prompts ?? [];
  if (!kinds.every((k) => typeof k === "string")) {
    throw new Malformed("capabilities.prompts must hold strings");
  }
  const caps = {
    max_media_bytes: uint(c, "max_media_bytes", 0),
    max_frame_bytes: uint(c, "max_frame_bytes", 0),
    media_chunk_bytes: uint(c, "media_chunk_bytes", 0),
    max_message_chars: uint(c, "max_message_chars", 0),
    streaming: optBool(c, "streaming"),
    voice: optBool(c, "voice"),
    prompts: kinds
  };
  if (c["push"] !== void 0 && c["push"] !== null) caps.push = { vapid_key: str(obj(c, "push"), "vapid_key") };
  return caps;
}
function decodeKnown(t, o) {
  switch (t) {
    case "ready": {
      const f = { t, session: str(o, "session"), capabilities: capabilities(obj(o, "capabilities")) };
      put(f, "avatar_url", optStr(o, "avatar_url"));
      return f;
    }
    case "message": {
      const f = { t, id: str(o, "id"), text: str(o, "text"), final: bool(o, "final") };
      if (o["chunk"] !== void 0 && o["chunk"] !== null) {
        const c = obj(o, "chunk");
        f.chunk = { index: uint(c, "index"), total: uint(c, "total") };
      }
      if (optBool(o, "edit")) f.edit = true;
      put(f, "reply_to", optStr(o, "reply_to"));
      return f;
    }
    case "typing": {
      const f = { t };
      if (optBool(o, "stop")) f.stop = true;
      return f;
    }
    case "avatar": {
      const state = str(o, "state");
      if (!AVATAR_STATES.includes(state)) {
        throw new Malformed(`unknown avatar state ${JSON.stringify(state)}`);
      }
      return { t, state };
    }
    case "prompt": {
      const options = o["options"];
      if (!Array.isArray(options)) throw new Malformed("options must be a list");
      const f = {
        t,
        id: str(o, "id"),
        kind: str(o, "kind"),
        text: str(o, "text"),
        options: options.map((opt) => {
          if (!isObject(opt)) throw new Malformed("an option must be an object");
          return { id: str(opt, "id"), label: str(opt, "label"), style: optStr(opt, "style") ?? "" };
        }),
        session: str(o, "session"),
        timeout_seconds: uint(o, "timeout_seconds")
      };
      put(f, "command", optStr(o, "command"));
      put(f, "description", optStr(o, "description"));
      return f;
    }
    case "prompt_done": {
      const f = { t, prompt_id: str(o, "prompt_id") };
      put(f, "option_id", optStr(o, "option_id"));
      if (optBool(o, "expired")) f.expired = true;
      return f;
    }
    case "media": {
      const f = {
        t,
        id: str(o, "id"),
        kind: str(o, "kind"),
        mime: str(o, "mime"),
        part: uint(o, "part"),
        parts: uint(o, "parts"),
        final: bool(o, "final"),
        size: uint(o, "size")
      };
      put(f, "filename", optStr(o, "filename"));
      put(f, "caption", optStr(o, "caption"));
      put(f, "data", optStr(o, "data"));
      put(f, "url", optStr(o, "url"));
      return f;
    }
    case "error": {
      const code = str(o, "code");
      if (!ERROR_CODES.includes(code)) {
        throw new Malformed(`unknown error code ${JSON.stringify(code)}`);
      }
      return { t, code, message: str(o, "message") };
    }
    case "pong":
    case "push_subscribed":
    case "push_unsubscribed":
      return { t };
    default:
      return void 0;
  }
}
function decodeServerFrame(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, ignored: false, reason: `not JSON: ${e.message}` };
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
var PUSH_MAX_SUBSCRIBE_BYTES = 1024;
function pushSubscriptionProblem(frame) {
  if (typeof frame.endpoint !== "string" || !/^https?:\/\/[^/?#\s]+/i.test(frame.endpoint)) {
    return "the endpoint must be an absolute URL, https (or http where the owner allows it)";
  }
  if (!frame.keys || typeof frame.keys !== "object") return "keys must hold p256dh and auth";
  let p256dh;
  let auth;
  try {
    p256dh = decodeBase64Url(frame.keys.p256dh);
    auth = decodeBase64Url(frame.keys.auth);
  } catch {
    return "keys.p256dh and keys.auth must be base64url";
  }
  if (p256dh.length !== 65 || p256dh[0] !== 4) return "keys.p256dh must be an uncompressed P-256 point (65 bytes)";
  if (auth.length !== 16) return "keys.auth must be 16 bytes";
  const size = utf8Length(frame.endpoint) + utf8Length(frame.keys.p256dh) + utf8Length(frame.keys.auth);
  if (size > PUSH_MAX_SUBSCRIBE_BYTES) return `the subscription is ${size} bytes, over ${PUSH_MAX_SUBSCRIBE_BYTES}`;
  return void 0;
}
function utf8Length(text) {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 128) n += 1;
    else if (c < 2048) n += 2;
    else if (c >= 55296 && c <= 56319 && i + 1 < text.length && (text.charCodeAt(i + 1) & 64512) === 56320) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

// ../sdk/typescript/src/assembly.ts
function applyMessage(prev, frame) {
  const replyTo = frame.reply_to ?? prev?.replyTo;
  const base = replyTo === void 0 ? {} : { replyTo };
  if (frame.edit) {
    return { ...base, id: frame.id, text: frame.text, final: frame.final, streamed: true, received: 1, total: 1, chunks: [frame.text] };
  }
  const total = Math.max(1, frame.chunk?.total ?? prev?.total ?? 1);
  const index = frame.chunk?.index ?? 0;
  const chunks = prev && !prev.streamed ? [...prev.chunks] : [];
  chunks.length = Math.max(chunks.length, total, index + 1);
  chunks[index] = frame.text;
  const received = chunks.filter((c) => c !== void 0).length;
  return {
    ...base,
    id: frame.id,
    text: chunks.map((c) => c ?? "").join(""),
    final: frame.final || (prev?.final ?? false),
    streamed: false,
    received,
    total,
    chunks
  };
}
function applyMedia(prev, frame) {
  const pieces = prev ? [...prev.pieces] : [];
  const bytes = frame.data === void 0 ? void 0 : decodeBase64(frame.data);
  if (bytes) pieces[frame.part] = bytes;
  const filename = frame.filename ?? prev?.filename;
  const caption = frame.caption ?? prev?.caption;
  const url = frame.url ?? prev?.url;
  return {
    id: frame.id,
    kind: frame.kind,
    mime: frame.mime,
    ...filename === void 0 ? {} : { filename },
    ...caption === void 0 ? {} : { caption },
    ...url === void 0 ? {} : { url },
    size: frame.size,
    parts: Math.max(1, frame.parts),
    receivedBytes: pieces.reduce((n, p) => n + (p?.length ?? 0), 0),
    pieces,
    final: frame.final
  };
}
function completed(d) {
  if (!d.final) return void 0;
  const base = {
    id: d.id,
    kind: d.kind,
    mime: d.mime,
    size: d.size,
    ...d.filename === void 0 ? {} : { filename: d.filename },
    ...d.caption === void 0 ? {} : { caption: d.caption }
  };
  if (d.url !== void 0 && d.receivedBytes === 0) return { ...base, url: d.url };
  const data = new Uint8Array(d.receivedBytes);
  let at = 0;
  for (const p of d.pieces) {
    if (p) {
      data.set(p, at);
      at += p.length;
    }
  }
  return { ...base, data, ...d.url === void 0 ? {} : { url: d.url } };
}

// ../sdk/typescript/src/backoff.ts
var DEFAULT_BACKOFF = Object.freeze({ initialMs: 1e3, maxMs: 3e4, jitter: 0.5 });
function backoffDelay(attempt, policy = DEFAULT_BACKOFF, random = Math.random) {
  const exp = Math.min(Math.max(0, Math.floor(attempt)), 30);
  const planned = Math.min(policy.maxMs, policy.initialMs * 2 ** exp);
  const jitter = Math.min(1, Math.max(0, policy.jitter));
  const r = Math.min(1, Math.max(0, random()));
  return Math.round(planned * (1 - jitter) + planned * jitter * r);
}
function nextAttempt(attempt, reachedReady) {
  return reachedReady ? 0 : attempt + 1;
}

// ../sdk/typescript/src/outbox.ts
var EMPTY_OUTBOX = Object.freeze({ entries: [], typing: false });
var OUTBOX_MAX_ENTRIES = LIMITS.OUTBOX_FRAMES;
var OUTBOX_MAX_CHARS = 64 * 1024 * 1024;
var RESEND_TTL_MS = LIMITS.OUTBOX_TTL_SECS * 1e3;
var FRAME_ERRORS = /* @__PURE__ */ new Set(["too_big", "bad_frame", "unsupported_frame", "forbidden", "rate_limited", "internal"]);
function chars(p) {
  return p.frames.reduce((n, f) => n + f.length, 0);
}
function enqueue(outbox, entry) {
  const entries = [...outbox.entries, entry];
  let total = entries.reduce((n, p) => n + chars(p), 0);
  while (entries.length > 1 && (entries.length > OUTBOX_MAX_ENTRIES || total > OUTBOX_MAX_CHARS)) {
    total -= chars(entries.shift());
  }
  return { ...outbox, entries };
}
function due(outbox) {
  return outbox.entries.filter((p) => !p.sent);
}
function markSent(outbox, id, kind) {
  return {
    ...outbox,
    entries: outbox.entries.map((p) => p.id === id && p.kind === kind ? { ...p, sent: true } : p)
  };
}
function openUploads(outbox) {
  return outbox.entries.filter((p) => p.kind === "media").length;
}
function acknowledge(outbox, frame, fresh) {
  const answerOldest = (typing) => {
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
function afterDisconnect(outbox, now) {
  return {
    typing: false,
    entries: outbox.entries.filter((p) => now - p.queuedAt < RESEND_TTL_MS).map((p) => p.sent ? { ...p, sent: false } : p)
  };
}

// ../sdk/typescript/src/wav.ts
var VOICE_RATE = 16e3;
function encodeWav(samples, rate = VOICE_RATE) {
  const dataBytes = samples.length * 2;
  const out = new Uint8Array(44 + dataBytes);
  const v = new DataView(out.buffer);
  const ascii = (at, s) => {
    for (let i = 0; i < s.length; i++) out[at + i] = s.charCodeAt(i);
  };
  ascii(0, "RIFF");
  v.setUint32(4, 36 + dataBytes, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true);
  v.setUint16(22, 1, true);
  v.setUint32(24, rate, true);
  v.setUint32(28, rate * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  ascii(36, "data");
  v.setUint32(40, dataBytes, true);
  for (let i = 0; i < samples.length; i++) v.setInt16(44 + i * 2, samples[i], true);
  return out;
}
function inspectWav(bytes) {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at2) => String.fromCharCode(...bytes.subarray(at2, at2 + 4));
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new Error("not a WAV file");
  let at = 12;
  let fmt;
  while (at + 8 <= bytes.length) {
    const id = tag(at);
    const size = v.getUint32(at + 4, true);
    const body = at + 8;
    if (id === "fmt " && body + 16 <= bytes.length) {
      fmt = {
        pcm: v.getUint16(body, true) === 1,
        channels: v.getUint16(body + 2, true),
        rate: v.getUint32(body + 4, true),
        bitsPerSample: v.getUint16(body + 14, true)
      };
    } else if (id === "data") {
      if (!fmt) throw new Error("WAV data before its format");
      const length = Math.min(size, bytes.length - body);
      const frame = fmt.channels * (fmt.bitsPerSample / 8);
      return { ...fmt, durationMs: frame > 0 && fmt.rate > 0 ? Math.round(length / frame / fmt.rate * 1e3) : 0 };
    }
    at = body + size + size % 2;
  }
  throw new Error("WAV file without data");
}
function isVoiceWav(info) {
  return info.pcm && info.rate === VOICE_RATE && info.channels === 1 && info.bitsPerSample === 16;
}
function toVoiceSamples(input, inputRate) {
  const ratio = inputRate / VOICE_RATE;
  const n = Math.floor(input.length / ratio);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const from = Math.floor(i * ratio);
    const to = Math.max(from + 1, Math.floor((i + 1) * ratio));
    let sum = 0;
    for (let j = from; j < to && j < input.length; j++) sum += input[j];
    const s = Math.max(-1, Math.min(1, sum / (to - from)));
    out[i] = Math.round(s < 0 ? s * 32768 : s * 32767);
  }
  return out;
}

// ../sdk/typescript/src/client.ts
var HeraldError = class extends Error {
  constructor(code, message, local) {
    super(message);
    __publicField(this, "code");
    __publicField(this, "local");
    this.name = "HeraldError";
    this.code = code;
    this.local = local;
  }
};
var HIGH_WATER = 1024 * 1024;
var REMEMBERED = 256;
var PUSH_ERRORS = /* @__PURE__ */ new Set(["bad_frame", "too_big", "unsupported_frame", "forbidden", "rate_limited", "internal"]);
function newId(prefix = "m") {
  const bytes = new Uint8Array(8);
  const crypto = globalThis.crypto;
  if (crypto?.getRandomValues) crypto.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
function resolveAvatarUrl(avatarUrl, wsUrl) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(avatarUrl)) return avatarUrl;
  const m = /^(wss?|https?):\/\/([^/?#]*)([^?#]*)/i.exec(wsUrl);
  if (!m) return avatarUrl;
  const scheme = /^(wss|https)$/i.test(m[1]) ? "https" : "http";
  if (avatarUrl.startsWith("//")) return `${scheme}:${avatarUrl}`;
  const origin = `${scheme}://${m[2]}`;
  if (avatarUrl.startsWith("/")) return origin + avatarUrl;
  const dir = (m[3] || "/").replace(/[^/]*$/, "");
  return origin + dir + avatarUrl;
}
function checkId(id, what = "an id") {
  if (id.length === 0 || utf8Length(id) > LIMITS.MAX_ID_BYTES || /[\u0000-\u001f\u007f-\u009f]/.test(id)) {
    throw new HeraldError("bad_frame", `${what} must be 1 to ${LIMITS.MAX_ID_BYTES} bytes without control characters`, true);
  }
}
function remember(map, key, value) {
  map.delete(key);
  map.set(key, value);
  if (map.size > REMEMBERED) map.delete(map.keys().next().value);
}
var HeraldClient = class {
  constructor(options) {
    __publicField(this, "options");
    __publicField(this, "listeners", /* @__PURE__ */ new Map());
    __publicField(this, "ws");
    __publicField(this, "outbox", EMPTY_OUTBOX);
    __publicField(this, "replies", /* @__PURE__ */ new Map());
    __publicField(this, "downloads", /* @__PURE__ */ new Map());
    __publicField(this, "cards", /* @__PURE__ */ new Map());
    __publicField(this, "attempt", 0);
    __publicField(this, "reachedReady", false);
    /** The error frame that came before `ready`: the reason for a refusal. */
    __publicField(this, "refusal");
    __publicField(this, "timer");
    __publicField(this, "readyTimer");
    __publicField(this, "flushing", false);
    __publicField(this, "_state", "idle");
    __publicField(this, "_ready");
    /** Push frames sent on this connection and not yet answered, oldest first. */
    __publicField(this, "pushRequests", []);
    /** What the app last said with `setVisible`; told again after each `ready`. */
    __publicField(this, "visible", true);
    const WebSocketClass = options.WebSocket ?? globalThis.WebSocket;
    if (!WebSocketClass) {
      throw new Error("no WebSocket here: pass one, e.g. `import WebSocket from 'ws'` on Node 20");
    }
    checkId(options.device.id, "device.id");
    this.options = {
      backoff: DEFAULT_BACKOFF,
      readyTimeoutMs: 1e4,
      random: Math.random,
      now: Date.now,
      ...options,
      WebSocket: WebSocketClass
    };
  }
  /** The connection's state. */
  get state() {
    return this._state;
  }
  /** What the last `ready` said, once there was one. */
  get ready() {
    return this._ready;
  }
  /** What the server allows; the protocol's defaults until the first `ready`. */
  get capabilities() {
    return this._ready?.capabilities ?? {
      max_media_bytes: LIMITS.MAX_MEDIA_BYTES,
      max_frame_bytes: LIMITS.MAX_FRAME_BYTES,
      media_chunk_bytes: LIMITS.MEDIA_CHUNK_BYTES,
      max_message_chars: LIMITS.MAX_MESSAGE_CHARS,
      streaming: true,
      voice: true,
      prompts: ["exec_approval", "confirm", "clarify"]
    };
  }
  /** Messages sent and not yet answered (they are resent after a reconnect). */
  get pending() {
    return this.outbox.entries;
  }
  /** Cards shown and not yet closed. */
  get openCards() {
    return [...this.cards.values()];
  }
  on(name, listener) {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, set = /* @__PURE__ */ new Set());
    set.add(listener);
    return () => set.delete(listener);
  }
  /**
   * The next `name` event (that satisfies `accept`, if given). The promise stays pending
   * if that never happens; race it with a timeout where that matters.
   */
  once(name, accept) {
    return new Promise((resolve) => {
      const off = this.on(name, (value) => {
        if (accept && !accept(value)) return;
        off();
        resolve(value);
      });
    });
  }
  /** Starts connecting (and reconnecting, until `close`). */
  connect() {
    if (this._state === "stopped") throw new HeraldError("stopped", "this client was stopped; make a new one", true);
    if (this._state !== "idle") return;
    this.open();
  }
  /** Stops for good: closes the connection and cancels any reconnection. */
  close() {
    if (this._state === "stopped") return;
    this.stop();
    const ws = this.ws;
    this.ws = void 0;
    if (ws) {
      try {
        ws.close(1e3, "bye");
      } catch {
      }
    }
  }
  /** Sends a text message; returns its id. Queued while disconnected. */
  send(text, options = {}) {
    const id = options.id ?? newId("m");
    const frame = { t: "text", id, text, ...options.replyTo ? { reply_to: options.replyTo } : {} };
    this.queue(id, "text", [encodeClientFrame(frame)], utf8Length(text));
    return id;
  }
  /** Sends a voice message: a WAV file, 16 kHz mono PCM16; returns its id. */
  sendVoice(wav, options = {}) {
    const caps = this.capabilities;
    if (!caps.voice) throw new HeraldError("not_supported", "this server does not take voice messages", true);
    let info;
    try {
      info = inspectWav(wav);
    } catch (e) {
      throw new HeraldError("bad_frame", `voice must be a WAV file: ${e.message}`, true);
    }
    if (!isVoiceWav(info)) {
      throw new HeraldError(
        "bad_frame",
        `voice must be 16 kHz mono 16-bit PCM, not ${info.rate} Hz, ${info.channels} channel(s), ${info.bitsPerSample} bits`,
        true
      );
    }
    const limit = caps.max_media_bytes > 0 ? Math.min(caps.max_media_bytes, LIMITS.MAX_MEDIA_BYTES) : LIMITS.MAX_MEDIA_BYTES;
    if (wav.length > limit) throw new HeraldError("too_big", `voice is ${wav.length} bytes, over the limit of ${limit}`, true);
    const id = options.id ?? newId("v");
    const frame = {
      t: "audio",
      id,
      format: "wav",
      data: encodeBase64(wav),
      ...options.transcript === void 0 ? {} : { text: options.transcript }
    };
    const text = encodeClientFrame(frame);
    this.checkFrame(text);
    this.queue(id, "audio", [text], wav.length);
    return id;
  }
  /**
   * Sends a file, in parts of at most `media_chunk_bytes`; `uploadProgress` reports each
   * part as it leaves. Every limit is checked before anything is sent. Returns the id.
   */
  upload(bytes, options) {
    const caps = this.capabilities;
    if (caps.max_media_bytes <= 0) throw new HeraldError("not_supported", "this server does not take files", true);
    if (bytes.length > caps.max_media_bytes) {
      throw new HeraldError("too_big", `the file is ${bytes.length} bytes, over the limit of ${caps.max_media_bytes}`, true);
    }
    if (openUploads(this.outbox) >= LIMITS.MAX_OPEN_UPLOADS) {
      throw new HeraldError("too_big", `${LIMITS.MAX_OPEN_UPLOADS} uploads are unfinished; wait for one to be answered`, true);
    }
    const chunk = Math.max(LIMITS.MIN_CHUNK_BYTES, caps.media_chunk_bytes || LIMITS.MEDIA_CHUNK_BYTES);
    const parts = Math.max(1, Math.ceil(bytes.length / chunk));
    if (parts > LIMITS.MAX_PARTS) throw new HeraldError("too_big", `the file needs ${parts} parts, over ${LIMITS.MAX_PARTS}`, true);
    const overhead = 512 + utf8Length((options.filename ?? "") + (options.caption ?? "") + (options.mime ?? "") + (options.id ?? ""));
    const frameBytes = base64Length(Math.min(chunk, bytes.length)) + overhead;
    if (caps.max_frame_bytes > 0 && frameBytes > caps.max_frame_bytes) {
      throw new HeraldError("too_big", `a part would be a ${frameBytes}-byte frame, over ${caps.max_frame_bytes}`, true);
    }
    const id = options.id ?? newId("f");
    const frames = [];
    for (let part = 0; part < parts; part++) {
      const frame = {
        t: "media",
        id,
        kind: options.kind,
        ...options.mime === void 0 ? {} : { mime: options.mime },
        ...options.filename === void 0 ? {} : { filename: options.filename },
        ...options.caption === void 0 || part > 0 ? {} : { caption: options.caption },
        data: encodeBase64(bytes.subarray(part * chunk, (part + 1) * chunk)),
        part,
        parts
      };
      frames.push(encodeClientFrame(frame));
    }
    this.queue(id, "media", frames, bytes.length);
    return id;
  }
  /** Answers a card with one of its options. */
  answer(promptId, optionId) {
    this.queue(promptId, "prompt", [encodeClientFrame({ t: "prompt", prompt_id: promptId, option_id: optionId })], 0);
  }
  /** Answers a clarify card with the user's own words (option `other`). */
  answerText(promptId, text) {
    const frame = { t: "prompt", prompt_id: promptId, option_id: CLARIFY_OTHER, text };
    this.queue(promptId, "prompt", [encodeClientFrame(frame)], 0);
  }
  /**
   * Pushes to another device (allowed from loopback or with a deliver token). Not
   * queued or resent: it needs a live connection, and so does its target.
   */
  deliver(to, text, media) {
    const frame = { t: "deliver", to, ...text === void 0 ? {} : { text }, ...media ? { media } : {} };
    this.sendNow(encodeClientFrame(frame));
  }
  /**
   * Sends a frame this SDK does not model (a newer protocol's); an older server answers
   * `error{code:"unsupported_frame"}` and keeps the connection. Needs a live connection.
   */
  sendRaw(frame) {
    this.sendNow(JSON.stringify(frame));
  }
  /** A keepalive; the server answers `pong`. */
  ping() {
    this.sendNow(encodeClientFrame({ t: "ping" }));
  }
  /**
   * Registers where Herald sends notifications while the app is closed (a browser's
   * `PushSubscription.toJSON()`, or a UnifiedPush endpoint with its keys), replacing this
   * device's previous one. Resolves on `push_subscribed`; rejects with the server's
   * `bad_frame` (an endpoint or keys it refuses), with `not_supported` when the server
   * sends no notifications, or `not_ready` without a live connection.
   */
  subscribePush(subscription) {
    return this.pushRequest("push_subscribed", () => {
      const keys = subscription.keys ?? { p256dh: "", auth: "" };
      const frame = { t: "push_subscribe", endpoint: subscription.endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } };
      const problem = pushSubscriptionProblem(frame);
      if (problem) throw new HeraldError("bad_frame", problem, true);
      return encodeClientFrame(frame);
    });
  }
  /** Ends this device's notifications. Resolves on `push_unsubscribed`. */
  unsubscribePush() {
    return this.pushRequest("push_unsubscribed", () => encodeClientFrame({ t: "push_unsubscribe" }));
  }
  /**
   * Says whether the app is in sight: Herald sends notifications only while none of the
   * user's apps is connected and visible. Remembered and said again after each reconnect
   * (the server takes a new connection as visible); sent only to a server with `push`.
   */
  setVisible(visible) {
    if (this.visible === visible) return;
    this.visible = visible;
    if (this._state === "ready" && this.ws && this._ready?.push) this.ws.send(encodeClientFrame({ t: "visibility", visible }));
  }
  // ---- internals ----
  pushRequest(answer, frame) {
    return new Promise((resolve, reject) => {
      if (this._state !== "ready" || !this.ws) throw new HeraldError("not_ready", "not connected", true);
      if (!this._ready?.push) throw new HeraldError("not_supported", "this server sends no notifications", true);
      const text = frame();
      this.checkFrame(text);
      this.ws.send(text);
      this.pushRequests.push({ answer, resolve, reject });
    });
  }
  /** Fails every push request still waiting: its answer can no longer come. */
  dropPushRequests(why) {
    for (const r of this.pushRequests.splice(0)) r.reject(why);
  }
  emit(name, value) {
    for (const listener of [...this.listeners.get(name) ?? []]) {
      try {
        listener(value);
      } catch (e) {
        setTimeout(() => {
          throw e;
        }, 0);
      }
    }
  }
  setState(state) {
    if (this._state === state) return;
    this._state = state;
    this.emit("state", state);
  }
  stop() {
    this.dropPushRequests(new HeraldError("stopped", "the client was stopped before the server answered", true));
    if (this.timer !== void 0) clearTimeout(this.timer);
    if (this.readyTimer !== void 0) clearTimeout(this.readyTimer);
    this.timer = void 0;
    this.readyTimer = void 0;
    this.setState("stopped");
  }
  checkFrame(text) {
    const max = this.capabilities.max_frame_bytes;
    const len = utf8Length(text);
    if (max > 0 && len > max) throw new HeraldError("too_big", `the frame is ${len} bytes, over the limit of ${max}`, true);
  }
  sendNow(text) {
    if (this._state !== "ready" || !this.ws) throw new HeraldError("not_ready", "not connected", true);
    this.checkFrame(text);
    this.ws.send(text);
  }
  queue(id, kind, frames, bytes) {
    if (this._state === "stopped") throw new HeraldError("stopped", "this client was stopped", true);
    checkId(id);
    for (const f of frames) this.checkFrame(f);
    this.outbox = enqueue(this.outbox, { id, kind, frames, bytes, queuedAt: this.options.now(), sent: false });
    void this.flush();
  }
  /** Hands due entries to the socket in order, pausing while its buffer is full. */
  async flush() {
    if (this.flushing) return;
    this.flushing = true;
    try {
      for (; ; ) {
        const ws = this.ws;
        if (this._state !== "ready" || !ws) return;
        const next = due(this.outbox)[0];
        if (!next) return;
        const parts = next.frames.length;
        const partBytes = Math.ceil(next.bytes / parts);
        for (let part = 0; part < parts; part++) {
          while ((ws.bufferedAmount ?? 0) > HIGH_WATER) {
            await new Promise((r) => setTimeout(r, 10));
            if (this.ws !== ws || this._state !== "ready") return;
          }
          ws.send(next.frames[part]);
          if (next.kind === "media") {
            this.emit("uploadProgress", {
              id: next.id,
              part,
              parts,
              sentBytes: Math.min(next.bytes, partBytes * (part + 1)),
              totalBytes: next.bytes
            });
          }
        }
        this.outbox = markSent(this.outbox, next.id, next.kind);
      }
    } finally {
      this.flushing = false;
      if (this._state === "ready" && this.ws && due(this.outbox).length > 0) void this.flush();
    }
  }
  open() {
    this.setState("connecting");
    this.reachedReady = false;
    this.refusal = void 0;
    let ws;
    try {
      ws = new this.options.WebSocket(this.options.url);
    } catch (e) {
      this.lost(void 0, 1006, e.message);
      return;
    }
    this.ws = ws;
    if (this.readyTimer !== void 0) clearTimeout(this.readyTimer);
    const readyTimer = setTimeout(() => {
      if (this.ws === ws && !this.reachedReady) {
        try {
          ws.close(4e3, "no ready in time");
        } catch {
          this.lost(ws, 1006, "no ready in time");
        }
      }
    }, this.options.readyTimeoutMs);
    this.readyTimer = readyTimer;
    ws.onopen = () => {
      const hello = { t: "hello", token: this.options.token, device: this.options.device };
      ws.send(encodeClientFrame(hello));
    };
    ws.onmessage = (event) => {
      if (this.ws === ws && typeof event.data === "string") this.onText(event.data);
    };
    ws.onerror = () => {
    };
    ws.onclose = (event) => {
      clearTimeout(readyTimer);
      this.lost(ws, event.code ?? 1006, event.reason ?? "");
    };
  }
  lost(ws, code, reason) {
    if (ws !== void 0 && this.ws !== ws) return;
    this.ws = void 0;
    this.dropPushRequests(new HeraldError("not_ready", "the connection was lost before the server answered", true));
    if (this._state === "stopped") return;
    this.outbox = afterDisconnect(this.outbox, this.options.now());
    if (code === CLOSE_NO_ACCESS) {
      this.stop();
      const refused = this.refusal?.code;
      this.emit("noAccess", { ...refused ? { code: refused } : {}, reason: this.refusalText() ?? (reason || "access denied") });
      return;
    }
    if (code === CLOSE_NORMAL) {
      this.stop();
      this.emit("replaced", { reason: reason || "replaced by a new connection" });
      return;
    }
    const reached = this.reachedReady;
    const attempt = reached ? 0 : this.attempt;
    const retryInMs = backoffDelay(attempt, this.options.backoff, this.options.random);
    this.attempt = nextAttempt(attempt, false);
    if (reached) this.typingOff();
    this.setState("waiting");
    this.emit("disconnect", { code, reason: this.refusalText() ?? reason, retryInMs });
    this.timer = setTimeout(() => {
      this.timer = void 0;
      if (this._state === "waiting") this.open();
    }, retryInMs);
  }
  refusalText() {
    return this.refusal && `${this.refusal.code}: ${this.refusal.message}`;
  }
  /** Settles the oldest push request if `frame` is its answer; true if it was. */
  settlePush(frame) {
    const head = this.pushRequests[0];
    if (!head) return false;
    if (frame.t === "error" && PUSH_ERRORS.has(frame.code)) {
      this.pushRequests.shift();
      head.reject(new HeraldError(frame.code, frame.message, false));
      return true;
    }
    if (frame.t !== "push_subscribed" && frame.t !== "push_unsubscribed") return false;
    const i = this.pushRequests.findIndex((r) => r.answer === frame.t);
    if (i >= 0) this.pushRequests.splice(i, 1)[0].resolve();
    return true;
  }
  typingOff() {
    this.emit("typing", false);
  }
  onText(text) {
    const decoded = decodeServerFrame(text);
    if (!decoded.ok) {
      if (!decoded.ignored) this.emit("invalidFrame", { reason: decoded.reason, text: text.slice(0, 200) });
      return;
    }
    const frame = decoded.frame;
    if (this.reachedReady && this.settlePush(frame)) {
      this.emit("frame", frame);
      return;
    }
    if (!this.reachedReady) {
      if (frame.t === "ready") {
        this.reachedReady = true;
        this.attempt = 0;
        clearTimeout(this.readyTimer);
        this.readyTimer = void 0;
        const info = {
          session: frame.session,
          capabilities: frame.capabilities,
          ...frame.avatar_url ? { avatarUrl: resolveAvatarUrl(frame.avatar_url, this.options.url) } : {},
          ...frame.capabilities.push ? { push: { vapidKey: frame.capabilities.push.vapid_key } } : {}
        };
        this._ready = info;
        this.setState("ready");
        if (!this.visible && info.push) this.ws?.send(encodeClientFrame({ t: "visibility", visible: false }));
        this.emit("frame", frame);
        this.emit("ready", info);
        void this.flush();
      } else if (frame.t === "error") {
        this.refusal = { code: frame.code, message: frame.message };
        this.emit("frame", frame);
        this.emit("error", new HeraldError(frame.code, frame.message, false));
      }
      return;
    }
    const fresh = frame.t === "message" && !this.replies.has(frame.id);
    this.outbox = acknowledge(this.outbox, frame, fresh).outbox;
    this.emit("frame", frame);
    switch (frame.t) {
      case "message": {
        const reply = applyMessage(this.replies.get(frame.id), frame);
        remember(this.replies, frame.id, reply);
        this.emit("message", reply);
        break;
      }
      case "typing":
        this.emit("typing", !frame.stop);
        break;
      case "avatar":
        this.emit("avatar", frame.state);
        break;
      case "prompt": {
        const card = {
          id: frame.id,
          kind: frame.kind,
          text: frame.text,
          options: frame.options,
          timeoutSeconds: frame.timeout_seconds,
          allowsText: frame.options.some((o) => o.id === CLARIFY_OTHER),
          ...frame.command === void 0 ? {} : { command: frame.command },
          ...frame.description === void 0 ? {} : { description: frame.description }
        };
        remember(this.cards, card.id, card);
        this.emit("prompt", card);
        break;
      }
      case "prompt_done":
        this.cards.delete(frame.prompt_id);
        this.emit("promptDone", {
          promptId: frame.prompt_id,
          expired: frame.expired === true,
          ...frame.option_id === void 0 ? {} : { optionId: frame.option_id }
        });
        break;
      case "media": {
        let download;
        try {
          download = applyMedia(this.downloads.get(frame.id), frame);
        } catch (e) {
          this.emit("invalidFrame", { reason: e.message, text: text.slice(0, 200) });
          break;
        }
        const done = completed(download);
        if (done) this.downloads.delete(frame.id);
        else remember(this.downloads, frame.id, download);
        this.emit("mediaProgress", { id: frame.id, receivedBytes: download.receivedBytes, size: frame.size });
        if (done) this.emit("media", done);
        break;
      }
      case "error":
        this.emit("error", new HeraldError(frame.code, frame.message, false));
        break;
      default:
        break;
    }
  }
};

// src/chat.ts
var STORE = { token: "herald.token", device: "herald.device", name: "herald.name", url: "herald.url", notify: "herald.notify" };
function $(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing`);
  return el;
}
var ui = {
  status: $("status"),
  settings: $("settings"),
  openSettings: $("open-settings"),
  token: $("token"),
  deviceName: $("device-name"),
  url: $("url"),
  deviceId: $("device-id"),
  forget: $("forget"),
  messages: $("messages"),
  typing: $("typing"),
  uploads: $("uploads"),
  composer: $("composer"),
  text: $("text"),
  file: $("file"),
  record: $("record"),
  avatar: $("avatar"),
  notifyRow: $("notify-row"),
  notify: $("notify"),
  notifyNote: $("notify-note")
};
function deviceId() {
  let id = localStorage.getItem(STORE.device);
  if (!id) {
    id = newId("web");
    localStorage.setItem(STORE.device, id);
  }
  return id;
}
function defaultUrl() {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
}
function avatar(call, arg) {
  const win = ui.avatar.contentWindow;
  if (!win) return;
  try {
    const api = win.hermesAvatar;
    if (api) {
      api[call](arg);
      return;
    }
  } catch {
  }
  const origin = new URL(ui.avatar.src, location.href).origin;
  if (origin !== "null") win.postMessage({ hermesAvatar: call, args: [arg] }, origin);
}
function scrollDown() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}
function bubble(kind, key) {
  const existing = key ? ui.messages.querySelector(`li[data-id="${CSS.escape(key)}"]`) : null;
  if (existing) return existing;
  const li = document.createElement("li");
  li.className = kind;
  if (key) li.dataset["id"] = key;
  ui.messages.append(li);
  return li;
}
function notice(text) {
  bubble("notice").textContent = text;
  scrollDown();
}
function showReply(reply) {
  const li = bubble("agent", reply.id);
  li.textContent = reply.text;
  li.dataset["final"] = String(reply.final);
  if (reply.final) avatar("speak", reply.text);
  scrollDown();
  followLink();
}
function showCard(c, client2) {
  const li = bubble("card", c.id);
  li.replaceChildren();
  const text = document.createElement("p");
  text.textContent = c.text;
  li.append(text);
  if (c.command) {
    const pre = document.createElement("pre");
    pre.textContent = c.command;
    li.append(pre);
  }
  if (c.description) {
    const p = document.createElement("p");
    p.className = "small";
    p.textContent = c.description;
    li.append(p);
  }
  const options = document.createElement("div");
  options.className = "options";
  for (const o of c.options) {
    if (o.id === CLARIFY_OTHER) continue;
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = o.label;
    b.dataset["option"] = o.id;
    if (o.style === "primary" || o.style === "danger") b.className = o.style;
    b.addEventListener("click", () => {
      client2.answer(c.id, o.id);
      for (const other of li.querySelectorAll("button")) other.disabled = true;
    });
    options.append(b);
  }
  li.append(options);
  if (c.allowsText) {
    const form = document.createElement("form");
    form.className = "row";
    const input = document.createElement("input");
    input.placeholder = "Or type your own answer";
    input.setAttribute("aria-label", "Your own answer");
    const b = document.createElement("button");
    b.textContent = "Answer";
    form.append(input, b);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!input.value.trim()) return;
      client2.answerText(c.id, input.value.trim());
      for (const other of li.querySelectorAll("button")) other.disabled = true;
    });
    li.append(form);
  }
  scrollDown();
  followLink();
}
function closeCard(promptId, optionId, expired) {
  const li = ui.messages.querySelector(`li.card[data-id="${CSS.escape(promptId)}"]`);
  if (!li) return;
  li.dataset["done"] = optionId ?? "expired";
  for (const b of li.querySelectorAll("button")) b.disabled = true;
  const p = document.createElement("p");
  p.className = "small";
  const label = [...li.querySelectorAll("button[data-option]")].find((b) => b.dataset["option"] === optionId)?.textContent;
  p.textContent = expired ? "This question has expired." : `Answered: ${label ?? optionId ?? ""}`;
  li.append(p);
  void closeNotifications(promptId);
}
function showMedia(m) {
  const li = bubble("agent", `media-${m.id}`);
  li.replaceChildren();
  const href = m.data ? URL.createObjectURL(new Blob([m.data], { type: m.mime })) : m.url;
  if (!href) return;
  if (m.mime.startsWith("image/") && (m.kind === "image" || m.kind === "animation")) {
    const img = document.createElement("img");
    img.src = href;
    img.alt = m.caption ?? m.filename ?? "A picture from the agent";
    li.append(img);
  } else if (m.kind === "voice" || m.mime.startsWith("audio/")) {
    const audio = document.createElement("audio");
    audio.controls = true;
    audio.src = href;
    li.append(audio);
  } else if (m.kind === "video" || m.mime.startsWith("video/")) {
    const video = document.createElement("video");
    video.controls = true;
    video.src = href;
    li.append(video);
  }
  const a = document.createElement("a");
  a.href = href;
  a.download = m.filename ?? `${m.kind}-${m.id}`;
  a.textContent = `Download ${m.filename ?? m.kind}`;
  li.append(a);
  if (m.caption) {
    const p = document.createElement("p");
    p.textContent = m.caption;
    li.append(p);
  }
  scrollDown();
}
function statusText(state) {
  switch (state) {
    case "idle":
      return "Not connected";
    case "connecting":
      return "Connecting…";
    case "ready":
      return "Connected";
    case "waiting":
      return "Not connected; trying again soon";
    case "stopped":
      return "Disconnected";
  }
}
function setStatus(state, text = statusText(state)) {
  ui.status.dataset["state"] = state;
  ui.status.textContent = text;
}
function kindOf(file) {
  if (file.type.startsWith("image/")) return "image";
  if (file.type.startsWith("video/")) return "video";
  if (file.type.startsWith("audio/")) return "audio";
  return "document";
}
async function sendFile(client2, file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const row = document.createElement("label");
  row.textContent = `${file.name} `;
  const bar = document.createElement("progress");
  bar.max = Math.max(1, bytes.length);
  bar.value = 0;
  row.append(bar);
  const id = newId("f");
  bar.dataset["id"] = id;
  ui.uploads.append(row);
  const off = client2.on("uploadProgress", (p) => {
    if (p.id !== id) return;
    bar.value = p.sentBytes;
    if (p.sentBytes >= p.totalBytes) {
      off();
      row.dataset["done"] = "true";
      setTimeout(() => row.remove(), 1500);
    }
  });
  try {
    client2.upload(bytes, { id, kind: kindOf(file), mime: file.type || "application/octet-stream", filename: file.name });
  } catch (e) {
    off();
    row.remove();
    notice(`Not sent: ${e.message}`);
    return;
  }
  bubble("me", id).textContent = `File: ${file.name}`;
  scrollDown();
}
async function startRecording(onLevel) {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true } });
  const ctx = new AudioContext();
  const source = ctx.createMediaStreamSource(stream);
  const node = ctx.createScriptProcessor(4096, 1, 1);
  const chunks = [];
  node.onaudioprocess = (e) => {
    const input = e.inputBuffer.getChannelData(0);
    chunks.push(new Float32Array(input));
    let peak = 0;
    for (const s of input) peak = Math.max(peak, Math.abs(s));
    onLevel(peak);
  };
  source.connect(node);
  node.connect(ctx.destination);
  return {
    async stop() {
      node.disconnect();
      source.disconnect();
      for (const t of stream.getTracks()) t.stop();
      const rate = ctx.sampleRate;
      await ctx.close();
      const all = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) {
        all.set(c, at);
        at += c.length;
      }
      return encodeWav(toVoiceSamples(all, rate));
    }
  };
}
function keepForOffline() {
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch((e) => {
    console.warn(`The chat will not open offline: ${e.message}`);
  });
}
var SUBSCRIBE_TIMEOUT_MS = 3e4;
var VISIBLE_NOTE = "When the chat is closed or out of sight: the agent's questions, deliveries and finished replies, on this device.";
function pushAvailable() {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}
function notifyNote(text) {
  ui.notifyNote.textContent = text;
}
async function browserSubscription(vapidKey) {
  const registration = await navigator.serviceWorker.ready;
  const key = decodeBase64Url(vapidKey);
  const current = await registration.pushManager.getSubscription();
  if (current) {
    const had = current.options.applicationServerKey;
    if (had && new Uint8Array(had).join() === key.join()) return current;
    await current.unsubscribe();
  }
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("the browser's push service did not answer")), SUBSCRIBE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }), late]);
  } finally {
    clearTimeout(timer);
  }
}
async function registerPush(c, vapidKey) {
  const json = (await browserSubscription(vapidKey)).toJSON();
  const p256dh = json.keys?.["p256dh"];
  const auth = json.keys?.["auth"];
  if (!json.endpoint || !p256dh || !auth) throw new Error("the browser gave a subscription without keys");
  await c.subscribePush({ endpoint: json.endpoint, keys: { p256dh, auth } });
}
async function turnNotificationsOn() {
  const permission = await Notification.requestPermission();
  const c = client;
  const key = c?.ready?.push?.vapidKey;
  if (permission !== "granted") {
    ui.notify.checked = false;
    notifyNote(permission === "denied" ? "Notifications are blocked for this page in the browser's settings." : "Notifications were not allowed.");
    return;
  }
  if (!c || !key) {
    ui.notify.checked = false;
    notifyNote("Connect first: notifications are set up with herald.");
    return;
  }
  ui.notify.disabled = true;
  try {
    await registerPush(c, key);
    localStorage.setItem(STORE.notify, "on");
    notifyNote(`On. ${VISIBLE_NOTE}`);
  } catch (e) {
    ui.notify.checked = false;
    notifyNote(`Could not turn notifications on: ${e.message}`);
  } finally {
    ui.notify.disabled = false;
  }
}
async function turnNotificationsOff() {
  localStorage.removeItem(STORE.notify);
  ui.notify.disabled = true;
  try {
    if (client?.state === "ready" && client.ready?.push) await client.unsubscribePush().catch(() => void 0);
    const registration = await navigator.serviceWorker.getRegistration("/");
    await (await registration?.pushManager.getSubscription())?.unsubscribe();
    notifyNote(VISIBLE_NOTE);
  } finally {
    ui.notify.disabled = false;
  }
}
function notificationsAtReady(c, push) {
  ui.notifyRow.hidden = !(push && pushAvailable());
  if (ui.notifyRow.hidden || !push) return;
  const wanted = localStorage.getItem(STORE.notify) === "on";
  const granted = Notification.permission === "granted";
  ui.notify.checked = wanted && granted;
  if (!wanted) return;
  if (!granted) {
    localStorage.removeItem(STORE.notify);
    void c.unsubscribePush().catch(() => void 0);
    notifyNote("Notifications were turned off: this page may no longer show them.");
    return;
  }
  registerPush(c, push.vapidKey).catch((e) => notifyNote(`Notifications may not arrive: ${e.message}`));
}
async function closeNotifications(promptId) {
  if (!pushAvailable()) return;
  const registration = await navigator.serviceWorker.getRegistration("/");
  for (const n of await registration?.getNotifications() ?? []) {
    if (n.data?.promptId === promptId) n.close();
  }
}
var link;
var LINKS = "herald-links";
var LINK_TTL_MS = 10 * 6e4;
var linkTimer;
var LINK_WAIT_MS = 2e3;
var answeredUnseen;
function linkFrom(source) {
  const l = {};
  for (const k of ["open", "answer", "option"]) {
    const v = source.get(k);
    if (typeof v === "string" && v) l[k] = v;
  }
  return l.open || l.answer && l.option ? l : void 0;
}
async function linkInAddress() {
  const query = new URLSearchParams(location.search);
  const l = linkFrom(query);
  if (!l?.answer) return l;
  const n = query.get("n");
  const links = "caches" in window ? await caches.open(LINKS) : void 0;
  const made = n && links ? await links.match(`/link/${encodeURIComponent(n)}`) : void 0;
  if (made) {
    await links?.delete(`/link/${encodeURIComponent(n ?? "")}`);
    const kept = await made.json();
    const fresh = typeof kept.at === "number" && Date.now() - kept.at < LINK_TTL_MS;
    if (fresh && kept.answer === l.answer && kept.option === l.option) return l;
  }
  return { open: l.answer };
}
function endLink() {
  link = void 0;
  clearTimeout(linkTimer);
  if (location.search) history.replaceState(history.state, "", location.pathname);
}
function followLink() {
  if (!link) return;
  const id = link.answer ?? link.open;
  if (!id) return endLink();
  const li = ui.messages.querySelector(`li[data-id="${CSS.escape(id)}"]`);
  if (!li) return;
  if (client) ui.settings.hidden = true;
  for (const other of ui.messages.querySelectorAll("li.opened")) other.classList.remove("opened");
  li.classList.add("opened");
  li.scrollIntoView({ block: "center" });
  if (link.answer && link.option) {
    const button = [...li.querySelectorAll("button[data-option]")].find((b) => b.dataset["option"] === link?.option);
    if (li.dataset["done"] !== void 0 || !button || button.disabled) notice("That question was already answered.");
    else button.click();
  }
  endLink();
}
function setLink(l) {
  link = l;
  followLink();
  waitForLink();
}
function waitForLink() {
  clearTimeout(linkTimer);
  if (!link || client?.state !== "ready") return;
  linkTimer = setTimeout(() => {
    const c = client;
    if (link?.answer && link.option && c?.state === "ready") {
      answeredUnseen = link.answer;
      c.answer(link.answer, link.option);
    }
    endLink();
  }, LINK_WAIT_MS);
}
function unseenDone(promptId, expired) {
  if (promptId !== answeredUnseen) return;
  answeredUnseen = void 0;
  notice(expired ? "That question is no longer open: it was answered elsewhere or it expired." : "Answered from the notification.");
}
var client;
function connect() {
  const token = localStorage.getItem(STORE.token);
  if (!token) {
    ui.settings.hidden = false;
    ui.token.focus();
    return;
  }
  client?.close();
  const name = localStorage.getItem(STORE.name) || "Browser";
  const c = new HeraldClient({
    url: localStorage.getItem(STORE.url) || defaultUrl(),
    token,
    device: { id: deviceId(), name, platform: "web" }
  });
  client = c;
  c.on("state", (s) => setStatus(s));
  c.on("ready", (info) => {
    if (info.avatarUrl && ui.avatar.src !== info.avatarUrl) ui.avatar.src = info.avatarUrl;
    notificationsAtReady(c, info.push);
    waitForLink();
  });
  c.on("message", showReply);
  c.on("typing", (on) => {
    ui.typing.hidden = !on;
  });
  c.on("avatar", (state) => avatar("setState", state));
  c.on("prompt", (card) => showCard(card, c));
  c.on("promptDone", (d) => {
    closeCard(d.promptId, d.optionId, d.expired);
    unseenDone(d.promptId, d.expired);
  });
  c.on("media", showMedia);
  c.on("error", (e) => notice(`Error (${e.code}): ${e.message}`));
  c.on("noAccess", ({ reason }) => {
    setStatus("stopped", `No access: ${reason}`);
    ui.settings.hidden = false;
  });
  c.on("replaced", () => setStatus("stopped", "Disconnected: this browser's chat is open somewhere else"));
  c.setVisible(document.visibilityState === "visible");
  c.connect();
}
function init() {
  ui.deviceId.textContent = deviceId();
  ui.url.value = localStorage.getItem(STORE.url) || defaultUrl();
  ui.deviceName.value = localStorage.getItem(STORE.name) || "Browser";
  ui.token.value = localStorage.getItem(STORE.token) ?? "";
  ui.openSettings.addEventListener("click", () => {
    ui.settings.hidden = !ui.settings.hidden;
  });
  ui.settings.addEventListener("submit", (e) => {
    e.preventDefault();
    localStorage.setItem(STORE.token, ui.token.value.trim());
    localStorage.setItem(STORE.name, ui.deviceName.value.trim() || "Browser");
    if (ui.url.value.trim() && ui.url.value.trim() !== defaultUrl()) localStorage.setItem(STORE.url, ui.url.value.trim());
    else localStorage.removeItem(STORE.url);
    ui.settings.hidden = true;
    connect();
  });
  ui.forget.addEventListener("click", () => {
    localStorage.removeItem(STORE.token);
    ui.token.value = "";
    client?.close();
    client = void 0;
    setStatus("idle");
  });
  ui.composer.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = ui.text.value.trim();
    if (!text || !client) return;
    try {
      const id = client.send(text);
      bubble("me", id).textContent = text;
      ui.text.value = "";
      scrollDown();
    } catch (err) {
      notice(`Not sent: ${err.message}`);
    }
  });
  ui.text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      ui.composer.requestSubmit();
    }
  });
  ui.file.addEventListener("change", () => {
    const file = ui.file.files?.[0];
    if (file && client) void sendFile(client, file);
    ui.file.value = "";
  });
  let recording;
  ui.record.addEventListener("click", async () => {
    if (!client) return;
    if (!recording) {
      try {
        recording = await startRecording((level) => avatar("setVolume", level));
        ui.record.setAttribute("aria-pressed", "true");
        ui.record.textContent = "Stop and send";
      } catch (e) {
        notice(`No microphone: ${e.message}`);
      }
      return;
    }
    const r = recording;
    recording = void 0;
    ui.record.setAttribute("aria-pressed", "false");
    ui.record.textContent = "Record voice";
    avatar("setVolume", 0);
    try {
      const wav = await r.stop();
      const id = client.sendVoice(wav);
      bubble("me", id).textContent = "Voice message";
      scrollDown();
    } catch (e) {
      notice(`Not sent: ${e.message}`);
    }
  });
  ui.notify.addEventListener("change", () => {
    void (ui.notify.checked ? turnNotificationsOn() : turnNotificationsOff());
  });
  document.addEventListener("visibilitychange", () => client?.setVisible(document.visibilityState === "visible"));
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.addEventListener("message", (e) => {
      const d = e.data;
      if (d?.["herald"] === "open") setLink(linkFrom({ get: (k) => typeof d[k] === "string" ? d[k] : void 0 }));
    });
    navigator.serviceWorker.startMessages();
  }
  void linkInAddress().then((l) => l && setLink(l));
  connect();
  keepForOffline();
}
init();
