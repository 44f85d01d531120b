var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

// src/gadget/resample.ts
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
var LEAD_S = 0.03;
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
    __publicField(this, "gain");
    __publicField(this, "volumeNow", 0.8);
    /** Where on the audio clock the next block starts. */
    __publicField(this, "nextTime", 0);
    __publicField(this, "sources", /* @__PURE__ */ new Set());
    __publicField(this, "stats", { blocks: 0, scheduledMs: 0 });
  }
  /** "playing" while anything is scheduled, else "idle". */
  get state() {
    return this.sources.size > 0 ? "playing" : "idle";
  }
  /** 0..1. */
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
  /** Queue PCM16 `samples` at `rate` after what is queued. */
  play(rate, samples) {
    if (samples.length === 0) return;
    const { ctx, gain } = this.output();
    const rateHz = Math.max(3e3, Math.min(768e3, rate));
    const buffer = ctx.createBuffer(1, samples.length, rateHz);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
    if (this.nextTime < ctx.currentTime) this.nextTime = ctx.currentTime + LEAD_S;
    const src = ctx.createBufferSource();
    src.buffer = buffer;
    src.connect(gain);
    src.onended = () => {
      this.sources.delete(src);
      if (this.sources.size === 0) this.onChange();
    };
    src.start(this.nextTime);
    const starting = this.sources.size === 0;
    this.sources.add(src);
    this.nextTime += buffer.duration;
    this.stats.blocks++;
    this.stats.scheduledMs += buffer.duration * 1e3;
    if (starting) this.onChange();
  }
  /** Drop whatever is queued. */
  stop() {
    const was = this.sources.size > 0;
    for (const src of this.sources) {
      src.onended = null;
      try {
        src.stop();
      } catch {
      }
    }
    this.sources.clear();
    this.nextTime = 0;
    if (was) this.onChange();
  }
};

// src/gadget/core.ts
var utf8 = new TextEncoder();
var fromUtf8 = new TextDecoder();
var DeviceCore = class _DeviceCore {
  constructor(m) {
    this.m = m;
  }
  /** The module from its bytes (a page fetches device.wasm; a test reads the file). */
  static async load(bytes) {
    let memory;
    const imports = {
      herald: {
        random(ptr, len) {
          if (!memory) throw new Error("random bytes asked for before the module started");
          crypto.getRandomValues(new Uint8Array(memory.buffer, ptr, len));
        }
      }
    };
    const { instance } = await WebAssembly.instantiate(bytes, imports);
    const m = instance.exports;
    memory = m.memory;
    return new _DeviceCore(m);
  }
  board() {
    return this.json(this.m.herald_board());
  }
  /** Boot the device: its id, or why the settings cannot be used. */
  boot(settings, now2) {
    this.input(JSON.stringify(settings));
    return this.json(this.m.herald_boot(now2));
  }
  connected(now2) {
    this.m.herald_connected(now2);
  }
  /** The connection ended without the core asking; `code` when a close frame came. */
  closed(code, reason, now2) {
    this.input(reason);
    this.m.herald_closed(code ?? -1, now2);
  }
  text(text, now2) {
    this.input(text);
    this.m.herald_text(now2);
  }
  binary(bytes, now2) {
    this.input(bytes);
    this.m.herald_binary(now2);
  }
  /** Microphone samples at the board's rate. */
  mic(samples, now2) {
    this.input(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
    this.m.herald_mic(now2);
  }
  button(button, down, now2) {
    this.input(button);
    this.m.herald_button(down ? 1 : 0, now2);
  }
  timeout(now2) {
    this.m.herald_timeout(now2);
  }
  /** When `timeout` is due next, if ever. */
  deadline() {
    const at = this.m.herald_deadline();
    return at < 0 ? void 0 : at;
  }
  /** The next thing to do, if any. */
  action() {
    const len = this.m.herald_action();
    if (len === 0) return void 0;
    const action = this.json(len);
    if (action.do === "send_binary") return { do: "send_binary", bytes: this.bulk() };
    if (action.do === "play") {
      const bytes = this.bulk();
      const samples = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
      return { do: "play", rate: action["rate"], samples };
    }
    return action;
  }
  view() {
    const view = this.json(this.m.herald_view());
    return { ...view, image: view.image ? { ...view.image, rgb565: this.bulk() } : null };
  }
  /** Type a message to the agent: why not, or undefined once sent. */
  sendText(text, now2) {
    this.input(text);
    return this.answerText(this.m.herald_send_text(now2));
  }
  /** Add an action of the page's own, for the next `hello`: why not, or undefined. */
  registerAction(spec) {
    this.input(JSON.stringify(spec));
    return this.answerText(this.m.herald_register_action());
  }
  /** Answer an invoked action with its result or what went wrong. */
  completeAction(id, outcome) {
    this.input(JSON.stringify({ id, ...outcome }));
    return this.answerText(this.m.herald_complete_action());
  }
  input(data) {
    const bytes = typeof data === "string" ? utf8.encode(data) : data;
    const at = this.m.herald_input(bytes.length);
    new Uint8Array(this.m.memory.buffer, at, bytes.length).set(bytes);
  }
  output(len) {
    return fromUtf8.decode(new Uint8Array(this.m.memory.buffer, this.m.herald_output(), len));
  }
  json(len) {
    return JSON.parse(this.output(len));
  }
  answerText(len) {
    return len === 0 ? void 0 : this.output(len);
  }
  /** A copy of the bulk buffer: the module's memory may move with the next call. */
  bulk() {
    return new Uint8Array(this.m.memory.buffer, this.m.herald_bulk(), this.m.herald_bulk_len()).slice();
  }
};

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
  constructor(canvas, board) {
    this.canvas = canvas;
    this.board = board;
    __publicField(this, "ctx");
    canvas.width = board.width;
    canvas.height = board.height;
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("no 2D canvas");
    this.ctx = ctx;
  }
  paint(view) {
    const { ctx } = this;
    const { width, height } = this.board;
    ctx.fillStyle = COLORS.background;
    ctx.fillRect(0, 0, width, height);
    this.bar(view);
    if (view.image) {
      const img = view.image;
      const box = this.board.image;
      const x = Math.floor((box.width - img.width) / 2);
      const y = BAR + Math.floor((box.height - img.height) / 2);
      ctx.putImageData(new ImageData(rgb565ToRgba(img.rgb565, img.width, img.height), img.width, img.height), x, y);
    } else {
      this.text(view);
    }
    if (view.screen === "prompt") this.answers(view.armed);
    if (view.notice) this.notice(view.notice);
  }
  bar(view) {
    const { ctx } = this;
    ctx.fillStyle = BAR_COLORS[view.screen] ?? COLORS.bar;
    ctx.fillRect(0, 0, this.board.width, BAR);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.barText;
    const label = view.title ? view.title : view.status;
    const pages = view.pages > 1 ? `${view.page + 1}/${view.pages}` : "";
    const room = Math.floor((this.board.width - 12 - (pages ? ctx.measureText(pages).width + 8 : 0)) / ctx.measureText("M").width);
    ctx.fillText(label.length > room ? `${label.slice(0, room - 1)}…` : label, 6, BAR / 2 + 1);
    if (view.level !== void 0) {
      const w = 80;
      ctx.fillStyle = "rgb(0 0 0 / 0.35)";
      ctx.fillRect(this.board.width - 6 - w, 7, w, BAR - 14);
      ctx.fillStyle = "#ff8fb1";
      ctx.fillRect(this.board.width - 6 - w, 7, Math.round(w * Math.min(1, view.level)), BAR - 14);
    }
    if (pages) {
      ctx.textAlign = "right";
      ctx.fillText(pages, this.board.width - 6, BAR / 2 + 1);
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
      ctx.fillRect(0, BAR, 4, this.board.height - BAR);
    }
    ctx.fillStyle = COLORS.text;
    view.lines.forEach((line, i) => {
      if (view.screen === "prompt" && i === last) return;
      ctx.fillText(line, 9, BAR + 6 + i * ROW);
    });
  }
  answers(armed) {
    const { ctx } = this;
    const y = BAR + 6 + (this.board.text_rows - 1) * ROW - 2;
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
    draw(this.board.width - 20 - w, COLORS.no, "CANCEL = no");
  }
  notice(text) {
    const { ctx } = this;
    const h = BAR;
    ctx.fillStyle = COLORS.notice;
    ctx.fillRect(0, this.board.height - h, this.board.width, h);
    ctx.font = SMALL;
    ctx.textBaseline = "middle";
    ctx.fillStyle = COLORS.noticeText;
    const room = Math.floor((this.board.width - 12) / ctx.measureText("M").width);
    ctx.fillText(text.length > room ? `${text.slice(0, room - 1)}…` : text, 6, this.board.height - h / 2 + 1);
  }
};
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

// src/gadget/gadget.ts
var STORE = { key: "herald.gadget.key", name: "herald.gadget.name", token: "herald.gadget.token", url: "herald.gadget.url" };
var DEFAULT_NAME = "Tab Gadget";
var DEFAULT_PORT = 8765;
var DEFAULT_PATH = "/gadget";
var SUBPROTOCOL = "hermes-gadget.v1";
var LOG_LINES = 120;
var LED_ACTION = {
  name: "led.set",
  description: "Set the colour of the status LED (a CSS colour name such as red, green or blue, or off).",
  params: { type: "object", properties: { color: { type: "string" } }, required: ["color"] }
};
var MAX_COLOR = 32;
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
var now = () => performance.now();
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
var Host = class {
  constructor(core, board) {
    this.core = core;
    __publicField(this, "ws");
    /** Where the device connects, as of its last boot. */
    __publicField(this, "url", "");
    __publicField(this, "timer");
    __publicField(this, "armTimer");
    __publicField(this, "drawPending", false);
    __publicField(this, "led");
    __publicField(this, "volume", 80);
    __publicField(this, "framesSent", 0);
    __publicField(this, "painter");
    __publicField(this, "speaker", new Speaker(() => this.draw()));
    __publicField(this, "mic");
    this.painter = new ScreenPainter(ui.canvas, board);
    this.mic = new Microphone(
      board.mic_rate,
      (samples) => {
        this.core.mic(samples, now());
        this.run();
        this.draw();
      },
      // No samples will come: as if TALK came up, which ends the recording.
      () => this.press("talk", false)
    );
  }
  /** Start the device anew (a new key, name, token or URL): the old connection goes. */
  boot() {
    this.dropSocket(1e3, "restarting");
    this.url = gadgetUrl();
    ui.serverUrl.textContent = this.url;
    ui.session.textContent = "none";
    const settings = {
      name: localStorage.getItem(STORE.name) || DEFAULT_NAME,
      token: localStorage.getItem(STORE.token) || void 0,
      key: localStorage.getItem(STORE.key) || void 0
    };
    let booted = this.core.boot(settings, now());
    if ("error" in booted && settings.key !== void 0) {
      this.trace("out", `${booted.error}: making a new key`);
      booted = this.core.boot({ ...settings, key: void 0 }, now());
    }
    if ("error" in booted) {
      ui.conn.textContent = booted.error;
      return;
    }
    ui.deviceId.textContent = booted.device_id;
    const refused = this.core.registerAction(LED_ACTION);
    if (refused) this.trace("out", `led.set not offered: ${refused}`);
    this.run();
  }
  press(button, down) {
    this.core.button(button, down, now());
    this.run();
  }
  /** A press and its release. */
  click(button) {
    this.press(button, true);
    this.press(button, false);
  }
  /** Type `text` to the agent: why not, or undefined. */
  sendText(text) {
    const refused = this.core.sendText(text, now());
    this.run();
    return refused;
  }
  /** Carry out what the core asks, then sleep until its next deadline. */
  run() {
    for (let action = this.core.action(); action; action = this.core.action()) this.carryOut(action);
    if (this.timer) clearTimeout(this.timer);
    const at = this.core.deadline();
    this.timer = at === void 0 ? void 0 : setTimeout(() => {
      this.core.timeout(now());
      this.run();
    }, Math.max(0, at - now()));
  }
  carryOut(action) {
    switch (action.do) {
      case "connect":
        return this.connect();
      case "close":
        return this.dropSocket(action.code, action.reason);
      case "send":
        this.ws?.send(action.text);
        return this.trace("out", action.log);
      case "send_binary": {
        const b = action.bytes;
        this.ws?.send(b);
        if (b[0] === 1) this.framesSent++;
        return this.trace("out", `binary ch${b[0]} stream ${b[1]} seq ${(b[2] ?? 0) | (b[3] ?? 0) << 8}`);
      }
      case "redraw":
        return this.draw();
      case "start_mic":
        return this.mic.start();
      case "stop_mic":
        return this.mic.stop();
      case "play":
        return this.speaker.play(action.rate, action.samples);
      case "stop_playback":
        return this.speaker.stop();
      case "volume":
        this.volume = action.percent;
        this.speaker.volume = action.percent / 100;
        return this.draw();
      case "brightness":
        ui.canvas.style.filter = `brightness(${Math.max(0.15, action.percent / 100)})`;
        return;
      case "store_key":
        return localStorage.setItem(STORE.key, action.key);
      case "invoke":
        return this.invoke(action.id, action.name, action.args);
      default:
        return;
    }
  }
  /** The page's own action: `led.set`. */
  invoke(id, name, args) {
    const color = args?.color;
    let outcome;
    if (name !== LED_ACTION.name) outcome = { error: `no action ${name}` };
    else if (typeof color !== "string" || color.trim() === "") outcome = { error: "color is required" };
    else if (color.length > MAX_COLOR) outcome = { error: `color is longer than ${MAX_COLOR} characters` };
    else {
      this.led = color === "off" ? void 0 : color;
      outcome = { result: { led: color } };
      this.draw();
    }
    this.core.completeAction(id, outcome);
  }
  connect() {
    this.dropSocket(1e3, "reconnecting");
    const ws = new WebSocket(this.url, SUBPROTOCOL);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      this.core.connected(now());
      this.run();
    };
    ws.onmessage = (e) => {
      if (this.ws !== ws) return;
      if (typeof e.data === "string") {
        this.traceIn(e.data);
        this.core.text(e.data, now());
      } else {
        this.core.binary(new Uint8Array(e.data), now());
      }
      this.run();
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = void 0;
      const code = e.code === 1005 || e.code === 1006 ? void 0 : e.code;
      this.core.closed(code, e.reason, now());
      this.run();
    };
  }
  /** Close the connection; the core counts it gone already. */
  dropSocket(code, reason) {
    const ws = this.ws;
    this.ws = void 0;
    if (!ws) return;
    try {
      ws.close(code, reason);
    } catch {
      ws.close(1e3, reason);
    }
  }
  traceIn(text) {
    try {
      const m = JSON.parse(text);
      if (m.type === "welcome" && typeof m.session === "string") ui.session.textContent = m.session;
    } catch {
      return this.trace("in", "(a frame that is not a message)");
    }
    this.trace("in", text.length > 300 ? `${text.slice(0, 300)}…` : text);
  }
  trace(direction, summary) {
    const li = document.createElement("li");
    li.className = direction;
    li.textContent = `${direction === "in" ? "←" : "→"} ${summary}`;
    ui.log.append(li);
    while (ui.log.childElementCount > LOG_LINES) ui.log.firstElementChild?.remove();
  }
  /** Draw once the current event is done with. */
  draw() {
    if (this.drawPending) return;
    this.drawPending = true;
    queueMicrotask(() => {
      this.drawPending = false;
      this.render(this.core.view());
    });
  }
  render(view) {
    const listening = view.screen === "listening";
    const armed = view.answers_from !== null && now() >= view.answers_from;
    if (this.armTimer) clearTimeout(this.armTimer);
    if (view.answers_from !== null && !armed) this.armTimer = setTimeout(() => this.draw(), view.answers_from - now());
    this.painter.paint({ ...view, armed, level: listening ? this.mic.level : void 0 });
    document.body.dataset["screen"] = view.screen;
    document.body.dataset["phase"] = view.phase;
    document.body.dataset["paired"] = String(view.paired);
    const shown = [view.status, view.title, ...view.lines, view.notice].filter((s2) => !!s2).join("\n");
    if (ui.screenText.textContent !== shown) ui.screenText.textContent = shown;
    ui.canvas.setAttribute("aria-label", `The gadget's screen: ${shown.replace(/\n/g, ". ")}`);
    ui.answers.hidden = view.screen !== "prompt";
    ui.yes.disabled = ui.no.disabled = !armed;
    const led = this.led;
    ui.led.dataset["color"] = led ?? "";
    ui.led.style.backgroundColor = led ?? "";
    ui.led.style.color = led ?? "";
    ui.led.classList.toggle("on", led !== void 0);
    ui.led.setAttribute("aria-label", led ? `LED ${led}` : "LED off");
    ui.talk.setAttribute("aria-pressed", String(listening));
    const bar = ui.level.firstElementChild;
    if (bar instanceof HTMLElement) bar.style.width = `${Math.round((listening ? this.mic.level : 0) * 100)}%`;
    ui.conn.textContent = connText(view);
    const sent = this.framesSent;
    ui.mic.dataset["frames"] = String(sent);
    ui.mic.textContent = this.mic.error ? `unavailable: ${this.mic.error}` : listening ? `recording, ${sent} frames sent in all` : `off (${sent} frames sent in all)`;
    const s = this.speaker.stats;
    ui.speaker.dataset["state"] = this.speaker.state;
    ui.speaker.dataset["blocks"] = String(s.blocks);
    ui.speaker.dataset["scheduledMs"] = String(Math.round(s.scheduledMs));
    const blocked = this.speaker.state !== "idle" && audioContext(false)?.state === "suspended" ? " (click the page to hear it)" : "";
    ui.speaker.textContent = `${this.speaker.state}${blocked}; ${(s.scheduledMs / 1e3).toFixed(1)} s played, volume ${this.volume}%`;
  }
};
function connText(view) {
  switch (view.phase) {
    case "online":
      return view.paired ? "Online, paired" : "Online, waiting for approval";
    case "offline":
      return view.setup_needed ? `Refused (${view.setup_needed})` : view.lines.join(" ");
    case "boot":
      return "Starting";
    default:
      return "Connecting";
  }
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
var KEYS = { Space: "talk", Escape: "cancel", ArrowUp: "up", ArrowDown: "down" };
function wireInput(host) {
  for (const type of ["pointerdown", "keydown"]) document.addEventListener(type, () => audioContext(), { capture: true });
  for (const [el, button2] of [[ui.talk, "talk"], [ui.cancel, "cancel"]]) {
    hold(el, () => host.press(button2, true), () => host.press(button2, false));
  }
  ui.up.addEventListener("click", () => host.click("up"));
  ui.down.addEventListener("click", () => host.click("down"));
  ui.yes.addEventListener("click", () => host.click("talk"));
  ui.no.addEventListener("click", () => host.click("cancel"));
  const held = /* @__PURE__ */ new Set();
  const button = (e) => KEYS[e.code === "Space" ? "Space" : e.key];
  document.addEventListener("keydown", (e) => {
    if (inField(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
    const b = button(e);
    if (!b) return;
    e.preventDefault();
    if (e.repeat || held.has(b)) return;
    held.add(b);
    host.press(b, true);
  });
  document.addEventListener("keyup", (e) => {
    const b = button(e);
    if (!b || !held.delete(b)) return;
    e.preventDefault();
    host.press(b, false);
  });
  window.addEventListener("blur", () => {
    for (const b of held) host.press(b, false);
    held.clear();
  });
  const send = (text) => {
    const problem = host.sendText(text);
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
    const b = e.target.closest("button[data-text]");
    if (b?.dataset["text"]) send(b.dataset["text"]);
  });
}
function wireSettings(host) {
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
    host.boot();
  });
  ui.reset.addEventListener("click", () => {
    if (!confirm("Make a new device key? The server will see a new gadget that has to be paired again.")) return;
    localStorage.removeItem(STORE.key);
    host.boot();
  });
}
async function main() {
  const [module] = await Promise.all([fetch("device.wasm"), learnServerUrl()]);
  let core;
  try {
    if (!module.ok) throw new Error(`device.wasm: ${module.status}`);
    core = await DeviceCore.load(await module.arrayBuffer());
  } catch (e) {
    ui.conn.textContent = `The device could not start: ${e instanceof Error ? e.message : String(e)}`;
    return;
  }
  const host = new Host(core, core.board());
  wireInput(host);
  wireSettings(host);
  host.boot();
}
void main();
