// The gadget in a tab: herald's admin listener serves this page at /gadget/, and it is
// a complete gadget (protocol v1) against the gadget listener: its key in this browser's
// storage, the canvas as its screen, the microphone and speaker through Web Audio, the
// buttons on the page and the keyboard. This file only wires the page; the protocol is
// in link.ts, the device's behaviour in device.ts, drawing in screen.ts, audio in audio.ts.
//
// The gadget URL comes from `?url=ws://HOST:PORT/PATH`, else from Settings, else the
// serving herald's own gadget port and path (`server.json` beside this page) on the
// page's host name, else the default port and path (ws://HOST:8765/gadget).

import { audioContext, Microphone, Speaker } from "./audio.js";
import { BOARD, GadgetDevice, type View } from "./device.js";
import { GadgetLink, type Identity } from "./link.js";
import { wrap } from "./pager.js";
import { DEFAULT_PATH, DEFAULT_PORT, deviceIdOf, fromBase64, KEY_LEN, newKey, toBase64 } from "./proto.js";
import { ScreenPainter } from "./screen.js";

const STORE = { key: "herald.gadget.key", name: "herald.gadget.name", token: "herald.gadget.token", url: "herald.gadget.url" } as const;
const DEFAULT_NAME = "Tab Gadget";
const LOG_LINES = 120;

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

// ---- settings and identity ----

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

/** The stored key, or a new one (kept at once: the id follows from it). */
function loadKey(): Uint8Array {
  const stored = localStorage.getItem(STORE.key);
  if (stored) {
    try {
      const key = fromBase64(stored);
      if (key.length === KEY_LEN) return key;
    } catch {
      // not a key: make a new one
    }
  }
  const key = newKey();
  localStorage.setItem(STORE.key, toBase64(key));
  return key;
}

// ---- the device ----

const painter = new ScreenPainter(ui.canvas);
let redrawPending = false;

const speaker = new Speaker(() => {
  device.speakerChanged();
});
const mic = new Microphone(
  BOARD.micRate,
  (samples) => device.micSamples(samples),
  (why) => device.micFailed(why),
);
let link: GadgetLink | undefined;

const device = new GadgetDevice({
  send: (m) => link?.send(m) ?? false,
  sendBinary: (b) => link?.sendBinary(b) ?? false,
  startMic: () => mic.start(),
  stopMic: () => mic.stop(),
  speaker,
  changed: () => redraw(),
  brightness: (p) => {
    ui.canvas.style.filter = `brightness(${Math.max(0.15, p / 100)})`;
  },
});

function redraw(): void {
  if (redrawPending) return;
  redrawPending = true;
  queueMicrotask(() => {
    redrawPending = false;
    render(device.view());
  });
}

function render(view: View): void {
  if (view.screen === "listening") view.level = mic.level;
  painter.paint(view);
  document.body.dataset["screen"] = view.screen;
  document.body.dataset["phase"] = device.phase;
  document.body.dataset["paired"] = String(device.paired);
  const shown = [view.status, view.title, view.code ? `Pairing code: ${view.code}` : undefined, ...view.lines, view.notice]
    .filter((s): s is string => !!s)
    .join("\n");
  if (ui.screenText.textContent !== shown) ui.screenText.textContent = shown;
  ui.canvas.setAttribute("aria-label", `The gadget's screen: ${shown.replace(/\n/g, ". ")}`);

  const prompt = view.screen === "prompt";
  ui.answers.hidden = !prompt;
  ui.yes.disabled = ui.no.disabled = !(prompt && view.armed);

  const led = device.led;
  ui.led.dataset["color"] = led ?? "";
  ui.led.style.backgroundColor = led ?? "";
  ui.led.style.color = led ?? ""; // the glow
  ui.led.classList.toggle("on", led !== undefined);
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
  ui.speaker.textContent = `${speaker.state}${blocked}; ${s.streams} streams, ${(s.scheduledMs / 1000).toFixed(1)} s played, ${s.underruns} underruns, ${s.gaps} gaps, volume ${device.speakerVolume}%`;
}

function connText(view: View): string {
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

function trace(direction: "in" | "out", summary: string): void {
  const li = document.createElement("li");
  li.className = direction;
  li.textContent = `${direction === "in" ? "←" : "→"} ${summary}`;
  ui.log.append(li);
  while (ui.log.childElementCount > LOG_LINES) ui.log.firstElementChild?.remove();
}

function connect(identity: Identity): void {
  link?.stop();
  const url = gadgetUrl();
  ui.serverUrl.textContent = url;
  const name = localStorage.getItem(STORE.name) || DEFAULT_NAME;
  const token = localStorage.getItem(STORE.token) || undefined;
  link = new GadgetLink({
    url,
    identity,
    hello: () => device.hello(name, token),
    listener: {
      phase: (phase, offline) => device.onPhase(phase, offline),
      welcome: (w) => device.onWelcome(w),
      message: (m) => device.onMessage(m),
      binary: (f) => device.onBinary(f),
      trace,
    },
  });
  link.start();
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

function wireInput(): void {
  // Web Audio may only start after a gesture: every gesture makes sure it runs.
  for (const type of ["pointerdown", "keydown"]) document.addEventListener(type, () => audioContext(), { capture: true });

  hold(ui.talk, () => device.talkDown(), () => device.talkUp());
  hold(ui.cancel, () => device.cancelDown(), () => device.cancelUp());
  ui.up.addEventListener("click", () => device.page(false));
  ui.down.addEventListener("click", () => device.page(true));
  ui.yes.addEventListener("click", () => device.answerButton(true));
  ui.no.addEventListener("click", () => device.answerButton(false));

  const keys = new Set<string>();
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
  // A key held while the tab loses focus would never come up.
  window.addEventListener("blur", () => {
    if (keys.delete("Space")) device.talkUp();
    if (keys.delete("Escape")) device.cancelUp();
  });

  const send = (text: string) => {
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
    const button = (e.target as HTMLElement).closest<HTMLButtonElement>("button[data-text]");
    if (button?.dataset["text"]) send(button.dataset["text"]);
  });
}

function wireSettings(identity: () => Identity | undefined, setIdentity: (i: Identity) => void): void {
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

async function main(): Promise<void> {
  let identity: Identity | undefined;
  wireInput();
  await learnServerUrl();
  wireSettings(
    () => identity,
    (i) => {
      identity = i;
      device.deviceId = i.deviceId;
      ui.deviceId.textContent = i.deviceId;
    },
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
