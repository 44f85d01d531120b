// Notifications while the app is closed, against a real `herald serve` (demo agent, every
// user allowed, endpoints on loopback allowed) and the push service of push-service.ts,
// which checks each push's VAPID token and decrypts it with the subscription's own keys.
// Each test has a user of its own: Herald pushes only while none of a user's apps is
// connected and in sight, so another test's app must not count.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import WebSocket from "ws";

import { decodeBase64Url, HeraldClient, HeraldError, type Card, type ClientOptions } from "../src/index.js";
import { Herald, within } from "./herald.js";
import { PushService, type ReceivedPush, type Subscriber } from "./push-service.js";

/** One app token per test, as `label:token` (the label is the user id). */
const USERS = ["question", "reply", "closed", "gone", "refused", "off", "restart"] as const;
type User = (typeof USERS)[number];
const tokenOf = (user: User): string => `${user}-`.padEnd(40, "0") + USERS.indexOf(user);

let herald: Herald;
let push: PushService;
const clients: HeraldClient[] = [];

before(async () => {
  push = await PushService.open();
  herald = await Herald.start({
    env: {
      MOBILE_ALLOW_ALL_USERS: "1",
      HERALD_PUSH_ALLOW_PRIVATE: "1",
      MOBILE_DELIVER_FROM_LOOPBACK: "1",
      MOBILE_EXTRA_TOKENS: USERS.map((u) => `${u}:${tokenOf(u)}`).join(","),
    },
  });
});
after(async () => {
  for (const c of clients) c.close();
  await herald.stop();
  await push.close();
});

let devices = 0;
async function app(user: User, name: string, extra: Partial<ClientOptions> = {}): Promise<HeraldClient> {
  const c = new HeraldClient({
    url: herald.url,
    token: tokenOf(user),
    device: { id: `push-${user}-${devices++}`, name, platform: "node" },
    WebSocket,
    backoff: { initialMs: 100, maxMs: 1000, jitter: 0.5 },
    ...extra,
  });
  clients.push(c);
  const ready = c.once("ready");
  c.connect();
  await within(5000, "ready", ready);
  return c;
}

const deviceOf = (c: HeraldClient): string => c.ready!.session.slice("mobile:".length);

/** `c` says it is out of sight; a ping's answer shows Herald has read that (frames are read in order). */
async function hide(c: HeraldClient): Promise<void> {
  c.setVisible(false);
  const pong = c.once("frame", (f) => f.t === "pong");
  c.ping();
  await within(5000, "pong", pong);
}

/** Closes `c` and waits until Herald lists its device offline (then none of it is in sight). */
async function closeApp(c: HeraldClient): Promise<void> {
  const device = deviceOf(c);
  c.close();
  await within(10_000, `${device} offline`, (async () => {
    for (;;) {
      const phones = (await admin("GET", "/v1/phones")).json as { id: string; online: boolean }[];
      if (phones.some((p) => p.id === device && !p.online)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
  })());
}

/** `c` subscribes with a new subscription of the push service; the subscriber (its keys). */
async function subscribed(c: HeraldClient, name: string): Promise<Subscriber> {
  const s = push.subscribe(name);
  await within(5000, "push_subscribed", c.subscribePush({ endpoint: s.endpoint, keys: s.keys }));
  return s;
}

function next(name: string, what: string): Promise<ReceivedPush> {
  return within(15_000, what, push.next(name));
}

/**
 * The devices that have a subscription in Herald's store, read from its database by
 * Python's sqlite3 (node 20 has none), read-only while Herald writes (WAL). The admin API
 * lists no subscriptions yet.
 */
async function stored(): Promise<string[]> {
  const script = [
    "import sqlite3, sys",
    "db = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)",
    "print('\\n'.join(r[0] for r in db.execute('SELECT device_id FROM push_subscriptions ORDER BY device_id')))",
  ].join("\n");
  const { stdout } = await promisify(execFile)("python3", ["-c", script, join(herald.dataDir, "herald.db")]);
  return stdout.split("\n").filter(Boolean);
}

/** An admin API call, with the token herald keeps in its data dir. */
async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const token = readFileSync(join(herald.dataDir, "admin.token"), "utf8").trim();
  const res = await fetch(new URL(path, herald.urls!.console), {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as unknown) : undefined };
}

/** The push every test checks the same way: what the VAPID token says, and how it was sent. */
function checkSent(p: ReceivedPush, c: HeraldClient): void {
  assert.equal(p.status, 201);
  assert.equal(p.vapidKey, c.ready!.push!.vapidKey, "signed with the key ready named");
  assert.equal(p.claims.aud, push.origin);
  assert.ok(p.ttl > 0, `TTL ${p.ttl}`);
  assert.ok(p.plaintext.length <= 3072, `a payload of ${p.plaintext.length} bytes`);
  assert.equal(p.payload["v"], 1);
}

test("ready offers push with the server's VAPID key, a P-256 point", async () => {
  const c = await app("question", "Key check");
  const key = c.ready?.push?.vapidKey;
  assert.ok(key, "capabilities.push");
  assert.deepEqual(c.ready?.capabilities.push, { vapid_key: key });
  const point = decodeBase64Url(key);
  assert.equal(point.length, 65);
  assert.equal(point[0], 4);
  assert.doesNotMatch(key, /[=+/]/, "base64url without padding");
  await closeApp(c);
});

test("a question asked on another device of the user, none in sight: pushed with its options, and answered from it", async () => {
  const phone = await app("question", "Phone");
  const tablet = await app("question", "Tablet");
  const sub = await subscribed(phone, "question-phone");
  await hide(phone);
  await hide(tablet);
  const pushed = next(sub.name, "the question's push");
  const asked = within(5000, "the card on the tablet", tablet.once("prompt"));
  const copy = within(5000, "the copy on the phone", phone.once("prompt"));
  tablet.send("/ask Lights off?");
  const card: Card = await asked;
  const p = await pushed;
  checkSent(p, phone);
  assert.equal(p.urgency, "high", "a question is urgent");
  assert.equal(p.payload["kind"], "question");
  // The asking device's own notification and its copy's share a tag; whichever Herald
  // makes first is the one pushed (the tablet's, titled "Question").
  assert.ok(["Tablet asks", "Question"].includes(String(p.payload["title"])), String(p.payload["title"]));
  assert.match(String(p.payload["body"]), /Lights off\?/);
  assert.equal(p.payload["prompt_id"], card.id);
  assert.equal(p.payload["tag"], `q-${card.id}`);
  assert.deepEqual(p.payload["options"], card.options.map((o) => ({ id: o.id, label: o.label })));
  assert.equal((await copy).id, card.id);
  // Answered with what the notification carries: it resolves the tablet's question, whose
  // card is withdrawn there.
  const done = within(5000, "prompt_done on the phone", phone.once("promptDone"));
  const withdrawn = within(5000, "prompt_done on the tablet", tablet.once("promptDone"));
  const reply = within(10_000, "the answer's reply", tablet.once("message", (r) => r.final && r.text.startsWith("You answered")));
  phone.answer(String(p.payload["prompt_id"]), "once");
  assert.deepEqual(await done, { promptId: card.id, optionId: "once", expired: false });
  assert.deepEqual(await withdrawn, { promptId: card.id, expired: true });
  assert.equal((await reply).text, "You answered yes.");
});

test("a finished reply and a delivery reach an app out of sight; an app in sight gets none", async () => {
  const phone = await app("reply", "Phone");
  const sub = await subscribed(phone, "reply-phone");
  // In sight: answered on screen, not pushed (the next push is the one after it).
  const seen = within(10_000, "the reply in sight", phone.once("message", (r) => r.final && r.text === "You said: in sight"));
  phone.send("in sight");
  await seen;
  await hide(phone);
  const pushed = next(sub.name, "the reply's push");
  const reply = within(10_000, "the reply", phone.once("message", (r) => r.final && r.text === "You said: out of sight"));
  phone.send("out of sight");
  const r = await reply;
  const p = await pushed;
  checkSent(p, phone);
  assert.equal(p.payload["kind"], "reply");
  assert.equal(p.payload["body"], "You said: out of sight");
  assert.equal(p.payload["message_id"], r.id);
  assert.equal(p.payload["device"], deviceOf(phone));
  assert.equal(p.payload["truncated"], undefined);

  const delivered = next(sub.name, "the delivery's push");
  const out = await herald.cli("send", "mobile", deviceOf(phone), "--text", "Reminder: stand up");
  assert.ok(out !== undefined);
  const d = await delivered;
  checkSent(d, phone);
  assert.equal(d.payload["kind"], "deliver");
  assert.equal(d.payload["body"], "Reminder: stand up");
  assert.equal(push.count(sub.name), 2, "nothing for the reply in sight");
});

test("a delivery to a closed app (admin API) is pushed; a long one is cut and says so", async () => {
  const phone = await app("closed", "Phone");
  const sub = await subscribed(phone, "closed-phone");
  const device = deviceOf(phone);
  await closeApp(phone);
  const pushed = next(sub.name, "the delivery's push");
  const res = await admin("POST", "/v1/deliver", { chat: { platform: "mobile", id: device }, text: "Your build finished" });
  assert.notEqual(res.status, 200, "not delivered: the app is closed");
  const p = await pushed;
  checkSent(p, phone);
  assert.deepEqual([p.payload["kind"], p.payload["body"], p.payload["device"]], ["deliver", "Your build finished", device]);

  const long = "All work and no play makes Jack a dull boy. ".repeat(200);
  const cut = next(sub.name, "the long delivery's push");
  await admin("POST", "/v1/deliver", { chat: { platform: "mobile", id: device }, text: long });
  const q = await cut;
  assert.equal(q.payload["truncated"], true);
  const body = String(q.payload["body"]);
  assert.ok(body.length < long.length && long.startsWith(body.replace(/…$/, "")), "the start of the text, cut");
});

test("a subscription the push service calls gone (410) is dropped and never pushed to again", async () => {
  const phone = await app("gone", "Phone");
  const sub = await subscribed(phone, "gone-phone");
  const device = deviceOf(phone);
  assert.ok((await stored()).includes(device));
  push.answer(sub.name, 410);
  await closeApp(phone);
  const first = next(sub.name, "the push answered 410");
  await admin("POST", "/v1/deliver", { chat: { platform: "mobile", id: device }, text: "first" });
  assert.equal((await first).status, 410);
  await within(10_000, "the subscription dropped", (async () => {
    while ((await stored()).includes(device)) await new Promise((r) => setTimeout(r, 50));
  })());
  // Another device of the same user, subscribed: a push for the user goes to every
  // subscription they have, so this one comes, and the dropped one gets nothing.
  const other = await app("gone", "Tablet");
  const witness = await subscribed(other, "gone-tablet");
  await closeApp(other);
  const second = next(witness.name, "the push to the remaining subscription");
  await admin("POST", "/v1/deliver", { chat: { platform: "mobile", id: device }, text: "second" });
  assert.equal((await second).payload["body"], "second");
  assert.equal(push.count(sub.name), 1, "the gone subscription was not tried again");
});

test("malformed or hostile subscriptions get bad_frame and are stored nowhere", async () => {
  const phone = await app("refused", "Phone");
  const device = deviceOf(phone);
  const good = push.subscribe("refused-phone");
  // Plain http on a public host: allowed by nobody (the owner allows it only on their own network).
  await assert.rejects(
    phone.subscribePush({ endpoint: "http://push.example.net/send/1", keys: good.keys }),
    (e: unknown) => e instanceof HeraldError && e.code === "bad_frame" && !e.local && /https/.test(e.message),
  );
  // What the SDK would refuse itself, sent as is: the server's own checks.
  const raw = async (frame: Record<string, unknown>, what: string) => {
    const error = within(5000, `the error for ${what}`, phone.once("error"));
    phone.sendRaw({ t: "push_subscribe", ...frame });
    const e = await error;
    assert.equal(e.code, "bad_frame", what);
    return e.message;
  };
  const point = decodeBase64Url(good.keys.p256dh);
  await raw({ endpoint: good.endpoint, keys: { ...good.keys, p256dh: Buffer.from(point.subarray(0, 33)).toString("base64url") } }, "a compressed point");
  await raw({ endpoint: good.endpoint, keys: { ...good.keys, auth: "c2hvcnQ" } }, "a short auth secret");
  await raw({ endpoint: good.endpoint, keys: { ...good.keys, auth: "not base64!" } }, "an auth secret that is not base64url");
  await raw({ endpoint: `${good.endpoint}/${"a".repeat(2000)}`, keys: good.keys }, "an oversized subscription");
  await raw({ endpoint: "ftp://push.example.net/1", keys: good.keys }, "another scheme");
  await raw({ endpoint: "https://user@push.example.net/1", keys: good.keys }, "credentials in the endpoint");
  await raw({ endpoint: good.endpoint }, "no keys");
  assert.ok(!(await stored()).includes(device), "nothing kept");
  // The connection is fine, and a sound subscription is taken.
  await phone.subscribePush({ endpoint: good.endpoint, keys: good.keys });
  assert.ok((await stored()).includes(device));
});

test("unsubscribing ends a device's notifications", async () => {
  const phone = await app("off", "Phone");
  await subscribed(phone, "off-phone");
  assert.ok((await stored()).includes(deviceOf(phone)));
  await within(5000, "push_unsubscribed", phone.unsubscribePush());
  assert.ok(!(await stored()).includes(deviceOf(phone)));
  // Unsubscribing again is answered the same way.
  await within(5000, "push_unsubscribed", phone.unsubscribePush());
});

/** The phone the restart test closed before restarting herald. */
let closedBeforeRestart = "";

test("the key and the subscriptions survive a restart", async () => {
  const phone = await app("restart", "Phone");
  closedBeforeRestart = deviceOf(phone);
  const key = phone.ready!.push!.vapidKey;
  const sub = await subscribed(phone, "restart-phone");
  await closeApp(phone);
  await herald.halt();
  await herald.run();
  // Another device of the same user asks, out of sight: the push goes to every
  // subscription of the user, the phone's kept from before the restart.
  const tablet = await app("restart", "Tablet");
  assert.equal(tablet.ready?.push?.vapidKey, key, "the same VAPID key");
  await hide(tablet);
  const pushed = next(sub.name, "a push after the restart");
  const asked = within(5000, "the card", tablet.once("prompt"));
  tablet.send("/ask Still there?");
  const card = await asked;
  const p = await pushed;
  checkSent(p, tablet);
  assert.deepEqual([p.payload["kind"], p.payload["prompt_id"]], ["question", card.id]);
  await closeApp(tablet);
});

test(
  "after a restart, a delivery to a closed app that has not connected since is pushed",
  async () => {
    const device = closedBeforeRestart;
    assert.ok((await stored()).includes(device), "its subscription is kept");
    const before = push.count("restart-phone");
    const pushed = within(5000, "the push", push.next("restart-phone"));
    await admin("POST", "/v1/deliver", { chat: { platform: "mobile", id: device }, text: "still here" });
    assert.equal((await pushed).payload["body"], "still here");
    assert.equal(push.count("restart-phone"), before + 1);
  },
);

test(
  "a p256dh of the right length that is not a point on the curve gets bad_frame",
  async () => {
    const phone = await app("refused", "Tablet");
    const good = push.subscribe("refused-tablet");
    const answer = within(5000, "the answer", phone.once("frame", (f) => f.t === "error" || f.t === "push_subscribed"));
    phone.sendRaw({ t: "push_subscribe", endpoint: good.endpoint, keys: { ...good.keys, p256dh: Buffer.from([4, ...new Uint8Array(64)]).toString("base64url") } });
    const f = await answer;
    assert.ok(f.t === "error" && f.code === "bad_frame", JSON.stringify(f));
    assert.ok(!(await stored()).includes(deviceOf(phone)));
  },
);

test("every push herald sent passed the push service's checks", () => {
  assert.deepEqual(push.problems, []);
  assert.ok(push.received.length >= 8, `${push.received.length} pushes`);
});
