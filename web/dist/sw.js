"use strict";
(() => {
  // <define:HERALD_ASSETS>
  var define_HERALD_ASSETS_default = ["/", "/chat.js", "/chat.css", "/avatar.html", "/manifest.webmanifest", "/icons/icon-192.png", "/icons/icon-512.png", "/icons/icon-maskable-512.png", "/icons/apple-touch-icon.png"];

  // src/sw.ts
  var worker = self;
  var PREFIX = "herald-chat-";
  var NETWORK_TIMEOUT_MS = 4e3;
  var ASSETS = new Set(define_HERALD_ASSETS_default);
  worker.addEventListener("install", (e) => {
    e.waitUntil(
      (async () => {
        const cache = await caches.open("herald-chat-d87332820a6d27c5");
        await cache.addAll(define_HERALD_ASSETS_default.map((path) => new Request(path, { cache: "reload" })));
        await worker.skipWaiting();
      })()
    );
  });
  worker.addEventListener("activate", (e) => {
    e.waitUntil(
      (async () => {
        for (const name of await caches.keys()) {
          if (name.startsWith(PREFIX) && name !== "herald-chat-d87332820a6d27c5") await caches.delete(name);
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
    const cached = await caches.match(path, { cacheName: "herald-chat-d87332820a6d27c5" });
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
})();
