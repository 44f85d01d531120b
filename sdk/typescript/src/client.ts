// The client: one connection to Herald's mobile endpoint, kept alive across drops.
//
// The WebSocket is injected (the browser's, or the `ws` package on Node), so the class
// holds no global state and runs anywhere. It says `hello`, waits for `ready`, then
// sends what the outbox holds and reports what arrives as typed events. When the
// connection ends it waits (exponential backoff with jitter, reset by `ready`) and tries
// again, except after close 1008, which means "no access": then it stops for good and
// says so with `noAccess`.

import { applyMedia, applyMessage, completed, type Download, type ReceivedMedia, type Reply } from "./assembly.js";
import { backoffDelay, DEFAULT_BACKOFF, nextAttempt, type BackoffPolicy } from "./backoff.js";
import { base64Length, encodeBase64 } from "./base64.js";
import {
  acknowledge,
  afterDisconnect,
  due,
  EMPTY_OUTBOX,
  enqueue,
  markSent,
  openUploads,
  type Outbox,
  type Pending,
  type PendingKind,
} from "./outbox.js";
import {
  CLARIFY_OTHER,
  CLOSE_NO_ACCESS,
  CLOSE_NORMAL,
  decodeServerFrame,
  encodeClientFrame,
  LIMITS,
  pushSubscriptionProblem,
  utf8Length,
  type AvatarState,
  type Capabilities,
  type ClientFrame,
  type DeliverMedia,
  type DeviceInfo,
  type ErrorCode,
  type MediaKindUp,
  type PromptFrame,
  type PushKeys,
  type ServerFrame,
} from "./protocol.js";
import { inspectWav, isVoiceWav } from "./wav.js";

/**
 * A handler the socket calls. Checked bivariantly (a method's type), so the browser's
 * `WebSocket` (handlers of `MessageEvent`, `CloseEvent`) and the `ws` package's (their own
 * event types) both fit without `any`: each event has at least the fields the client reads.
 */
export type SocketHandler<E> = { handle(event: E): void }["handle"];

/** The part of a WebSocket the client uses: the browser's `WebSocket` and the `ws` package's both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount?: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: SocketHandler<unknown> | null;
  onmessage: SocketHandler<{ data: unknown }> | null;
  onclose: SocketHandler<{ code?: number; reason?: string }> | null;
  onerror: SocketHandler<unknown> | null;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ClientOptions {
  /** `ws://host:8787/ws` or `wss://…`. Never put the token in it. */
  url: string;
  /** The app token (`MOBILE_TOKEN` on the agent's machine). */
  token: string;
  /** Who is connecting; `id` must stay the same for this install of the app. */
  device: DeviceInfo;
  /** The WebSocket class: defaults to `globalThis.WebSocket` (browsers, Node ≥ 22). */
  WebSocket?: WebSocketConstructor;
  backoff?: BackoffPolicy;
  /** How long to wait for `ready` after connecting. */
  readyTimeoutMs?: number;
  /** For tests: the jitter's random source. */
  random?: () => number;
  /** For tests: the clock (ms). */
  now?: () => number;
}

export type ConnectionState = "idle" | "connecting" | "ready" | "waiting" | "stopped";

export interface ReadyInfo {
  session: string;
  /** The avatar page, made absolute against the connection's URL; absent if the server has none. */
  avatarUrl?: string;
  capabilities: Capabilities;
  /** Present when the server sends notifications while the app is closed (`capabilities.push`). */
  push?: { vapidKey: string };
}

/** A Web Push subscription (or a UnifiedPush endpoint and its keys), as `PushSubscription.toJSON()` has it. */
export interface PushSubscriptionInfo {
  endpoint: string;
  keys: PushKeys;
}

/** Codes of errors the client raises itself, before anything is sent. */
export type LocalErrorCode = "not_supported" | "stopped";

/** An error from the server (`local: false`) or a check of the client's (`local: true`). */
export class HeraldError extends Error {
  readonly code: ErrorCode | LocalErrorCode;
  readonly local: boolean;
  constructor(code: ErrorCode | LocalErrorCode, message: string, local: boolean) {
    super(message);
    this.name = "HeraldError";
    this.code = code;
    this.local = local;
  }
}

export interface Card {
  id: string;
  kind: PromptFrame["kind"];
  text: string;
  options: PromptFrame["options"];
  timeoutSeconds: number;
  /** Exec approvals: the exact command; show it beside the buttons. */
  command?: string;
  description?: string;
  /** Clarify cards: the user may type an answer (option `other`). */
  allowsText: boolean;
}

export interface PromptDone {
  promptId: string;
  /** The choice that counted (an invalid one is replaced by the safe choice). */
  optionId?: string;
  expired: boolean;
}

export interface UploadProgress {
  id: string;
  part: number;
  parts: number;
  sentBytes: number;
  totalBytes: number;
}

export interface MediaProgress {
  id: string;
  receivedBytes: number;
  size: number;
}

export interface Disconnect {
  code: number;
  reason: string;
  retryInMs: number;
}

/** Every event and what it carries. */
export interface ClientEvents {
  state: ConnectionState;
  ready: ReadyInfo;
  /** A reply, every time it grows or is edited; `final` when complete. */
  message: Reply;
  /** Typing indicator: `true` on, `false` off now. */
  typing: boolean;
  avatar: AvatarState;
  prompt: Card;
  promptDone: PromptDone;
  media: ReceivedMedia;
  mediaProgress: MediaProgress;
  uploadProgress: UploadProgress;
  /** An error frame from the server (`unsupported_frame`, `too_big`, …). */
  error: HeraldError;
  /** A frame that could not be used (bad JSON, wrong fields); it was dropped. */
  invalidFrame: { reason: string; text: string };
  disconnect: Disconnect;
  /**
   * Close 1008: the token or device is refused. The client has stopped; show "no access".
   * `code` is the refusal's error code (`auth_failed`, `forbidden`, …) when one came first.
   */
  noAccess: { code?: ErrorCode; reason: string };
  /**
   * Close 1000 from the server: another connection with the same `device.id` took over
   * (another tab, a second copy of the app). The client has stopped rather than fight it.
   */
  replaced: { reason: string };
  /** Every frame decoded, for logging or frames this class does not model. */
  frame: ServerFrame;
}
export type EventName = keyof ClientEvents;
type Listener<K extends EventName> = (value: ClientEvents[K]) => void;

export interface SendOptions {
  /** Reuse an id to resend a message; by default a new one. */
  id?: string;
  replyTo?: string;
}
export interface VoiceOptions {
  id?: string;
  /** The app's own transcript; without it the agent transcribes. */
  transcript?: string;
}
export interface UploadOptions {
  id?: string;
  kind: MediaKindUp;
  mime?: string;
  filename?: string;
  caption?: string;
}

const OPEN = 1;
/** Wait while the socket holds more than this unsent, so progress means something. */
const HIGH_WATER = 1024 * 1024;
/** Replies and downloads remembered for edits and chunks. */
const REMEMBERED = 256;
/**
 * Error codes the server answers a push frame with. While a push request waits, the next
 * of these is its answer (frames are answered in order), not a sign that a message was
 * handled.
 */
const PUSH_ERRORS: ReadonlySet<string> = new Set(["bad_frame", "too_big", "unsupported_frame", "forbidden", "rate_limited", "internal"]);

interface PushRequest {
  answer: "push_subscribed" | "push_unsubscribed";
  resolve(): void;
  reject(e: HeraldError): void;
}

/** A random id, e.g. `m-3f9c0a…`. */
export function newId(prefix = "m"): string {
  const bytes = new Uint8Array(8);
  const crypto = globalThis.crypto;
  if (crypto?.getRandomValues) crypto.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * `avatar_url` made absolute: a relative URL is relative to the WebSocket's, over HTTP(S)
 * (`ws:` → `http:`, `wss:` → `https:`). Plain string work, since React Native's `URL`
 * cannot do it.
 */
export function resolveAvatarUrl(avatarUrl: string, wsUrl: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(avatarUrl)) return avatarUrl;
  const m = /^(wss?|https?):\/\/([^/?#]*)([^?#]*)/i.exec(wsUrl);
  if (!m) return avatarUrl;
  const scheme = /^(wss|https)$/i.test(m[1]!) ? "https" : "http";
  if (avatarUrl.startsWith("//")) return `${scheme}:${avatarUrl}`;
  const origin = `${scheme}://${m[2]}`;
  if (avatarUrl.startsWith("/")) return origin + avatarUrl;
  const dir = (m[3] || "/").replace(/[^/]*$/, "");
  return origin + dir + avatarUrl;
}

/** Ids the server accepts: 1..256 bytes, no control characters (Unicode Cc, as the server counts them). */
function checkId(id: string, what = "an id"): void {
  // eslint-disable-next-line no-control-regex
  if (id.length === 0 || utf8Length(id) > LIMITS.MAX_ID_BYTES || /[\u0000-\u001f\u007f-\u009f]/.test(id)) {
    throw new HeraldError("bad_frame", `${what} must be 1 to ${LIMITS.MAX_ID_BYTES} bytes without control characters`, true);
  }
}

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > REMEMBERED) map.delete(map.keys().next().value as string);
}

export class HeraldClient {
  private readonly options: Required<Omit<ClientOptions, "WebSocket">> & { WebSocket: WebSocketConstructor };
  private readonly listeners = new Map<EventName, Set<Listener<EventName>>>();
  private ws: WebSocketLike | undefined;
  private outbox: Outbox = EMPTY_OUTBOX;
  private replies = new Map<string, Reply>();
  private downloads = new Map<string, Download>();
  private cards = new Map<string, Card>();
  private attempt = 0;
  private reachedReady = false;
  /** The error frame that came before `ready`: the reason for a refusal. */
  private refusal: { code: ErrorCode; message: string } | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readyTimer: ReturnType<typeof setTimeout> | undefined;
  private flushing = false;
  private _state: ConnectionState = "idle";
  private _ready: ReadyInfo | undefined;
  /** Push frames sent on this connection and not yet answered, oldest first. */
  private pushRequests: PushRequest[] = [];
  /** What the app last said with `setVisible`; told again after each `ready`. */
  private visible = true;

  constructor(options: ClientOptions) {
    const WebSocketClass = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WebSocketClass) {
      throw new Error("no WebSocket here: pass one, e.g. `import WebSocket from 'ws'` on Node 20");
    }
    // A device id the server cannot take is refused at hello with close 1008, which would
    // read as "no access": say what is wrong now instead.
    checkId(options.device.id, "device.id");
    this.options = {
      backoff: DEFAULT_BACKOFF,
      readyTimeoutMs: 10_000,
      random: Math.random,
      now: Date.now,
      ...options,
      WebSocket: WebSocketClass,
    };
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this._state;
  }

  /** What the last `ready` said, once there was one. */
  get ready(): ReadyInfo | undefined {
    return this._ready;
  }

  /** What the server allows; the protocol's defaults until the first `ready`. */
  get capabilities(): Capabilities {
    return (
      this._ready?.capabilities ?? {
        max_media_bytes: LIMITS.MAX_MEDIA_BYTES,
        max_frame_bytes: LIMITS.MAX_FRAME_BYTES,
        media_chunk_bytes: LIMITS.MEDIA_CHUNK_BYTES,
        max_message_chars: LIMITS.MAX_MESSAGE_CHARS,
        streaming: true,
        voice: true,
        prompts: ["exec_approval", "confirm", "clarify"],
      }
    );
  }

  /** Messages sent and not yet answered (they are resent after a reconnect). */
  get pending(): readonly Pending[] {
    return this.outbox.entries;
  }

  /** Cards shown and not yet closed. */
  get openCards(): Card[] {
    return [...this.cards.values()];
  }

  on<K extends EventName>(name: K, listener: Listener<K>): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener as Listener<EventName>);
    return () => set.delete(listener as Listener<EventName>);
  }

  /**
   * The next `name` event (that satisfies `accept`, if given). The promise stays pending
   * if that never happens; race it with a timeout where that matters.
   */
  once<K extends EventName>(name: K, accept?: (value: ClientEvents[K]) => boolean): Promise<ClientEvents[K]> {
    return new Promise((resolve) => {
      const off = this.on(name, (value) => {
        if (accept && !accept(value)) return;
        off();
        resolve(value);
      });
    });
  }

  /** Starts connecting (and reconnecting, until `close`). */
  connect(): void {
    if (this._state === "stopped") throw new HeraldError("stopped", "this client was stopped; make a new one", true);
    if (this._state !== "idle") return;
    this.open();
  }

  /** Stops for good: closes the connection and cancels any reconnection. */
  close(): void {
    if (this._state === "stopped") return;
    this.stop();
    const ws = this.ws;
    this.ws = undefined;
    if (ws) {
      try {
        ws.close(1000, "bye");
      } catch {
        // Closing a socket that never opened may throw on some platforms; it is gone either way.
      }
    }
  }

  /** Sends a text message; returns its id. Queued while disconnected. */
  send(text: string, options: SendOptions = {}): string {
    const id = options.id ?? newId("m");
    const frame: ClientFrame = { t: "text", id, text, ...(options.replyTo ? { reply_to: options.replyTo } : {}) };
    this.queue(id, "text", [encodeClientFrame(frame)], utf8Length(text));
    return id;
  }

  /** Sends a voice message: a WAV file, 16 kHz mono PCM16; returns its id. */
  sendVoice(wav: Uint8Array, options: VoiceOptions = {}): string {
    const caps = this.capabilities;
    if (!caps.voice) throw new HeraldError("not_supported", "this server does not take voice messages", true);
    let info;
    try {
      info = inspectWav(wav);
    } catch (e) {
      throw new HeraldError("bad_frame", `voice must be a WAV file: ${(e as Error).message}`, true);
    }
    if (!isVoiceWav(info)) {
      throw new HeraldError(
        "bad_frame",
        `voice must be 16 kHz mono 16-bit PCM, not ${info.rate} Hz, ${info.channels} channel(s), ${info.bitsPerSample} bits`,
        true,
      );
    }
    // Voice is governed by `voice`; a server that names no file size still takes the
    // protocol's 8 MiB of it.
    const limit = caps.max_media_bytes > 0 ? Math.min(caps.max_media_bytes, LIMITS.MAX_MEDIA_BYTES) : LIMITS.MAX_MEDIA_BYTES;
    if (wav.length > limit) throw new HeraldError("too_big", `voice is ${wav.length} bytes, over the limit of ${limit}`, true);
    const id = options.id ?? newId("v");
    const frame: ClientFrame = {
      t: "audio",
      id,
      format: "wav",
      data: encodeBase64(wav),
      ...(options.transcript === undefined ? {} : { text: options.transcript }),
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
  upload(bytes: Uint8Array, options: UploadOptions): string {
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
    // The largest part's frame must fit: check it before encoding anything.
    const overhead = 512 + utf8Length((options.filename ?? "") + (options.caption ?? "") + (options.mime ?? "") + (options.id ?? ""));
    const frameBytes = base64Length(Math.min(chunk, bytes.length)) + overhead;
    if (caps.max_frame_bytes > 0 && frameBytes > caps.max_frame_bytes) {
      throw new HeraldError("too_big", `a part would be a ${frameBytes}-byte frame, over ${caps.max_frame_bytes}`, true);
    }
    const id = options.id ?? newId("f");
    const frames: string[] = [];
    for (let part = 0; part < parts; part++) {
      const frame: ClientFrame = {
        t: "media",
        id,
        kind: options.kind,
        ...(options.mime === undefined ? {} : { mime: options.mime }),
        ...(options.filename === undefined ? {} : { filename: options.filename }),
        ...(options.caption === undefined || part > 0 ? {} : { caption: options.caption }),
        data: encodeBase64(bytes.subarray(part * chunk, (part + 1) * chunk)),
        part,
        parts,
      };
      frames.push(encodeClientFrame(frame));
    }
    this.queue(id, "media", frames, bytes.length);
    return id;
  }

  /** Answers a card with one of its options. */
  answer(promptId: string, optionId: string): void {
    this.queue(promptId, "prompt", [encodeClientFrame({ t: "prompt", prompt_id: promptId, option_id: optionId })], 0);
  }

  /** Answers a clarify card with the user's own words (option `other`). */
  answerText(promptId: string, text: string): void {
    const frame: ClientFrame = { t: "prompt", prompt_id: promptId, option_id: CLARIFY_OTHER, text };
    this.queue(promptId, "prompt", [encodeClientFrame(frame)], 0);
  }

  /**
   * Pushes to another device (allowed from loopback or with a deliver token). Not
   * queued or resent: it needs a live connection, and so does its target.
   */
  deliver(to: string, text?: string, media?: DeliverMedia[]): void {
    const frame: ClientFrame = { t: "deliver", to, ...(text === undefined ? {} : { text }), ...(media ? { media } : {}) };
    this.sendNow(encodeClientFrame(frame));
  }

  /**
   * Sends a frame this SDK does not model (a newer protocol's); an older server answers
   * `error{code:"unsupported_frame"}` and keeps the connection. Needs a live connection.
   */
  sendRaw(frame: { t: string } & Record<string, unknown>): void {
    this.sendNow(JSON.stringify(frame));
  }

  /** A keepalive; the server answers `pong`. */
  ping(): void {
    this.sendNow(encodeClientFrame({ t: "ping" }));
  }

  /**
   * Registers where Herald sends notifications while the app is closed (a browser's
   * `PushSubscription.toJSON()`, or a UnifiedPush endpoint with its keys), replacing this
   * device's previous one. Resolves on `push_subscribed`; rejects with the server's
   * `bad_frame` (an endpoint or keys it refuses), with `not_supported` when the server
   * sends no notifications, or `not_ready` without a live connection.
   */
  subscribePush(subscription: PushSubscriptionInfo): Promise<void> {
    return this.pushRequest("push_subscribed", () => {
      const keys = subscription.keys ?? { p256dh: "", auth: "" };
      const frame: ClientFrame = { t: "push_subscribe", endpoint: subscription.endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } };
      const problem = pushSubscriptionProblem(frame);
      if (problem) throw new HeraldError("bad_frame", problem, true);
      return encodeClientFrame(frame);
    });
  }

  /** Ends this device's notifications. Resolves on `push_unsubscribed`. */
  unsubscribePush(): Promise<void> {
    return this.pushRequest("push_unsubscribed", () => encodeClientFrame({ t: "push_unsubscribe" }));
  }

  /**
   * Says whether the app is in sight: Herald sends notifications only while none of the
   * user's apps is connected and visible. Remembered and said again after each reconnect
   * (the server takes a new connection as visible); sent only to a server with `push`.
   */
  setVisible(visible: boolean): void {
    if (this.visible === visible) return;
    this.visible = visible;
    if (this._state === "ready" && this.ws && this._ready?.push) this.ws.send(encodeClientFrame({ t: "visibility", visible }));
  }

  // ---- internals ----

  private pushRequest(answer: PushRequest["answer"], frame: () => string): Promise<void> {
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
  private dropPushRequests(why: HeraldError): void {
    for (const r of this.pushRequests.splice(0)) r.reject(why);
  }

  private emit<K extends EventName>(name: K, value: ClientEvents[K]): void {
    for (const listener of [...(this.listeners.get(name) ?? [])]) {
      try {
        (listener as Listener<K>)(value);
      } catch (e) {
        // A listener's bug must not break the connection; surface it asynchronously.
        setTimeout(() => {
          throw e;
        }, 0);
      }
    }
  }

  private setState(state: ConnectionState): void {
    if (this._state === state) return;
    this._state = state;
    this.emit("state", state);
  }

  private stop(): void {
    this.dropPushRequests(new HeraldError("stopped", "the client was stopped before the server answered", true));
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.readyTimer !== undefined) clearTimeout(this.readyTimer);
    this.timer = undefined;
    this.readyTimer = undefined;
    this.setState("stopped");
  }

  private checkFrame(text: string): void {
    const max = this.capabilities.max_frame_bytes;
    const len = utf8Length(text);
    if (max > 0 && len > max) throw new HeraldError("too_big", `the frame is ${len} bytes, over the limit of ${max}`, true);
  }

  private sendNow(text: string): void {
    if (this._state !== "ready" || !this.ws) throw new HeraldError("not_ready", "not connected", true);
    this.checkFrame(text);
    this.ws.send(text);
  }

  private queue(id: string, kind: PendingKind, frames: string[], bytes: number): void {
    if (this._state === "stopped") throw new HeraldError("stopped", "this client was stopped", true);
    checkId(id);
    for (const f of frames) this.checkFrame(f);
    this.outbox = enqueue(this.outbox, { id, kind, frames, bytes, queuedAt: this.options.now(), sent: false });
    void this.flush();
  }

  /** Hands due entries to the socket in order, pausing while its buffer is full. */
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      for (;;) {
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
          ws.send(next.frames[part]!);
          if (next.kind === "media") {
            this.emit("uploadProgress", {
              id: next.id,
              part,
              parts,
              sentBytes: Math.min(next.bytes, partBytes * (part + 1)),
              totalBytes: next.bytes,
            });
          }
        }
        this.outbox = markSent(this.outbox, next.id, next.kind);
      }
    } finally {
      this.flushing = false;
      // A flush cut short by a lost connection may end after the next `ready` asked for
      // one (and was turned away): pick up where it left, on the new connection.
      if (this._state === "ready" && this.ws && due(this.outbox).length > 0) void this.flush();
    }
  }

  private open(): void {
    this.setState("connecting");
    this.reachedReady = false;
    this.refusal = undefined;
    let ws: WebSocketLike;
    try {
      ws = new this.options.WebSocket(this.options.url);
    } catch (e) {
      this.lost(undefined, 1006, (e as Error).message);
      return;
    }
    this.ws = ws;
    if (this.readyTimer !== undefined) clearTimeout(this.readyTimer);
    const readyTimer = setTimeout(() => {
      if (this.ws === ws && !this.reachedReady) {
        try {
          ws.close(4000, "no ready in time");
        } catch {
          this.lost(ws, 1006, "no ready in time");
        }
      }
    }, this.options.readyTimeoutMs);
    this.readyTimer = readyTimer;
    ws.onopen = () => {
      const hello: ClientFrame = { t: "hello", token: this.options.token, device: this.options.device };
      ws.send(encodeClientFrame(hello));
    };
    ws.onmessage = (event) => {
      if (this.ws === ws && typeof event.data === "string") this.onText(event.data);
    };
    ws.onerror = () => {
      // A close event follows; that is where the client decides what to do.
    };
    ws.onclose = (event) => {
      clearTimeout(readyTimer);
      this.lost(ws, event.code ?? 1006, event.reason ?? "");
    };
  }

  private lost(ws: WebSocketLike | undefined, code: number, reason: string): void {
    if (ws !== undefined && this.ws !== ws) return;
    this.ws = undefined;
    this.dropPushRequests(new HeraldError("not_ready", "the connection was lost before the server answered", true));
    if (this._state === "stopped") return;
    this.outbox = afterDisconnect(this.outbox, this.options.now());
    if (code === CLOSE_NO_ACCESS) {
      this.stop();
      const refused = this.refusal?.code;
      this.emit("noAccess", { ...(refused ? { code: refused } : {}), reason: this.refusalText() ?? (reason || "access denied") });
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
      this.timer = undefined;
      if (this._state === "waiting") this.open();
    }, retryInMs);
  }

  private refusalText(): string | undefined {
    return this.refusal && `${this.refusal.code}: ${this.refusal.message}`;
  }

  /** Settles the oldest push request if `frame` is its answer; true if it was. */
  private settlePush(frame: ServerFrame): boolean {
    const head = this.pushRequests[0];
    if (!head) return false;
    if (frame.t === "error" && PUSH_ERRORS.has(frame.code)) {
      this.pushRequests.shift();
      head.reject(new HeraldError(frame.code, frame.message, false));
      return true;
    }
    if (frame.t !== "push_subscribed" && frame.t !== "push_unsubscribed") return false;
    const i = this.pushRequests.findIndex((r) => r.answer === frame.t);
    if (i >= 0) this.pushRequests.splice(i, 1)[0]!.resolve();
    return true;
  }

  private typingOff(): void {
    this.emit("typing", false);
  }

  private onText(text: string): void {
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
        this.readyTimer = undefined;
        const info: ReadyInfo = {
          session: frame.session,
          capabilities: frame.capabilities,
          ...(frame.avatar_url ? { avatarUrl: resolveAvatarUrl(frame.avatar_url, this.options.url) } : {}),
          ...(frame.capabilities.push ? { push: { vapidKey: frame.capabilities.push.vapid_key } } : {}),
        };
        this._ready = info;
        this.setState("ready");
        // A new connection counts as visible: say so first if the app is out of sight.
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
        const card: Card = {
          id: frame.id,
          kind: frame.kind,
          text: frame.text,
          options: frame.options,
          timeoutSeconds: frame.timeout_seconds,
          allowsText: frame.options.some((o) => o.id === CLARIFY_OTHER),
          ...(frame.command === undefined ? {} : { command: frame.command }),
          ...(frame.description === undefined ? {} : { description: frame.description }),
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
          ...(frame.option_id === undefined ? {} : { optionId: frame.option_id }),
        });
        break;
      case "media": {
        let download: Download;
        try {
          download = applyMedia(this.downloads.get(frame.id), frame);
        } catch (e) {
          this.emit("invalidFrame", { reason: (e as Error).message, text: text.slice(0, 200) });
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
}
