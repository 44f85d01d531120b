// The gadget in a tab: herald's admin listener serves this page at /gadget/, and it is
// a complete gadget (protocol v1) against the gadget listener. The device itself is the
// core every Herald gadget runs (device.wasm, see core.ts); this page is its host, as a
// board's firmware is: it keeps the device key in this browser's storage, opens and
// closes the WebSocket when the core asks, draws the core's view on the canvas
// (screen.ts), plays and records through Web Audio (audio.ts), turns the page's buttons
// and keys into the board's buttons, runs the core's timer, and answers the one action
// of its own, `led.set`.
//
// The gadget URL comes from `?url=ws://HOST:PORT/PATH`, else from Settings, else the
// serving herald's own gadget port and path (`server.json` beside this page) on the
// page's host name, else the default port and path (ws://HOST:8765/gadget).

import { audioContext, Microphone, Speaker } from "./audio.js";
import { DeviceCore, type Action, type Board, type Button, type View } from "./core.js";
import { ScreenPainter } from "./screen.js";

const STORE = { key: "herald.gadget.key", name: "herald.gadget.name", token: "herald.gadget.token", url: "herald.gadget.url" } as const;
const DEFAULT_NAME = "Tab Gadget";
const DEFAULT_PORT = 8765;
const DEFAULT_PATH = "/gadget";
const SUBPROTOCOL = "hermes-gadget.v1";
const LOG_LINES = 120;
/** The page's own action: the status LED. */
const LED_ACTION = {
  name: "led.set",
  description: "Set the colour of the status LED (a CSS colour name such as red, green or blue, or off).",
  params: { type: "object", properties: { color: { type: "string" } }, required: ["color"] },
};
/** Longest colour name `led.set` takes. */
const MAX_COLOR = 32;

function $<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing`);
  return el as T;
}

const ui = {
  conn: $<HTMLParagraphElement>("conn"),
  canvas: $<HTMLCanvasElement>("screen"),
  screenText: $<HTMLDivElement>("screen-text"),
  led: $<HTMLSpanElement>("led"),
  level: $<HTMLSpanElement>("level"),
  talk: $<HTMLButtonElement>("talk"),
  cancel: $<HTMLButtonElement>("cancel"),
  up: $<HTMLButtonElement>("up"),
  down: $<HTMLButtonElement>("down"),
  answers: $<HTMLDivElement>("answers"),
  yes: $<HTMLButtonElement>("yes"),
  no: $<HTMLButtonElement>("no"),
  composer: $<HTMLFormElement>("composer"),
  text: $<HTMLInputElement>("text"),
  tryList: $<HTMLUListElement>("try"),
  deviceId: $<HTMLElement>("device-id"),
  serverUrl: $<HTMLElement>("server-url"),
  session: $<HTMLElement>("session"),
  mic: $<HTMLElement>("mic"),
  speaker: $<HTMLElement>("speaker"),
  settingsForm: $<HTMLFormElement>("settings-form"),
  url: $<HTMLInputElement>("url"),
  name: $<HTMLInputElement>("name"),
  token: $<HTMLInputElement>("token"),
  reset: $<HTMLButtonElement>("reset"),
  log: $<HTMLOListElement>("log"),
};

const now = (): number => performance.now();

// ---- settings ----

/** The gadget endpoint of the herald that served this page, once asked. */
let servedBy: string | undefined;

/** Asks the serving herald where its gadgets connect; a page served by anything else
 * keeps the default. The host is the page's own, as the console's link does (the page
 * may come through a tunnel under another name). */
async function learnServerUrl(): Promise<void> {
  try {
    const answer = await fetch("server.json", { cache: "no-store" });
    if (!answer.ok) return;
    const { gadget_url } = (await answer.json()) as { gadget_url?: unknown };
    if (typeof gadget_url !== "string" || !validUrl(gadget_url)) return;
    const url = new URL(gadget_url);
    url.hostname = location.hostname || url.hostname;
    servedBy = url.toString();
  } catch {
    // not served by herald: the default stands
  }
}

function defaultUrl(): string {
  if (servedBy) return servedBy;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const host = location.hostname || "127.0.0.1";
  return `${scheme}://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${DEFAULT_PORT}${DEFAULT_PATH}`;
}

function validUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === "ws:" || u.protocol === "wss:";
  } catch {
    return false;
  }
}

/** Whether `url` names the host this page came from. A link that points the gadget at
 * another host is not followed: that server would get the gadget's token and could
 * relay its key's answers; another server is set by hand in Settings. */
function onThisHost(url: string): boolean {
  const loopback = (host: string) =>
    host === "localhost" || host === "[::1]" || host.startsWith("127.");
  const there = new URL(url).hostname;
  const here = location.hostname;
  return there === here || (loopback(there) && loopback(here));
}

function gadgetUrl(): string {
  const asked = new URLSearchParams(location.search).get("url");
  if (asked && validUrl(asked) && onThisHost(asked)) return asked;
  const stored = localStorage.getItem(STORE.url);
  return stored && validUrl(stored) ? stored : defaultUrl();
}

// ---- the host ----

/** Everything the page keeps beside the core. */
class Host {
  private ws: WebSocket | undefined;
  /** Where the device connects, as of its last boot. */
  private url = "";
  private timer: ReturnType<typeof setTimeout> | undefined;
  private armTimer: ReturnType<typeof setTimeout> | undefined;
  private drawPending = false;
  private led: string | undefined;
  private volume = 80;
  private framesSent = 0;
  private readonly painter: ScreenPainter;
  private readonly speaker = new Speaker(() => this.draw());
  private readonly mic: Microphone;

  constructor(
    private readonly core: DeviceCore,
    board: Board,
  ) {
    this.painter = new ScreenPainter(ui.canvas, board);
    this.mic = new Microphone(
      board.mic_rate,
      (samples) => {
        this.core.mic(samples, now());
        this.run();
        this.draw(); // the level meter
      },
      // No samples will come: as if TALK came up, which ends the recording.
      () => this.press("talk", false),
    );
  }

  /** Start the device anew (a new key, name, token or URL): the old connection goes. */
  boot(): void {
    this.dropSocket(1000, "restarting");
    this.url = gadgetUrl();
    ui.serverUrl.textContent = this.url;
    ui.session.textContent = "none";
    // The key as the core asked it kept: base64.
    const settings = {
      name: localStorage.getItem(STORE.name) || DEFAULT_NAME,
      token: localStorage.getItem(STORE.token) || undefined,
      key: localStorage.getItem(STORE.key) || undefined,
    };
    let booted = this.core.boot(settings, now());
    if ("error" in booted && settings.key !== undefined) {
      // A stored key that is not one (edited by hand): a new device, as in a new browser.
      this.trace("out", `${booted.error}: making a new key`);
      booted = this.core.boot({ ...settings, key: undefined }, now());
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

  press(button: Button, down: boolean): void {
    this.core.button(button, down, now());
    this.run();
  }

  /** A press and its release. */
  click(button: Button): void {
    this.press(button, true);
    this.press(button, false);
  }

  /** Type `text` to the agent: why not, or undefined. */
  sendText(text: string): string | undefined {
    const refused = this.core.sendText(text, now());
    this.run();
    return refused;
  }

  /** Carry out what the core asks, then sleep until its next deadline. */
  private run(): void {
    for (let action = this.core.action(); action; action = this.core.action()) this.carryOut(action);
    if (this.timer) clearTimeout(this.timer);
    const at = this.core.deadline();
    this.timer =
      at === undefined
        ? undefined
        : setTimeout(() => {
            this.core.timeout(now());
            this.run();
          }, Math.max(0, at - now()));
  }

  private carryOut(action: Action): void {
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
        return this.trace("out", `binary ch${b[0]} stream ${b[1]} seq ${(b[2] ?? 0) | ((b[3] ?? 0) << 8)}`);
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
        // Firmware confirmation, rollback and restart: a tab installs no firmware.
        return;
    }
  }

  /** The page's own action: `led.set`. */
  private invoke(id: string, name: string, args: unknown): void {
    const color = (args as { color?: unknown } | null)?.color;
    let outcome: { result: unknown } | { error: string };
    if (name !== LED_ACTION.name) outcome = { error: `no action ${name}` };
    else if (typeof color !== "string" || color.trim() === "") outcome = { error: "color is required" };
    else if (color.length > MAX_COLOR) outcome = { error: `color is longer than ${MAX_COLOR} characters` };
    else {
      this.led = color === "off" ? undefined : color;
      outcome = { result: { led: color } };
      this.draw();
    }
    this.core.completeAction(id, outcome);
  }

  private connect(): void {
    this.dropSocket(1000, "reconnecting");
    const ws = new WebSocket(this.url, SUBPROTOCOL);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      this.core.connected(now());
      this.run();
    };
    ws.onmessage = (e: MessageEvent<string | ArrayBuffer>) => {
      if (this.ws !== ws) return;
      if (typeof e.data === "string") {
        this.traceIn(e.data);
        this.core.text(e.data, now());
      } else {
        this.core.binary(new Uint8Array(e.data), now());
      }
      this.run();
    };
    ws.onclose = (e: CloseEvent) => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      // 1005 and 1006: no close frame came.
      const code = e.code === 1005 || e.code === 1006 ? undefined : e.code;
      this.core.closed(code, e.reason, now());
      this.run();
    };
  }

  /** Close the connection; the core counts it gone already. */
  private dropSocket(code: number, reason: string): void {
    const ws = this.ws;
    this.ws = undefined;
    if (!ws) return;
    try {
      ws.close(code, reason);
    } catch {
      // A browser closes with 1000 or 3000–4999 only.
      ws.close(1000, reason);
    }
  }

  private traceIn(text: string): void {
    try {
      const m = JSON.parse(text) as { type?: unknown; session?: unknown };
      if (m.type === "welcome" && typeof m.session === "string") ui.session.textContent = m.session;
    } catch {
      return this.trace("in", "(a frame that is not a message)");
    }
    this.trace("in", text.length > 300 ? `${text.slice(0, 300)}…` : text);
  }

  trace(direction: "in" | "out", summary: string): void {
    const li = document.createElement("li");
    li.className = direction;
    li.textContent = `${direction === "in" ? "←" : "→"} ${summary}`;
    ui.log.append(li);
    while (ui.log.childElementCount > LOG_LINES) ui.log.firstElementChild?.remove();
  }

  /** Draw once the current event is done with. */
  draw(): void {
    if (this.drawPending) return;
    this.drawPending = true;
    queueMicrotask(() => {
      this.drawPending = false;
      this.render(this.core.view());
    });
  }

  private render(view: View): void {
    const listening = view.screen === "listening";
    const armed = view.answers_from !== null && now() >= view.answers_from;
    if (this.armTimer) clearTimeout(this.armTimer);
    // The question's answers wake when its guard ends.
    if (view.answers_from !== null && !armed) this.armTimer = setTimeout(() => this.draw(), view.answers_from - now());
    this.painter.paint({ ...view, armed, level: listening ? this.mic.level : undefined });
    document.body.dataset["screen"] = view.screen;
    document.body.dataset["phase"] = view.phase;
    document.body.dataset["paired"] = String(view.paired);
    const shown = [view.status, view.title, ...view.lines, view.notice].filter((s): s is string => !!s).join("\n");
    if (ui.screenText.textContent !== shown) ui.screenText.textContent = shown;
    ui.canvas.setAttribute("aria-label", `The gadget's screen: ${shown.replace(/\n/g, ". ")}`);

    ui.answers.hidden = view.screen !== "prompt";
    ui.yes.disabled = ui.no.disabled = !armed;

    const led = this.led;
    ui.led.dataset["color"] = led ?? "";
    ui.led.style.backgroundColor = led ?? "";
    ui.led.style.color = led ?? ""; // the glow
    ui.led.classList.toggle("on", led !== undefined);
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
    ui.speaker.textContent = `${this.speaker.state}${blocked}; ${(s.scheduledMs / 1000).toFixed(1)} s played, volume ${this.volume}%`;
  }
}

function connText(view: View): string {
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

// ---- input ----

function inField(target: EventTarget | null): boolean {
  return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement;
}

function hold(button: HTMLButtonElement, down: () => void, up: () => void): void {
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

const KEYS: Record<string, Button> = { Space: "talk", Escape: "cancel", ArrowUp: "up", ArrowDown: "down" };

function wireInput(host: Host): void {
  // Web Audio may only start after a gesture: every gesture makes sure it runs.
  for (const type of ["pointerdown", "keydown"]) document.addEventListener(type, () => audioContext(), { capture: true });

  for (const [el, button] of [[ui.talk, "talk"], [ui.cancel, "cancel"]] as const) {
    hold(el, () => host.press(button, true), () => host.press(button, false));
  }
  ui.up.addEventListener("click", () => host.click("up"));
  ui.down.addEventListener("click", () => host.click("down"));
  // On a question TALK answers yes and CANCEL no.
  ui.yes.addEventListener("click", () => host.click("talk"));
  ui.no.addEventListener("click", () => host.click("cancel"));

  const held = new Set<string>();
  const button = (e: KeyboardEvent) => KEYS[e.code === "Space" ? "Space" : e.key];
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
  // A key held while the tab loses focus would never come up.
  window.addEventListener("blur", () => {
    for (const b of held) host.press(b as Button, false);
    held.clear();
  });

  const send = (text: string) => {
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
    const b = (e.target as HTMLElement).closest<HTMLButtonElement>("button[data-text]");
    if (b?.dataset["text"]) send(b.dataset["text"]);
  });
}

function wireSettings(host: Host): void {
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
    // The address bar names the server this page talks to.
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

async function main(): Promise<void> {
  const [module] = await Promise.all([fetch("device.wasm"), learnServerUrl()]);
  let core: DeviceCore;
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
