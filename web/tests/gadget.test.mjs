// The gadget in a tab (web/src/gadget), two ways:
// - its device core (web/dist/gadget/device.wasm, built from crates/tab-gadget) through
//   the page's bridge to it (core.ts), and the microphone's resampler, in node (the same
//   TypeScript, bundled by esbuild for the test);
// - the page in headless Chromium against a real `herald serve` (demo agent, the ports it
//   picks itself, a temp data dir): it enrolls and shows a pairing code, is approved with
//   the CLI, completes a typed turn, answers questions with the on-screen button and with
//   CANCEL, sets its LED when the agent calls led.set, shows a card and an RGB565 picture,
//   sends push-to-talk audio from the (fake) microphone and plays the reply on its
//   speaker, answers heartbeats, and after herald restarts (behind a proxy that keeps the
//   gadget's URL) reconnects and signs in with its HMAC.
// The page comes from herald's admin listener at /gadget/. Screenshots go to
// $HERALD_ARTIFACTS/gadget (default: target/artifacts/gadget).

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, stop } from "esbuild";
import { chromium } from "playwright-core";

// The SDK's test helpers: herald on the ports it picks, and a proxy that holds a port.
import { Herald, TcpProxy } from "../../sdk/typescript/build/test/herald.js";

const here = dirname(fileURLToPath(import.meta.url));
const web = resolve(here, "..");
const root = resolve(web, "..");
const shots = join(process.env.HERALD_ARTIFACTS ?? join(root, "target/artifacts"), "gadget");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const HERALD_BIN = process.env.HERALD_BIN ?? join(root, "target/debug/herald");

// ---- the modules in node ----

/** core.ts and resample.ts bundled into one module and imported. */
async function loadModules() {
  const dir = mkdtempSync(join(tmpdir(), "herald-gadget-mod-"));
  const outfile = join(dir, "gadget-modules.mjs");
  await build({
    stdin: {
      contents: 'export * from "./core.ts"; export * from "./resample.ts";',
      resolveDir: join(web, "src/gadget"),
      loader: "ts",
    },
    outfile,
    bundle: true,
    format: "esm",
    platform: "neutral",
    logLevel: "warning",
  });
  // esbuild's service process goes now (a later build starts another), not at node's exit.
  await stop();
  const mod = await import(pathToFileURL(outfile).href);
  rmSync(dir, { recursive: true, force: true });
  return mod;
}

/** The device core as the page loads it, booted at time 0 and connected: the core, what
 * it did on the way, and a function that takes every action since. */
async function connectedCore(g, settings = {}) {
  const core = await g.DeviceCore.load(readFileSync(join(web, "dist/gadget/device.wasm")));
  const booted = core.boot({ name: "Tab", token: undefined, key: undefined, ...settings }, 0);
  assert.match(booted.device_id, /^hg-[0-9a-f]{16}$/);
  const actions = () => {
    const all = [];
    for (let a = core.action(); a; a = core.action()) all.push(a);
    return all;
  };
  assert.equal(core.registerAction({ name: "led.set", params: { type: "object" } }), undefined);
  const first = actions();
  core.timeout(core.deadline());
  const connecting = actions();
  assert.ok(connecting.some((a) => a.do === "connect"), JSON.stringify(connecting));
  core.connected(10);
  return { core, booted, actions, first: [...first, ...connecting, ...actions()] };
}

test("the page's device core: the key to keep, the hello, a question's guard, push-to-talk frames, played audio", async () => {
  const g = await loadModules();
  const { core, booted, actions, first } = await connectedCore(g);
  const key = first.find((a) => a.do === "store_key").key;
  assert.equal(Buffer.from(key, "base64").length, 32, "a new key, to keep, in base64");
  assert.equal(`hg-${createHash("sha256").update(Buffer.from(key, "base64")).digest("hex").slice(0, 16)}`, booted.device_id);
  const hello = JSON.parse(first.find((a) => a.do === "send").text);
  assert.equal(hello.type, "hello");
  assert.deepEqual(hello.actions.map((a) => a.name), ["speaker.volume", "screen.brightness", "led.set"]);
  assert.deepEqual(hello.caps.mic, { rate: 16000, format: "pcm16" });
  assert.equal(hello.caps.display.image.format, "rgb565");
  assert.equal(first.find((a) => a.do === "send").log, `hello ${booted.device_id}`);

  // Online and paired, a question: presses count only after its guard.
  core.text(JSON.stringify({ type: "challenge", nonce: "bm9uY2Utbm9uY2Utbm9uY2U=", enrolled: true }), 20);
  const auth = actions().find((a) => a.do === "send");
  assert.match(auth.log, /"type":"auth","mac":"<mac>"/);
  assert.ok(!auth.log.includes(JSON.parse(auth.text).mac), "the MAC is not logged");
  core.text(JSON.stringify({ type: "welcome", session: "s-1", paired: true, heartbeat_s: 30, server: "herald", proto: 1 }), 30);
  core.text(JSON.stringify({ type: "prompt", id: "q1", title: "Question", text: "Go on?" }), 1000);
  actions();
  const view = core.view();
  assert.equal(view.screen, "prompt");
  assert.equal(view.answers_from, 1600);
  core.button("talk", true, 1300);
  core.button("talk", false, 1350);
  assert.deepEqual(actions().filter((a) => a.do === "send"), [], "a press inside the guard");
  core.button("talk", true, 1700);
  const reply = actions().find((a) => a.do === "send");
  assert.deepEqual(JSON.parse(reply.text), { type: "prompt.reply", id: "q1", answer: "yes" });
  core.button("talk", false, 1750);

  // Push-to-talk: the page's samples become 40 ms frames of 640 samples.
  core.button("talk", true, 3000);
  const started = actions();
  assert.ok(started.some((a) => a.do === "start_mic"));
  const start = JSON.parse(started.find((a) => a.do === "send").text);
  assert.equal(start.type, "audio.start");
  core.mic(new Int16Array(1500).fill(7), 3100);
  const frames = actions().filter((a) => a.do === "send_binary").map((a) => a.bytes);
  assert.deepEqual(frames.map((f) => [f[0], f[1], f[2] | (f[3] << 8), f.length - 4]), [[1, start.stream, 0, 1280], [1, start.stream, 1, 1280]]);
  assert.deepEqual([...frames[0].subarray(4, 8)], [7, 0, 7, 0], "PCM16 little-endian");
  core.button("talk", false, 4000);
  assert.ok(actions().some((a) => a.do === "stop_mic"));

  // A reply's audio comes back as samples to play, once the jitter buffer has enough.
  core.text(JSON.stringify({ type: "audio.start", stream: 9, rate: 16000, format: "pcm16" }), 5000);
  const pcm = new Uint8Array(4 + 6400);
  pcm.set([1, 9, 0, 0]);
  for (let i = 4; i < pcm.length; i += 2) pcm[i] = 3;
  core.binary(pcm, 5010);
  core.text(JSON.stringify({ type: "audio.end", stream: 9 }), 5020);
  let played = 0;
  for (let t = 5020; t < 7000; t += 20) {
    core.timeout(t);
    for (const a of actions()) if (a.do === "play") played += a.samples.length;
  }
  assert.equal(played, 3200, "every sample played, none made up");
});

test("the page's device core: a key kept is the same device; typed text is refused offline", async () => {
  const g = await loadModules();
  const { booted, first } = await connectedCore(g);
  const key = first.find((a) => a.do === "store_key").key;
  const again = await connectedCore(g, { key });
  assert.equal(again.booted.device_id, booted.device_id);
  assert.ok(!again.first.some((a) => a.do === "store_key"), "nothing new to keep");
  assert.equal(again.core.sendText("hello", 20), "not connected to the server");
  const core = await g.DeviceCore.load(readFileSync(join(web, "dist/gadget/device.wasm")));
  assert.match(core.boot({ name: "Tab", token: undefined, key: "abcd" }, 0).error, /key/);
});

test("the resampler keeps time and pitch from 48 kHz to 16 kHz", async () => {
  const g = await loadModules();
  const r = new g.Resampler(48_000, 16_000);
  const tone = (i) => Math.sin((2 * Math.PI * 440 * i) / 48_000);
  const out = [];
  for (let start = 0; start < 48_000; start += 1000) {
    const block = Float32Array.from({ length: 1000 }, (_, k) => tone(start + k));
    out.push(...r.push(block));
  }
  assert.ok(Math.abs(out.length - 16_000) <= 2, `${out.length} samples for 1 s`);
  // 440 Hz crosses zero upwards 440 times a second, whatever the block boundaries.
  let ups = 0;
  for (let i = 1; i < out.length; i++) if (out[i - 1] < 0 && out[i] >= 0) ups++;
  assert.ok(Math.abs(ups - 440) <= 1, `${ups} upward crossings`);
});

// ---- the page against herald ----

/** `herald serve` with the demo agent, heartbeats every 5 s (the least allowed, so the test
 * sees one answered), on the ports it picks itself. `remove()` stops it and deletes its dir. */
async function startHerald(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), "herald-gadget-"));
  const config = join(dir, "herald.toml");
  writeFileSync(config, "[gadget]\nheartbeat_s = 5\n");
  const herald = await Herald.start({ dataDir: dir, config, env: { MOBILE_TOKEN: randomBytes(32).toString("hex"), ...env } });
  herald.remove = async () => {
    await herald.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  return herald;
}

const GADGET_FILES = ["index.html", "gadget.js", "gadget.css", "mic-worklet.js", "device.wasm"];

/** What herald's admin listener serves at /gadget/: whether it is web/dist/gadget, and its CSP. */
async function heraldGadget(herald) {
  const base = new URL("gadget/", herald.urls.console).href;
  let csp;
  for (const name of GADGET_FILES) {
    const res = await fetch(name === "index.html" ? base : base + name).catch(() => undefined);
    if (!res?.ok) return { same: false, csp };
    if (name === "index.html") csp = res.headers.get("content-security-policy") ?? undefined;
    const body = Buffer.from(await res.arrayBuffer());
    if (!body.equals(readFileSync(join(web, "dist/gadget", name)))) return { same: false, csp };
  }
  return { same: true, csp };
}

test("the gadget in a tab against herald: pairing, a typed turn, questions, led.set, card, picture, voice, reconnect", { timeout: 120_000 }, async (t) => {
  mkdirSync(shots, { recursive: true });
  const herald = await startHerald();
  t.after(() => herald.remove());
  const served = await heraldGadget(herald);
  assert.ok(served.same, `${HERALD_BIN} does not serve this web/dist/gadget at /gadget/: rebuild it (cargo build -p herald)`);
  assert.ok(served.csp, "herald serves the page with a content security policy");
  const base = `http://127.0.0.1:${herald.adminPort}`;
  const gadgetUrl = herald.urls.gadget;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--use-fake-ui-for-media-stream",
      "--use-fake-device-for-media-stream",
    ],
  });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1200, height: 860 } });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (process.env.GADGET_DEBUG) console.log(`[page] ${m.type()}: ${m.text()}`);
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(`${base}/`) && !r.url().startsWith("data:")) problems.push(`request to another place: ${r.url()}`);
  });
  const sockets = [];
  // Everything herald sends the page, in order, as the browser received it.
  const wire = [];
  const wireWaiters = new Set();
  page.on("websocket", (ws) => {
    sockets.push(ws.url());
    ws.on("framereceived", ({ payload }) => {
      wire.push(payload);
      for (const check of [...wireWaiters]) check();
    });
  });
  /** Resolves with `find()` once it is not undefined, looked at as each frame comes. */
  const onWire = (find, what, ms = 20_000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        wireWaiters.delete(check);
        reject(new Error(`no ${what} within ${ms} ms`));
      }, ms);
      const check = () => {
        const found = find();
        if (found === undefined) return;
        wireWaiters.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      wireWaiters.add(check);
      check();
    });

  const shot = async (name) => {
    await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
    await page.locator("#screen").screenshot({ path: join(shots, `${name}-screen.png`) });
  };
  const screenSays = (text) => page.locator("#screen-text", { hasText: text }).waitFor({ state: "attached" });
  const onScreen = (name) => page.locator(`body[data-screen=${name}]`).waitFor({ state: "attached" });
  const send = async (text) => {
    await page.fill("#text", text);
    await page.press("#text", "Enter");
  };
  // Every screen the device shows, in order, from the moment this runs.
  const watchScreens = () =>
    page.evaluate(() => {
      window.__screens = [document.body.dataset.screen];
      new MutationObserver(() => {
        if (window.__screens.at(-1) !== document.body.dataset.screen) window.__screens.push(document.body.dataset.screen);
      }).observe(document.body, { attributes: true, attributeFilter: ["data-screen"] });
    });

  let deviceId;
  await t.test("the page enrolls with a key kept in the browser and shows a pairing code", async () => {
    // Opened by hand, with no ?url=: it finds the serving herald's own gadget port.
    await page.goto(`${base}/gadget/`);
    await onScreen("pairing");
    await screenSays("Pairing code:");
    const key = await page.evaluate(() => localStorage.getItem("herald.gadget.key"));
    const keyBytes = Buffer.from(key, "base64");
    assert.equal(keyBytes.length, 32);
    deviceId = `hg-${createHash("sha256").update(keyBytes).digest("hex").slice(0, 16)}`;
    assert.equal(await page.textContent("#device-id"), deviceId);
    assert.deepEqual(sockets, [gadgetUrl]);
    // First contact: the key went up once, never shown in the log.
    const log = await page.textContent("#log");
    assert.match(log, /"type":"auth","key":"<the device key>"/);
    assert.ok(!log.includes(key), "the key is not in the log");
    await shot("1-pairing");
  });

  await t.test("approved with the CLI, the gadget shows it is paired at once", async () => {
    const text = await page.textContent("#screen-text");
    const code = /Pairing code: ([A-Z2-9]{8})/.exec(text)?.[1];
    assert.ok(code, `a code on the screen: ${text}`);
    assert.match(text, new RegExp(`herald pairing approve\\s+gadget\\s+${code}`), "the command to run");
    const out = await herald.cli("pairing", "approve", "gadget", code);
    assert.match(out, new RegExp(deviceId));
    await page.locator("body[data-paired=true]").waitFor({ state: "attached" });
    await onScreen("ready");
    await screenSays("Paired");
    await shot("2-paired");
  });

  await t.test("a typed turn: thinking, the streamed reply, ready again", async () => {
    await watchScreens();
    await send("hello from a tab");
    await screenSays("You said: hello from a tab");
    await onScreen("ready");
    const screens = await page.evaluate(() => window.__screens);
    assert.ok(screens.includes("thinking") && screens.includes("responding"), JSON.stringify(screens));
    await shot("3-typed-turn");
  });

  await t.test("a question answered with the on-screen Yes, another with CANCEL", async () => {
    // When the answers show and when Yes wakes up, by the page's clock.
    await page.evaluate(() => {
      const answers = document.getElementById("answers");
      const yes = document.getElementById("yes");
      window.__answers = {};
      new MutationObserver(() => {
        const now = performance.now();
        if (!answers.hidden) window.__answers.shown ??= now;
        if (!answers.hidden && !yes.disabled) window.__answers.armed ??= now;
      }).observe(answers, { attributes: true, subtree: true, attributeFilter: ["hidden", "disabled"] });
    });
    await send("/ask Shall we go on?");
    await onScreen("prompt");
    await screenSays("Shall we go on?");
    // The buttons wake after the 0.6 s guard; a click waits for that. Never sooner: how much
    // later depends on the page's 100 ms tick, which a loaded machine delays, so there is no
    // upper bound here (the device core's test pins the guard on a fake clock).
    await page.locator("#yes:not([disabled])").waitFor();
    const { shown, armed } = await page.evaluate(() => window.__answers);
    assert.ok(armed - shown >= 590, `Yes woke ${armed - shown} ms after the question showed`);
    await shot("4-prompt");
    await page.click("#yes");
    await screenSays("You answered yes.");
    assert.equal(await page.isHidden("#answers"), true);

    await send("/ask Stop here?");
    await onScreen("prompt");
    await page.locator("#yes:not([disabled])").waitFor();
    await page.locator("#screen").click({ position: { x: 5, y: 5 } }); // focus off the text field
    await page.keyboard.down("Escape");
    await page.keyboard.up("Escape");
    await screenSays("You answered no.");
  });

  await t.test("led.set from the agent lights the LED", async () => {
    assert.equal(await page.getAttribute("#led", "data-color"), "");
    await send('/action led.set {"color":"green"}');
    await page.locator('#led[data-color="green"]').waitFor({ state: "attached" });
    assert.equal(await page.$eval("#led", (el) => getComputedStyle(el).backgroundColor), "rgb(0, 128, 0)");
    await screenSays('Result: {"led":"green"}');
    await shot("5-led");
    await send('/action led.set {"colour":"blue"}');
    await screenSays("color is required");
    assert.equal(await page.getAttribute("#led", "data-color"), "green");
  });

  await t.test("a card, dismissed with CANCEL", async () => {
    await send("/card Timer | Pasta: 9 min");
    await onScreen("card");
    await screenSays("Pasta: 9 min");
    await shot("6-card");
    await page.locator("#cancel").click();
    await onScreen("ready");
  });

  await t.test("a picture arrives as RGB565 and is drawn pixel for pixel", async () => {
    await send("/image");
    await onScreen("image");
    // The demo's test pattern, fitted into the 320×196 box: many colours, not one.
    const colours = await page.$eval("#screen", (c) => {
      const data = c.getContext("2d").getImageData(0, 22, 320, 196).data;
      const seen = new Set();
      for (let i = 0; i < data.length; i += 4 * 37) seen.add(`${data[i]},${data[i + 1]},${data[i + 2]}`);
      return seen.size;
    });
    assert.ok(colours >= 6, `${colours} colours drawn`);
    await shot("7-image");
    await page.locator("#cancel").click();
    await onScreen("ready");
  });

  await t.test("push-to-talk from the microphone; the reply plays on the speaker", async () => {
    // Counted, not timed: TALK is held until the page has sent FRAMES frames of 40 ms, and
    // what herald heard is checked against what the page says it sent, so a slow machine
    // (a late release, a late frame) changes neither side of the comparison.
    const FRAMES = 30;
    const speakerNow = () => page.$eval("#speaker", (el) => ({ ms: Number(el.dataset.scheduledMs) }));
    const sentBefore = await page.$eval("#mic", (el) => Number(el.dataset.frames));
    const speakerBefore = await speakerNow();
    const wireFrom = wire.length;
    const talk = page.locator("#talk");
    await talk.hover();
    await page.mouse.down();
    await onScreen("listening");
    await page.waitForFunction((n) => Number(document.getElementById("mic").dataset.frames) >= n, sentBefore + FRAMES);
    await shot("8-listening");
    await page.mouse.up();
    const heard = page.locator("#screen-text", { hasText: /I heard [\d.]+ seconds/ });
    await heard.waitFor({ state: "attached" });
    const seconds = Number(/I heard ([\d.]+) seconds/.exec(await heard.textContent())?.[1]);
    const sent = (await page.$eval("#mic", (el) => Number(el.dataset.frames))) - sentBefore;
    assert.ok(sent >= FRAMES, `${sent} frames of 40 ms sent`);
    // 40 ms a frame, the last one maybe short; the reply rounds to a tenth of a second.
    assert.ok(seconds >= (sent - 1) * 0.04 - 0.05 && seconds <= sent * 0.04 + 0.05, `herald heard ${seconds} s of ${sent} frames`);

    // The demo plays the recording back after its reply: on the wire, by the end of the
    // turn, the longest audio stream. (Herald may play short tones of its own on other
    // streams around it; those count only in the total.)
    const audio = (from) => {
      const streams = [];
      let replied = false;
      for (const p of wire.slice(from)) {
        if (typeof p !== "string") {
          const s = streams.findLast((x) => x.stream === p[1]);
          if (p[0] === 1 && s && !s.ended) {
            s.bytes += p.length - 4;
            s.frames++;
          }
          continue;
        }
        let m;
        try {
          m = JSON.parse(p);
        } catch {
          continue;
        }
        if (m.type === "reply" && /I heard/.test(m.text ?? "")) replied = true;
        if (m.type === "audio.start") streams.push({ stream: m.stream, rate: m.rate, frames: 0, bytes: 0, ended: false });
        if (m.type === "audio.end" || m.type === "audio.abort") for (const s of streams) if (s.stream === m.stream) s.ended = true;
        if (m.type === "turn.end" && replied) {
          const ms = (s) => (s.bytes / 2 / s.rate) * 1000;
          const echo = streams.reduce((a, b) => (b.bytes > (a?.bytes ?? -1) ? b : a), undefined);
          return echo && { frames: echo.frames, ms: ms(echo), allMs: streams.reduce((n, x) => n + ms(x), 0) };
        }
      }
      return undefined;
    };
    const back = await onWire(() => audio(wireFrom), "the recording played back");
    assert.ok(Math.abs(back.ms - seconds * 1000) <= 90, `${back.ms} ms came back for ${seconds} s`);
    // The device core's jitter buffer hands it over and the page schedules it.
    await page.locator("#speaker[data-state=playing]").waitFor({ state: "attached" });
    await shot("9-speaking");
    await page.waitForFunction(
      (ms) => {
        const s = document.getElementById("speaker");
        return s.dataset.state === "idle" && Number(s.dataset.scheduledMs) >= ms;
      },
      speakerBefore.ms + Math.min(back.ms, 1000) - 40,
      { timeout: 15_000 },
    );
    const playedMs = (await speakerNow()).ms - speakerBefore.ms;
    // Nothing is made up, and at least the first second is played: the jitter buffer drops
    // only what waits beyond its 1 s (a page stalled for over half a second gets a burst
    // like that); under no load all of it is.
    assert.ok(playedMs <= back.allMs + 1 && playedMs >= Math.min(back.ms, 1000) - 40, `played ${playedMs} ms of ${back.ms} ms (${back.allMs} ms of audio in all)`);
    t.diagnostic(`voice: ${sent} frames sent, herald heard ${seconds} s, ${Math.round(back.ms)} ms back, ${playedMs} ms played (${Math.round(back.allMs)} ms of audio in all)`);
  });

  await t.test("heartbeats from the server are answered", async () => {
    await page.waitForFunction(() => /"type":"pong"/.test(document.getElementById("log").textContent), null, { timeout: 12_000 });
  });

  await t.test("after herald restarts the gadget reconnects and signs in with its HMAC", async () => {
    // A restarted herald listens on new ports, and the gadget must find it again at the URL
    // it has. So the gadget is pointed, in its Settings, at a proxy that holds its port for
    // the rest of the test and forwards to whichever gadget port herald has now.
    const proxy = await TcpProxy.open(() => herald.port("gadget"));
    t.after(() => proxy.close());
    const proxied = `ws://127.0.0.1:${proxy.port}/gadget`;
    // The log lines from now on, to see each sign-in.
    const watchLog = () =>
      page.evaluate(() => {
        window.__log = [];
        if (window.__logWatched) return;
        window.__logWatched = true;
        new MutationObserver((changes) => {
          for (const c of changes) for (const n of c.addedNodes) window.__log.push(n.textContent);
        }).observe(document.getElementById("log"), { childList: true });
      });
    /** Waits for a sign-in with the MAC, then the welcome, both logged after watchLog(). */
    const signedIn = () =>
      page.waitForFunction(() => {
        const mac = window.__log.findIndex((l) => /"type":"auth","mac":"<mac>"/.test(l));
        return mac >= 0 && window.__log.slice(mac).some((l) => /"type":"welcome"/.test(l));
      });
    await watchLog();
    const before = sockets.length;
    await page.click("#settings summary");
    await page.fill("#url", proxied);
    await page.click("#save");
    await signedIn();
    await onScreen("ready");
    assert.equal(await page.textContent("#server-url"), proxied);

    await herald.halt();
    await onScreen("offline");
    await shot("10-offline");
    await watchLog();
    await herald.run(); // on new ports, behind the same proxy
    await signedIn();
    await onScreen("ready");
    assert.equal(await page.getAttribute("body", "data-paired"), "true");
    await send("still there?");
    await screenSays("You said: still there?");
    const since = sockets.slice(before);
    assert.ok(since.length >= 2 && since.every((u) => u === proxied), JSON.stringify(sockets));
  });

  await t.test("a host that wants an access token: setup needed, until Settings has it", async () => {
    const guarded = await startHerald({ GADGET_ACCESS_TOKEN: "tab-token-1234" });
    const other = await browser.newContext({ viewport: { width: 1200, height: 860 } });
    try {
      // A key in storage that is not one (12 bytes): the page makes a new device.
      const damaged = Buffer.from("not a key...").toString("base64");
      await other.addInitScript((bad) => localStorage.getItem("herald.gadget.key") ?? localStorage.setItem("herald.gadget.key", bad), damaged);
      const tab = await other.newPage();
      tab.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      // The page from the first herald, as now running, told to use the other one.
      await tab.goto(`${herald.urls.console}gadget/?url=${encodeURIComponent(guarded.urls.gadget)}`);
      await tab.locator("body[data-screen=setup]").waitFor({ state: "attached" });
      await tab.locator("#screen-text", { hasText: "refused the access token" }).waitFor({ state: "attached" });
      await tab.screenshot({ path: join(shots, "11-setup-needed.png"), fullPage: true });
      await tab.click("#settings summary");
      await tab.fill("#token", "tab-token-1234");
      await tab.click("#save");
      await tab.locator("body[data-screen=pairing]").waitFor({ state: "attached" });
      assert.equal(await tab.evaluate(() => localStorage.getItem("herald.gadget.token")), "tab-token-1234");
      const key = await tab.evaluate(() => localStorage.getItem("herald.gadget.key"));
      assert.notEqual(key, damaged);
      assert.equal(Buffer.from(key, "base64").length, 32, "a new key replaced the damaged one");
      const log = await tab.textContent("#log");
      assert.match(log, /key is 12 bytes, expected 32: making a new key/);
      assert.ok(!log.includes("tab-token-1234"), "the token is not in the log");
    } finally {
      await other.close();
      await guarded.remove();
    }
  });

  assert.deepEqual(problems, []);
});
