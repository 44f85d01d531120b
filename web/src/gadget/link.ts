// The connection a gadget keeps to herald: open the WebSocket, hello → challenge → auth
// → welcome, answer and send heartbeats, and reconnect with the reference device's
// backoff. It knows nothing of screens or audio: it hands the session's messages and
// frames to whoever listens, and sends what it is given.

import {
  authMac,
  decodeFrame,
  decodeMessage,
  encodeMessage,
  num,
  SETUP_CODES,
  str,
  SUBPROTOCOL,
  TIMING,
  toBase64,
  type Frame,
  type Message,
  type Outgoing,
} from "./proto.js";

export type Phase = "offline" | "connecting" | "handshake" | "online";

/** The device's identity: its key (a secret) and the id that follows from it. */
export interface Identity {
  key: Uint8Array;
  deviceId: string;
}

export interface Welcome {
  session: string;
  paired: boolean;
  heartbeatS: number;
}

export interface LinkListener {
  /** The phase changed; offline carries when the next attempt is and why the last ended. */
  phase(phase: Phase, offline?: { retryAt: number; reason: string; setup?: string }): void;
  welcome(welcome: Welcome): void;
  /** A text frame of the established session (not the handshake's). */
  message(message: Message): void;
  binary(frame: Frame): void;
  /** Every frame in and out, for the page's log; binary frames by their header only. */
  trace?(direction: "in" | "out", summary: string): void;
}

export interface LinkOptions {
  url: string;
  identity: Identity;
  /** The `hello` to send, built fresh for each connection. */
  hello: () => Outgoing;
  listener: LinkListener;
}

type Timer = ReturnType<typeof setTimeout>;

export class GadgetLink {
  private ws: WebSocket | undefined;
  private phaseNow: Phase = "offline";
  private backoffStep = 0;
  private onlineSince: number | undefined;
  private refused: string | undefined;
  private heartbeatMs = TIMING.heartbeatDefaultS * 1000;
  private lastInbound = 0;
  private timers = new Set<Timer>();
  private phaseTimer: Timer | undefined;
  private pingTimer: ReturnType<typeof setInterval> | undefined;
  private stopped = true;

  constructor(private readonly options: LinkOptions) {}

  get phase(): Phase {
    return this.phaseNow;
  }

  /** Connects now, and keeps reconnecting until `stop`. */
  start(): void {
    this.stopped = false;
    this.backoffStep = 0;
    this.connect();
  }

  /** Closes the connection and makes no more attempts. */
  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.teardown(1000, "stopped");
    this.setPhase("offline", { retryAt: 0, reason: "stopped" });
  }

  /** Sends a message of the established session; false when not online. */
  send(message: Outgoing): boolean {
    if (this.phaseNow !== "online") return false;
    return this.sendNow(message);
  }

  sendBinary(bytes: Uint8Array): boolean {
    const ws = this.ws;
    if (this.phaseNow !== "online" || !ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(bytes);
    this.options.listener.trace?.("out", `binary ch${bytes[0]} stream ${bytes[1]} seq ${(bytes[2] ?? 0) | ((bytes[3] ?? 0) << 8)}`);
    return true;
  }

  private sendNow(message: Outgoing): boolean {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(encodeMessage(message));
    this.options.listener.trace?.("out", redact(message));
    return true;
  }

  private later(ms: number, f: () => void): Timer {
    const t = setTimeout(() => {
      this.timers.delete(t);
      f();
    }, ms);
    this.timers.add(t);
    return t;
  }

  private setPhase(phase: Phase, offline?: { retryAt: number; reason: string; setup?: string }): void {
    this.phaseNow = phase;
    this.options.listener.phase(phase, offline);
  }

  private connect(): void {
    if (this.stopped) return;
    this.refused = undefined;
    this.setPhase("connecting");
    let ws: WebSocket;
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
    ws.onmessage = (event: MessageEvent) => {
      if (ws !== this.ws) return;
      this.lastInbound = Date.now();
      if (typeof event.data === "string") void this.onText(event.data);
      else if (event.data instanceof ArrayBuffer) this.onBinary(new Uint8Array(event.data));
    };
    ws.onclose = (event: CloseEvent) => {
      if (ws !== this.ws) return;
      this.ws = undefined;
      const code = this.refused ?? (SETUP_CODES.has(event.reason) || event.reason === "busy" ? event.reason : undefined);
      this.goOffline(event.reason || `closed (${event.code})`, code);
    };
    ws.onerror = () => {
      // A close event follows, with the details there are.
    };
  }

  private armPhaseTimer(ms: number, reason: string): void {
    if (this.phaseTimer) clearTimeout(this.phaseTimer);
    this.phaseTimer = this.later(ms, () => {
      this.phaseTimer = undefined;
      this.teardown(1000, reason);
      this.goOffline(reason);
    });
  }

  private async onText(text: string): Promise<void> {
    const m = decodeMessage(text);
    const listener = this.options.listener;
    if (!m) {
      listener.trace?.("in", "(a frame that is not a message)");
      return;
    }
    listener.trace?.("in", text.length > 300 ? `${text.slice(0, 300)}…` : text);
    switch (m.type) {
      case "ping":
        this.sendNow(m["ts"] === undefined ? { type: "pong" } : { type: "pong", ts: m["ts"] });
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

  private async answerChallenge(m: Message): Promise<void> {
    const { key, deviceId } = this.options.identity;
    const nonce = str(m, "nonce") ?? "";
    if (m["enrolled"] === true) {
      this.sendNow({ type: "auth", mac: await authMac(key, deviceId, nonce) });
    } else {
      // First contact: the key crosses the network this once (trust on first use).
      this.sendNow({ type: "auth", key: toBase64(key) });
    }
  }

  private onWelcome(m: Message): void {
    if (this.phaseTimer) clearTimeout(this.phaseTimer);
    this.phaseTimer = undefined;
    const heartbeatS = Math.min(TIMING.heartbeatMaxS, Math.max(TIMING.heartbeatMinS, num(m, "heartbeat_s") ?? TIMING.heartbeatDefaultS));
    this.heartbeatMs = heartbeatS * 1000;
    this.onlineSince = Date.now();
    this.setPhase("online");
    this.options.listener.welcome({ session: str(m, "session") ?? "", paired: m["paired"] === true, heartbeatS });
    // Our own pings, and the dead-connection check: 3 heartbeats with nothing heard.
    this.pingTimer = setInterval(() => {
      if (Date.now() - this.lastInbound > this.heartbeatMs * TIMING.deadAfterHeartbeats) {
        this.teardown(1000, "heartbeat timeout");
        this.goOffline("heartbeat timeout");
      } else {
        this.sendNow({ type: "ping", ts: Date.now() });
      }
    }, this.heartbeatMs);
  }

  private onBinary(bytes: Uint8Array): void {
    if (this.phaseNow !== "online") return;
    const frame = decodeFrame(bytes);
    if (frame) this.options.listener.binary(frame);
  }

  private teardown(code: number, reason: string): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    if (this.phaseTimer) clearTimeout(this.phaseTimer);
    this.phaseTimer = undefined;
    const ws = this.ws;
    this.ws = undefined;
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(code, reason);
  }

  /** Offline until the next attempt: the backoff, or the longest wait after a refusal. */
  private goOffline(reason: string, code?: string): void {
    this.teardown(1000, reason);
    if (this.stopped) return;
    const steps = TIMING.backoffS;
    let waitS: number;
    const setup = code !== undefined && SETUP_CODES.has(code) ? code : undefined;
    if (setup) {
      waitS = steps[steps.length - 1]!;
    } else {
      if (this.onlineSince !== undefined && Date.now() - this.onlineSince >= TIMING.backoffResetAfterS * 1000) {
        this.backoffStep = 0;
      }
      waitS = steps[Math.min(this.backoffStep, steps.length - 1)]!;
      this.backoffStep = Math.min(this.backoffStep + 1, steps.length - 1);
    }
    this.onlineSince = undefined;
    const retryAt = Date.now() + waitS * 1000;
    this.setPhase("offline", setup ? { retryAt, reason: code ?? reason, setup } : { retryAt, reason: code ?? reason });
    this.later(waitS * 1000, () => this.connect());
  }

  /** Try again now instead of waiting out the backoff (the page's Reconnect button). */
  retryNow(): void {
    if (this.stopped || this.phaseNow !== "offline") return;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.connect();
  }
}

/** A message as the log shows it: the key never, the token never. */
function redact(m: Outgoing): string {
  const shown: Record<string, unknown> = { ...m };
  if ("key" in shown) shown["key"] = "<the device key>";
  if ("mac" in shown) shown["mac"] = "<mac>";
  if ("token" in shown) shown["token"] = "<token>";
  if (shown["type"] === "hello") return `hello ${shown["device_id"]}`;
  return JSON.stringify(shown);
}
