// What the gadget in the tab is: its board, and the state a real gadget keeps between
// the connection and its screen. Server messages, button presses, typed text and the
// clock go in; messages and audio frames go out through `DeviceIo`, and `view()` says
// what the screen shows. The behaviour is the reference device's (see
// docs/gadget-protocol.md, "Reconnecting" and "Questions"): TALK records while held and
// answers yes, CANCEL answers no / stops / dismisses and held 2 s starts a new chat, a
// question ignores presses in its first 0.6 s, cards, pictures and notices go away after
// their ttl, and with no reply for 180 s the screen says so.

import type { Phase, Welcome } from "./link.js";
import { Pager, wrap } from "./pager.js";
import {
  CHANNEL,
  encodeFrame,
  MAX_TEXT,
  num,
  obj,
  rgb565ToRgba,
  str,
  TIMING,
  type Frame,
  type Message,
  type Outgoing,
} from "./proto.js";

/** The board the tab pretends to be: the reference breadboard's screen, mic and speaker. */
export const BOARD = {
  board: "browser-tab",
  firmware: "0.1.0",
  width: 320,
  height: 240,
  textCols: 25,
  textRows: 8,
  image: { width: 320, height: 196 },
  micRate: 16_000,
  speakerRate: 16_000,
} as const;

export const LED_ACTION = "led.set";
export const VOLUME_ACTION = "speaker.volume";
export const BRIGHTNESS_ACTION = "screen.brightness";
/** Longest colour name `led.set` takes. */
const MAX_COLOR = 32;

export type Screen =
  | "offline"
  | "connecting"
  | "setup"
  | "pairing"
  | "ready"
  | "listening"
  | "thinking"
  | "responding"
  | "card"
  | "image"
  | "prompt";

export interface ImageView {
  width: number;
  height: number;
  rgba: Uint8ClampedArray<ArrayBuffer>;
}

export interface View {
  screen: Screen;
  /** The status bar: what is going on, the agent's working phrase. */
  status: string;
  title?: string;
  /** The text area's page. */
  lines: string[];
  page: number;
  pages: number;
  notice?: string;
  image?: ImageView;
  /** On the prompt screen: whether presses answer yet (after the 0.6 s guard). */
  armed?: boolean;
  /** Pairing code, for the big letters. */
  code?: string;
  /** While listening: the microphone's level, 0..1 (the page fills it in). */
  level?: number;
}

/** The speaker as the core uses it (audio.ts has the Web Audio one). */
export interface SpeakerLike {
  /** A new stream replaces any other. */
  start(stream: number, rate: number): void;
  push(stream: number, seq: number, pcm: Uint8Array): void;
  end(stream: number): void;
  /** True when `stream` was playing. */
  abort(stream: number): boolean;
  /** True when anything was playing. */
  stop(): boolean;
  readonly active: boolean;
  volume: number;
}

export interface DeviceIo {
  send(message: Outgoing): boolean;
  sendBinary(bytes: Uint8Array): boolean;
  startMic(): void;
  stopMic(): void;
  speaker: SpeakerLike;
  /** Something the screen or the LED shows changed. */
  changed(): void;
  /** Screen brightness in percent (the `screen.brightness` action). */
  brightness(percent: number): void;
}

interface Recording {
  id: string;
  stream: number;
  startedAt: number;
  seq: number;
  pending: number[];
  samples: number;
}

interface PromptShown {
  id: string;
  title: string;
  text: Pager;
  shownAt: number;
  /** Drawn since its guard ended: the buttons show they answer. */
  armedDrawn: boolean;
  until: number | undefined;
}

interface CardShown {
  title: string;
  body: Pager;
  until: number | undefined;
}

interface ImageShown {
  image: ImageView;
  until: number | undefined;
}

interface IncomingImage {
  stream: number;
  width: number;
  height: number;
  ttlS: number | undefined;
  data: Uint8Array;
  filled: number;
}

const PROMPT_HINT = "TALK yes, CANCEL no";

function deadline(now: number, ttlS: number | undefined, defaultS: number): number | undefined {
  const s = ttlS ?? defaultS;
  return s === 0 ? undefined : now + s * 1000;
}

function due(at: number | undefined, now: number): boolean {
  return at !== undefined && now >= at;
}

function percent(args: Record<string, unknown> | undefined): number | undefined {
  const p = args?.["percent"];
  return typeof p === "number" && Number.isInteger(p) && p >= 0 && p <= 100 ? p : undefined;
}

export class GadgetDevice {
  phase: Phase | "boot" = "boot";
  paired = false;
  pairing: { code: string; command: string } | undefined;
  setupNeeded: string | undefined;
  session = "";
  led: string | undefined;
  retryAt = 0;
  deviceId = "";
  /** Counters the page shows. */
  readonly stats = { framesSent: 0, framesReceived: 0, gaps: 0, refusedImages: 0 };

  // the conversation
  private awaiting = false;
  private replying = false;
  private streaming = false;
  private turn: string | undefined;
  private statusText = "";
  private noReplyAt: number | undefined;
  private readonly chat = new Pager(BOARD.textCols, BOARD.textRows);

  private recording: Recording | undefined;
  private talkIgnored = false;
  private cancelDownAt: number | undefined;
  private cancelIgnored = false;
  private prompt: PromptShown | undefined;
  private card: CardShown | undefined;
  private image: ImageShown | undefined;
  private imageOnTop = false;
  private incoming: IncomingImage | undefined;
  private notice: { text: string; until: number | undefined } | undefined;
  private nextId = 0;
  private nextStream = 0;
  private volume = 80;

  constructor(private readonly io: DeviceIo) {}

  /** The actions sent in `hello`: the built-in two, then the LED. */
  manifest(): Record<string, unknown>[] {
    const percentParams = {
      type: "object",
      properties: { percent: { type: "integer", minimum: 0, maximum: 100 } },
      required: ["percent"],
    };
    return [
      { name: VOLUME_ACTION, description: "Set the speaker volume, in percent.", params: percentParams },
      { name: BRIGHTNESS_ACTION, description: "Set the screen brightness, in percent.", params: percentParams },
      {
        name: LED_ACTION,
        description: "Set the colour of the status LED (a CSS colour name such as red, green or blue, or off).",
        params: { type: "object", properties: { color: { type: "string" } }, required: ["color"] },
      },
    ];
  }

  /** The `hello` for the next connection. */
  hello(name: string, token: string | undefined): Outgoing {
    const hello: Outgoing = {
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
          image: { width: BOARD.image.width, height: BOARD.image.height, format: "rgb565" },
        },
        mic: { rate: BOARD.micRate, format: "pcm16" },
        speaker: { rate: BOARD.speakerRate, format: "pcm16" },
        inputs: ["talk", "cancel", "up", "down"],
        talk_mode: "hold",
      },
      actions: this.manifest(),
    };
    if (token) hello["token"] = token;
    return hello;
  }

  // ---- the link ----

  onPhase(phase: Phase, offline?: { retryAt: number; reason: string; setup?: string }): void {
    const wasOnline = this.phase === "online";
    this.phase = phase;
    if (offline) {
      this.retryAt = offline.retryAt;
      if (offline.setup) this.setupNeeded = offline.setup;
    }
    if (phase !== "online" && wasOnline) this.dropSession();
    this.io.changed();
  }

  onWelcome(w: Welcome): void {
    this.paired = w.paired;
    this.session = w.session;
    this.setupNeeded = undefined;
    this.io.changed();
  }

  onMessage(m: Message, now = Date.now()): void {
    switch (m.type) {
      case "pairing":
        this.paired = false;
        this.pairing = { code: str(m, "code") ?? "", command: str(m, "command") ?? "" };
        break;
      case "paired":
        this.paired = true;
        this.pairing = undefined;
        this.showNotice("Paired", undefined, now);
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
        this.noReplyAt = now + TIMING.noReplyS * 1000;
        // A new turn takes the screen from a card an earlier one left.
        this.card = undefined;
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
        this.showNotice(str(m, "message") ?? str(m, "code") ?? "error", undefined, now);
        break;
      case "prompt":
        this.showPrompt(m, now);
        break;
      case "prompt.close":
        if (this.prompt && this.prompt.id === str(m, "id")) this.prompt = undefined;
        break;
      case "display":
        this.card = {
          title: str(m, "title") ?? "",
          body: this.paged(str(m, "body") ?? "", 0),
          until: deadline(now, num(m, "ttl_s"), TIMING.cardTtlS),
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
        // A browser tab has no flash to write: it never offers caps.ota, and says so.
        this.io.send({ type: "ota.error", code: "unsupported", message: "this gadget installs no firmware" });
        return;
      default:
        // Receivers ignore what they do not know.
        return;
    }
    this.io.changed();
  }

  onBinary(frame: Frame): void {
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

  sendText(text: string, now = Date.now()): string | undefined {
    if (this.phase !== "online") return "not connected";
    if (!text.trim()) return "the message is empty";
    if ([...text].length > MAX_TEXT) return `the message is longer than ${MAX_TEXT} characters`;
    this.cancelDownAt = undefined;
    this.io.send({ type: "text", id: this.id("t"), text });
    this.request(text, now);
    this.io.changed();
    return undefined;
  }

  talkDown(now = Date.now()): void {
    this.talkIgnored = this.phase !== "online" || this.guarded(now);
    if (this.talkIgnored) return;
    if (this.prompt) {
      this.answer("yes");
      // The press is spent: its release must not do anything.
      this.talkIgnored = true;
      return;
    }
    this.startRecording(now);
  }

  talkUp(now = Date.now()): void {
    if (this.talkIgnored) {
      this.talkIgnored = false;
      return;
    }
    this.stopRecording(now);
  }

  cancelDown(now = Date.now()): void {
    if (this.cancelDownAt !== undefined) return;
    this.cancelIgnored = this.phase !== "online" || this.guarded(now);
    this.cancelDownAt = now;
    if (!this.cancelIgnored) this.io.changed();
  }

  cancelUp(now = Date.now()): void {
    const at = this.cancelDownAt;
    this.cancelDownAt = undefined;
    if (at === undefined || this.cancelIgnored) return;
    this.shortCancel(now);
    this.io.changed();
  }

  page(down: boolean): void {
    const pager = this.prompt?.text ?? (this.topCard() ? this.card?.body : undefined) ?? (this.onChatScreen() ? this.chat : undefined);
    if (pager?.turn(down)) this.io.changed();
  }

  /** The on-screen Yes and No: the same as TALK and CANCEL on a question. */
  answerButton(yes: boolean, now = Date.now()): void {
    if (!this.prompt || this.guarded(now)) return;
    this.answer(yes ? "yes" : "no");
    this.io.changed();
  }

  /** 16 kHz samples from the microphone while recording, cut into 40 ms frames. */
  micSamples(samples: Int16Array): void {
    const r = this.recording;
    if (!r) return;
    const max = BOARD.micRate * TIMING.maxRecordingS;
    const frameSamples = (BOARD.micRate * TIMING.audioFrameMs) / 1000;
    for (const s of samples) {
      if (r.samples >= max) break;
      r.pending.push(s);
      r.samples++;
      if (r.pending.length === frameSamples) this.flushFrame(r);
    }
  }

  /** The microphone could not open: the utterance is dropped, and the screen says why. */
  micFailed(why: string, now = Date.now()): void {
    const r = this.recording;
    if (r) {
      this.recording = undefined;
      this.talkIgnored = true;
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "no microphone" });
    }
    this.showNotice(`No microphone: ${why}`, undefined, now);
    this.io.changed();
  }

  /** The clock: ttl, the question's guard, the CANCEL hold, the recording cap, no reply. */
  tick(now = Date.now()): void {
    let changed = false;
    if (this.recording && now - this.recording.startedAt >= TIMING.maxRecordingS * 1000) {
      this.stopRecording(now);
    }
    if (this.cancelDownAt !== undefined && !this.cancelIgnored) {
      if (now - this.cancelDownAt >= TIMING.sessionNewHoldMs) {
        this.cancelIgnored = true;
        this.newSession(now);
      }
      changed = true; // the countdown on the status bar
    }
    // Redrawn through the guard and once after it, whenever that tick comes (a page
    // stalled past the guard still wakes its buttons).
    if (this.prompt && !this.prompt.armedDrawn) {
      changed = true;
      this.prompt.armedDrawn = !this.guarded(now);
    }
    if (due(this.prompt?.until, now)) {
      this.prompt = undefined;
      changed = true;
    }
    if (due(this.card?.until, now)) {
      this.card = undefined;
      changed = true;
    }
    if (due(this.image?.until, now)) {
      this.image = undefined;
      changed = true;
    }
    if (due(this.notice?.until, now)) {
      this.notice = undefined;
      changed = true;
    }
    if (due(this.noReplyAt, now)) {
      this.endTurn();
      this.chat.show("No reply");
      changed = true;
    }
    if (this.phase === "offline" || this.recording) changed = true; // the retry countdown, the level meter
    if (changed) this.io.changed();
  }

  /** The speaker finished or started: the mode (and so the screen) may have changed. */
  speakerChanged(): void {
    this.io.changed();
  }

  // ---- the screen ----

  screen(): Screen {
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
    const top = this.topCard() ? "card" : this.image ? "image" : undefined;
    if (top) return top;
    if (!this.paired) return "pairing";
    if (this.io.speaker.active || this.replying) return "responding";
    if (this.awaiting) return "thinking";
    return "ready";
  }

  view(now = Date.now()): View {
    const screen = this.screen();
    const fixed = (text: string) => wrap(text, BOARD.textCols).slice(0, BOARD.textRows);
    const view: View = { screen, status: "", lines: [], page: 0, pages: 1 };
    if (this.notice) view.notice = this.notice.text;
    let pager: Pager | undefined;
    switch (screen) {
      case "offline": {
        const s = Math.max(0, Math.ceil((this.retryAt - now) / 1000));
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
          view.lines = fixed(`Pairing code:\n\n\n\nApprove it on the host:\n${this.pairing.command}`);
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
    if (this.cancelDownAt !== undefined && !this.cancelIgnored) {
      const left = Math.max(1, Math.ceil((TIMING.sessionNewHoldMs - (now - this.cancelDownAt)) / 1000));
      view.status = `New chat in ${left} s`;
    }
    return view;
  }

  // ---- inside ----

  private id(prefix: string): string {
    this.nextId++;
    return `${prefix}${this.nextId}`;
  }

  private guarded(now: number): boolean {
    return this.prompt !== undefined && now - this.prompt.shownAt < TIMING.promptGuardMs;
  }

  private onChatScreen(): boolean {
    return ["ready", "listening", "thinking", "responding"].includes(this.screen());
  }

  private topCard(): boolean {
    return this.card !== undefined && !(this.image !== undefined && this.imageOnTop);
  }

  private paged(text: string, reserved: number): Pager {
    const pager = new Pager(BOARD.textCols, Math.max(1, BOARD.textRows - reserved));
    pager.show(text);
    return pager;
  }

  private setupText(): string {
    switch (this.setupNeeded) {
      case "bad_token":
        return "The server refused the access token. Set the right token in Settings.";
      case "protocol":
        return "The server does not speak this protocol.";
      default:
        return `The server refused this device. Ask the owner to run: herald forget ${this.deviceId}, or reset this gadget in Settings.`;
    }
  }

  private request(shown: string, now: number): void {
    this.endTurn();
    this.awaiting = true;
    this.noReplyAt = now + TIMING.noReplyS * 1000;
    this.chat.show(shown);
  }

  private endTurn(): void {
    this.awaiting = false;
    this.replying = false;
    this.streaming = false;
    this.turn = undefined;
    this.statusText = "";
    this.noReplyAt = undefined;
  }

  private progress(now: number): void {
    if (this.noReplyAt !== undefined) this.noReplyAt = now + TIMING.noReplyS * 1000;
  }

  private showReply(text: string): void {
    if (this.streaming) this.chat.update(text);
    else this.chat.show(text);
  }

  private onReply(m: Message, now: number): void {
    const text = str(m, "text") ?? "";
    if (m["interim"] === true) {
      // Commentary on the way: shown, but the answer is still to come.
      this.chat.show(text);
      this.progress(now);
      return;
    }
    this.showReply(text);
    this.streaming = false;
    if (this.awaiting && this.turn !== undefined) {
      this.replying = true;
      this.noReplyAt = undefined;
    } else {
      this.endTurn();
    }
  }

  private onTurnEnd(m: Message, now: number): void {
    const turn = str(m, "turn");
    if ((this.turn !== undefined && turn !== this.turn) || !this.awaiting) return;
    this.endTurn();
    const outcome = str(m, "outcome");
    if (outcome === "failure") this.showNotice("Something went wrong", undefined, now);
    if (outcome === "cancelled") this.showNotice("Cancelled", undefined, now);
  }

  private showNotice(text: string, ttlS: number | undefined, now: number): void {
    this.notice = { text, until: deadline(now, ttlS, TIMING.noticeTtlS) };
  }

  private showPrompt(m: Message, now: number): void {
    const ttl = num(m, "ttl_s");
    this.prompt = {
      id: str(m, "id") ?? "",
      title: str(m, "title") ?? "",
      // The hint takes the last row.
      text: this.paged(str(m, "text") ?? "", 1),
      shownAt: now,
      armedDrawn: false,
      until: ttl !== undefined && ttl > 0 ? now + ttl * 1000 : undefined,
    };
  }

  private answer(answer: "yes" | "no"): void {
    const prompt = this.prompt;
    if (!prompt) return;
    this.prompt = undefined;
    this.io.send({ type: "prompt.reply", id: prompt.id, answer });
    this.io.changed();
  }

  private imageStart(m: Message): void {
    const stream = num(m, "stream") ?? -1;
    const width = num(m, "width") ?? 0;
    const height = num(m, "height") ?? 0;
    const box = BOARD.image;
    const fits =
      str(m, "format") === "rgb565" &&
      Number.isInteger(width) &&
      Number.isInteger(height) &&
      width >= 1 &&
      height >= 1 &&
      width <= box.width &&
      height <= box.height;
    this.incoming = undefined;
    if (!fits) {
      this.stats.refusedImages++;
      return;
    }
    this.incoming = { stream, width, height, ttlS: num(m, "ttl_s"), data: new Uint8Array(width * height * 2), filled: 0 };
  }

  private imageEnd(stream: number, now: number): void {
    const img = this.incoming;
    if (!img || img.stream !== stream) return;
    this.incoming = undefined;
    this.image = {
      image: { width: img.width, height: img.height, rgba: rgb565ToRgba(img.data, img.width, img.height) },
      until: deadline(now, img.ttlS, TIMING.imageTtlS),
    };
    this.imageOnTop = true;
  }

  private onAction(m: Message): void {
    const id = str(m, "id") ?? "";
    const name = str(m, "name") ?? "";
    const args = obj(m, "args");
    let result: { ok: true; result: Record<string, unknown> } | { ok: false; error: string };
    if (name === LED_ACTION) {
      const color = args?.["color"];
      if (typeof color !== "string") result = { ok: false, error: "color is required" };
      else if (!color.trim() || [...color].length > MAX_COLOR) result = { ok: false, error: `color must be 1 to ${MAX_COLOR} characters` };
      else if (!validColor(color.trim())) result = { ok: false, error: `${color} is not a colour this LED knows` };
      else {
        this.led = color.trim().toLowerCase() === "off" ? undefined : color.trim();
        result = { ok: true, result: { led: color.trim() } };
      }
    } else if (name === VOLUME_ACTION || name === BRIGHTNESS_ACTION) {
      const p = percent(args);
      if (p === undefined) result = { ok: false, error: "percent must be an integer from 0 to 100" };
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

  get speakerVolume(): number {
    return this.volume;
  }

  private startRecording(now: number): void {
    if (this.recording) return;
    if (!this.paired) {
      this.showNotice("Pair this device first", undefined, now);
      this.io.changed();
      return;
    }
    // Barge-in: talking stops the reply being played.
    this.io.speaker.stop();
    this.nextStream = (this.nextStream + 1) & 0xff;
    const r: Recording = { id: this.id("a"), stream: this.nextStream, startedAt: now, seq: 0, pending: [], samples: 0 };
    this.recording = r;
    this.io.send({ type: "audio.start", id: r.id, stream: r.stream, rate: BOARD.micRate, format: "pcm16", mode: "hold" });
    this.io.startMic();
    this.io.changed();
  }

  private stopRecording(now: number): void {
    const r = this.recording;
    if (!r) return;
    this.recording = undefined;
    this.io.stopMic();
    if (now - r.startedAt < TIMING.minPressMs) {
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "too short" });
    } else {
      if (r.pending.length) this.flushFrame(r);
      this.io.send({ type: "audio.end", id: r.id, stream: r.stream, duration_ms: Math.floor((r.samples * 1000) / BOARD.micRate) });
      this.request("", now);
    }
    this.io.changed();
  }

  private flushFrame(r: Recording): void {
    const pcm = new Uint8Array(r.pending.length * 2);
    r.pending.forEach((s, i) => {
      pcm[2 * i] = s & 0xff;
      pcm[2 * i + 1] = (s >> 8) & 0xff;
    });
    r.pending = [];
    if (this.io.sendBinary(encodeFrame(CHANNEL.audio, r.stream, r.seq, pcm))) this.stats.framesSent++;
    r.seq = (r.seq + 1) & 0xffff;
  }

  /** CANCEL released before the hold: the first of these that applies. */
  private shortCancel(now: number): void {
    if (this.prompt) {
      this.answer("no");
      return;
    }
    const r = this.recording;
    if (r) {
      this.recording = undefined;
      this.io.stopMic();
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "cancelled" });
      return;
    }
    if (this.topCard()) {
      this.card = undefined;
      return;
    }
    if (this.image) {
      this.image = undefined;
      return;
    }
    if (this.awaiting || this.io.speaker.active) {
      this.io.send({ type: "cancel" });
      this.io.speaker.stop();
      this.endTurn();
      this.showNotice("Cancelled", undefined, now);
      return;
    }
    this.notice = undefined;
  }

  /** CANCEL held 2 s: a fresh conversation. */
  private newSession(now: number): void {
    if (this.phase !== "online") return;
    const r = this.recording;
    if (r) {
      this.recording = undefined;
      this.io.stopMic();
      this.io.send({ type: "audio.cancel", id: r.id, stream: r.stream, reason: "cancelled" });
    }
    this.io.speaker.stop();
    this.io.send({ type: "session.new" });
    this.endTurn();
    this.chat.clear();
    this.showNotice("New conversation", undefined, now);
  }

  /** Everything that lived on the connection that ended. */
  private dropSession(): void {
    if (this.recording) {
      this.recording = undefined;
      this.io.stopMic();
    }
    this.io.speaker.stop();
    this.endTurn();
    this.prompt = undefined;
    this.incoming = undefined;
    this.pairing = undefined;
    this.cancelDownAt = undefined;
  }
}

/** Whether the LED can show `color`: a CSS colour, or `off`. */
function validColor(color: string): boolean {
  if (color.toLowerCase() === "off") return true;
  const css = (globalThis as { CSS?: { supports(p: string, v: string): boolean } }).CSS;
  return css ? css.supports("color", color) : /^[a-z]+$|^#[0-9a-f]{3,8}$/i.test(color);
}
