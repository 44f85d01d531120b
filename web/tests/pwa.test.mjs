// The browser chat as an installable app, in a real browser (Debian's chromium, headless,
// driven by playwright-core) against a real `herald serve`: Chromium's own checks of the
// web app manifest (over the DevTools protocol), the service worker installed and in
// control with one cache named after the built files, and, with herald killed, a reload
// that the worker serves and that says "not connected". Loopback counts as a secure
// context, so the worker runs on http://127.0.0.1. Screenshots in $HERALD_ARTIFACTS/web.
//
// The page's origin is a proxy's port, held until the test ends: with herald killed, its
// own port would be free for any other process to take, and answer the reload.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

import { Herald, TcpProxy, TOKEN } from "../../sdk/typescript/build/test/herald.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const shots = join(process.env.HERALD_ARTIFACTS ?? join(root, "target/artifacts"), "web");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

// What build.mjs wrote into the worker: its cache's name and the files it keeps.
const worker = readFileSync(join(here, "../dist/sw.js"), "utf8");
const CACHE = /"(herald-chat-[0-9a-f]{16})"/.exec(worker)?.[1];
const KEPT = [
  "/",
  "/chat.js",
  "/chat.css",
  "/avatar.html",
  "/manifest.webmanifest",
  "/icons/icon-192.png",
  "/icons/icon-512.png",
  "/icons/icon-maskable-512.png",
  "/icons/apple-touch-icon.png",
];

test("the browser chat installs as an app and opens, not connected, without herald", { timeout: 120_000 }, async (t) => {
  assert.ok(CACHE, "dist/sw.js names its cache");
  mkdirSync(shots, { recursive: true });
  const herald = await Herald.start();
  const proxy = await TcpProxy.open(() => herald.port("mobile"));
  // A profile on disk: Chromium offers no install from an incognito context, which is
  // what a plain browser.newContext() is.
  const profile = mkdtempSync(join(tmpdir(), "herald-pwa-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking"],
    viewport: { width: 412, height: 800 },
  });
  t.after(async () => {
    await context.close();
    await proxy.close();
    await herald.stop();
    rmSync(profile, { recursive: true, force: true });
  });
  const origin = `http://127.0.0.1:${proxy.port}`;
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  context.on("request", (r) => {
    if (!r.url().startsWith(`${origin}/`)) problems.push(`request to another host: ${r.url()}`);
  });

  await t.test("Chromium reads the manifest without an error, and the page is installable", async () => {
    // First a cache as an older build's worker would have left it: the avatar page,
    // unlike the chat, registers no worker.
    await page.goto(`${origin}/avatar.html`);
    await page.evaluate(async () => (await caches.open("herald-chat-0123456789abcdef")).put("/", new Response("old")));

    await page.goto(`${origin}/`);
    const cdp = await context.newCDPSession(page);
    const manifest = await cdp.send("Page.getAppManifest");
    assert.equal(manifest.url, `${origin}/manifest.webmanifest`);
    assert.deepEqual(manifest.errors, []);
    // Chromium's parsed manifest: URLs resolved against the page, display as it names it.
    const parsed = manifest.manifest;
    assert.ok(parsed, "Page.getAppManifest returns the parsed manifest");
    assert.equal(parsed.name, "Herald");
    assert.equal(parsed.display, "kStandalone");
    assert.equal(parsed.startUrl, `${origin}/`);
    assert.equal(parsed.scope, `${origin}/`);
    assert.equal(parsed.themeColor, "rgba(47,111,237,1)");
    assert.deepEqual(
      parsed.icons.map((i) => `${i.url} ${i.sizes}`),
      [`${origin}/icons/icon-192.png 192x192`, `${origin}/icons/icon-512.png 512x512`, `${origin}/icons/icon-maskable-512.png 512x512`],
    );
    // The icons were fetched and fit, the worker is there: nothing stops an install.
    await page.evaluate(() => navigator.serviceWorker.ready);
    const { installabilityErrors } = await cdp.send("Page.getInstallabilityErrors");
    assert.deepEqual(installabilityErrors, []);
    await cdp.detach();
  });

  await t.test("the service worker activates, takes the page and keeps its files in one versioned cache", async () => {
    const state = await page.evaluate(async () => {
      const registration = await navigator.serviceWorker.ready;
      // ready means active, which may still be activating (clearing older caches).
      const sw = registration.active;
      if (sw && sw.state !== "activated") {
        await new Promise((r) => sw.addEventListener("statechange", () => sw.state === "activated" && r()));
      }
      if (!navigator.serviceWorker.controller) {
        await new Promise((r) => navigator.serviceWorker.addEventListener("controllerchange", r, { once: true }));
      }
      return { state: registration.active?.state, scope: registration.scope, script: registration.active?.scriptURL };
    });
    assert.deepEqual(state, { state: "activated", scope: `${origin}/`, script: `${origin}/sw.js` });
    // The older build's cache is gone; this build's holds exactly the page's files.
    const caches = await page.evaluate(async () => {
      const out = {};
      for (const name of await caches.keys()) {
        const cache = await caches.open(name);
        out[name] = (await cache.keys()).map((r) => new URL(r.url).pathname).sort();
      }
      return out;
    });
    assert.deepEqual(caches, { [CACHE]: [...KEPT].sort() });
  });

  await t.test("connected, with the token kept in the browser", async () => {
    await page.reload();
    await page.locator("#settings").waitFor({ state: "visible" });
    await page.fill("#token", TOKEN);
    await page.click("#connect");
    await page.locator("#status[data-state=ready]").waitFor();
  });

  await t.test("with herald killed, a reload comes from the worker and says not connected", async () => {
    await herald.kill();
    // Without a worker the same load is the browser's error page: herald is really gone
    // (the proxy closes every connection at once while nothing is behind it; what the
    // browser calls that depends on when the close comes).
    const bare = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-background-networking"] });
    try {
      await assert.rejects((await bare.newPage()).goto(`${origin}/`), /net::ERR_(CONNECTION_RESET|CONNECTION_CLOSED|EMPTY_RESPONSE|SOCKET_NOT_CONNECTED)\b/);
    } finally {
      await bare.close();
    }

    const response = await page.reload();
    assert.ok(response, "a response for the page");
    assert.equal(response.status(), 200);
    assert.ok(response.fromServiceWorker(), "the page came from the service worker");
    // chat.js ran (only it sets data-state) and could not reach herald.
    const status = page.locator("#status[data-state=waiting]");
    await status.waitFor();
    assert.equal(await status.textContent(), "Not connected; trying again soon");
    // The stylesheet and the avatar came from the cache too.
    assert.equal(await page.locator("header").evaluate((h) => getComputedStyle(h).display), "flex");
    const avatar = page.frame({ url: /\/avatar\.html$/ });
    assert.ok(avatar, "the avatar frame");
    await avatar.waitForFunction(() => typeof window.hermesAvatar?.setState === "function");
    await page.screenshot({ path: join(shots, "pwa-offline.png"), fullPage: true });
  });

  assert.deepEqual(problems, []);
});
