var __defProp = Object.defineProperty;
var __defNormalProp = (obj2, key, value) => key in obj2 ? __defProp(obj2, key, { enumerable: true, configurable: true, writable: true, value }) : obj2[key] = value;
var __publicField = (obj2, key, value) => __defNormalProp(obj2, typeof key !== "symbol" ? key + "" : key, value);

// <define:HERALD_GADGET_LIMITS>
var define_HERALD_GADGET_LIMITS_default = { max_inbound_frame: 1048576, max_json_depth: 32, max_name: 64, max_board: 64, max_firmware: 32, max_text: 4e3, max_id: 64, handshake_timeout_s: 10, action_timeout_s: 18, ota_frame: 4096, ota_ack_interval: 16384, ota_max_unacked: 65536, ota_min_image: 288, pairing_code_len: 8, pairing_code_alphabet: "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", session_id_len: 12, min_audio_rate: 4e3, max_audio_rate: 48e3, heartbeat_default_s: 20, heartbeat_min_s: 5, heartbeat_max_s: 300, dead_after_heartbeats: 3, audio_frame_ms: 40, connect_timeout_s: 10, reconnect_backoff_s: [1, 2, 4, 8, 15, 30], backoff_reset_after_s: 30, min_press_ms: 350, max_recording_s: 30, prompt_guard_ms: 600, session_new_hold_ms: 2e3, no_reply_s: 180, card_ttl_s: 15, image_ttl_s: 30, notice_ttl_s: 8 };

// src/gadget/proto.ts
var SUBPROTOCOL = "hermes-gadget.v1";
var DEFAULT_PORT = 8765;
var DEFAULT_PATH = "/gadget";
var LIMITS = define_HERALD_GADGET_LIMITS_default;
var KEY_LEN = 32;
var MAX_TEXT = LIMITS.max_text;
var CHANNEL = { audio: 1, image: 2, firmware: 3 };
var TIMING = {
  connectTimeoutMs: LIMITS.connect_timeout_s * 1e3,
  handshakeTimeoutMs: LIMITS.handshake_timeout_s * 1e3,
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
  noticeTtlS: LIMITS.notice_ttl_s
};
var SETUP_CODES = /* @__PURE__ */ new Set(["auth_failed", "bad_token", "protocol"]);
function toHex(bytes) {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}
var B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] ?? 0;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    const n = a << 16 | (b ?? 0) << 8 | (c ?? 0);
    s += B64[n >> 18 & 63] + B64[n >> 12 & 63];
    s += b === void 0 ? "=" : B64[n >> 6 & 63];
    s += c === void 0 ? "=" : B64[n & 63];
  }
  return s;
}
function fromBase64(text) {
  if (text.length % 4 !== 0) throw new Error("base64 length");
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const body = text.slice(0, text.length - pad);
  const out = new Uint8Array(text.length / 4 * 3 - pad);
  let bits = 0;
  let acc = 0;
  let at = 0;
  for (const ch of body) {
    const v = B64.indexOf(ch);
    if (v < 0) throw new Error("base64 character");
    acc = acc << 6 | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = acc >> bits & 255;
    }
  }
  if ((acc & (1 << bits) - 1) !== 0) throw new Error("base64 trailing bits");
  return out;
}
function subtle() {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error("WebCrypto is not available: open this page from localhost or over https");
  return s;
}
function newKey() {
  return globalThis.crypto.getRandomValues(new Uint8Array(KEY_LEN));
}
async function deviceIdOf(key) {
  const digest = new Uint8Array(await subtle().digest("SHA-256", new Uint8Array(key)));
  return `hg-${toHex(digest).slice(0, 16)}`;
}
async function hmac(key, message) {
  const k = await subtle().importKey("raw", new Uint8Array(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", k, new TextEncoder().encode(message)));
}
async function authMac(key, deviceId, nonce) {
  return toBase64(await hmac(key, `hermes-gadget/v1|${deviceId}|${nonce}`));
}
function encodeFrame(channel, stream, seq, payload) {
  const out = new Uint8Array(4 + payload.length);
  out[0] = channel;
  out[1] = stream & 255;
  out[2] = seq & 255;
  out[3] = seq >> 8 & 255;
  out.set(payload, 4);
  return out;
}
function decodeFrame(bytes) {
  if (bytes.length < 4) return null;
  const channel = bytes[0];
  if (channel !== CHANNEL.audio && channel !== CHANNEL.image && channel !== CHANNEL.firmware) return null;
  return {
    channel,
    stream: bytes[1],
    seq: bytes[2] | bytes[3] << 8,
    payload: bytes.subarray(4)
  };
}
function decodeMessage(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const type = value["type"];
  return typeof type === "string" ? value : null;
}
function str(m, key) {
  const v = m[key];
  return typeof v === "string" ? v : void 0;
}
function num(m, key) {
  const v = m[key];
  return typeof v === "number" && Number.isFinite(v) ? v : void 0;
}
function obj(m, key) {
  const v = m[key];
  return typeof v === "object" && v !== null && !Array.isArray(v) ? v : void 0;
}
function encodeMessage(m) {
  return JSON.stringify(m);
}
function rgb565ToRgba(data, width, height) {
  const out = new Uint8ClampedArray(new ArrayBuffer(width * height * 4));
  for (let i = 0; i < width * height; i++) {
    const v = (data[2 * i] ?? 0) | (data[2 * i + 1] ?? 0) << 8;
    const r = v >> 11 & 31;
    const g = v >> 5 & 63;
    const b = v & 31;
    out[4 * i] = r << 3 | r >> 2;
    out[4 * i + 1] = g << 2 | g >> 4;
    out[4 * i + 2] = b << 3 | b >> 2;
    out[4 * i + 3] = 255;
  }
  return out;
}
function pcm16ToFloat(bytes) {
  const out = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) {
    const v = (bytes[2 * i] | bytes[2 * i + 1] << 8) << 16 >> 16;
    out[i] = v / 32768;
  }
  return out;
}
var Resampler = class {
  constructor(from, to) {
    this.from = from;
    this.to = to;
    __publicField(this, "step");
    /** Input position (in input samples, relative to the next block) of the next output. */
    __publicField(this, "pos", 0);
    __publicField(this, "carry", []);
    this.step = from / to;
  }
  push(block) {
    const input = this.carry.length ? [...this.carry, ...Array.from(block)] : Array.from(block);
    const out = [];
    const step = this.step;
    for (; ; ) {
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
};

// src/gadget/audio.ts
var PREBUFFER_MS = 200;
var CAPACITY_MS = 1e3;
var MIC_LINGER_MS = 3e4;
var shared;
function audioContext(create = true) {
  if (!create) return shared;
  shared ?? (shared = new AudioContext({ latencyHint: "interactive" }));
  if (shared.state === "suspended") void shared.resume();
  return shared;
}
var MIC_WORKLET = "mic-worklet.js";
var micWorklet;
var Microphone = class {
  constructor(rate, onSamples, onError) {
    this.rate = rate;
    this.onSamples = onSamples;
    this.onError = onError;
    __publicField(this, "media");
    __publicField(this, "source");
    __publicField(this, "node");
    __publicField(this, "resampler");
    __publicField(this, "live", false);
    __publicField(this, "opening");
    __publicField(this, "closeTimer");
    /** Peak level of the last block, 0..1, for the meter. */
    __publicField(this, "level", 0);
    __publicField(this, "error");
  }
  /** Starts delivering samples (opening the device first when needed). */
  start() {
    this.live = true;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.closeTimer = void 0;
    if (!this.media && !this.opening) {
      this.opening = this.open().catch((e) => {
        this.error = e instanceof Error ? e.message : String(e);
        this.live = false;
        this.onError(this.error);
      });
      void this.opening.finally(() => this.opening = void 0);
    }
  }
  stop() {
    this.live = false;
    this.level = 0;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.closeTimer = setTimeout(() => this.close(), MIC_LINGER_MS);
  }
  async open() {
    if (!navigator.mediaDevices?.getUserMedia) throw new Error("this browser gives no microphone here (open the page from localhost or over https)");
    const ctx = audioContext();
    micWorklet ?? (micWorklet = ctx.audioWorklet.addModule(MIC_WORKLET).catch((err) => {
      micWorklet = void 0;
      throw err;
    }));
    const [media] = await Promise.all([
      navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true }
      }),
      micWorklet
    ]);
    this.error = void 0;
    this.media = media;
    this.source = ctx.createMediaStreamSource(media);
    this.node = new AudioWorkletNode(ctx, "herald-mic", { numberOfInputs: 1, numberOfOutputs: 1 });
    this.resampler = new Resampler(ctx.sampleRate, this.rate);
    this.node.port.onmessage = (e) => this.block(e.data);
    this.source.connect(this.node);
    this.node.connect(ctx.destination);
    if (!this.live) this.stop();
  }
  block(block) {
    if (!this.live || !this.resampler) return;
    const out = this.resampler.push(block);
    let peak = 0;
    const pcm = new Int16Array(out.length);
    for (let i = 0; i < out.length; i++) {
      const s = Math.max(-1, Math.min(1, out[i]));
      peak = Math.max(peak, Math.abs(s));
      pcm[i] = Math.round(s < 0 ? s * 32768 : s * 32767);
    }
    this.level = peak;
    if (pcm.length) this.onSamples(pcm);
  }
  close() {
    this.closeTimer = void 0;
    if (this.live) return;
    this.source?.disconnect();
    this.node?.disconnect();
    if (this.node) this.node.port.onmessage = null;
    for (const track of this.media?.getTracks() ?? []) track.stop();
    this.media = void 0;
    this.source = void 0;
    this.node = void 0;
  }
};
var Speaker = class {
  constructor(onChange) {
    this.onChange = onChange;
    __publicField(this, "stream");
    __publicField(this, "gain");
    __publicField(this, "volumeNow", 0.8);
    __publicField(this, "stats", { streams: 0, frames: 0, scheduledMs: 0, gaps: 0, underruns: 0, overflowMs: 0 });
  }
  get active() {
    return this.stream !== void 0;
  }
  /** "idle", "buffering" or "playing". */
  get state() {
    return !this.stream ? "idle" : this.stream.playing ? "playing" : "buffering";
  }
  get volume() {
    return this.volumeNow;
  }
  set volume(v) {
    this.volumeNow = Math.max(0, Math.min(1, v));
    if (this.gain) this.gain.gain.value = this.volumeNow;
  }
  output() {
    const ctx = audioContext();
    if (!this.gain) {
      this.gain = ctx.createGain();
      this.gain.gain.value = this.volumeNow;
      this.gain.connect(ctx.destination);
    }
    return { ctx, gain: this.gain };
  }
  start(id, rate) {
    this.silence();
    this.stream = { id, rate: Math.max(3e3, Math.min(768e3, rate)), queue: [], queued: 0, nextSeq: void 0, ended: false, playing: false, nextTime: 0, sources: /* @__PURE__ */ new Set() };
    this.stats.streams++;
    this.onChange();
  }
  push(id, seq, pcm) {
    const s = this.stream;
    if (!s || s.id !== id || s.ended) return;
    this.stats.frames++;
    if (s.nextSeq !== void 0 && seq !== s.nextSeq) this.stats.gaps++;
    s.nextSeq = seq + 1 & 65535;
    const samples = pcm16ToFloat(pcm);
    const { ctx } = this.output();
    const ahead = s.queued / s.rate + (s.playing ? Math.max(0, s.nextTime - ctx.currentTime) : 0);
    if ((ahead + samples.length / s.rate) * 1e3 > CAPACITY_MS) {
      this.stats.overflowMs += samples.length * 1e3 / s.rate;
      return;
    }
    s.queue.push(samples);
    s.queued += samples.length;
    this.pump();
  }
  end(id) {
    const s = this.stream;
    if (!s || s.id !== id) return;
    s.ended = true;
    this.pump();
  }
  abort(id) {
    if (!this.stream || this.stream.id !== id) return false;
    this.stop();
    return true;
  }
  stop() {
    const was = this.stream !== void 0;
    this.silence();
    if (was) this.onChange();
    return was;
  }
  silence() {
    const s = this.stream;
    this.stream = void 0;
    for (const src of s?.sources ?? []) {
      src.onended = null;
      try {
        src.stop();
      } catch {
      }
    }
  }
  pump() {
    const s = this.stream;
    if (!s) return;
    const { ctx, gain } = this.output();
    if (s.playing && s.nextTime < ctx.currentTime && !s.ended) {
      s.playing = false;
      this.stats.underruns++;
    }
    if (!s.playing) {
      const ready = s.queued >= s.rate * PREBUFFER_MS / 1e3 || s.ended && s.queued > 0;
      if (!ready) {
        if (s.ended && s.sources.size === 0) this.finish(s);
        return;
      }
      s.playing = true;
      s.nextTime = ctx.currentTime + 0.03;
      this.onChange();
    }
    for (const chunk of s.queue) {
      const buffer = ctx.createBuffer(1, chunk.length, s.rate);
      buffer.copyToChannel(chunk, 0);
      const src = ctx.createBufferSource();
      src.buffer = buffer;
      src.connect(gain);
      src.onended = () => {
        s.sources.delete(src);
        if (s.ended && s.queued === 0 && s.sources.size === 0) this.finish(s);
      };
      src.start(s.nextTime);
      s.sources.add(src);
      s.nextTime += buffer.duration;
      this.stats.scheduledMs += buffer.duration * 1e3;
    }
    s.queue = [];
    s.queued = 0;
    if (s.ended && s.sources.size === 0) this.finish(s);
  }
  finish(s) {
    if (this.stream !== s) return;
    this.stream = void 0;
    this.onChange();
  }
};

// src/gadget/pager.ts
function wrap(text, cols) {
  const lines = [];
  for (const paragraph of text.split("\n")) {
    let line = "";
    for (const word of paragraph.split(/[ \t]+/)) {
      if (!word) continue;
      let rest = [...word];
      while (rest.length > cols) {
        if (line) {
          lines.push(line);
          line = "";
        }
        lines.push(rest.slice(0, cols).join(""));
        rest = rest.slice(cols);
      }
      const piece = rest.join("");
      if (!piece) continue;
      if (!line) line = piece;
      else if ([...line].length + 1 + rest.length <= cols) line += ` ${piece}`;
      else {
        lines.push(line);
        line = piece;
      }
    }
    lines.push(line);
  }
  while (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines.length === 1 && lines[0] === "" ? [] : lines;
}
var Pager = class {
  constructor(cols, rows) {
    this.cols = cols;
    this.rows = rows;
    __publicField(this, "lines", []);
    __publicField(this, "pageNow", 0);
  }
  /** New text, from its first page. */
  show(text) {
    this.lines = wrap(text, this.cols);
    this.pageNow = 0;
  }
  /** The same text grown (a streaming reply): the page shown stays where it is. */
  update(text) {
    this.lines = wrap(text, this.cols);
    this.pageNow = Math.min(this.pageNow, this.pages - 1);
  }
  clear() {
    this.show("");
  }
  get text() {
    return this.lines.join("\n");
  }
  get pages() {
    return Math.max(1, Math.ceil(this.lines.length / this.rows));
  }
  get page() {
    return this.pageNow;
  }
  current() {
    return this.lines.slice(this.pageNow * this.rows, (this.pageNow + 1) * this.rows);
  }
  /** Moves one page; false when there is none that way. */
  turn(down) {
    const next = this.pageNow + (down ? 1 : -1);
    if (next < 0 || next >= this.pages) return false;
    this.pageNow = next;
    return true;
  }
};

// src/gadget/device.ts
var BOARD = {
  board: "browser-tab",
  firmware: "0.1.0",
  width: 320,
  height: 240,
  textCols: 25,
  textRows: 8,
  image: { width: 320, height: 196 },
  micRate: 16e3,
  speakerRate: 16e3
};
var LED_ACTION = "led.set";
var VOLUME_ACTION = "speaker.volume";
var BRIGHTNESS_ACTION = "screen.brightness";
var MAX_COLOR = 32;
var PROMPT_HINT = "TALK yes, CANCEL no";
function deadline(now, ttlS, defaultS) {
  const s = ttlS ?? defaultS;
  return s === 0 ? void 0 : now + s * 1e3;
}
function due(at, now) {
  return at !== void 0 && now >= at;
}
function percent(args) {
  const p = args?.["percent"];
  return typeof p === "number" && Number.isInteger(p) && p >= 0 && p <= 100 ? p : void 0;
}
var GadgetDevice = class {
  constructor(io) {
    this.io = io;
    __publicField(this, "phase", "boot");
    __publicField(this, "paired", false);
    __publicField(this, "pairing");
    __publicField(this, "setupNeeded");
    __publicField(this, "session", "");
    __publicField(this, "led");
    __publicField(this, "retryAt", 0);
    __publicField(this, "deviceId", "");
    /** Counters the page shows. */
    __publicField(this, "stats", { framesSent: 0, framesReceived: 0, gaps: 0, refusedImages: 0 });
    // the conversation
    __publicField(this, "awaiting", false);
    __publicField(this, "replying", false);
    __publicField(this, "streaming", false);
    __publicField(this, "turn");
    __publicField(this, "statusText", "");
    __publicField(this, "noReplyAt");
    __publicField(this, "chat", new Pager(BOARD.textCols, BOARD.textRows));
    __publicField(this, "recording");
    __publicField(this, "talkIgnored", false);
    __publicField(this, "cancelDownAt");
    __publicField(this, "cancelIgnored", false);
    __publicField(this, "prompt");
    __publicField(this, "card");
    __publicField(this, "image");
    __publicField(this, "imageOnTop", false);
    __publicField(this, "incoming");
    __publicField(this, "notice");
    __publicField(this, "nextId", 0);
    __publicField(this, "nextStream", 0);
    __publicField(this, "volume", 80);
  }
  /** The actions sent in `hello`: the built-in two, then the LED. */
  manifest() {
    const percentParams = {
      type: "object",
      properties: { percent: { type: "integer", minimum: 0, maximum: 100 } },
      required: ["percent"]
    };
    return [
      { name: VOLUME_ACTION, description: "Set the speaker volume, in percent.", params: percentParams },
      { name: BRIGHTNESS_ACTION, description: "Set the screen brightness, in percent.", params: percentParams },
      {
        name: LED_ACTION,
        description: "Set the colour of the status LED (a CSS colour name such as red, green or blue, or off).",
        params: { type: "object", properties: { color: { type: "string" } }, required: ["color"] }
      }
    ];
  }
  /** The `hello` for the next connection. */
  hello(name, token) {
    const hello = {
      type: "hello",
      proto: 1,
      device_id: this.deviceId,
      name,
      board: BOARD.board,
      firmware: BOARD.firmware,
      caps: {
        display: {
          width: BOARD.width,
          height: BOARD.height,
          color: true,
          charset: "utf8",
          text_cols: BOARD.textCols,
          text_rows: BOARD.textRows,
          image: { width: BOARD.image.width, height: BOARD.image.height, format: "rgb565" }
        },
        mic: { rate: BOARD.micRate, format: "pcm16" },
        speaker: { rate: BOARD.speakerRate, format: "pcm16" },
        inputs: ["talk", "cancel", "up", "down"],
        talk_mode: "hold"
      },
      actions: this.manifest()
    };
    if (token) hello["token"] = token;
    return hello;
  }
  // ---- the link ----
  onPhase(phase, offline) {
    const wasOnline = this.phase === "online";
    this.phase = phase;
    if (offline) {
      this.retryAt = offline.retryAt;
      if (offline.setup) this.setupNeeded = offline.setup;
    }
    if (phase !== "online" && wasOnline) this.dropSession();
    this.io.changed();
  }
  onWelcome(w) {
    this.paired = w.paired;
    this.session = w.session;
    this.setupNeeded = void 0;
    this.io.changed();
  }
  onMessage(m, now = Date.now()) {
    switch (m.type) {
      case "pairing":
        this.paired = false;
        this.pairing = { code: str(m, "code") ?? "", command: str(m, "command") ?? "" };
        break;
      case "paired":
        this.paired = true;
        this.pairing = void 0;
        this.showNotice("Paired", void 0, now);
        break;
      case "unpaired":
        this.paired = false;
        break;
      case "turn.start":
        if (!this.awaiting) {
          this.endTurn();
          this.awaiting = true;
        }
        this.turn = str(m, "turn");
        this.noReplyAt = now + TIMING.noReplyS * 1e3;
        this.card = void 0;
        break;
      case "transcript":
        if (!this.replying) this.chat.show(str(m, "text") ?? "");
        this.progress(now);
        break;
      case "status":
        this.statusText = str(m, "text") ?? "";
        this.progress(now);
        break;
      case "reply.delta":
        this.showReply(str(m, "text") ?? "");
        this.streaming = true;
        this.replying = this.awaiting;
        this.progress(now);
        break;
      case "reply":
        this.onReply(m, now);
        break;
      case "turn.end":
        this.onTurnEnd(m, now);
        break;
      case "notice":
        this.showNotice(str(m, "text") ?? "", num(m, "ttl_s"), now);
        break;
      case "error":
        this.showNotice(str(m, "message") ?? str(m, "code") ?? "error", void 0, now);
        break;
      case "prompt":
        this.showPrompt(m, now);
        break;
      case "prompt.close":
        if (this.prompt && this.prompt.id === str(m, "id")) this.prompt = void 0;
        break;
      case "display":
        this.card = {
          title: str(m, "title") ?? "",
          body: this.paged(str(m, "body") ?? "", 0),
          until: deadline(now, num(m, "ttl_s"), TIMING.cardTtlS)
        };
        this.imageOnTop = false;
        break;
      case "image.start":
        this.imageStart(m);
        return;
      case "image.end":
        this.imageEnd(num(m, "stream") ?? -1, now);
        break;
      case "audio.start":
        if (str(m, "format") === "pcm16") this.io.speaker.start(num(m, "stream") ?? 0, num(m, "rate") ?? BOARD.speakerRate);
        break;
      case "audio.end":
        this.io.speaker.end(num(m, "stream") ?? -1);
        return;
      case "audio.abort":
        this.io.speaker.abort(num(m, "stream") ?? -1);
        break;
      case "action":
        this.onAction(m);
        break;
      case "ota.offer":
        this.io.send({ type: "ota.error", code: "unsupported", message: "this gadget installs no firmware" });
        return;
      default:
        return;
    }
    this.io.changed();
  }
  onBinary(frame) {
    this.stats.framesReceived++;
    if (frame.channel === CHANNEL.audio) {
      this.io.speaker.push(frame.stream, frame.seq, frame.payload);
    } else if (frame.channel === CHANNEL.image) {
      const img = this.incoming;
      if (img && img.stream === frame.stream) {
        const room = img.data.length - img.filled;
        const take = frame.payload.subarray(0, Math.min(room, frame.payload.length));
        img.data.set(take, img.filled);
        img.filled += take.length;
      }
    }
  }
  // ---- inputs ----
  sendText(text, now = Date.now()) {
    if (this.phase !== "online") return "not connected";
    if (!text.trim()) return "the message is empty";
    if ([...text].length > MAX_TEXT) return `the message is longer than ${MAX_TEXT} characters`;
    this.cancelDownAt = void 0;
    this.io.send({ type: "text", id: this.id("t"), text });
    this.request(text, now);
    this.io.changed();
    return void 0;
  }
  talkDown(now = Date.now()) {
    this.talkIgnored = this.phase !== "online" || this.guarded(now);
    if (this.talkIgnored) return;
    if (this.prompt) {
      this.answer("yes");
      this.talkIgnored = true;
      return;
    }
    this.startRecording(now);
  }
  talkUp(now = Date.now()) {
    if (this.talkIgnored) {
      this.talkIgnored = false;
      return;
    }
    this.stopRecording(now);
  }
  cancelDown(now = Date.now()) {
    if (this.cancelDownAt !== void 0) return;
    this.cancelIgnored = this.phase !== "online" || this.guarded(now);
    this.cancelDownAt = now;
    if (!this.cancelIgnored) this.io.changed();
  }
  cancelUp(now = Date.now()) {
    const at = this.cancelDownAt;
    this.cancelDownAt = void 0;
    if (at === void 0 || this.cancelIgnored) return;
    this.shortCancel(now);
    this.io.changed();
  }
  page(down) {
    const pager = this.prompt?.text ?? (this.topCard() ? this.card?.body : void 0) ?? (this.onChatScreen() ? this.chat : void 0);
    if (pager?.turn(down)) this.io.changed();
  }
  /** The on-screen Yes and No: the same as TALK and CANCEL on a question. */
  answerButton(yes, now = Date.now()) {
    if (!this.prompt || this.guarded(now)) return;
    this.answer(yes ? "yes" : "no");
    this.io.changed();
  }
  /** 16 kHz samples from the microphone while recording, cut into 40 ms frames. */
  micSamples(samples) {
    const r = this.recording;
    if (!r) return;
    const max = BOARD.micRate * TIMING.maxRecordingS;
    const frameSamples = BOARD.micRate * TIMING.audioFrameMs / 1e3;
    for (const s of samples) {
      if (r.samples >= max) break;
      r.pending.push(s);
      r.samples++;
      if (r.pending.length === frameSamples) this.flushFrame(r);
    }
  }
  /** The microphone could not open: the utterance is dropped, and the screen says why. */
  micFailed(why, now = Date.now()) {
    const r = this.recording;
    if (r) {
      this.recording = void 0;
      this.talkIgnored = true;
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "no microphone" });
    }
    this.showNotice(`No microphone: ${why}`, void 0, now);
    this.io.changed();
  }
  /** The clock: ttl, the question's guard, the CANCEL hold, the recording cap, no reply. */
  tick(now = Date.now()) {
    let changed = false;
    if (this.recording && now - this.recording.startedAt >= TIMING.maxRecordingS * 1e3) {
      this.stopRecording(now);
    }
    if (this.cancelDownAt !== void 0 && !this.cancelIgnored) {
      if (now - this.cancelDownAt >= TIMING.sessionNewHoldMs) {
        this.cancelIgnored = true;
        this.newSession(now);
      }
      changed = true;
    }
    if (this.prompt && !this.prompt.armedDrawn) {
      changed = true;
      this.prompt.armedDrawn = !this.guarded(now);
    }
    if (due(this.prompt?.until, now)) {
      this.prompt = void 0;
      changed = true;
    }
    if (due(this.card?.until, now)) {
      this.card = void 0;
      changed = true;
    }
    if (due(this.image?.until, now)) {
      this.image = void 0;
      changed = true;
    }
    if (due(this.notice?.until, now)) {
      this.notice = void 0;
      changed = true;
    }
    if (due(this.noReplyAt, now)) {
      this.endTurn();
      this.chat.show("No reply");
      changed = true;
    }
    if (this.phase === "offline" || this.recording) changed = true;
    if (changed) this.io.changed();
  }
  /** The speaker finished or started: the mode (and so the screen) may have changed. */
  speakerChanged() {
    this.io.changed();
  }
  // ---- the screen ----
  screen() {
    switch (this.phase) {
      case "boot":
      case "connecting":
      case "handshake":
        return this.setupNeeded ? "setup" : "connecting";
      case "offline":
        return this.setupNeeded ? "setup" : "offline";
      case "online":
        break;
    }
    if (this.prompt) return "prompt";
    if (this.recording) return "listening";
    const top = this.topCard() ? "card" : this.image ? "image" : void 0;
    if (top) return top;
    if (!this.paired) return "pairing";
    if (this.io.speaker.active || this.replying) return "responding";
    if (this.awaiting) return "thinking";
    return "ready";
  }
  view(now = Date.now()) {
    const screen = this.screen();
    const fixed = (text) => wrap(text, BOARD.textCols).slice(0, BOARD.textRows);
    const view = { screen, status: "", lines: [], page: 0, pages: 1 };
    if (this.notice) view.notice = this.notice.text;
    let pager;
    switch (screen) {
      case "offline": {
        const s = Math.max(0, Math.ceil((this.retryAt - now) / 1e3));
        view.status = "Offline";
        view.lines = fixed(`No connection. Trying again in ${s} s.`);
        break;
      }
      case "connecting":
        view.status = "Connecting";
        view.lines = fixed("Connecting to the server...");
        break;
      case "setup":
        view.status = "Setup needed";
        view.lines = fixed(this.setupText());
        break;
      case "pairing":
        view.status = "Pairing";
        if (this.pairing) {
          view.code = this.pairing.code;
          view.lines = fixed(`Pairing code:



Approve it on the host:
${this.pairing.command}`);
        } else {
          view.lines = fixed("Waiting for approval");
        }
        break;
      case "prompt":
        view.status = "Question";
        if (this.prompt) {
          view.title = this.prompt.title;
          pager = this.prompt.text;
          view.armed = now - this.prompt.shownAt >= TIMING.promptGuardMs;
        }
        break;
      case "card":
        view.status = "Card";
        if (this.card) {
          view.title = this.card.title;
          pager = this.card.body;
        }
        break;
      case "image":
        view.status = "Image";
        if (this.image) view.image = this.image.image;
        break;
      default: {
        const label = { ready: "Ready", listening: "Listening", thinking: "Thinking", responding: "Responding" }[screen];
        const working = screen === "thinking" || screen === "responding";
        view.status = working && this.statusText ? this.statusText : label;
        pager = this.chat;
      }
    }
    if (pager) {
      view.lines = pager.current();
      view.page = pager.page;
      view.pages = pager.pages;
    }
    if (screen === "prompt") view.lines.push(PROMPT_HINT);
    if (this.cancelDownAt !== void 0 && !this.cancelIgnored) {
      const left = Math.max(1, Math.ceil((TIMING.sessionNewHoldMs - (now - this.cancelDownAt)) / 1e3));
      view.status = `New chat in ${left} s`;
    }
    return view;
  }
  // ---- inside ----
  id(prefix) {
    this.nextId++;
    return `${prefix}${this.nextId}`;
  }
  guarded(now) {
    return this.prompt !== void 0 && now - this.prompt.shownAt < TIMING.promptGuardMs;
  }
  onChatScreen() {
    return ["ready", "listening", "thinking", "responding"].includes(this.screen());
  }
  topCard() {
    return this.card !== void 0 && !(this.image !== void 0 && this.imageOnTop);
  }
  paged(text, reserved) {
    const pager = new Pager(BOARD.textCols, Math.max(1, BOARD.textRows - reserved));
    pager.show(text);
    return pager;
  }
  setupText() {
    switch (this.setupNeeded) {
      case "bad_token":
        return "The server refused the access token. Set the right token in Settings.";
      case "protocol":
        return "The server does not speak this protocol.";
      default:
        return `The server refused this device. Ask the owner to run: herald forget ${this.deviceId}, or reset this gadget in Settings.`;
    }
  }
  request(shown, now) {
    this.endTurn();
    this.awaiting = true;
    this.noReplyAt = now + TIMING.noReplyS * 1e3;
    this.chat.show(shown);
  }
  endTurn() {
    this.awaiting = false;
    this.replying = false;
    this.streaming = false;
    this.turn = void 0;
    this.statusText = "";
    this.noReplyAt = void 0;
  }
  progress(now) {
    if (this.noReplyAt !== void 0) this.noReplyAt = now + TIMING.noReplyS * 1e3;
  }
  showReply(text) {
    if (this.streaming) this.chat.update(text);
    else this.chat.show(text);
  }
  onReply(m, now) {
    const text = str(m, "text") ?? "";
    if (m["interim"] === true) {
      this.chat.show(text);
      this.progress(now);
      return;
    }
    this.showReply(text);
    this.streaming = false;
    if (this.awaiting && this.turn !== void 0) {
      this.replying = true;
      this.noReplyAt = void 0;
    } else {
      this.endTurn();
    }
  }
  onTurnEnd(m, now) {
    const turn = str(m, "turn");
    if (this.turn !== void 0 && turn !== this.turn || !this.awaiting) return;
    this.endTurn();
    const outcome = str(m, "outcome");
    if (outcome === "failure") this.showNotice("Something went wrong", void 0, now);
    if (outcome === "cancelled") this.showNotice("Cancelled", void 0, now);
  }
  showNotice(text, ttlS, now) {
    this.notice = { text, until: deadline(now, ttlS, TIMING.noticeTtlS) };
  }
  showPrompt(m, now) {
    const ttl = num(m, "ttl_s");
    this.prompt = {
      id: str(m, "id") ?? "",
      title: str(m, "title") ?? "",
      // The hint takes the last row.
      text: this.paged(str(m, "text") ?? "", 1),
      shownAt: now,
      armedDrawn: false,
      until: ttl !== void 0 && ttl > 0 ? now + ttl * 1e3 : void 0
    };
  }
  answer(answer) {
    const prompt = this.prompt;
    if (!prompt) return;
    this.prompt = void 0;
    this.io.send({ type: "prompt.reply", id: prompt.id, answer });
    this.io.changed();
  }
  imageStart(m) {
    const stream = num(m, "stream") ?? -1;
    const width = num(m, "width") ?? 0;
    const height = num(m, "height") ?? 0;
    const box = BOARD.image;
    const fits = str(m, "format") === "rgb565" && Number.isInteger(width) && Number.isInteger(height) && width >= 1 && height >= 1 && width <= box.width && height <= box.height;
    this.incoming = void 0;
    if (!fits) {
      this.stats.refusedImages++;
      return;
    }
    this.incoming = { stream, width, height, ttlS: num(m, "ttl_s"), data: new Uint8Array(width * height * 2), filled: 0 };
  }
  imageEnd(stream, now) {
    const img = this.incoming;
    if (!img || img.stream !== stream) return;
    this.incoming = void 0;
    this.image = {
      image: { width: img.width, height: img.height, rgba: rgb565ToRgba(img.data, img.width, img.height) },
      until: deadline(now, img.ttlS, TIMING.imageTtlS)
    };
    this.imageOnTop = true;
  }
  onAction(m) {
    const id = str(m, "id") ?? "";
    const name = str(m, "name") ?? "";
    const args = obj(m, "args");
    let result;
    if (name === LED_ACTION) {
      const color = args?.["color"];
      if (typeof color !== "string") result = { ok: false, error: "color is required" };
      else if (!color.trim() || [...color].length > MAX_COLOR) result = { ok: false, error: `color must be 1 to ${MAX_COLOR} characters` };
      else if (!validColor(color.trim())) result = { ok: false, error: `${color} is not a colour this LED knows` };
      else {
        this.led = color.trim().toLowerCase() === "off" ? void 0 : color.trim();
        result = { ok: true, result: { led: color.trim() } };
      }
    } else if (name === VOLUME_ACTION || name === BRIGHTNESS_ACTION) {
      const p = percent(args);
      if (p === void 0) result = { ok: false, error: "percent must be an integer from 0 to 100" };
      else {
        if (name === VOLUME_ACTION) {
          this.volume = p;
          this.io.speaker.volume = p / 100;
        } else {
          this.io.brightness(p);
        }
        result = { ok: true, result: { percent: p } };
      }
    } else {
      result = { ok: false, error: `unknown action ${name}` };
    }
    this.io.send(result.ok ? { type: "action.result", id, ok: true, result: result.result } : { type: "action.result", id, ok: false, error: result.error });
  }
  get speakerVolume() {
    return this.volume;
  }
  startRecording(now) {
    if (this.recording) return;
    if (!this.paired) {
      this.showNotice("Pair this device first", void 0, now);
      this.io.changed();
      return;
    }
    this.io.speaker.stop();
    this.nextStream = this.nextStream + 1 & 255;
    const r = { id: this.id("a"), stream: this.nextStream, startedAt: now, seq: 0, pending: [], samples: 0 };
    this.recording = r;
    this.io.send({ type: "audio.start", id: r.id, stream: r.stream, rate: BOARD.micRate, format: "pcm16", mode: "hold" });
    this.io.startMic();
    this.io.changed();
  }
  stopRecording(now) {
    const r = this.recording;
    if (!r) return;
    this.recording = void 0;
    this.io.stopMic();
    if (now - r.startedAt < TIMING.minPressMs) {
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "too short" });
    } else {
      if (r.pending.length) this.flushFrame(r);
      this.io.send({ type: "audio.end", id: r.id, stream: r.stream, duration_ms: Math.floor(r.samples * 1e3 / BOARD.micRate) });
      this.request("", now);
    }
    this.io.changed();
  }
  flushFrame(r) {
    const pcm = new Uint8Array(r.pending.length * 2);
    r.pending.forEach((s, i) => {
      pcm[2 * i] = s & 255;
      pcm[2 * i + 1] = s >> 8 & 255;
    });
    r.pending = [];
    if (this.io.sendBinary(encodeFrame(CHANNEL.audio, r.stream, r.seq, pcm))) this.stats.framesSent++;
    r.seq = r.seq + 1 & 65535;
  }
  /** CANCEL released before the hold: the first of these that applies. */
  shortCancel(now) {
    if (this.prompt) {
      this.answer("no");
      return;
    }
    const r = this.recording;
    if (r) {
      this.recording = void 0;
      this.io.stopMic();
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "cancelled" });
      return;
    }
    if (this.topCard()) {
      this.card = void 0;
      return;
    }
    if (this.image) {
      this.image = void 0;
      return;
    }
    if (this.awaiting || this.io.speaker.active) {
      this.io.send({ type: "cancel" });
      this.io.speaker.stop();
      this.endTurn();
      this.showNotice("Cancelled", void 0, now);
      return;
    }
    this.notice = void 0;
  }
  /** CANCEL held 2 s: a fresh conversation. */
  newSession(now) {
    if (this.phase !== "online") return;
    const r = this.recording;
    if (r) {
      this.recording = void 0;
      this.io.stopMic();
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "cancelled" });
    }
    this.io.speaker.stop();
    this.io.send({ type: "session.new" });
    this.endTurn();
    this.chat.clear();
    this.showNotice("New conversation", void 0, now);
  }
  /** Everything that lived on the connection that ended. */
  dropSession() {
    if (this.recording) {
      this.recording = void 0;
      this.io.stopMic();
    }
    this.io.speaker.stop();
    this.endTurn();
    this.prompt = void 0;
    this.incoming = void 0;
    this.pairing = void 0;
    this.cancelDownAt = void 0;
  }
};
function validColor(color) {
  if (color.toLowerCase() === "off") return true;
  const css = globalThis.CSS;
  return css ? css.supports("color", color) : /^[a-z]+$|^#[0-9a-f]{3,8}$/i.test(color);
}

// src/gadget/link.ts
var GadgetLink = class {
  constructor(options) {
    this.options = options;
    __publicField(this, "ws");
    __publicField(this, "phaseNow", "offline");
    __publicField(this, "backoffStep", 0);
    __publicField(this, "onlineSince");
    __publicField(this, "refused");
    __publicField(this, "heartbeatMs", TIMING.heartbeatDefaultS * 1e3);
    __publicField(this, "lastInbound", 0);
    __publicField(this, "timers", /* @__PURE__ */ new Set());
    __publicField(this, "phaseTimer");
    __publicField(this, "pingTimer");
    __publicField(this, "stopped", true);
  }
  get phase() {
    return this.phaseNow;
  }
  /** Connects now, and keeps reconnecting until `stop`. */
  start() {
    this.stopped = false;
    this.backoffStep = 0;
    this.connect();
  }
  /** Closes the connection and makes no more attempts. */
  stop() {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.teardown(1e3, "stopped");
    this.setPhase("offline", { retryAt: 0, reason: "stopped" });
  }
  /** Sends a message of the established session; false when not online. */
  send(message) {
    if (this.phaseNow !== "online") return false;
    return this.sendNow(message);
  }
  sendBinary(bytes) {
    const ws = this.ws;
    if (this.phaseNow !== "online" || !ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(bytes);
    this.options.listener.trace?.("out", `binary ch${bytes[0]} stream ${bytes[1]} seq ${(bytes[2] ?? 0) | (bytes[3] ?? 0) << 8}`);
    return true;
  }
  sendNow(message) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(encodeMessage(message));
    this.options.listener.trace?.("out", redact(message));
    return true;
  }
  later(ms, f) {
    const t = setTimeout(() => {
      this.timers.delete(t);
      f();
    }, ms);
    this.timers.add(t);
    return t;
  }
  setPhase(phase, offline) {
    this.phaseNow = phase;
    this.options.listener.phase(phase, offline);
  }
  connect() {
    if (this.stopped) return;
    this.refused = void 0;
    this.setPhase("connecting");
    let ws;
    try {
      ws = new WebSocket(this.options.url, SUBPROTOCOL);
    } catch (e) {
      this.goOffline(`cannot connect: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.armPhaseTimer(TIMING.connectTimeoutMs, "connect timeout");
    ws.onopen = () => {
      if (ws !== this.ws) return;
      this.setPhase("handshake");
      this.armPhaseTimer(TIMING.handshakeTimeoutMs, "handshake timeout");
      this.lastInbound = Date.now();
      this.sendNow(this.options.hello());
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws) return;
      this.lastInbound = Date.now();
      if (typeof event.data === "string") void this.onText(event.data);
      else if (event.data instanceof ArrayBuffer) this.onBinary(new Uint8Array(event.data));
    };
    ws.onclose = (event) => {
      if (ws !== this.ws) return;
      this.ws = void 0;
      const code = this.refused ?? (SETUP_CODES.has(event.reason) || event.reason === "busy" ? event.reason : void 0);
      this.goOffline(event.reason || `closed (${event.code})`, code);
    };
    ws.onerror = () => {
    };
  }
  armPhaseTimer(ms, reason) {
    if (this.phaseTimer) clearTimeout(this.phaseTimer);
    this.phaseTimer = this.later(ms, () => {
      this.phaseTimer = void 0;
      this.teardown(1e3, reason);
      this.goOffline(reason);
    });
  }
  async onText(text) {
    const m = decodeMessage(text);
    const listener = this.options.listener;
    if (!m) {
      listener.trace?.("in", "(a frame that is not a message)");
      return;
    }
    listener.trace?.("in", text.length > 300 ? `${text.slice(0, 300)}…` : text);
    switch (m.type) {
      case "ping":
        this.sendNow(m["ts"] === void 0 ? { type: "pong" } : { type: "pong", ts: m["ts"] });
        return;
      case "pong":
        return;
      case "error":
        this.refused = str(m, "code");
        if (this.phaseNow === "online") listener.message(m);
        return;
      case "challenge":
        if (this.phaseNow === "handshake") await this.answerChallenge(m);
        return;
      case "welcome":
        if (this.phaseNow === "handshake") this.onWelcome(m);
        return;
    }
    if (this.phaseNow === "online") listener.message(m);
  }
  async answerChallenge(m) {
    const { key, deviceId } = this.options.identity;
    const nonce = str(m, "nonce") ?? "";
    if (m["enrolled"] === true) {
      this.sendNow({ type: "auth", mac: await authMac(key, deviceId, nonce) });
    } else {
      this.sendNow({ type: "auth", key: toBase64(key) });
    }
  }
  onWelcome(m) {
    if (this.phaseTimer) clearTimeout(this.phaseTimer);
    this.phaseTimer = void 0;
    const heartbeatS = Math.min(TIMING.heartbeatMaxS, Math.max(TIMING.heartbeatMinS, num(m, "heartbeat_s") ?? TIMING.heartbeatDefaultS));
    this.heartbeatMs = heartbeatS * 1e3;
    this.onlineSince = Date.now();
    this.setPhase("online");
    this.options.listener.welcome({ session: str(m, "session") ?? "", paired: m["paired"] === true, heartbeatS });
    this.pingTimer = setInterval(() => {
      if (Date.now() - this.lastInbound > this.heartbeatMs * TIMING.deadAfterHeartbeats) {
        this.teardown(1e3, "heartbeat timeout");
        this.goOffline("heartbeat timeout");
      } else {
        this.sendNow({ type: "ping", ts: Date.now() });
      }
    }, this.heartbeatMs);
  }
  onBinary(bytes) {
    if (this.phaseNow !== "online") return;
    const frame = decodeFrame(bytes);
    if (frame) this.options.listener.binary(frame);
  }
  teardown(code, reason) {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = void 0;
    if (this.phaseTimer) clearTimeout(this.phaseTimer);
    this.phaseTimer = void 0;
    const ws = this.ws;
    this.ws = void 0;
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(code, reason);
  }
  /** Offline until the next attempt: the backoff, or the longest wait after a refusal. */
  goOffline(reason, code) {
    this.teardown(1e3, reason);
    if (this.stopped) return;
    const steps = TIMING.backoffS;
    let waitS;
    const setup = code !== void 0 && SETUP_CODES.has(code) ? code : void 0;
    if (setup) {
      waitS = steps[steps.length - 1];
    } else {
      if (this.onlineSince !== void 0 && Date.now() - this.onlineSince >= TIMING.backoffResetAfterS * 1e3) {
        this.backoffStep = 0;
      }
      waitS = steps[Math.min(this.backoffStep, steps.length - 1)];
      this.backoffStep = Math.min(this.backoffStep + 1, steps.length - 1);
    }
    this.onlineSince = void 0;
    const retryAt = Date.now() + waitS * 1e3;
    this.setPhase("offline", setup ? { retryAt, reason: code ?? reason, setup } : { retryAt, reason: code ?? reason });
    this.later(waitS * 1e3, () => this.connect());
  }
  /** Try again now instead of waiting out the backoff (the page's Reconnect button). */
  retryNow() {
    if (this.stopped || this.phaseNow !== "offline") return;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.connect();
  }
};
function redact(m) {
  const shown = { ...m };
  if ("key" in shown) shown["key"] = "<the device key>";
  if ("mac" in shown) shown["mac"] = "<mac>";
  if ("token" in shown) shown["token"] = "<token>";
  if (shown["type"] === "hello") return `hello ${shown["device_id"]}`;
  return JSON.stringify(shown);
}

// src/gadget/screen.ts
var BAR = 22;
var ROW = 24;
var FONT = "20px 'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace";
var SMALL = "15px 'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace";
var COLORS = {
  background: "#0b1020",
  text: "#e8ecf4",
  bar: "#1d2a4a",
  barText: "#cdd6ea",
  accent: "#ffd166",
  notice: "#3a2f0b",
  noticeText: "#ffe8a3",
  yes: "#2f9e44",
  no: "#c92a2a",
  dim: "#6b7896"
};
var BAR_COLORS = {
  offline: "#5c1f1f",
  setup: "#7a2e00",
  pairing: "#4a3b00",
  listening: "#7a1f4a",
  thinking: "#263d73",
  responding: "#1e5a45",
  prompt: "#5a3d00"
};
var ScreenPainter = class {
  constructor(canvas) {
    this.canvas = canvas;
    __publicField(this, "ctx");
    canvas.width = BOARD.width;
    canvas.height = BOARD.height;
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("no 2D canvas");
    this.ctx = ctx;
  }
  paint(view) {
    const { ctx } = this;
    const { width, height } = BOARD;
    ctx.fillStyle = COLORS.background;
    ctx.fillRect(0, 0, width, height);
    this.bar(view);
    if (view.image) {
      const img = view.image;
      const box = BOARD.image;
      const x = Math.floor((box.width - img.width) / 2);
      const y = BAR + Math.floor((box.height - img.height) / 2);
      ctx.putImageData(new ImageData(img.rgba, img.width, img.height), x, y);
    } else {
      this.text(view);
    }
    if (view.code) this.code(view.code);
    if (view.screen === "prompt") this.answers(view.armed === true);
    if (view.notice) this.notice(view.notice);
  }
  bar(view) {
    const { ctx } = this;
    ctx.fillStyle = BAR_COLORS[view.screen] ?? COLORS.bar;
    ctx.fillRect(0, 0, BOARD.width, BAR);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.barText;
    const label = view.title ? view.title : view.status;
    const pages = view.pages > 1 ? `${view.page + 1}/${view.pages}` : "";
    const room = Math.floor((BOARD.width - 12 - (pages ? ctx.measureText(pages).width + 8 : 0)) / ctx.measureText("M").width);
    ctx.fillText(label.length > room ? `${label.slice(0, room - 1)}…` : label, 6, BAR / 2 + 1);
    if (view.level !== void 0) {
      const w = 80;
      ctx.fillStyle = "rgb(0 0 0 / 0.35)";
      ctx.fillRect(BOARD.width - 6 - w, 7, w, BAR - 14);
      ctx.fillStyle = "#ff8fb1";
      ctx.fillRect(BOARD.width - 6 - w, 7, Math.round(w * Math.min(1, view.level)), BAR - 14);
    }
    if (pages) {
      ctx.textAlign = "right";
      ctx.fillText(pages, BOARD.width - 6, BAR / 2 + 1);
      ctx.textAlign = "left";
    }
  }
  text(view) {
    const { ctx } = this;
    ctx.font = FONT;
    ctx.textBaseline = "top";
    const last = view.lines.length - 1;
    if (view.screen === "card") {
      ctx.fillStyle = COLORS.accent;
      ctx.fillRect(0, BAR, 4, BOARD.height - BAR);
    }
    ctx.fillStyle = COLORS.text;
    view.lines.forEach((line, i) => {
      if (view.screen === "prompt" && i === last) return;
      ctx.fillText(line, 9, BAR + 6 + i * ROW);
    });
  }
  code(code) {
    const { ctx } = this;
    ctx.font = "bold 40px 'DejaVu Sans Mono', 'Menlo', 'Consolas', monospace";
    ctx.textBaseline = "middle";
    ctx.textAlign = "center";
    ctx.fillStyle = COLORS.accent;
    ctx.fillText(code, BOARD.width / 2, BAR + 6 + 2.5 * ROW);
    ctx.textAlign = "left";
  }
  answers(armed) {
    const { ctx } = this;
    const y = BAR + 6 + (BOARD.textRows - 1) * ROW - 2;
    const w = 130;
    const h = ROW;
    const draw = (x, color, label) => {
      ctx.fillStyle = armed ? color : COLORS.dim;
      ctx.fillRect(x, y, w, h);
      ctx.fillStyle = "#ffffff";
      ctx.font = SMALL;
      ctx.textBaseline = "middle";
      ctx.textAlign = "center";
      ctx.fillText(label, x + w / 2, y + h / 2 + 1);
      ctx.textAlign = "left";
    };
    draw(20, COLORS.yes, "TALK = yes");
    draw(BOARD.width - 20 - w, COLORS.no, "CANCEL = no");
  }
  notice(text) {
    const { ctx } = this;
    const h = BAR;
    ctx.fillStyle = COLORS.notice;
    ctx.fillRect(0, BOARD.height - h, BOARD.width, h);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.noticeText;
    const room = Math.floor((BOARD.width - 12) / ctx.measureText("M").width);
    ctx.fillText(text.length > room ? `${text.slice(0, room - 1)}…` : text, 6, BOARD.height - h / 2 + 1);
  }
};

// src/gadget/gadget.ts
var STORE = { key: "herald.gadget.key", name: "herald.gadget.name", token: "herald.gadget.token", url: "herald.gadget.url" };
var DEFAULT_NAME = "Tab Gadget";
var LOG_LINES = 120;
function $(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing`);
  return el;
}
var ui = {
  conn: $("conn"),
  canvas: $("screen"),
  screenText: $("screen-text"),
  led: $("led"),
  level: $("level"),
  talk: $("talk"),
  cancel: $("cancel"),
  up: $("up"),
  down: $("down"),
  answers: $("answers"),
  yes: $("yes"),
  no: $("no"),
  composer: $("composer"),
  text: $("text"),
  tryList: $("try"),
  deviceId: $("device-id"),
  serverUrl: $("server-url"),
  session: $("session"),
  mic: $("mic"),
  speaker: $("speaker"),
  settingsForm: $("settings-form"),
  url: $("url"),
  name: $("name"),
  token: $("token"),
  reset: $("reset"),
  log: $("log")
};
var servedBy;
async function learnServerUrl() {
  try {
    const answer = await fetch("server.json", { cache: "no-store" });
    if (!answer.ok) return;
    const { gadget_url } = await answer.json();
    if (typeof gadget_url !== "string" || !validUrl(gadget_url)) return;
    const url = new URL(gadget_url);
    url.hostname = location.hostname || url.hostname;
    servedBy = url.toString();
  } catch {
  }
}
function defaultUrl() {
  if (servedBy) return servedBy;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const host = location.hostname || "127.0.0.1";
  return `${scheme}://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${DEFAULT_PORT}${DEFAULT_PATH}`;
}
function validUrl(url) {
  try {
    const u = new URL(url);
    return u.protocol === "ws:" || u.protocol === "wss:";
  } catch {
    return false;
  }
}
function onThisHost(url) {
  const loopback = (host) => host === "localhost" || host === "[::1]" || host.startsWith("127.");
  const there = new URL(url).hostname;
  const here = location.hostname;
  return there === here || loopback(there) && loopback(here);
}
function gadgetUrl() {
  const asked = new URLSearchParams(location.search).get("url");
  if (asked && validUrl(asked) && onThisHost(asked)) return asked;
  const stored = localStorage.getItem(STORE.url);
  return stored && validUrl(stored) ? stored : defaultUrl();
}
function loadKey() {
  const stored = localStorage.getItem(STORE.key);
  if (stored) {
    try {
      const key2 = fromBase64(stored);
      if (key2.length === KEY_LEN) return key2;
    } catch {
    }
  }
  const key = newKey();
  localStorage.setItem(STORE.key, toBase64(key));
  return key;
}
var painter = new ScreenPainter(ui.canvas);
var redrawPending = false;
var speaker = new Speaker(() => {
  device.speakerChanged();
});
var mic = new Microphone(
  BOARD.micRate,
  (samples) => device.micSamples(samples),
  (why) => device.micFailed(why)
);
var link;
var device = new GadgetDevice({
  send: (m) => link?.send(m) ?? false,
  sendBinary: (b) => link?.sendBinary(b) ?? false,
  startMic: () => mic.start(),
  stopMic: () => mic.stop(),
  speaker,
  changed: () => redraw(),
  brightness: (p) => {
    ui.canvas.style.filter = `brightness(${Math.max(0.15, p / 100)})`;
  }
});
function redraw() {
  if (redrawPending) return;
  redrawPending = true;
  queueMicrotask(() => {
    redrawPending = false;
    render(device.view());
  });
}
function render(view) {
  if (view.screen === "listening") view.level = mic.level;
  painter.paint(view);
  document.body.dataset["screen"] = view.screen;
  document.body.dataset["phase"] = device.phase;
  document.body.dataset["paired"] = String(device.paired);
  const shown = [view.status, view.title, view.code ? `Pairing code: ${view.code}` : void 0, ...view.lines, view.notice].filter((s2) => !!s2).join("\n");
  if (ui.screenText.textContent !== shown) ui.screenText.textContent = shown;
  ui.canvas.setAttribute("aria-label", `The gadget's screen: ${shown.replace(/\n/g, ". ")}`);
  const prompt = view.screen === "prompt";
  ui.answers.hidden = !prompt;
  ui.yes.disabled = ui.no.disabled = !(prompt && view.armed);
  const led = device.led;
  ui.led.dataset["color"] = led ?? "";
  ui.led.style.backgroundColor = led ?? "";
  ui.led.style.color = led ?? "";
  ui.led.classList.toggle("on", led !== void 0);
  ui.led.setAttribute("aria-label", led ? `LED ${led}` : "LED off");
  ui.talk.setAttribute("aria-pressed", String(view.screen === "listening"));
  const bar = ui.level.firstElementChild;
  if (bar instanceof HTMLElement) bar.style.width = `${Math.round((view.screen === "listening" ? mic.level : 0) * 100)}%`;
  ui.conn.textContent = connText(view);
  ui.session.textContent = device.session || "none";
  ui.mic.dataset["frames"] = String(device.stats.framesSent);
  ui.mic.textContent = mic.error ? `unavailable: ${mic.error}` : view.screen === "listening" ? `recording, ${device.stats.framesSent} frames sent in all` : `off (${device.stats.framesSent} frames sent in all)`;
  const s = speaker.stats;
  ui.speaker.dataset["state"] = speaker.state;
  ui.speaker.dataset["frames"] = String(s.frames);
  ui.speaker.dataset["scheduledMs"] = String(Math.round(s.scheduledMs));
  const blocked = speaker.state !== "idle" && audioContext(false)?.state === "suspended" ? " (click the page to hear it)" : "";
  ui.speaker.textContent = `${speaker.state}${blocked}; ${s.streams} streams, ${(s.scheduledMs / 1e3).toFixed(1)} s played, ${s.underruns} underruns, ${s.gaps} gaps, volume ${device.speakerVolume}%`;
}
function connText(view) {
  switch (device.phase) {
    case "online":
      return device.paired ? "Online, paired" : "Online, waiting for approval";
    case "offline":
      return device.setupNeeded ? `Refused (${device.setupNeeded})` : view.lines.join(" ");
    case "boot":
      return "Starting";
    default:
      return "Connecting";
  }
}
function trace(direction, summary) {
  const li = document.createElement("li");
  li.className = direction;
  li.textContent = `${direction === "in" ? "←" : "→"} ${summary}`;
  ui.log.append(li);
  while (ui.log.childElementCount > LOG_LINES) ui.log.firstElementChild?.remove();
}
function connect(identity) {
  link?.stop();
  const url = gadgetUrl();
  ui.serverUrl.textContent = url;
  const name = localStorage.getItem(STORE.name) || DEFAULT_NAME;
  const token = localStorage.getItem(STORE.token) || void 0;
  link = new GadgetLink({
    url,
    identity,
    hello: () => device.hello(name, token),
    listener: {
      phase: (phase, offline) => device.onPhase(phase, offline),
      welcome: (w) => device.onWelcome(w),
      message: (m) => device.onMessage(m),
      binary: (f) => device.onBinary(f),
      trace
    }
  });
  link.start();
}
function inField(target) {
  return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement;
}
function hold(button, down, up) {
  let held = false;
  button.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    button.setPointerCapture(e.pointerId);
    held = true;
    button.classList.add("held");
    down();
  });
  const release = () => {
    if (!held) return;
    held = false;
    button.classList.remove("held");
    up();
  };
  button.addEventListener("pointerup", release);
  button.addEventListener("pointercancel", release);
  button.addEventListener("lostpointercapture", release);
}
function wireInput() {
  for (const type of ["pointerdown", "keydown"]) document.addEventListener(type, () => audioContext(), { capture: true });
  hold(ui.talk, () => device.talkDown(), () => device.talkUp());
  hold(ui.cancel, () => device.cancelDown(), () => device.cancelUp());
  ui.up.addEventListener("click", () => device.page(false));
  ui.down.addEventListener("click", () => device.page(true));
  ui.yes.addEventListener("click", () => device.answerButton(true));
  ui.no.addEventListener("click", () => device.answerButton(false));
  const keys = /* @__PURE__ */ new Set();
  document.addEventListener("keydown", (e) => {
    if (inField(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
    const known = e.code === "Space" || e.key === "Escape" || e.key === "ArrowUp" || e.key === "ArrowDown";
    if (!known) return;
    e.preventDefault();
    if (e.repeat || keys.has(e.code)) return;
    keys.add(e.code);
    if (e.code === "Space") device.talkDown();
    else if (e.key === "Escape") device.cancelDown();
    else device.page(e.key === "ArrowDown");
  });
  document.addEventListener("keyup", (e) => {
    if (!keys.delete(e.code)) return;
    e.preventDefault();
    if (e.code === "Space") device.talkUp();
    else if (e.key === "Escape") device.cancelUp();
  });
  window.addEventListener("blur", () => {
    if (keys.delete("Space")) device.talkUp();
    if (keys.delete("Escape")) device.cancelUp();
  });
  const send = (text) => {
    const problem = device.sendText(text);
    if (problem) ui.text.setCustomValidity(problem);
    else {
      ui.text.setCustomValidity("");
      ui.text.value = "";
    }
    ui.text.reportValidity();
  };
  ui.composer.addEventListener("submit", (e) => {
    e.preventDefault();
    send(ui.text.value);
  });
  ui.text.addEventListener("input", () => ui.text.setCustomValidity(""));
  ui.tryList.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-text]");
    if (button?.dataset["text"]) send(button.dataset["text"]);
  });
}
function wireSettings(identity, setIdentity) {
  ui.url.value = gadgetUrl();
  ui.name.value = localStorage.getItem(STORE.name) || DEFAULT_NAME;
  ui.token.value = localStorage.getItem(STORE.token) ?? "";
  ui.settingsForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const url = ui.url.value.trim();
    if (!validUrl(url)) {
      ui.url.setCustomValidity("a ws:// or wss:// URL");
      ui.url.reportValidity();
      return;
    }
    ui.url.setCustomValidity("");
    localStorage.setItem(STORE.url, url);
    localStorage.setItem(STORE.name, ui.name.value.trim().slice(0, 64));
    if (ui.token.value) localStorage.setItem(STORE.token, ui.token.value);
    else localStorage.removeItem(STORE.token);
    const query = new URLSearchParams(location.search);
    query.set("url", url);
    history.replaceState(null, "", `${location.pathname}?${query.toString()}`);
    const id = identity();
    if (id) connect(id);
  });
  ui.reset.addEventListener("click", () => {
    if (!confirm("Make a new device key? The server will see a new gadget that has to be paired again.")) return;
    localStorage.removeItem(STORE.key);
    void (async () => {
      const key = loadKey();
      const next = { key, deviceId: await deviceIdOf(key) };
      setIdentity(next);
      connect(next);
    })();
  });
}
async function main() {
  let identity;
  wireInput();
  await learnServerUrl();
  wireSettings(
    () => identity,
    (i) => {
      identity = i;
      device.deviceId = i.deviceId;
      ui.deviceId.textContent = i.deviceId;
    }
  );
  setInterval(() => device.tick(), 100);
  render(device.view());
  try {
    const key = loadKey();
    identity = { key, deviceId: await deviceIdOf(key) };
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    painter.paint({ screen: "setup", status: "Setup needed", lines: wrap(why, BOARD.textCols), page: 0, pages: 1 });
    ui.conn.textContent = why;
    return;
  }
  device.deviceId = identity.deviceId;
  ui.deviceId.textContent = identity.deviceId;
  connect(identity);
}
void main();
