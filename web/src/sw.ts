// The browser chat's service worker, served at /sw.js (so its scope is the whole phone
// port). It keeps the page's own files in one cache, named after a hash of them, so the
// chat opens, and says it is not connected, when herald cannot be reached.
//
// - Install puts every file of ASSETS in the cache CACHE; activate deletes every older
//   cache of this page. build.mjs computes both (the name from the files' bytes), so a
//   new build is a new sw.js, which the browser notices on the next visit and installs in
//   place of this one.
// - A GET for one of ASSETS goes to herald first and comes from the cache when herald
//   cannot be reached: a network error, a proxy's 5xx, or no answer within
//   NETWORK_TIMEOUT_MS. Nothing else is touched: not the WebSocket (which never passes
//   through a worker anyway), not the agent's media, not any other path.
// - Notifications (Web Push): a push shows one, titled and tagged as Herald's payload
//   says; a question gets its options as actions (as many as the browser shows, the safe
//   choice kept). A click focuses the chat, or opens it, at that card or message; an
//   action click also answers the card there (`/?answer=ID&option=OPTION&n=NONCE`), once
//   the page is connected. The nonce is kept in the LINKS cache: a page answers only a
//   link this worker made, never one someone sent the owner.

import { decodePushPayload, type PushPayload } from "../../sdk/typescript/src/protocol.js";

// Set by build.mjs (esbuild's `define`).
declare const HERALD_CACHE: string;
declare const HERALD_ASSETS: string[];

// The worker scope's globals; TypeScript's DOM library does not describe them.
interface ExtendableEvent extends Event {
  waitUntil(done: Promise<unknown>): void;
}
interface FetchEvent extends ExtendableEvent {
  readonly request: Request;
  respondWith(response: Promise<Response>): void;
}
interface PushEvent extends ExtendableEvent {
  readonly data: { text(): string } | null;
}
interface NotificationEvent extends ExtendableEvent {
  readonly notification: Notification;
  readonly action: string;
}
interface WindowClient {
  readonly url: string;
  readonly frameType: string;
  readonly focused: boolean;
  readonly visibilityState: string;
  postMessage(message: unknown): void;
  focus(): Promise<WindowClient>;
}
interface WorkerScope {
  addEventListener(type: "install" | "activate", listener: (e: ExtendableEvent) => void): void;
  addEventListener(type: "fetch", listener: (e: FetchEvent) => void): void;
  addEventListener(type: "push", listener: (e: PushEvent) => void): void;
  addEventListener(type: "notificationclick", listener: (e: NotificationEvent) => void): void;
  skipWaiting(): Promise<void>;
  readonly clients: {
    claim(): Promise<void>;
    matchAll(options: { type: "window"; includeUncontrolled: boolean }): Promise<WindowClient[]>;
    openWindow(url: string): Promise<WindowClient | null>;
  };
  readonly registration: ServiceWorkerRegistration;
  readonly location: Location;
}
/** What Chromium's notifications take beyond TypeScript's NotificationOptions. */
interface ShownOptions extends NotificationOptions {
  actions?: { action: string; title: string }[];
  renotify?: boolean;
}
/** What a notification keeps for its click: where to open the chat, and a question's choices. */
interface ClickData {
  open?: string;
  promptId?: string;
  options?: string[];
}
/** What the page is asked to do: show `open`, or answer card `answer` with `option`. */
interface ChatLink {
  open?: string;
  answer?: string;
  option?: string;
  /** For an answer in a new window's address: the proof this worker made it. */
  n?: string;
}
/** Answers this worker put in an address, by nonce; the page takes each once. Not a HERALD_CACHE. */
const LINKS = "herald-links";
/** A nonce not taken within this long (the window never opened) is dropped. */
const LINK_TTL_MS = 10 * 60_000;

const worker = self as unknown as WorkerScope;
/** Every cache this page has made starts so; only CACHE is kept. */
const PREFIX = "herald-chat-";
/** How long herald may take before the page comes from the cache instead. */
const NETWORK_TIMEOUT_MS = 4000;
const ASSETS = new Set(HERALD_ASSETS);

worker.addEventListener("install", (e) => {
  e.waitUntil(
    (async () => {
      const cache = await caches.open(HERALD_CACHE);
      // Past the HTTP cache: the files must be the ones this worker was built with.
      await cache.addAll(HERALD_ASSETS.map((path) => new Request(path, { cache: "reload" })));
      await worker.skipWaiting();
    })(),
  );
});

worker.addEventListener("activate", (e) => {
  e.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith(PREFIX) && name !== HERALD_CACHE) await caches.delete(name);
      }
      await worker.clients.claim();
    })(),
  );
});

/** The cached path that answers `request`, if it is one of the page's own files. */
function cachedPath(request: Request): string | undefined {
  if (request.method !== "GET") return undefined;
  const url = new URL(request.url);
  if (url.origin !== worker.location.origin) return undefined;
  const path = url.pathname === "/index.html" ? "/" : url.pathname;
  return ASSETS.has(path) ? path : undefined;
}

async function fromCache(path: string, why: unknown): Promise<Response> {
  const cached = await caches.match(path, { cacheName: HERALD_CACHE });
  if (cached) return cached;
  throw why instanceof Error ? why : new Error(`herald cannot be reached, and ${path} is not cached`);
}

async function answer(request: Request, path: string): Promise<Response> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("herald did not answer in time")), NETWORK_TIMEOUT_MS);
  });
  try {
    const response = await Promise.race([fetch(request), late]);
    // A proxy in front of herald answers 502 or 504 while herald is down.
    if (response.status >= 500) return await fromCache(path, new Error(`herald answered ${response.status}`)).catch(() => response);
    return response;
  } catch (why) {
    return fromCache(path, why);
  } finally {
    clearTimeout(timer);
  }
}

worker.addEventListener("fetch", (e) => {
  const path = cachedPath(e.request);
  if (path) e.respondWith(answer(e.request, path));
});

// ---- notifications ----

/** The choices shown as buttons: the browser's limit (two in Chromium), the safe one kept. */
function actionsFor(options: { id: string; label: string }[]): { action: string; title: string }[] {
  // "other" means "let me type", which a notification cannot take.
  const usable = options.filter((o) => o.id !== "other");
  const max = typeof Notification === "undefined" ? undefined : (Notification as unknown as { maxActions?: number }).maxActions;
  const limit = Math.max(0, Math.min(2, max ?? 2));
  let chosen = usable.slice(0, limit);
  const safe = usable.find((o) => o.id === "deny" || o.id === "cancel");
  if (safe && limit > 0 && !chosen.includes(safe)) chosen = [...usable.slice(0, limit - 1), safe];
  return chosen.map((o) => ({ action: o.id, title: o.label }));
}

async function showPush(text: string | undefined): Promise<void> {
  const decoded = text === undefined ? undefined : decodePushPayload(text);
  // A push must show something (the subscription promised userVisibleOnly).
  if (!decoded?.ok) {
    await worker.registration.showNotification("Herald", { body: "Something new in the chat", tag: "herald", icon: "/icons/icon-192.png" });
    return;
  }
  const p: PushPayload = decoded.payload;
  const data: ClickData = {};
  const open = p.prompt_id ?? p.message_id;
  if (open !== undefined) data.open = open;
  const options: ShownOptions = { body: p.body, icon: "/icons/icon-192.png", data };
  if (p.tag !== undefined) {
    options.tag = p.tag;
    options.renotify = true; // a newer one with the same tag is still news
  }
  if (p.kind === "question" && p.prompt_id !== undefined) {
    data.promptId = p.prompt_id;
    const actions = actionsFor(p.options ?? []);
    data.options = actions.map((a) => a.action);
    options.actions = actions;
    options.requireInteraction = true;
  }
  await worker.registration.showNotification(p.title, options);
}

worker.addEventListener("push", (e) => {
  let text: string | undefined;
  try {
    text = e.data?.text();
  } catch {
    text = undefined;
  }
  e.waitUntil(showPush(text));
});

/** Where a click on a notification with `data` (and `action`, a button's) takes the chat. */
function linkFor(data: unknown, action: string): ChatLink {
  const d = (typeof data === "object" && data !== null ? data : {}) as ClickData;
  if (action && d.promptId && d.options?.includes(action)) return { answer: d.promptId, option: action };
  return typeof d.open === "string" ? { open: d.open } : {};
}

function chatUrl(link: ChatLink): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(link)) if (typeof v === "string") q.set(k, v);
  const query = q.toString();
  return query ? `/?${query}` : "/";
}

/** Tells an open chat (the focused one first) what to show, and brings it forward; else opens one there. */
async function openChat(link: ChatLink): Promise<void> {
  const windows = (await worker.clients.matchAll({ type: "window", includeUncontrolled: true })).filter((w) => {
    const u = new URL(w.url);
    return w.frameType === "top-level" && u.origin === worker.location.origin && (u.pathname === "/" || u.pathname === "/index.html");
  });
  const chat = windows.find((w) => w.focused) ?? windows.find((w) => w.visibilityState === "visible") ?? windows[0];
  if (chat) {
    chat.postMessage({ herald: "open", ...link });
    // Focus needs the click's user activation; a chat told what to do is enough without it.
    await chat.focus().catch(() => undefined);
    return;
  }
  if (link.answer) {
    const links = await caches.open(LINKS);
    for (const request of await links.keys()) {
      const kept = (await (await links.match(request))?.json().catch(() => undefined)) as { at?: number } | undefined;
      if (!kept?.at || Date.now() - kept.at > LINK_TTL_MS) await links.delete(request);
    }
    const n = crypto.randomUUID();
    await links.put(`/link/${n}`, new Response(JSON.stringify({ ...link, at: Date.now() })));
    link = { ...link, n };
  }
  await worker.clients.openWindow(chatUrl(link));
}

worker.addEventListener("notificationclick", (e) => {
  e.notification.close();
  e.waitUntil(openChat(linkFor(e.notification.data, e.action)));
});
