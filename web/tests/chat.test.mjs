// The browser chat in a real browser (Debian's chromium, headless, driven by
// playwright-core) against a real `herald serve`: pairing, a streamed reply, a card, an
// upload, a picture from the agent, voice from the (fake) microphone, the avatar's
// states, and herald restarting under the page: it reconnects and what was unanswered
// or typed meanwhile is answered, once. Screenshots go to $HERALD_ARTIFACTS/web (default:
// target/artifacts/web).
//
// The page is opened through a proxy that holds its port for the whole test: herald comes
// back from a restart on new ports, and the page must find it at the address it came from.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

// The SDK's test helpers: herald on the ports it picks, with its own data dir; a proxy.
import { Herald, TcpProxy, TOKEN } from "../../sdk/typescript/build/test/herald.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const shots = join(process.env.HERALD_ARTIFACTS ?? join(root, "target/artifacts"), "web");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

// A 2×2 PNG, red, green, blue and white.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP4z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==",
  "base64",
);

test("the browser chat: pairing, streamed reply, card, upload, media, voice, avatar, a restart", { timeout: 120_000 }, async (t) => {
  mkdirSync(shots, { recursive: true });
  const herald = await Herald.start();
  const proxy = await TcpProxy.open(() => herald.port("mobile"));
  const origin = `http://127.0.0.1:${proxy.port}`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"],
  });
  t.after(async () => {
    await browser.close();
    await proxy.close();
    await herald.stop();
  });
  const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
  page.on("request", (r) => {
    if (r.url().includes(TOKEN)) problems.push(`the token in a URL: ${r.url()}`);
    if (!r.url().startsWith(`${origin}/`) && !r.url().startsWith("blob:") && !r.url().startsWith("data:")) {
      problems.push(`request to another host: ${r.url()}`);
    }
  });
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  const agentSays = (text) => page.locator("#messages li.agent", { hasText: text });
  // Every text frame the page sends, from its first socket on.
  const sentTexts = [];
  page.on("websocket", (ws) =>
    ws.on("framesent", ({ payload }) => {
      try {
        const frame = JSON.parse(String(payload));
        if (frame.t === "text") sentTexts.push(frame);
      } catch {
        // not JSON: not ours to count
      }
    }),
  );

  await t.test("the page, its script and the avatar are served by herald", async () => {
    await page.goto(`${origin}/`);
    await page.locator("#settings").waitFor({ state: "visible" });
    const avatar = page.frame({ url: /\/avatar\.html$/ });
    assert.ok(avatar, "the avatar frame");
    await avatar.waitForFunction(() => typeof window.hermesAvatar?.setState === "function");
    assert.equal(await avatar.locator("#state").textContent(), "idle");
    await shot("1-settings");
  });

  await t.test("the avatar page shows each state visibly, called directly or by postMessage", async () => {
    const solo = await browser.newPage({ viewport: { width: 320, height: 360 } });
    await solo.goto(`${origin}/avatar.html`);
    const look = () =>
      solo.evaluate(() => ({
        state: document.body.dataset.state,
        label: document.getElementById("state").textContent,
        dots: getComputedStyle(document.querySelector(".dots circle")).animationName,
        mouth: getComputedStyle(document.querySelector(".mouth-open")).animationName,
      }));
    assert.deepEqual(await look(), { state: "idle", label: "idle", dots: "none", mouth: "none" });
    await solo.screenshot({ path: join(shots, "avatar-idle.png") });
    await solo.evaluate(() => window.hermesAvatar.setState("thinking"));
    assert.deepEqual(await look(), { state: "thinking", label: "thinking", dots: "dot", mouth: "none" });
    await solo.screenshot({ path: join(shots, "avatar-thinking.png") });
    await solo.evaluate(() => window.postMessage({ hermesAvatar: "setState", args: ["speaking"] }, "*"));
    await solo.waitForFunction(() => document.body.dataset.state === "speaking");
    assert.deepEqual(await look(), { state: "speaking", label: "speaking", dots: "none", mouth: "talk" });
    await solo.evaluate(() => {
      window.hermesAvatar.speak("Hello there");
      window.hermesAvatar.setVolume(0.8);
      window.hermesAvatar.setState("dancing"); // not a state: ignored
    });
    assert.equal(await solo.locator("#line").textContent(), "Hello there");
    assert.equal(await solo.evaluate(() => document.body.style.getPropertyValue("--level")), "0.8");
    assert.equal((await look()).state, "speaking");
    await solo.screenshot({ path: join(shots, "avatar-speaking.png") });
    await solo.close();
  });

  await t.test("token entry is kept in the browser; connected", async () => {
    await page.fill("#token", TOKEN);
    await page.fill("#device-name", "Headless Chromium");
    await page.click("#connect");
    await page.locator("#status[data-state=ready]").waitFor();
    assert.equal(await page.evaluate(() => localStorage.getItem("herald.token")), TOKEN);
    // The avatar named in ready is herald's own page.
    assert.equal(await page.locator("#avatar").evaluate((f) => f.src), `${origin}/avatar.html`);
  });

  await t.test("the first message shows a pairing code, approved with the CLI; then it reaches the agent", async () => {
    await page.fill("#text", "hello");
    await page.press("#text", "Enter");
    const pairing = agentSays("Pairing code:");
    await pairing.waitFor();
    const code = /Pairing code: ([A-Z0-9]+)/.exec(await pairing.textContent())?.[1];
    assert.ok(code, "a code in the message");
    await shot("2-pairing");
    const out = await herald.cli("pairing", "approve", "mobile", code);
    assert.match(out, /^Approved mobile /);
    // The page hears it at once, and the message that got the code reaches the agent.
    await agentSays("now paired").waitFor();
    await page.locator("#messages li.agent[data-final=true]", { hasText: "You said: hello" }).waitFor();
  });

  await t.test("a text turn streams into one bubble; the avatar thinks, speaks, idles", async () => {
    const avatar = page.frame({ url: /\/avatar\.html/ });
    await avatar.evaluate(() => {
      window.__states = [];
      new MutationObserver(() => window.__states.push(document.body.dataset.state)).observe(document.body, {
        attributes: true,
        attributeFilter: ["data-state"],
      });
    });
    await page.evaluate(() => {
      window.__texts = {};
      new MutationObserver(() => {
        for (const li of document.querySelectorAll("#messages li.agent[data-id]")) {
          const seen = (window.__texts[li.dataset.id] ??= []);
          if (seen.at(-1) !== li.textContent) seen.push(li.textContent);
        }
      }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
    });
    const sentence = "the quick brown fox jumps over the lazy dog";
    const bubbles = await page.locator("#messages li.agent").count();
    await page.fill("#text", sentence);
    await page.click("#send");
    const reply = page.locator("#messages li.agent[data-final=true]", { hasText: `You said: ${sentence}` });
    await reply.waitFor();
    assert.equal(await page.locator("#messages li.agent").count(), bubbles + 1, "edits redraw one bubble");
    const id = await reply.getAttribute("data-id");
    const texts = await page.evaluate((id) => window.__texts[id], id);
    assert.ok(texts.length >= 3, `streamed in steps: ${JSON.stringify(texts)}`);
    for (let i = 1; i < texts.length; i++) assert.ok(texts[i].startsWith(texts[i - 1]), JSON.stringify(texts));
    await avatar.waitForFunction(() => document.body.dataset.state === "idle" && window.__states.includes("speaking"));
    const states = await avatar.evaluate(() => window.__states);
    assert.deepEqual(states.slice(0, 2), ["thinking", "speaking"], JSON.stringify(states));
    assert.equal(states.at(-1), "idle");
    assert.equal(await avatar.locator("#line").textContent(), `You said: ${sentence}`, "speak() shows the line");
    await shot("3-streamed");
  });

  await t.test("a card answered by a click", async () => {
    await page.fill("#text", "/ask Shall we go on?");
    await page.click("#send");
    const card = page.locator("#messages li.card", { hasText: "Shall we go on?" });
    await card.waitFor();
    await shot("4-card");
    await card.getByRole("button", { name: "Confirm", exact: true }).click();
    await agentSays("You answered yes.").waitFor();
    await card.locator("text=Answered: Confirm").waitFor();
  });

  await t.test("an upload with progress", async () => {
    // The file picker is reachable from the keyboard, not only by a click on its label.
    await page.focus("#file");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "file");
    const done = page.waitForFunction(() => [...document.querySelectorAll("#uploads progress")].some((p) => p.value === p.max));
    await page.setInputFiles("#file", { name: "dots.png", mimeType: "image/png", buffer: PNG });
    await done;
    await agentSays("Got your image.").waitFor();
  });

  await t.test("a picture from the agent is shown", async () => {
    await page.fill("#text", "/image");
    await page.click("#send");
    const img = page.locator("#messages li.agent img");
    await img.waitFor();
    await page.waitForFunction(() => document.querySelector("#messages li.agent img")?.naturalWidth > 0);
    assert.equal(await img.getAttribute("alt"), "A demo picture");
    await shot("5-media");
  });

  await t.test("voice from the microphone, as a 16 kHz WAV", async () => {
    // Counted, not timed: the page hands each block the microphone gives it (4096 samples
    // at the audio context's rate) to the avatar's level meter; recording stops once 1.2 s
    // of blocks came, and what herald heard is checked against the blocks counted.
    const avatar = page.frame({ url: /\/avatar\.html/ });
    await avatar.evaluate(() => {
      const api = window.hermesAvatar;
      const setVolume = api.setVolume;
      window.__levels = 0;
      api.setVolume = (level) => {
        window.__levels++;
        setVolume.call(api, level);
      };
    });
    const rate = await page.evaluate(async () => {
      const ctx = new AudioContext();
      const r = ctx.sampleRate;
      await ctx.close();
      return r;
    });
    const BLOCK = 4096 / rate;
    const wanted = Math.ceil(1.2 / BLOCK);
    await page.click("#record");
    await page.locator("#record[aria-pressed=true]").waitFor();
    await avatar.waitForFunction((n) => window.__levels >= n, wanted);
    await page.click("#record");
    const heard = agentSays("I heard");
    await heard.waitFor();
    const seconds = Number(/I heard ([\d.]+) seconds/.exec(await heard.textContent())?.[1]);
    // Every block counted before the stop is in the recording; the count afterwards also
    // has the stop's own level 0 and any block that came as it stopped.
    const blocks = await avatar.evaluate(() => window.__levels);
    assert.ok(seconds >= wanted * BLOCK - 0.05 && seconds <= blocks * BLOCK + 0.05, `recorded ${seconds} s; ${wanted}..${blocks} blocks of ${BLOCK} s`);
    await page.locator("#messages li.agent audio").waitFor();
    await shot("6-voice");
  });

  await t.test("herald restarts: the page reconnects, and what was unanswered or typed meanwhile is answered once", async () => {
    const status = page.locator("#status");
    const mine = (text) => page.locator("#messages li.me", { hasText: text });
    const answers = (text) => page.locator("#messages li.agent[data-final=true]", { hasText: `You said: ${text}` });
    const say = async (text) => {
      await page.fill("#text", text);
      await page.press("#text", "Enter");
      await mine(text).waitFor();
    };
    const down = async () => {
      await page.locator("#status[data-state=waiting]").waitFor();
      assert.equal(await status.textContent(), "Not connected; trying again soon");
    };
    const backAgain = async () => {
      await herald.run(); // on new ports, behind the same proxy
      await page.locator("#status[data-state=ready]").waitFor();
      assert.equal(await status.textContent(), "Connected");
    };
    // One message at a time: a message that arrives while the demo agent is answering
    // another ends that turn (as a new message does in Hermes), so two resent together
    // would get one answer between them.
    const unanswered = "sent just before the crash";
    const typed = "typed while herald is down";
    const marker = "and after it";

    // Herald gets a message and starts on it, but its answer never reaches the page (the
    // proxy swallows it); then herald dies. Back, it answers the resend.
    proxy.muted = true;
    const answering = proxy.swallowedSomething();
    await say(unanswered);
    await answering;
    await herald.kill();
    proxy.muted = false;
    await down();
    await backAgain();
    await answers(unanswered).waitFor();

    // Typed while nothing listens behind the page's address; sent once herald is back.
    await herald.kill();
    await down();
    await say(typed);
    await shot("7-offline");
    await backAgain();
    await answers(typed).waitFor();

    // A marker: anything more for the two would come before its answer.
    await say(marker);
    await answers(marker).waitFor();
    await shot("8-reconnected");
    for (const text of [unanswered, typed, marker]) {
      assert.equal(await answers(text).count(), 1, `one answer to "${text}"`);
      assert.equal(await mine(text).count(), 1, `"${text}" shown once`);
    }
    // On the wire: the unanswered one again with its id, the typed one once.
    const sent = (text) => sentTexts.filter((f) => f.text === text);
    assert.equal(sent(unanswered).length, 2, "sent, then resent after the restart");
    assert.equal(new Set(sent(unanswered).map((f) => f.id)).size, 1, "with the same id");
    assert.equal(sent(typed).length, 1);
    assert.equal(sent(marker).length, 1);
  });

  assert.deepEqual(problems, []);
});
