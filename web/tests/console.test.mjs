// The owner's console (web/src/console, served at / on herald's admin listener) in a real
// browser (Debian's chromium, headless, a fresh profile, driven by playwright-core)
// against a real `herald serve` with the demo agent and a real simulated gadget
// (`herald sim --headless`, the firmware's device core): a wrong token is refused in
// words; the login; the gadget appears online and asks to pair without a reload; a click
// approves it; a message, a card and an action reach it; a file that is no firmware is
// refused, a real image is checked, pushed and installed with the progress reaching
// 100%; a device that vanished says so; the server page's QR codes; logging out. Then a
// gadget's owner: chosen on the pairing page (a phone's user offered, a phone's own pairing
// taking none), changed and cleared on its page, a name that is nobody refused in herald's
// words, each stored as the admin API shows.
// Screenshots go to $HERALD_ARTIFACTS/console (default: target/artifacts/console).

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

// The SDK's test helper: herald on the ports it picks, read from its log.
import { Herald } from "../../sdk/typescript/build/test/herald.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const shots = join(process.env.HERALD_ARTIFACTS ?? join(root, "target/artifacts"), "console");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const HERALD_BIN = process.env.HERALD_BIN ?? join(root, "target/debug/herald");
/** The simulator's default board, and the tag its firmware must carry. */
const BOARD = "esp32s3-breadboard";
const PATIENCE = 30_000;

/** A process's output, line by line, and a way to wait for a line. */
class Lines {
  constructor(stream) {
    this.seen = [];
    this.waiters = [];
    let rest = "";
    stream.on("data", (chunk) => {
      rest += chunk;
      const lines = rest.split("\n");
      rest = lines.pop() ?? "";
      for (const line of lines) {
        this.seen.push(line);
        for (const w of [...this.waiters]) if (w.re.test(line)) w.done(line);
      }
    });
  }

  /** The first line from `from` on that matches, waiting for it. */
  wait(re, what, from = 0, ms = PATIENCE) {
    const found = this.seen.slice(from).find((l) => re.test(l));
    if (found) return Promise.resolve(found);
    return new Promise((res, rej) => {
      const w = {
        re,
        done: (line) => {
          clearTimeout(timer);
          this.waiters.splice(this.waiters.indexOf(w), 1);
          res(line);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        rej(new Error(`no ${what} within ${ms} ms; the simulator printed:\n${this.seen.join("\n")}`));
      }, ms);
      this.waiters.push(w);
    });
  }
}

/** `herald serve` on the loopback ports it picks, with its own data dir and the demo agent. */
async function startHerald(options = {}) {
  const h = await Herald.start(options);
  h.base = `http://127.0.0.1:${h.adminPort}`;
  // admin.json is written once the API serves, after the token.
  for (const deadline = Date.now() + 10_000; !existsSync(join(h.dataDir, "admin.json")); ) {
    if (Date.now() > deadline) throw new Error(`herald published no admin endpoint:\n${h.log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  h.token = readFileSync(join(h.dataDir, "admin.token"), "utf8").trim();
  return h;
}

/** A simulated gadget, headless, printing each screen change; nothing on its stdin. */
function startSim(herald, stateDir) {
  const child = spawn(
    HERALD_BIN,
    ["sim", "--headless", "--name", "Console sim", "--url", herald.urls.gadget, "--state-dir", stateDir],
    { env: { ...herald.env, RUST_LOG: "warn" }, stdio: ["pipe", "pipe", "pipe"] },
  );
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  let errors = "";
  child.stderr.on("data", (d) => (errors += d));
  const sim = { child, lines: new Lines(child.stdout), errors: () => errors };
  sim.stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
  };
  return sim;
}

/** A fake ESP-IDF application image for `board`: header, app descriptor, board tag, filler. */
function firmware(board, version) {
  const bytes = Buffer.alloc(150_000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = i % 251;
  bytes[0] = 0xe9;
  bytes.writeUInt32LE(0xabcd5432, 32);
  bytes.fill(0, 48, 112);
  bytes.write(version, 48, "latin1");
  bytes.write("herald-test", 80, "latin1");
  bytes.write(`HGBOARD=${board}\0`, 500, "latin1");
  return bytes;
}

test("the token field has no name: no form submission, whatever runs, can put it in a URL", () => {
  const html = readFileSync(join(root, "web/dist/console/index.html"), "utf8");
  const form = /<form id="login-form"[^>]*>([\s\S]*?)<\/form>/.exec(html)?.[1];
  assert.ok(form, "the login form");
  const fields = form.match(/<(input|textarea|select)\b[^>]*>/g) ?? [];
  assert.ok(fields.some((f) => /id="token"/.test(f)), "the token field");
  for (const field of fields) assert.doesNotMatch(field, /\sname=/, field);
});

/**
 * A fresh Chromium profile with a console tab on `herald`, ended with the test: content
 * policy violations kept in the tab's sessionStorage ("csp"), page errors, the admin token
 * in a URL and requests anywhere else gathered in `problems`; dialogs accepted.
 */
async function openConsole(t, herald) {
  mkdirSync(shots, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "herald-console-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1200, height: 860 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  t.after(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  // Anything the content policy blocks is a bug: the page would be missing part of itself.
  await context.addInitScript(() =>
    document.addEventListener("securitypolicyviolation", (e) => {
      const seen = JSON.parse(sessionStorage.getItem("csp") ?? "[]");
      seen.push(`${e.violatedDirective} ${e.blockedURI}`);
      sessionStorage.setItem("csp", JSON.stringify(seen));
    }),
  );
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => {
    if (r.url().includes(herald.token)) problems.push(`the admin token in a URL: ${r.url()}`);
    if (!r.url().startsWith(`${herald.base}/`)) problems.push(`request to another place: ${r.url()}`);
  });
  page.on("dialog", (d) => void d.accept());
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  const notice = page.locator("#notice:not([hidden]) #notice-text");
  return { context, page, problems, shot, notice };
}

/**
 * A herald started with `options` and a console tab on it (`openConsole`), ended with the
 * test; `startGadget()` starts a simulated gadget with its state in a directory of its own,
 * stopped and removed with them.
 */
async function setUp(t, options = {}) {
  const herald = await startHerald(options);
  const browser = await openConsole(t, herald);
  const simState = mkdtempSync(join(tmpdir(), "herald-console-sim-"));
  let sim;
  t.after(async () => {
    await sim?.stop();
    await herald.stop();
    rmSync(simState, { recursive: true, force: true });
  });
  const startGadget = () => (sim = startSim(herald, simState));
  return { herald, startGadget, ...browser };
}

test("the console: login, a gadget online and paired by a click, a card, an action, firmware to 100%, bad input", { timeout: 180_000 }, async (t) => {
  const { herald, startGadget, context, page, problems, shot, notice } = await setUp(t);
  let sim;
  let id = "";

  await t.test("a wrong token is refused with a word on where the right one is", async () => {
    await page.goto(`${herald.base}/`);
    await page.locator("#login:not([hidden])").waitFor();
    // The login page names the easy way in.
    assert.match(await page.locator("#login").textContent(), /herald console/);
    await page.fill("#token", "not-the-token");
    await page.click("#login-button");
    await page.locator("#login-error", { hasText: "not the admin token" }).waitFor();
    assert.match(await page.locator("#login-error").textContent(), /admin\.token/);
    assert.equal(await page.locator("#nav").isHidden(), true);
    await shot("1-wrong-token");
  });

  await t.test("the right token logs in; the session is an HttpOnly cookie and the page keeps no token", async () => {
    await page.fill("#token", herald.token);
    await page.click("#login-button");
    await page.locator("#view-devices:not([hidden])").waitFor();
    await page.locator("#live[data-state=live]").waitFor();
    const cookies = await context.cookies(herald.base);
    const session = cookies.find((c) => c.name === "herald_console");
    assert.ok(session, JSON.stringify(cookies));
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, "Strict");
    assert.ok(session.expires > Date.now() / 1000 + 3600, "it expires, hours from now");
    assert.equal(await page.evaluate(() => document.cookie), "", "scripts cannot read it");
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    assert.ok(!stored.includes(herald.token), "the token is not kept in the page's storage");
    await page.locator("#gadgets-empty:not([hidden])").waitFor();
  });

  await t.test("a simulated gadget appears online and waiting, without a reload", async () => {
    const navigations = [];
    page.on("framenavigated", (f) => f === page.mainFrame() && navigations.push(f.url()));
    sim = startGadget();
    id = /(hg-[0-9a-f]{16})/.exec(await sim.lines.wait(/\* device hg-/, "the device line"))?.[1];
    assert.ok(id, "a device id");
    await sim.lines.wait(/Pairing code/, "a pairing code on the gadget");
    const row = page.locator(`#gadgets tr[data-id="${id}"]`);
    await row.locator(".state[data-online=true]").waitFor();
    assert.match(await row.textContent(), new RegExp(BOARD));
    assert.match(await row.textContent(), /Console sim/);
    await page.locator("#pending-count:not([hidden])", { hasText: "1" }).waitFor();
    assert.deepEqual(navigations, [], "nothing was reloaded");
    await shot("2-devices-online");
  });

  await t.test("its pairing is approved by a click, and the gadget says so at once", async () => {
    await page.click("nav a[data-view=pairing]");
    const pending = page.locator(`#pending tr[data-user="${id}"]`);
    await pending.waitFor();
    const code = /Pairing code: ([A-Z0-9]+)/.exec(sim.lines.seen.join("\n"))?.[1];
    assert.ok(code, "the code the gadget shows");
    assert.match(await pending.textContent(), new RegExp(code));
    await shot("3-pairing-waiting");
    const from = sim.lines.seen.length;
    await pending.getByRole("button", { name: "Approve" }).click();
    await sim.lines.wait(/\] ready \| /, "the gadget ready after the approval", from);
    await page.locator(`#approved tr[data-user="${id}"]`).waitFor();
    await pending.waitFor({ state: "detached" });
    await notice.filter({ hasText: "Approved" }).waitFor();
    await shot("4-pairing-approved");
  });

  await t.test("the device page: a message, a card and an action reach the gadget and are listed", async () => {
    await page.click("nav a[data-view=devices]");
    await page.locator(`#gadgets tr[data-id="${id}"] a`).click();
    await page.locator("#view-device:not([hidden])").waitFor();
    await page.locator("#device-title", { hasText: "Console sim" }).waitFor();
    await page.locator("#device-facts", { hasText: BOARD }).waitFor();
    // Whose it is: nobody's in particular yet (the API's `owner`, set with `herald owner`).
    assert.match(await page.locator("#device-facts").textContent(), /Owner\s*—/);

    let from = sim.lines.seen.length;
    await page.fill("#send-text", "Hello from the console");
    await page.click("#send-form button[type=submit]");
    await sim.lines.wait(/Hello from the console/, "the message on the gadget's screen", from);
    await page.locator("#events li[data-kind=message]", { hasText: "Hello from the console" }).waitFor();

    from = sim.lines.seen.length;
    await page.fill("#card-title", "Console card");
    await page.fill("#card-body", "Sent from the browser");
    await page.fill("#card-seconds", "0");
    await page.click("#card-form button[type=submit]");
    await sim.lines.wait(/\] card \| .*Console card/, "the card on the gadget's screen", from);
    await page.locator("#events li[data-kind=card]", { hasText: "Console card" }).waitFor();
    await page.locator("#device-result", { hasText: "Card shown." }).waitFor();

    await page.locator("#action-name option[value='led.set']").waitFor({ state: "attached" });
    await page.selectOption("#action-name", "led.set");
    await page.locator("#action-about", { hasText: "LED" }).waitFor();
    await page.fill("#action-args", '{"color": "green"}');
    await page.click("#action-form button[type=submit]");
    await page.locator("#action-result", { hasText: '"led": "green"' }).waitFor({ timeout: 10_000 }).catch(async (e) => {
      throw new Error(`${e.message}\nthe page says: ${await page.locator("#action-result").textContent()}`);
    });
    await page.locator("#events li[data-kind=action]", { hasText: "led.set" }).waitFor();
    // A wrong argument comes back as the device's own words.
    await page.fill("#action-args", "{}");
    await page.click("#action-form button[type=submit]");
    await page.locator("#action-result", { hasText: "color is required" }).waitFor();
    await shot("5-device-page");
  });

  await t.test("a file that is no firmware is refused in words", async () => {
    await page.click("nav a[data-view=firmware]");
    await page.locator(`#ota-device option[value="${id}"]`).waitFor({ state: "attached" });
    await page.selectOption("#ota-device", id);
    await page.setInputFiles("#ota-file", { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("just some notes\n") });
    await page.click("#ota-check");
    await page.locator("#ota-error", { hasText: "not an ESP-IDF application image" }).waitFor();
    assert.equal(await page.locator("#ota-checked").isHidden(), true);
    await shot("6-not-an-image");
  });

  await t.test("an image for another board is checked and cannot be pushed", async () => {
    await page.setInputFiles("#ota-file", { name: "other.bin", mimeType: "application/octet-stream", buffer: firmware("esp32s3-other", "0.2.0") });
    await page.click("#ota-check");
    await page.locator("#checks li[data-check=board][data-outcome=fail]", { hasText: "esp32s3-other" }).waitFor();
    assert.equal(await page.locator("#ota-push").isDisabled(), true);
  });

  await t.test("a real image is checked, pushed, and its progress reaches 100% as the gadget installs it", async () => {
    await page.setInputFiles("#ota-file", { name: "firmware.bin", mimeType: "application/octet-stream", buffer: firmware(BOARD, "0.2.0") });
    await page.click("#ota-check");
    for (const check of ["image", "board", "online", "idle"]) {
      await page.locator(`#checks li[data-check=${check}][data-outcome=ok]`).waitFor();
    }
    await shot("7-checks");
    // Progress as the page shows it, every time it changes.
    await page.evaluate(() => {
      window.__progress = [];
      new MutationObserver(() => {
        for (const bar of document.querySelectorAll("#updates progress")) {
          const v = Number(bar.getAttribute("value"));
          if (window.__progress.at(-1) !== v) window.__progress.push(v);
        }
      }).observe(document.getElementById("updates"), { subtree: true, childList: true, attributes: true });
    });
    const from = sim.lines.seen.length;
    await page.click("#ota-push");
    await notice.filter({ hasText: "Sending 0.2.0" }).waitFor();
    const row = page.locator(`#updates tr[data-device="${id}"]`);
    await row.waitFor();
    await sim.lines.wait(/\] updating \| /, "the gadget updating", from);
    await page.locator(`#updates tr[data-device="${id}"][data-status=done]`).waitFor({ timeout: 60_000 });
    assert.equal(await row.locator("progress").getAttribute("value"), "100");
    assert.match(await row.locator(".percent").textContent(), /100%/);
    const seen = await page.evaluate(() => window.__progress);
    assert.equal(seen.at(-1), 100, JSON.stringify(seen));
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] >= seen[i - 1], `progress only grows: ${seen}`);
    await sim.lines.wait(/firmware 0\.2\.0 confirmed/, "the gadget keeping 0.2.0", from, 60_000);
    await page.locator(`#gadgets tr[data-id="${id}"]`, { hasText: "0.2.0" }).waitFor({ state: "attached" });
    await page.locator("#history tbody tr", { hasText: "0.2.0" }).first().waitFor();
    await shot("8-firmware-done");
  });

  await t.test("the server page: the URLs devices use, their QR codes, the figures", async () => {
    await page.click("nav a[data-view=server]");
    await page.locator("#url-gadget", { hasText: herald.urls.gadget }).waitFor();
    await page.locator("#url-chat", { hasText: `127.0.0.1:${herald.mobilePort}/` }).waitFor();
    for (const name of ["gadget", "mobile", "chat"]) {
      await page.waitForFunction((n) => document.getElementById(`qr-${n}`)?.naturalWidth > 0, name);
    }
    await page.locator("#stats tbody tr", { hasText: "Turns" }).waitFor();
    await page.locator("#stats-ota", { hasText: "1 done" }).waitFor();
    await shot("11-server");
  });

  await t.test("a device that vanished says so: offline, then forgotten", async () => {
    await page.goto(`${herald.base}/#/device/gadget/${id}`);
    await page.locator("#device-facts .state[data-online=true]").waitFor();
    await sim.stop();
    await page.locator("#device-facts .state[data-online=false]").waitFor();
    await page.fill("#card-title", "Anyone there?");
    await page.click("#card-form button[type=submit]");
    await notice.filter({ hasText: "not connected" }).waitFor();
    await shot("9-device-offline");
    await page.click("#forget");
    await notice.filter({ hasText: `Forgot ${id}` }).waitFor();
    await page.locator("#view-devices:not([hidden])").waitFor();
    await page.locator(`#gadgets tr[data-id="${id}"]`).waitFor({ state: "detached" });
    await page.goto(`${herald.base}/#/device/gadget/${id}`);
    await page.locator("#device-gone:not([hidden])", { hasText: "forgotten" }).waitFor();
    await shot("10-device-gone");
  });

  await t.test("nothing was blocked by the content policy", async () => {
    assert.deepEqual(await page.evaluate(() => JSON.parse(sessionStorage.getItem("csp") ?? "[]")), []);
  });

  await t.test("logging out ends the session", async () => {
    await page.click("#logout");
    await page.locator("#login:not([hidden])").waitFor();
    await page.reload();
    await page.locator("#login:not([hidden])").waitFor();
    const status = await page.evaluate(async () => (await fetch("/v1/devices")).status);
    assert.equal(status, 401);
  });

  await t.test("the link `herald console` prints logs in once, and leaves no code in the address", async () => {
    const printed = execFileSync(HERALD_BIN, ["console", "--no-open", "--data-dir", herald.dataDir], { env: herald.env, encoding: "utf8" });
    const link = /http:\/\/\S+\/#login=\S+/.exec(printed)?.[0];
    assert.ok(link?.startsWith(`${herald.base}/#login=`), printed);
    // Opened in a new tab, as a browser started by `herald console` does.
    const tab = await context.newPage();
    tab.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    await tab.goto(link);
    await tab.locator("#view-devices:not([hidden])").waitFor();
    await tab.locator("#live[data-state=live]").waitFor();
    assert.equal(tab.url(), `${herald.base}/`, "the code is out of the address");
    assert.ok((await context.cookies(herald.base)).some((c) => c.name === "herald_console" && c.httpOnly));
    await tab.screenshot({ path: join(shots, "11-logged-in-by-link.png"), fullPage: true });
    await tab.click("#logout");
    await tab.locator("#login:not([hidden])").waitFor();
    await tab.close();
    // Once only: the same link again, pasted into an open console, is refused in words.
    await page.goto(link);
    await page.locator("#login-error", { hasText: "used already" }).waitFor();
    assert.equal(await page.locator("#nav").isHidden(), true);
    assert.equal(page.url(), `${herald.base}/`);
    await shot("12-link-used-already");
  });

  assert.deepEqual(problems, []);
  assert.ok(!herald.log.includes("panicked"), herald.log);
});

/** App tokens of two people, named by their labels in MOBILE_EXTRA_TOKENS. */
const ALICE = "a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11c";
const BOB = "b0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0bb0";

test("the console: a gadget's owner chosen when it is paired, changed and cleared on its page, a name that is nobody refused", { timeout: 120_000 }, async (t) => {
  // Three people (the default token's user, alice, bob): no owner goes without saying.
  const { herald, startGadget, context, page, problems, shot, notice } = await setUp(t, { env: { MOBILE_EXTRA_TOKENS: `alice:${ALICE},bob:${BOB}` } });
  let sim;
  /** The gadget's owner as the admin API has it. */
  const storedOwner = async (id) => {
    const response = await fetch(`${herald.base}/v1/devices`, { headers: { Authorization: `Bearer ${herald.token}` } });
    assert.equal(response.status, 200);
    const device = (await response.json()).find((d) => d.id === id);
    assert.ok(device, `${id} in /v1/devices`);
    return device.owner;
  };
  let id = "";

  await t.test("alice's phone (the browser chat) makes her one of the people the console offers", async () => {
    const chat = await context.newPage();
    chat.on("pageerror", (e) => problems.push(`chat page error: ${e.message}`));
    await chat.goto(`http://127.0.0.1:${herald.mobilePort}/`);
    await chat.fill("#token", ALICE);
    await chat.fill("#device-name", "Alice's phone");
    await chat.click("#connect");
    await chat.locator("#status[data-state=ready]").waitFor();
    // Her first message gets a pairing code: a phone's pairing waits beside the gadget's.
    await chat.fill("#text", "hello");
    await chat.press("#text", "Enter");
    await chat.locator("#messages li.agent", { hasText: "Pairing code:" }).waitFor();

    // The console's tab in front again: a tab behind gets no animation frames to act in.
    await page.bringToFront();
    await page.goto(`${herald.base}/`);
    await page.fill("#token", herald.token);
    await page.click("#login-button");
    await page.locator("#live[data-state=live]").waitFor();
    await page.locator("#phones tbody tr", { hasText: "alice" }).waitFor();
    await page.locator("#people option[value=alice]").waitFor({ state: "attached" });
    // Known from her phone alone: bob has none, so he is not offered (he can be typed).
    assert.equal(await page.locator("#people option[value=bob]").count(), 0);
  });

  await t.test("the pairing page asks a gadget for its owner, a phone for none; what is typed outlives a redraw", async () => {
    sim = startGadget();
    id = /(hg-[0-9a-f]{16})/.exec(await sim.lines.wait(/\* device hg-/, "the device line"))?.[1];
    assert.ok(id, "a device id");
    await page.click("nav a[data-view=pairing]");
    const gadget = page.locator(`#pending tr[data-user="${id}"]`);
    const phone = page.locator(`#pending tr[data-user="alice"]`);
    await gadget.waitFor();
    await phone.waitFor();
    assert.equal(await phone.locator("input").count(), 0, "a phone's pairing has no owner field");
    const field = gadget.getByLabel("Owner of Console sim");
    assert.equal(await field.getAttribute("list"), "people");
    await field.fill("mall");
    // Approving the phone redraws the waiting list (and takes no owner: herald would refuse one).
    await phone.getByRole("button", { name: "Approve" }).click();
    await page.locator(`#approved tr[data-user="alice"]`).waitFor();
    await phone.waitFor({ state: "detached" });
    assert.equal(await field.inputValue(), "mall");
    // A redraw while the field is being typed in (the pairing revoked elsewhere) leaves
    // the typing where it was.
    await field.focus();
    await page.keyboard.press("End");
    const revoked = await fetch(`${herald.base}/v1/pairing/revoke`, {
      method: "POST",
      headers: { Authorization: `Bearer ${herald.token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ platform: "mobile", user_id: "alice" }),
    });
    assert.equal(revoked.status, 200);
    await page.locator(`#approved tr[data-user="alice"]`).waitFor({ state: "detached" });
    await page.keyboard.type("ory");
    assert.equal(await field.inputValue(), "mallory");
    await shot("13-owner-at-pairing");
  });

  await t.test("a name that is nobody is refused in herald's words, and the gadget still waits", async () => {
    const gadget = page.locator(`#pending tr[data-user="${id}"]`);
    await gadget.getByRole("button", { name: "Approve" }).click();
    await notice.filter({ hasText: "nobody called mallory" }).waitFor();
    assert.equal(await page.locator(`#approved tr[data-user="${id}"]`).count(), 0);
    assert.equal(await gadget.getByLabel("Owner of Console sim").inputValue(), "mallory");
    assert.equal(await storedOwner(id), null);
    await page.click("#notice-close");
  });

  await t.test("approved as alice's: the gadget is ready and herald keeps her as its owner", async () => {
    const gadget = page.locator(`#pending tr[data-user="${id}"]`);
    await gadget.getByLabel("Owner of Console sim").fill("alice");
    const from = sim.lines.seen.length;
    await gadget.getByRole("button", { name: "Approve" }).click();
    await sim.lines.wait(/\] ready \| /, "the gadget ready after the approval", from);
    await notice.filter({ hasText: "Approved Console sim for alice" }).waitFor();
    await page.locator(`#approved tr[data-user="${id}"]`).waitFor();
    assert.equal(await storedOwner(id), "alice");
    await page.click("nav a[data-view=devices]");
    await page.locator(`#gadgets tr[data-id="${id}"]`, { hasText: "alice" }).waitFor();
  });

  await t.test("its page changes the owner, refuses a name that is nobody, and clears it", async () => {
    await page.locator(`#gadgets tr[data-id="${id}"] a`).click();
    await page.locator("#device-facts", { hasText: /Owner\s*alice/ }).waitFor();
    assert.equal(await page.getByLabel("Who it belongs to").inputValue(), "alice");

    await page.getByLabel("Who it belongs to").fill("bob");
    await page.getByRole("button", { name: "Set owner" }).click();
    await page.locator("#device-result", { hasText: "It belongs to bob now." }).waitFor();
    await page.locator("#device-facts", { hasText: /Owner\s*bob/ }).waitFor();
    assert.equal(await storedOwner(id), "bob");

    await page.getByLabel("Who it belongs to").fill("zed");
    await page.getByRole("button", { name: "Set owner" }).click();
    await page.locator("#owner-error", { hasText: "nobody called zed" }).waitFor();
    await shot("14-owner-refused");
    assert.equal(await storedOwner(id), "bob");
    assert.match(await page.locator("#device-facts").textContent(), /Owner\s*bob/);

    await page.getByRole("button", { name: "Clear" }).click();
    await page.locator("#device-result", { hasText: "nobody in particular" }).waitFor();
    await page.locator("#device-facts", { hasText: /Owner\s*—/ }).waitFor();
    assert.equal(await page.locator("#owner-error").textContent(), "");
    assert.equal(await page.getByLabel("Who it belongs to").inputValue(), "");
    assert.equal(await page.getByRole("button", { name: "Clear" }).isDisabled(), true);
    assert.equal(await storedOwner(id), null);
    await shot("15-owner-cleared");
  });

  await t.test("nothing was blocked by the content policy", async () => {
    assert.deepEqual(await page.evaluate(() => JSON.parse(sessionStorage.getItem("csp") ?? "[]")), []);
  });

  assert.deepEqual(problems, []);
  assert.ok(!herald.log.includes("panicked"), herald.log);
});
