// The gadget in a tab (web/src/gadget), two ways:
// - its protocol and device modules in node, against vectors/gadget-v1.json and the
//   reference device's rules (the same TypeScript, bundled by esbuild for the test);
// - the page in headless Chromium against a real `herald serve` (demo agent, free ports,
//   a temp data dir): it enrolls and shows a pairing code, is approved with the CLI,
//   completes a typed turn, answers questions with the on-screen button and with CANCEL,
//   sets its LED when the agent calls led.set, shows a card and an RGB565 picture, sends
//   push-to-talk audio from the (fake) microphone and plays the reply on its speaker,
//   answers heartbeats, and after herald restarts reconnects and signs in with its HMAC.
// The page comes from herald's admin listener at /gadget/ when herald serves it there,
// else from a small static server over web/dist/gadget. Screenshots go to
// $HERALD_ARTIFACTS/gadget (default: target/artifacts/gadget).

import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { gadgetLimits } from "../limits.mjs";

// The SDK's test helpers: free loopback ports, and waiting for herald to listen.
import { freePort, waitForPort } from "../../sdk/typescript/build/test/herald.js";

const here = dirname(fileURLToPath(import.meta.url));
const web = resolve(here, "..");
const root = resolve(web, "..");
const shots = join(process.env.HERALD_ARTIFACTS ?? join(root, "target/artifacts"), "gadget");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const HERALD_BIN = process.env.HERALD_BIN ?? join(root, "target/debug/herald");
const vectors = JSON.parse(readFileSync(join(root, "vectors/gadget-v1.json"), "utf8"));

// ---- the modules in node ----

/** proto.ts, pager.ts and device.ts bundled into one module and imported. */
async function loadModules() {
  const dir = mkdtempSync(join(tmpdir(), "herald-gadget-mod-"));
  const outfile = join(dir, "gadget-modules.mjs");
  await build({
    stdin: {
      contents: 'export * from "./proto.ts"; export * from "./pager.ts"; export * from "./device.ts";',
      resolveDir: join(web, "src/gadget"),
      loader: "ts",
    },
    outfile,
    bundle: true,
    format: "esm",
    platform: "neutral",
    define: gadgetLimits(),
    logLevel: "warning",
  });
  const mod = await import(pathToFileURL(outfile).href);
  rmSync(dir, { recursive: true, force: true });
  return mod;
}

const hex = (bytes) => Buffer.from(bytes).toString("hex");

test("protocol pieces match the shared vectors", async () => {
  const g = await loadModules();
  // The numbers come from the vectors' limits at build time: a name missing there would
  // leave NaN or undefined here.
  for (const [name, value] of Object.entries({ ...g.TIMING, MAX_TEXT: g.MAX_TEXT })) {
    for (const n of [value].flat()) assert.ok(Number.isInteger(n) && n > 0, `${name}: ${value}`);
  }
  assert.equal(g.TIMING.connectTimeoutMs, vectors.limits.connect_timeout_s * 1000);

  for (const c of vectors.device_id) {
    assert.equal(await g.deviceIdOf(g.fromHex(c.key_hex)), c.device_id, c.name);
  }
  for (const c of vectors.keys) {
    let result;
    try {
      const key = g.fromBase64(c.key_b64);
      result = key.length === g.KEY_LEN ? { ok: true, key } : { ok: false, error: "length", len: key.length };
    } catch {
      result = { ok: false, error: "base64" };
    }
    assert.equal(result.ok, c.ok, c.name);
    if (c.ok) {
      assert.equal(hex(result.key), c.key_hex, c.name);
      assert.equal(await g.deviceIdOf(result.key), c.device_id, c.name);
      assert.equal(g.toBase64(result.key), c.key_b64, `${c.name}: encodes back`);
    } else {
      assert.equal(result.error, c.error, c.name);
      if (c.error === "length") assert.equal(result.len, c.decoded_len, c.name);
    }
  }
  for (const c of vectors.auth_mac) {
    const mac = await g.authMac(g.fromHex(c.key_hex), c.device_id, c.nonce);
    assert.equal(mac === c.mac, c.valid, c.name);
  }
  for (const c of vectors.ota_mac) {
    const mac = await g.otaMac(g.fromHex(c.key_hex), c.device_id, c.nonce, c.sha256, c.size);
    assert.equal(mac === c.mac, c.valid, c.name);
  }
  for (const c of vectors.frames) {
    const frame = g.decodeFrame(g.fromHex(c.bytes_hex));
    assert.equal(frame !== null, c.ok, c.name);
    if (c.ok) {
      assert.deepEqual([frame.channel, frame.stream, frame.seq, hex(frame.payload)], [c.channel, c.stream, c.seq, c.payload_hex], c.name);
      assert.equal(hex(g.encodeFrame(c.channel, c.stream, c.seq, g.fromHex(c.payload_hex))), c.bytes_hex, c.name);
    }
  }
  // Pure red is 0xF800, little-endian on the wire.
  assert.equal(g.rgb565(255, 0, 0), 0xf800);
  assert.deepEqual([...g.rgb565ToRgba(Uint8Array.of(0x00, 0xf8, 0xe0, 0x07, 0x1f, 0x00), 3, 1)], [255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255]);
  // PCM16 both ways, clipped.
  assert.equal(hex(g.floatToPcm16([0, 1, -1, 2])), "0000ff7f0080ff7f");
  assert.deepEqual([...g.pcm16ToFloat(Uint8Array.of(0x00, 0x80, 0x00, 0x40))], [-1, 0.5]);
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

/** A device on a fake connection and clock: what it sent, and a speaker that records. */
function fakeDevice(g) {
  const sent = [];
  const frames = [];
  const speaker = { active: false, volume: 1, calls: [], start() {}, push() {}, end() {}, abort: () => false, stop: () => false };
  const device = new g.GadgetDevice({
    send: (m) => (sent.push(m), true),
    sendBinary: (b) => (frames.push(b), true),
    startMic() {},
    stopMic() {},
    speaker,
    changed() {},
    brightness() {},
  });
  device.deviceId = "hg-0000000000000000";
  device.onPhase("online");
  device.onWelcome({ session: "000000000000", paired: true, heartbeatS: 20 });
  return { device, sent, frames };
}

test("the device core keeps the reference device's rules", async () => {
  const g = await loadModules();
  const { device, sent, frames } = fakeDevice(g);
  const t0 = 1_000_000;

  // hello: the LED action with its schema, a screen, a mic and a speaker.
  const hello = device.hello("Tab", undefined);
  assert.equal(hello.proto, 1);
  assert.deepEqual(hello.actions.find((a) => a.name === "led.set").params, {
    type: "object",
    properties: { color: { type: "string" } },
    required: ["color"],
  });
  assert.deepEqual(hello.caps.mic, { rate: 16000, format: "pcm16" });
  assert.equal(hello.caps.display.image.format, "rgb565");
  assert.equal("token" in hello, false, "no token unless one is set");

  // A question ignores presses in its first 0.6 s; TALK is yes, CANCEL no.
  device.onMessage({ type: "prompt", id: "q1", title: "Question", text: "Go on?" }, t0);
  assert.equal(device.screen(), "prompt");
  device.talkDown(t0 + 300);
  device.talkUp(t0 + 400);
  device.answerButton(true, t0 + 500);
  assert.equal(sent.length, 0, "answered inside the guard");
  assert.equal(device.view(t0 + 500).armed, false);
  assert.equal(device.view(t0 + 700).armed, true);
  device.cancelDown(t0 + 700);
  device.cancelUp(t0 + 800);
  assert.deepEqual(sent.pop(), { type: "prompt.reply", id: "q1", answer: "no" });
  assert.equal(device.screen(), "ready");

  // Push-to-talk: 40 ms frames of 640 samples, seq from 0; a short press is cancelled.
  device.talkDown(t0 + 1000);
  assert.equal(sent.at(-1).type, "audio.start");
  const stream = sent.at(-1).stream;
  device.micSamples(new Int16Array(1500).fill(1));
  device.talkUp(t0 + 2000);
  assert.deepEqual(
    frames.map((f) => [f[0], f[1], f[2] | (f[3] << 8), f.length - 4]),
    [[1, stream, 0, 1280], [1, stream, 1, 1280], [1, stream, 2, 440]],
  );
  assert.deepEqual(sent.at(-1), { type: "audio.end", id: sent.at(-2).id, stream, duration_ms: 93 });
  assert.equal(device.screen(), "thinking");
  device.talkDown(t0 + 3000);
  device.talkUp(t0 + 3200);
  assert.equal(sent.at(-1).type, "audio.cancel");
  assert.equal(sent.at(-1).reason, "too short");

  // led.set: a colour is taken, none is an error; an unknown action is refused.
  device.onMessage({ type: "action", id: "x1", name: "led.set", args: { color: "red" } }, t0);
  assert.deepEqual(sent.at(-1), { type: "action.result", id: "x1", ok: true, result: { led: "red" } });
  assert.equal(device.led, "red");
  device.onMessage({ type: "action", id: "x2", name: "led.set", args: {} }, t0);
  assert.deepEqual(sent.at(-1), { type: "action.result", id: "x2", ok: false, error: "color is required" });
  device.onMessage({ type: "action", id: "x3", name: "door.open", args: {} }, t0);
  assert.equal(sent.at(-1).ok, false);

  // A card goes after its ttl (15 s by default); CANCEL held 2 s starts a new chat.
  device.onMessage({ type: "display", title: "Timer", body: "Pasta" }, t0);
  assert.equal(device.screen(), "card");
  device.tick(t0 + 15_000);
  assert.notEqual(device.screen(), "card");
  device.cancelDown(t0 + 20_000);
  device.tick(t0 + 21_000);
  assert.equal(device.view(t0 + 21_000).status, "New chat in 1 s");
  device.tick(t0 + 22_000);
  assert.deepEqual(sent.at(-1), { type: "session.new" });
  device.cancelUp(t0 + 22_100);
  assert.deepEqual(sent.at(-1), { type: "session.new" }, "the release after a hold does nothing more");
});

// ---- the page against herald ----

/** `herald serve` on fixed free ports (so a restart keeps them) with the demo agent. */
class Herald {
  static async start(env = {}) {
    const h = new Herald();
    h.dataDir = mkdtempSync(join(tmpdir(), "herald-gadget-"));
    h.gadgetPort = await freePort();
    h.mobilePort = await freePort();
    h.adminPort = await freePort();
    // Heartbeats every 5 s (the least allowed), so the test sees one answered.
    h.config = join(h.dataDir, "herald.toml");
    writeFileSync(h.config, "[gadget]\nheartbeat_s = 5\n");
    h.env = { PATH: process.env.PATH ?? "", HOME: h.dataDir, RUST_LOG: "warn", MOBILE_TOKEN: randomBytes(32).toString("hex"), ...env };
    h.log = "";
    await h.run();
    return h;
  }

  get gadgetUrl() {
    return `ws://127.0.0.1:${this.gadgetPort}/gadget`;
  }

  async run() {
    const args = ["serve", "--host", "127.0.0.1", "--gadget-port", this.gadgetPort, "--mobile-port", this.mobilePort, "--admin-port", this.adminPort];
    this.child = spawn(HERALD_BIN, [...args.map(String), "--data-dir", this.dataDir, "--config", this.config], {
      env: this.env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.child.stderr.on("data", (d) => (this.log += d));
    await waitForPort(this.gadgetPort, this.child);
    await waitForPort(this.adminPort, this.child);
  }

  async cli(...args) {
    const { stdout } = await promisify(execFile)(HERALD_BIN, [...args, "--data-dir", this.dataDir, "--config", this.config], { env: this.env });
    return stdout;
  }

  async halt() {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const t = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(t);
  }

  async stop() {
    await this.halt();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

const GADGET_FILES = ["index.html", "gadget.js", "gadget.css", "mic-worklet.js"];

/** What herald's admin listener serves at /gadget/: whether it is web/dist/gadget, and its CSP. */
async function heraldGadget(herald) {
  const base = `http://127.0.0.1:${herald.adminPort}/gadget/`;
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
  const herald = await Herald.start();
  t.after(() => herald.stop());
  const served = await heraldGadget(herald);
  assert.ok(served.same, `${HERALD_BIN} does not serve this web/dist/gadget at /gadget/: rebuild it (cargo build -p herald)`);
  assert.ok(served.csp, "herald serves the page with a content security policy");
  const base = `http://127.0.0.1:${herald.adminPort}`;
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
  page.on("websocket", (ws) => sockets.push(ws.url()));

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
    assert.deepEqual(sockets, [herald.gadgetUrl]);
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
    // The buttons wake after the 0.6 s guard; a click waits for that.
    await page.locator("#yes:not([disabled])").waitFor();
    const { shown, armed } = await page.evaluate(() => window.__answers);
    assert.ok(armed - shown >= 590 && armed - shown < 1000, `Yes woke ${armed - shown} ms after the question showed`);
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
    const talk = page.locator("#talk");
    await talk.hover();
    await page.mouse.down();
    await onScreen("listening");
    await page.waitForTimeout(1500);
    await shot("8-listening");
    await page.mouse.up();
    const heard = page.locator("#screen-text", { hasText: /I heard [\d.]+ seconds/ });
    await heard.waitFor({ state: "attached" });
    const seconds = Number(/I heard ([\d.]+) seconds/.exec(await heard.textContent())?.[1]);
    assert.ok(seconds >= 0.8 && seconds <= 2, `recorded ${seconds} s`);
    const sent = Number(await page.getAttribute("#mic", "data-frames"));
    assert.ok(sent >= 20, `${sent} frames of 40 ms sent`);
    // The demo plays the recording back: frames in, scheduled through the jitter buffer.
    await page.locator("#speaker[data-state=playing]").waitFor({ state: "attached" });
    await shot("9-speaking");
    await page.locator("#speaker[data-state=idle]").waitFor({ state: "attached", timeout: 15_000 });
    const frames = Number(await page.getAttribute("#speaker", "data-frames"));
    const playedMs = Number(await page.getAttribute("#speaker", "data-scheduled-ms"));
    assert.ok(frames >= 20, `${frames} frames received`);
    assert.ok(Math.abs(playedMs - seconds * 1000) < 300, `played ${playedMs} ms of ${seconds} s`);
  });

  await t.test("heartbeats from the server are answered", async () => {
    await page.waitForFunction(() => /"type":"pong"/.test(document.getElementById("log").textContent), null, { timeout: 12_000 });
  });

  await t.test("after herald restarts the gadget reconnects and signs in with its HMAC", async () => {
    await herald.halt();
    await onScreen("offline");
    await shot("10-offline");
    await herald.run();
    await onScreen("ready");
    assert.equal(await page.getAttribute("body", "data-paired"), "true");
    const log = await page.textContent("#log");
    assert.match(log, /"type":"auth","mac":"<mac>"/, "the second time, a MAC");
    await send("still there?");
    await screenSays("You said: still there?");
    assert.ok(sockets.length >= 2 && sockets.every((u) => u === herald.gadgetUrl), JSON.stringify(sockets));
  });

  await t.test("a host that wants an access token: setup needed, until Settings has it", async () => {
    const guarded = await Herald.start({ GADGET_ACCESS_TOKEN: "tab-token-1234" });
    const other = await browser.newContext({ viewport: { width: 1200, height: 860 } });
    try {
      const tab = await other.newPage();
      tab.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      await tab.goto(`${base}/gadget/?url=${encodeURIComponent(guarded.gadgetUrl)}`);
      await tab.locator("body[data-screen=setup]").waitFor({ state: "attached" });
      await tab.locator("#screen-text", { hasText: "refused the access token" }).waitFor({ state: "attached" });
      await tab.screenshot({ path: join(shots, "11-setup-needed.png"), fullPage: true });
      await tab.click("#settings summary");
      await tab.fill("#token", "tab-token-1234");
      await tab.click("#save");
      await tab.locator("body[data-screen=pairing]").waitFor({ state: "attached" });
      assert.equal(await tab.evaluate(() => localStorage.getItem("herald.gadget.token")), "tab-token-1234");
      const log = await tab.textContent("#log");
      assert.ok(!log.includes("tab-token-1234"), "the token is not in the log");
    } finally {
      await other.close();
      await guarded.stop();
    }
  });

  assert.deepEqual(problems, []);
});
