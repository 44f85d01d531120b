// Notifications in the browser chat, in a real browser (Debian's chromium, headless,
// driven by playwright-core) against a real `herald serve`: the switch shown because
// herald offers push, permission asked on its click and never on load, the subscription
// sent to herald, `visibility` said, then what herald pushes for a question while the
// page is out of sight given to the real service worker as a push event: the
// notification it shows, and clicks on it that answer the card, in the open page or in one
// the worker opens. Screenshots in $HERALD_ARTIFACTS/web.
//
// The push event is made in the worker and its handler awaited, as the clicks are. The
// DevTools road (ServiceWorker.deliverPushMessage) answers before the event runs and, on a
// loaded machine, sometimes never runs it (4 of 9 runs beside two busy loops lost one).
//
// Headless Chromium reaches no push service (PushManager.subscribe never settles), so
// this test alone stands in for it: the page's PushManager hands out a subscription of
// the test's push service (sdk/typescript/test/push-service.ts), which checks and
// decrypts what herald sends to it. The subscription round trip with a real push
// service's rules is the SDK's test (sdk/typescript/test/push.test.ts).

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

import { Herald, TOKEN } from "../../sdk/typescript/build/test/herald.js";
import { PushService } from "../../sdk/typescript/build/test/push-service.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const shots = join(process.env.HERALD_ARTIFACTS ?? join(root, "target/artifacts"), "web");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

/**
 * Run in the page before its own script: a PushManager that hands out `sub` (the real one
 * never answers in headless Chromium), and a count of permission requests with whether
 * each came in a click.
 */
function stubPush(sub) {
  let current = null;
  const key = { bytes: null };
  window.__push = { subscribes: [], unsubscribes: 0, permissionRequests: [] };
  PushManager.prototype.getSubscription = async function () {
    return current;
  };
  PushManager.prototype.subscribe = async function (options) {
    key.bytes = new Uint8Array(options.applicationServerKey);
    window.__push.subscribes.push({ userVisibleOnly: options.userVisibleOnly, key: [...key.bytes] });
    current = {
      endpoint: sub.endpoint,
      options: { userVisibleOnly: true, applicationServerKey: key.bytes.buffer },
      toJSON: () => ({ endpoint: sub.endpoint, expirationTime: null, keys: sub.keys }),
      unsubscribe: async () => {
        current = null;
        window.__push.unsubscribes++;
        return true;
      },
    };
    return current;
  };
  const request = Notification.requestPermission.bind(Notification);
  Notification.requestPermission = (...args) => {
    window.__push.permissionRequests.push({ inClick: navigator.userActivation.isActive });
    return request(...args);
  };
}

test("notifications: the switch, a question pushed while out of sight, shown by the worker, answered from it", { timeout: 120_000 }, async (t) => {
  mkdirSync(shots, { recursive: true });
  const push = await PushService.open();
  const herald = await Herald.start({ env: { MOBILE_ALLOW_ALL_USERS: "1", HERALD_PUSH_ALLOW_PRIVATE: "1" } });
  const origin = `http://127.0.0.1:${herald.mobilePort}`;
  const profile = mkdtempSync(join(tmpdir(), "herald-push-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking"],
    viewport: { width: 1000, height: 760 },
  });
  t.after(async () => {
    await context.close();
    await herald.stop();
    await push.close();
    rmSync(profile, { recursive: true, force: true });
  });
  // What a click on "Allow" would do; the page still has to ask.
  await context.grantPermissions(["notifications"], { origin });
  const sub = push.subscribe("browser");
  await context.addInitScript(stubPush, { endpoint: sub.endpoint, keys: sub.keys });

  const problems = [];
  const frames = { sent: [], received: [] };
  const watch = (page) => {
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("websocket", (ws) => {
      ws.on("framesent", ({ payload }) => frames.sent.push(JSON.parse(String(payload))));
      ws.on("framereceived", ({ payload }) => frames.received.push(JSON.parse(String(payload))));
    });
  };
  const sentOf = (type) => frames.sent.filter((f) => f.t === type);
  /** The next push for the browser's subscription about `promptId` (replies to the page's turns come too). */
  const questionPushed = async (text) => {
    for (;;) {
      const p = await push.next("browser");
      if (p.payload.kind === "question" && String(p.payload.body).includes(text)) return p;
    }
  };
  const until = async (what, check) => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const v = await check();
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  // A blank tab that stays open, so the browser (and its worker) lives on with no chat open.
  const control = await context.newPage();
  /** Hands `payload` to the chat's service worker as the browser would a push, and waits for its handler. */
  const deliver = (payload) =>
    worker.evaluate(async (text) => {
      const push = new PushEvent("push", { data: text });
      // A script-made event refuses waitUntil: take the promise the handler hands it.
      let handled;
      push.waitUntil = (p) => (handled = p);
      self.dispatchEvent(push);
      await handled;
    }, payload);

  /**
   * Clicks the worker's (only) notification, on `action` if given, as the browser would
   * dispatch it, and waits for what the worker's handler does. A synthetic click carries
   * no user activation, so the worker cannot focus a page or open a window.
   */
  const clickNotification = (action) =>
    worker.evaluate(async (action) => {
      const [notification] = await self.registration.getNotifications();
      const click = new NotificationEvent("notificationclick", action ? { notification, action } : { notification });
      // A script-made event refuses waitUntil: take the promise the handler hands it.
      let handled;
      click.waitUntil = (p) => (handled = p);
      self.dispatchEvent(click);
      await handled;
    }, action);

  let page = context.pages().find((p) => p !== control) ?? (await context.newPage());
  watch(page);
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

  let worker;
  await t.test("the switch is there because herald offers push; permission is not asked on load", async () => {
    await page.goto(`${origin}/`);
    await page.fill("#token", TOKEN);
    await page.click("#connect");
    await page.locator("#status[data-state=ready]").waitFor();
    await page.evaluate(() => navigator.serviceWorker.ready);
    worker = context.serviceWorkers()[0] ?? (await context.waitForEvent("serviceworker"));
    const ready = frames.received.find((f) => f.t === "ready");
    assert.ok(ready?.capabilities?.push?.vapid_key, "herald offers push");
    await page.click("#open-settings");
    await page.locator("#notify-row").waitFor({ state: "visible" });
    assert.equal(await page.locator("#notify").isChecked(), false);
    assert.deepEqual(await page.evaluate(() => window.__push.permissionRequests), [], "nothing asked yet");
    assert.deepEqual(sentOf("push_subscribe"), []);
  });

  await t.test("turned on: permission asked in the click, subscribed with herald's key, sent to herald", async () => {
    await page.click("#notify");
    await page.locator("#notify-note", { hasText: "On." }).waitFor();
    assert.equal(await page.locator("#notify").isChecked(), true);
    assert.deepEqual(await page.evaluate(() => window.__push.permissionRequests), [{ inClick: true }]);
    const ready = frames.received.find((f) => f.t === "ready");
    const subscribes = await page.evaluate(() => window.__push.subscribes);
    assert.equal(subscribes.length, 1);
    assert.equal(subscribes[0].userVisibleOnly, true);
    assert.equal(Buffer.from(subscribes[0].key).toString("base64url"), ready.capabilities.push.vapid_key, "applicationServerKey is herald's VAPID key");
    assert.deepEqual(sentOf("push_subscribe"), [{ t: "push_subscribe", endpoint: sub.endpoint, keys: sub.keys }]);
    assert.ok(frames.received.some((f) => f.t === "push_subscribed"));
    assert.equal(await page.evaluate(() => localStorage.getItem("herald.notify")), "on");
    await shot("push-1-switch-on");
    await page.click("#open-settings");
    await page.locator("#settings").waitFor({ state: "hidden" });
  });

  let question;
  let pushed;
  await t.test("out of sight, a question is pushed to the subscription, and the worker shows it with two actions", async () => {
    // Headless pages are always visible: the page is told it is hidden the way a browser would.
    await page.evaluate(() => {
      Object.defineProperty(document, "visibilityState", { value: "hidden", configurable: true });
      Object.defineProperty(document, "hidden", { value: true, configurable: true });
      document.dispatchEvent(new Event("visibilitychange"));
    });
    await until("visibility sent", () => sentOf("visibility").length === 1);
    assert.deepEqual(sentOf("visibility"), [{ t: "visibility", visible: false }]);
    const arrives = questionPushed("rm -rf build");
    await page.fill("#text", "/approve rm -rf build");
    await page.click("#send");
    const card = page.locator("#messages li.card", { hasText: "rm -rf build" });
    await card.waitFor();
    question = await card.getAttribute("data-id");
    pushed = await arrives;
    assert.equal(pushed.payload.kind, "question");
    assert.equal(pushed.payload.prompt_id, question);

    // What herald sent, as the browser would hand it to the worker.
    await deliver(pushed.plaintext.toString("utf8"));
    const shown = await until("the notification", () =>
      page.evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => ({ title: n.title, body: n.body, tag: n.tag, actions: n.actions.map((a) => [a.action, a.title]) }))).then((list) => (list.length ? list : undefined)),
    );
    const labels = Object.fromEntries(pushed.payload.options.map((o) => [o.id, o.label]));
    assert.deepEqual(shown, [
      {
        title: pushed.payload.title,
        body: pushed.payload.body,
        tag: pushed.payload.tag,
        // Chromium shows two: the first choice, and the safe one.
        actions: [["once", labels.once], ["deny", labels.deny]],
      },
    ]);
  });

  await t.test("its Allow action, clicked while the chat is open, answers the card there", async () => {
    // The worker cannot focus the page without a real click, but tells it what to do.
    await clickNotification("once");
    const card = page.locator(`#messages li.card[data-id="${question}"]`);
    await card.locator("text=Answered: Allow once").waitFor();
    assert.deepEqual(sentOf("prompt"), [{ t: "prompt", prompt_id: question, option_id: "once" }]);
    assert.equal(await card.evaluate((li) => li.classList.contains("opened")), true, "the card is brought into view");
    assert.deepEqual(await page.evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications()).length), 0, "the notification is gone");
    await shot("push-2-answered-from-notification");
  });

  await t.test("with the chat closed, an action click opens it and answers the card", async () => {
    const arrives = questionPushed("Lights off?");
    await page.fill("#text", "/ask Lights off?");
    await page.click("#send");
    const card = page.locator("#messages li.card", { hasText: "Lights off?" });
    await card.waitFor();
    const id = await card.getAttribute("data-id");
    const p = await arrives;
    assert.equal(p.payload.prompt_id, id);
    await page.close();
    // The worker shows what herald pushed, and is clicked with no chat open.
    await deliver(p.plaintext.toString("utf8"));
    await until("the notification", () => worker.evaluate(async () => (await self.registration.getNotifications()).length === 1));
    // Without the click's user activation Chromium refuses clients.openWindow: note the
    // address the worker asks for, and open it as the browser would.
    await worker.evaluate(() => {
      self.clients.openWindow = async (url) => {
        self.__opened = url;
        return null;
      };
    });
    await clickNotification("once");
    const opened = await worker.evaluate(() => self.__opened);
    // With the nonce the worker keeps for it: only an address the worker made answers.
    assert.match(opened, new RegExp(`^/\\?answer=${id}&option=once&n=[0-9a-f-]{36}$`));
    page = await context.newPage();
    watch(page);
    const before = sentOf("prompt").length;
    await page.goto(`${origin}${opened}`);
    await page.locator("#messages li.agent", { hasText: "You answered yes." }).waitFor();
    assert.deepEqual(sentOf("prompt").slice(before), [{ t: "prompt", prompt_id: id, option_id: "once" }], "answered once");
    assert.ok(frames.received.some((f) => f.t === "prompt_done" && f.prompt_id === id && f.option_id === "once"));
    // On the card, when herald showed it again on connect; else a note says it counted.
    await page.locator(`#messages li.card[data-id="${id}"] >> text=Answered: Confirm`).or(page.locator("#messages li.notice", { hasText: "Answered from the notification." })).waitFor();
    assert.equal(new URL(page.url()).search, "", "the query is cleared");
    assert.deepEqual(await page.evaluate(() => window.__push.permissionRequests), [], "not asked on load, though on");
    await shot("push-3-opened-and-answered");
  });

  await t.test("a click on a reply's notification focuses the chat at that message", async () => {
    const reply = page.locator("#messages li.agent", { hasText: "You answered yes." });
    const id = await reply.getAttribute("data-id");
    // As the worker shows a reply's push (its own code path, given the payload).
    await deliver(JSON.stringify({ v: 1, kind: "reply", title: "Hermes", body: "You answered yes.", tag: `m-${id}`, device: "web", message_id: id }));
    await until("the reply's notification", () => worker.evaluate(async () => (await self.registration.getNotifications()).length === 1));
    await clickNotification();
    await page.locator(`#messages li.opened[data-id="${id}"]`).waitFor();
  });

  await t.test("an address someone sends the owner shows the card but does not answer it", async () => {
    // Another device of the same user asks (a plain WebSocket in the blank tab): the chat
    // gets the question too, also when it connects while the question is open.
    await control.evaluate(
      async ({ url, token }) => {
        const ws = new WebSocket(url);
        window.__tablet = { ws, frames: [] };
        ws.onmessage = (e) => window.__tablet.frames.push(JSON.parse(e.data));
        await new Promise((r) => (ws.onopen = r));
        ws.send(JSON.stringify({ t: "hello", token, device: { id: "tablet-1", name: "Tablet" } }));
      },
      { url: herald.url, token: TOKEN },
    );
    await until("the tablet's ready", () => control.evaluate(() => window.__tablet.frames.some((f) => f.t === "ready")));
    await control.evaluate(() => window.__tablet.ws.send(JSON.stringify({ t: "text", id: "tablet-m1", text: "/ask Door open?" })));
    const id = await until("the tablet's card", () => control.evaluate(() => window.__tablet.frames.find((f) => f.t === "prompt")?.id));
    const before = sentOf("prompt").length;
    // As another browser of the owner's: a device that connects while the question is
    // open is shown it (herald does not show it again to a device that had it).
    await page.evaluate(() => localStorage.removeItem("herald.device"));
    await page.goto(`${origin}/?answer=${id}&option=once`);
    const card = page.locator(`#messages li.card.opened[data-id="${id}"]`);
    await card.waitFor();
    // followLink marks the card and, for an answer, clicks in the same turn: no click came.
    assert.equal(await card.locator("button[data-option=once]").isDisabled(), false);
    assert.deepEqual(sentOf("prompt").slice(before), []);
    assert.equal(new URL(page.url()).search, "", "the query is cleared");
    await control.evaluate((id) => window.__tablet.ws.send(JSON.stringify({ t: "prompt", prompt_id: id, option_id: "cancel" })), id);
    await card.locator("text=This question has expired.").waitFor();
  });

  await t.test("turned off: herald and the browser forget the subscription", async () => {
    // Reconnected on each load with notifications on: the subscription was said again.
    await until("the renewed subscription", () => sentOf("push_subscribe").length >= 3);
    await page.click("#open-settings");
    assert.equal(await page.locator("#notify").isChecked(), true);
    await page.click("#notify");
    await until("push_unsubscribed", () => frames.received.some((f) => f.t === "push_unsubscribed"));
    assert.deepEqual(sentOf("push_unsubscribe"), [{ t: "push_unsubscribe" }]);
    await until("the browser's subscription gone", () => page.evaluate(() => window.__push.unsubscribes === 1));
    assert.equal(await page.evaluate(() => localStorage.getItem("herald.notify")), null);
    assert.equal(await page.locator("#notify").isChecked(), false);
  });

  assert.deepEqual(push.problems, []);
  assert.deepEqual(problems, []);
});
