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
interface WorkerScope {
  addEventListener(type: "install" | "activate", listener: (e: ExtendableEvent) => void): void;
  addEventListener(type: "fetch", listener: (e: FetchEvent) => void): void;
  skipWaiting(): Promise<void>;
  readonly clients: { claim(): Promise<void> };
  readonly location: Location;
}

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
