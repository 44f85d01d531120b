// The browser chat herald serves at `/` on the phone port: the TypeScript SDK, a page of
// plain HTML, and the avatar beside it. Built by build.mjs into one file, dist/chat.js.

import {
  CLARIFY_OTHER,
  decodeBase64Url,
  encodeWav,
  HeraldClient,
  newId,
  toVoiceSamples,
  type Card,
  type ConnectionState,
  type MediaKindUp,
  type ReceivedMedia,
  type Reply,
} from "../../sdk/typescript/src/index.js";

const STORE = { token: "herald.token", device: "herald.device", name: "herald.name", url: "herald.url", notify: "herald.notify" } as const;

function $<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing`);
  return el as T;
}

const ui = {
  status: $<HTMLParagraphElement>("status"),
  settings: $<HTMLFormElement>("settings"),
  openSettings: $<HTMLButtonElement>("open-settings"),
  token: $<HTMLInputElement>("token"),
  deviceName: $<HTMLInputElement>("device-name"),
  url: $<HTMLInputElement>("url"),
  deviceId: $<HTMLElement>("device-id"),
  forget: $<HTMLButtonElement>("forget"),
  messages: $<HTMLOListElement>("messages"),
  typing: $<HTMLParagraphElement>("typing"),
  uploads: $<HTMLDivElement>("uploads"),
  composer: $<HTMLFormElement>("composer"),
  text: $<HTMLTextAreaElement>("text"),
  file: $<HTMLInputElement>("file"),
  record: $<HTMLButtonElement>("record"),
  avatar: $<HTMLIFrameElement>("avatar"),
  notifyRow: $<HTMLDivElement>("notify-row"),
  notify: $<HTMLInputElement>("notify"),
  notifyNote: $<HTMLParagraphElement>("notify-note"),
};

/** This browser's device id: made once, kept in localStorage. */
function deviceId(): string {
  let id = localStorage.getItem(STORE.device);
  if (!id) {
    id = newId("web");
    localStorage.setItem(STORE.device, id);
  }
  return id;
}

function defaultUrl(): string {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
}

// ---- the avatar ----

type AvatarCall = "setState" | "speak" | "setVolume";
interface AvatarApi {
  setState(state: string): void;
  speak(text: string): void;
  setVolume(level: number): void;
}

function avatar(call: AvatarCall, arg: string | number): void {
  const win = ui.avatar.contentWindow as (Window & { hermesAvatar?: AvatarApi }) | null;
  if (!win) return;
  try {
    const api = win.hermesAvatar;
    if (api) {
      (api[call] as (a: string | number) => void)(arg);
      return;
    }
  } catch {
    // Another origin: fall through to postMessage, which the avatar page also takes.
  }
  // Only to the page the frame was given: the lines it speaks are the agent's replies. An
  // opaque origin (a data: URL) cannot be named as a target, so it gets nothing.
  const origin = new URL(ui.avatar.src, location.href).origin;
  if (origin !== "null") win.postMessage({ hermesAvatar: call, args: [arg] }, origin);
}

// ---- the conversation ----

function scrollDown(): void {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function bubble(kind: "me" | "agent" | "notice" | "card", key?: string): HTMLLIElement {
  const existing = key ? ui.messages.querySelector<HTMLLIElement>(`li[data-id="${CSS.escape(key)}"]`) : null;
  if (existing) return existing;
  const li = document.createElement("li");
  li.className = kind;
  if (key) li.dataset["id"] = key;
  ui.messages.append(li);
  return li;
}

function notice(text: string): void {
  bubble("notice").textContent = text;
  scrollDown();
}

function showReply(reply: Reply): void {
  const li = bubble("agent", reply.id);
  li.textContent = reply.text;
  li.dataset["final"] = String(reply.final);
  if (reply.final) avatar("speak", reply.text);
  scrollDown();
  followLink();
}

function showCard(c: Card, client: HeraldClient): void {
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
      client.answer(c.id, o.id);
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
      client.answerText(c.id, input.value.trim());
      for (const other of li.querySelectorAll("button")) other.disabled = true;
    });
    li.append(form);
  }
  scrollDown();
  followLink();
}

function closeCard(promptId: string, optionId: string | undefined, expired: boolean): void {
  const li = ui.messages.querySelector<HTMLLIElement>(`li.card[data-id="${CSS.escape(promptId)}"]`);
  if (!li) return;
  li.dataset["done"] = optionId ?? "expired";
  for (const b of li.querySelectorAll("button")) b.disabled = true;
  const p = document.createElement("p");
  p.className = "small";
  const label = [...li.querySelectorAll<HTMLButtonElement>("button[data-option]")].find((b) => b.dataset["option"] === optionId)?.textContent;
  p.textContent = expired ? "This question has expired." : `Answered: ${label ?? optionId ?? ""}`;
  li.append(p);
  void closeNotifications(promptId);
}

function showMedia(m: ReceivedMedia): void {
  const li = bubble("agent", `media-${m.id}`);
  li.replaceChildren();
  const href = m.data ? URL.createObjectURL(new Blob([m.data as Uint8Array<ArrayBuffer>], { type: m.mime })) : m.url;
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

function statusText(state: ConnectionState): string {
  switch (state) {
    case "idle":
      return "Not connected";
    case "connecting":
      return "Connecting…";
    case "ready":
      return "Connected";
    case "waiting":
      // Also what a page opened with herald out of reach shows (from the service worker).
      return "Not connected; trying again soon";
    case "stopped":
      return "Disconnected";
  }
}

function setStatus(state: ConnectionState, text = statusText(state)): void {
  ui.status.dataset["state"] = state;
  ui.status.textContent = text;
}

// ---- uploads and voice ----

function kindOf(file: File): MediaKindUp {
  if (file.type.startsWith("image/")) return "image";
  if (file.type.startsWith("video/")) return "video";
  if (file.type.startsWith("audio/")) return "audio";
  return "document";
}

async function sendFile(client: HeraldClient, file: File): Promise<void> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const row = document.createElement("label");
  row.textContent = `${file.name} `;
  const bar = document.createElement("progress");
  bar.max = Math.max(1, bytes.length);
  bar.value = 0;
  row.append(bar);
  // Listen first: a small file leaves at once, inside upload().
  const id = newId("f");
  bar.dataset["id"] = id;
  ui.uploads.append(row);
  const off = client.on("uploadProgress", (p) => {
    if (p.id !== id) return;
    bar.value = p.sentBytes;
    if (p.sentBytes >= p.totalBytes) {
      off();
      row.dataset["done"] = "true";
      setTimeout(() => row.remove(), 1500);
    }
  });
  try {
    client.upload(bytes, { id, kind: kindOf(file), mime: file.type || "application/octet-stream", filename: file.name });
  } catch (e) {
    off();
    row.remove();
    notice(`Not sent: ${(e as Error).message}`);
    return;
  }
  bubble("me", id).textContent = `File: ${file.name}`;
  scrollDown();
}

interface Recording {
  stop(): Promise<Uint8Array>;
}

async function startRecording(onLevel: (level: number) => void): Promise<Recording> {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true } });
  const ctx = new AudioContext();
  const source = ctx.createMediaStreamSource(stream);
  // ScriptProcessor is old but everywhere, and needs no second file for a worklet.
  const node = ctx.createScriptProcessor(4096, 1, 1);
  const chunks: Float32Array[] = [];
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
    },
  };
}

// ---- offline ----

/**
 * Registers sw.js, which keeps this page's files so that it still opens, not connected,
 * when herald cannot be reached. Browsers give a worker only to a secure context (HTTPS,
 * or loopback); elsewhere (plain http on a LAN address) the page simply goes without.
 */
function keepForOffline(): void {
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch((e: unknown) => {
    console.warn(`The chat will not open offline: ${(e as Error).message}`);
  });
}

// ---- notifications (Web Push) ----

/** How long the browser may take to subscribe with its push service. */
const SUBSCRIBE_TIMEOUT_MS = 30_000;
const VISIBLE_NOTE = "When the chat is closed or out of sight: the agent's questions, deliveries and finished replies, on this device.";

/** Push needs a service worker and the Push API: a secure context (HTTPS, or loopback). */
function pushAvailable(): boolean {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

function notifyNote(text: string): void {
  ui.notifyNote.textContent = text;
}

/** The browser's subscription for `vapidKey`: the one it has if made with that key, else a new one. */
async function browserSubscription(vapidKey: string): Promise<PushSubscription> {
  const registration = await navigator.serviceWorker.ready;
  const key = decodeBase64Url(vapidKey);
  const current = await registration.pushManager.getSubscription();
  if (current) {
    const had = current.options.applicationServerKey;
    if (had && new Uint8Array(had).join() === key.join()) return current;
    // Another server key (a new data dir): that subscription can no longer be used.
    await current.unsubscribe();
  }
  // A browser whose push service cannot be reached may never answer: give up in time.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("the browser's push service did not answer")), SUBSCRIBE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key as Uint8Array<ArrayBuffer> }), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Sends this browser's subscription to herald; throws what went wrong. */
async function registerPush(c: HeraldClient, vapidKey: string): Promise<void> {
  const json = (await browserSubscription(vapidKey)).toJSON();
  const p256dh = json.keys?.["p256dh"];
  const auth = json.keys?.["auth"];
  if (!json.endpoint || !p256dh || !auth) throw new Error("the browser gave a subscription without keys");
  await c.subscribePush({ endpoint: json.endpoint, keys: { p256dh, auth } });
}

/** The switch was turned on: ask for permission (in this click, never on load), then subscribe. */
async function turnNotificationsOn(): Promise<void> {
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
    notifyNote(`Could not turn notifications on: ${(e as Error).message}`);
  } finally {
    ui.notify.disabled = false;
  }
}

async function turnNotificationsOff(): Promise<void> {
  localStorage.removeItem(STORE.notify);
  ui.notify.disabled = true;
  try {
    // Herald forgets it; the browser's own goes too, so a push sent meanwhile is refused.
    if (client?.state === "ready" && client.ready?.push) await client.unsubscribePush().catch(() => undefined);
    const registration = await navigator.serviceWorker.getRegistration("/");
    await (await registration?.pushManager.getSubscription())?.unsubscribe();
    notifyNote(VISIBLE_NOTE);
  } finally {
    ui.notify.disabled = false;
  }
}

/** At each ready: show the switch if herald offers push, and renew a subscription that is on. */
function notificationsAtReady(c: HeraldClient, push: { vapidKey: string } | undefined): void {
  ui.notifyRow.hidden = !(push && pushAvailable());
  if (ui.notifyRow.hidden || !push) return;
  const wanted = localStorage.getItem(STORE.notify) === "on";
  const granted = Notification.permission === "granted";
  ui.notify.checked = wanted && granted;
  if (!wanted) return;
  if (!granted) {
    // Permission was taken back in the browser: off, here and in herald.
    localStorage.removeItem(STORE.notify);
    void c.unsubscribePush().catch(() => undefined);
    notifyNote("Notifications were turned off: this page may no longer show them.");
    return;
  }
  // The browser's subscription may have changed, or herald dropped it: say it again.
  registerPush(c, push.vapidKey).catch((e: unknown) => notifyNote(`Notifications may not arrive: ${(e as Error).message}`));
}

/** Closes the notifications about card `promptId`: it was answered or expired. */
async function closeNotifications(promptId: string): Promise<void> {
  if (!pushAvailable()) return;
  const registration = await navigator.serviceWorker.getRegistration("/");
  for (const n of (await registration?.getNotifications()) ?? []) {
    if ((n.data as { promptId?: unknown } | null)?.promptId === promptId) n.close();
  }
}

// ---- links from notifications ----

/** What a notification asked for: show message or card `open`, or answer card `answer` with `option`. */
interface Link {
  open?: string;
  answer?: string;
  option?: string;
}

let link: Link | undefined;
/** The service worker's nonces for answers in an address, and how long one holds (sw.ts). */
const LINKS = "herald-links";
const LINK_TTL_MS = 10 * 60_000;
let linkTimer: ReturnType<typeof setTimeout> | undefined;
/** How long after ready a card or message asked for may take to come. */
const LINK_WAIT_MS = 2000;
/** A card answered from a notification without being on the page: its prompt_done says how it went. */
let answeredUnseen: string | undefined;

function linkFrom(source: { get(name: string): string | null | undefined }): Link | undefined {
  const l: Link = {};
  for (const k of ["open", "answer", "option"] as const) {
    const v = source.get(k);
    if (typeof v === "string" && v) l[k] = v;
  }
  return l.open || (l.answer && l.option) ? l : undefined;
}

/**
 * The link in this page's address. An answer is taken only with the nonce the service
 * worker keeps for it (once): anyone can send the owner an address, so an address alone
 * only shows the card.
 */
async function linkInAddress(): Promise<Link | undefined> {
  const query = new URLSearchParams(location.search);
  const l = linkFrom(query);
  if (!l?.answer) return l;
  const n = query.get("n");
  const links = "caches" in window ? await caches.open(LINKS) : undefined;
  const made = n && links ? await links.match(`/link/${encodeURIComponent(n)}`) : undefined;
  if (made) {
    await links?.delete(`/link/${encodeURIComponent(n ?? "")}`);
    const kept = (await made.json()) as Link & { at?: number };
    const fresh = typeof kept.at === "number" && Date.now() - kept.at < LINK_TTL_MS;
    if (fresh && kept.answer === l.answer && kept.option === l.option) return l;
  }
  return { open: l.answer };
}

function endLink(): void {
  link = undefined;
  clearTimeout(linkTimer);
  if (location.search) history.replaceState(history.state, "", location.pathname);
}

/** Does what the link asks once its card or message is on the page. */
function followLink(): void {
  if (!link) return;
  const id = link.answer ?? link.open;
  if (!id) return endLink();
  const li = ui.messages.querySelector<HTMLLIElement>(`li[data-id="${CSS.escape(id)}"]`);
  if (!li) return;
  // The conversation, not the settings, is what the notification was about.
  if (client) ui.settings.hidden = true;
  for (const other of ui.messages.querySelectorAll("li.opened")) other.classList.remove("opened");
  li.classList.add("opened");
  li.scrollIntoView({ block: "center" });
  if (link.answer && link.option) {
    const button = [...li.querySelectorAll<HTMLButtonElement>("button[data-option]")].find((b) => b.dataset["option"] === link?.option);
    if (li.dataset["done"] !== undefined || !button || button.disabled) notice("That question was already answered.");
    else button.click();
  }
  endLink();
}

function setLink(l: Link | undefined): void {
  link = l;
  followLink();
  waitForLink();
}

/** Gives what the link names time to come after ready; then an answer goes anyway, and a link to show is dropped. */
function waitForLink(): void {
  clearTimeout(linkTimer);
  if (!link || client?.state !== "ready") return;
  linkTimer = setTimeout(() => {
    // The card did not come (herald shows only open cards, and not always its own
    // again): answer it anyway, as the protocol allows; prompt_done says whether it counted.
    const c = client;
    if (link?.answer && link.option && c?.state === "ready") {
      answeredUnseen = link.answer;
      c.answer(link.answer, link.option);
    }
    endLink();
  }, LINK_WAIT_MS);
}

/** The outcome of an answer given from a notification to a card not on the page. */
function unseenDone(promptId: string, expired: boolean): void {
  if (promptId !== answeredUnseen) return;
  answeredUnseen = undefined;
  notice(expired ? "That question is no longer open: it was answered elsewhere or it expired." : "Answered from the notification.");
}

// ---- wiring ----

let client: HeraldClient | undefined;

function connect(): void {
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
    device: { id: deviceId(), name, platform: "web" },
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

function init(): void {
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
    client = undefined;
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
      notice(`Not sent: ${(err as Error).message}`);
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

  let recording: Recording | undefined;
  ui.record.addEventListener("click", async () => {
    if (!client) return;
    if (!recording) {
      try {
        recording = await startRecording((level) => avatar("setVolume", level));
        ui.record.setAttribute("aria-pressed", "true");
        ui.record.textContent = "Stop and send";
      } catch (e) {
        notice(`No microphone: ${(e as Error).message}`);
      }
      return;
    }
    const r = recording;
    recording = undefined;
    ui.record.setAttribute("aria-pressed", "false");
    ui.record.textContent = "Record voice";
    avatar("setVolume", 0);
    try {
      const wav = await r.stop();
      const id = client.sendVoice(wav);
      bubble("me", id).textContent = "Voice message";
      scrollDown();
    } catch (e) {
      notice(`Not sent: ${(e as Error).message}`);
    }
  });

  ui.notify.addEventListener("change", () => {
    // requestPermission is called within this handler, so the click is what allows it.
    void (ui.notify.checked ? turnNotificationsOn() : turnNotificationsOff());
  });
  document.addEventListener("visibilitychange", () => client?.setVisible(document.visibilityState === "visible"));
  if ("serviceWorker" in navigator) {
    // A click on a notification while this page is open: the worker says what to show.
    navigator.serviceWorker.addEventListener("message", (e: MessageEvent<unknown>) => {
      const d = e.data as Record<string, unknown> | null;
      if (d?.["herald"] === "open") setLink(linkFrom({ get: (k) => (typeof d[k] === "string" ? (d[k] as string) : undefined) }));
    });
    navigator.serviceWorker.startMessages();
  }
  void linkInAddress().then((l) => l && setLink(l));

  connect();
  keepForOffline();
}

init();
