"use strict";
(() => {
  // <define:HERALD_ASSETS>
  var define_HERALD_ASSETS_default = ["/", "/chat.js", "/chat.css", "/avatar.html", "/manifest.webmanifest", "/icons/icon-192.png", "/icons/icon-512.png", "/icons/icon-maskable-512.png", "/icons/apple-touch-icon.png"];

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
  var Malformed = class extends Error {
  };
  function isObject(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
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
  function put(out, key, value) {
    if (value !== void 0) out[key] = value;
  }
  function decodePushPayload(text) {
    let o;
    try {
      o = JSON.parse(text);
    } catch (e) {
      return { ok: false, reason: `not JSON: ${e.message}` };
    }
    if (!isObject(o)) return { ok: false, reason: "the payload is not a JSON object" };
    try {
      const p = { v: uint(o, "v", 1), kind: str(o, "kind"), title: str(o, "title"), body: optStr(o, "body") ?? "" };
      put(p, "tag", optStr(o, "tag"));
      put(p, "device", optStr(o, "device"));
      put(p, "prompt_id", optStr(o, "prompt_id"));
      put(p, "message_id", optStr(o, "message_id"));
      if (o["options"] !== void 0 && o["options"] !== null) {
        const options = o["options"];
        if (!Array.isArray(options)) throw new Malformed("options must be a list");
        p.options = options.map((opt) => {
          if (!isObject(opt)) throw new Malformed("an option must be an object");
          return { id: str(opt, "id"), label: str(opt, "label") };
        });
      }
      if (optBool(o, "truncated")) p.truncated = true;
      return { ok: true, payload: p };
    } catch (e) {
      if (e instanceof Malformed) return { ok: false, reason: e.message };
      throw e;
    }
  }

  // src/sw.ts
  var LINKS = "herald-links";
  var LINK_TTL_MS = 10 * 6e4;
  var worker = self;
  var PREFIX = "herald-chat-";
  var NETWORK_TIMEOUT_MS = 4e3;
  var ASSETS = new Set(define_HERALD_ASSETS_default);
  worker.addEventListener("install", (e) => {
    e.waitUntil(
      (async () => {
        const cache = await caches.open("herald-chat-0204ee1193ce1704");
        await cache.addAll(define_HERALD_ASSETS_default.map((path) => new Request(path, { cache: "reload" })));
        await worker.skipWaiting();
      })()
    );
  });
  worker.addEventListener("activate", (e) => {
    e.waitUntil(
      (async () => {
        for (const name of await caches.keys()) {
          if (name.startsWith(PREFIX) && name !== "herald-chat-0204ee1193ce1704") await caches.delete(name);
        }
        await worker.clients.claim();
      })()
    );
  });
  function cachedPath(request) {
    if (request.method !== "GET") return void 0;
    const url = new URL(request.url);
    if (url.origin !== worker.location.origin) return void 0;
    const path = url.pathname === "/index.html" ? "/" : url.pathname;
    return ASSETS.has(path) ? path : void 0;
  }
  async function fromCache(path, why) {
    const cached = await caches.match(path, { cacheName: "herald-chat-0204ee1193ce1704" });
    if (cached) return cached;
    throw why instanceof Error ? why : new Error(`herald cannot be reached, and ${path} is not cached`);
  }
  async function answer(request, path) {
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("herald did not answer in time")), NETWORK_TIMEOUT_MS);
    });
    try {
      const response = await Promise.race([fetch(request), late]);
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
  function actionsFor(options) {
    const usable = options.filter((o) => o.id !== "other");
    const max = typeof Notification === "undefined" ? void 0 : Notification.maxActions;
    const limit = Math.max(0, Math.min(2, max ?? 2));
    let chosen = usable.slice(0, limit);
    const safe = usable.find((o) => o.id === "deny" || o.id === "cancel");
    if (safe && limit > 0 && !chosen.includes(safe)) chosen = [...usable.slice(0, limit - 1), safe];
    return chosen.map((o) => ({ action: o.id, title: o.label }));
  }
  async function showPush(text) {
    const decoded = text === void 0 ? void 0 : decodePushPayload(text);
    if (!decoded?.ok) {
      await worker.registration.showNotification("Herald", { body: "Something new in the chat", tag: "herald", icon: "/icons/icon-192.png" });
      return;
    }
    const p = decoded.payload;
    const data = {};
    const open = p.prompt_id ?? p.message_id;
    if (open !== void 0) data.open = open;
    const options = { body: p.body, icon: "/icons/icon-192.png", data };
    if (p.tag !== void 0) {
      options.tag = p.tag;
      options.renotify = true;
    }
    if (p.kind === "question" && p.prompt_id !== void 0) {
      data.promptId = p.prompt_id;
      const actions = actionsFor(p.options ?? []);
      data.options = actions.map((a) => a.action);
      options.actions = actions;
      options.requireInteraction = true;
    }
    await worker.registration.showNotification(p.title, options);
  }
  worker.addEventListener("push", (e) => {
    let text;
    try {
      text = e.data?.text();
    } catch {
      text = void 0;
    }
    e.waitUntil(showPush(text));
  });
  function linkFor(data, action) {
    const d = typeof data === "object" && data !== null ? data : {};
    if (action && d.promptId && d.options?.includes(action)) return { answer: d.promptId, option: action };
    return typeof d.open === "string" ? { open: d.open } : {};
  }
  function chatUrl(link) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(link)) if (typeof v === "string") q.set(k, v);
    const query = q.toString();
    return query ? `/?${query}` : "/";
  }
  async function openChat(link) {
    const windows = (await worker.clients.matchAll({ type: "window", includeUncontrolled: true })).filter((w) => {
      const u = new URL(w.url);
      return w.frameType === "top-level" && u.origin === worker.location.origin && (u.pathname === "/" || u.pathname === "/index.html");
    });
    const chat = windows.find((w) => w.focused) ?? windows.find((w) => w.visibilityState === "visible") ?? windows[0];
    if (chat) {
      chat.postMessage({ herald: "open", ...link });
      await chat.focus().catch(() => void 0);
      return;
    }
    if (link.answer) {
      const links = await caches.open(LINKS);
      for (const request of await links.keys()) {
        const kept = await (await links.match(request))?.json().catch(() => void 0);
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
})();
