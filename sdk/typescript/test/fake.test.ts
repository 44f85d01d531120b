// The client against a scripted transport, for what a real server does not send today:
// unknown frames and fields, absent capabilities, frames it cannot use.

import assert from "node:assert/strict";
import { test } from "node:test";

import { HeraldClient, HeraldError, type WebSocketConstructor, type WebSocketLike } from "../src/index.js";

/** A WebSocket whose server side the test plays. */
class FakeSocket implements WebSocketLike {
  static last: FakeSocket | undefined;
  readyState = 0;
  bufferedAmount = 0;
  sent: string[] = [];
  onopen: ((e: unknown) => void) | null = null;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  onerror: ((e: unknown) => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.last = this;
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.({});
    });
  }
  send(data: string): void {
    this.sent.push(data);
  }
  close(code = 1000, reason = ""): void {
    this.readyState = 3;
    queueMicrotask(() => this.onclose?.({ code, reason }));
  }
  /** The server says `frame`. */
  say(frame: unknown): void {
    this.onmessage?.({ data: typeof frame === "string" ? frame : JSON.stringify(frame) });
  }
}

function fakeClient(): HeraldClient {
  return new HeraldClient({ url: "wss://agent.example.com/herald/ws", token: "t", device: { id: "fake" }, WebSocket: FakeSocket });
}

/** The socket of the client's next attempt, once it is open (hello goes in onopen). No
 * clock: the attempt is awaited by its state change, and setImmediate only lets the queued
 * microtasks (the socket's open) run. */
async function nextSocket(c: HeraldClient): Promise<FakeSocket> {
  await c.once("state", (s) => s === "connecting");
  await new Promise((r) => setImmediate(r));
  return FakeSocket.last!;
}

async function readyWith(c: HeraldClient, capabilities: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<FakeSocket> {
  const ready = c.once("ready");
  c.connect();
  await new Promise((r) => setTimeout(r, 0));
  const ws = FakeSocket.last!;
  assert.deepEqual(JSON.parse(ws.sent[0]!), { t: "hello", token: "t", device: { id: "fake" } });
  ws.say({ t: "ready", session: "mobile:fake", capabilities, ...extra });
  await ready;
  return ws;
}

test("unknown frames and fields are ignored; unusable frames are reported and dropped", async () => {
  const c = fakeClient();
  const ws = await readyWith(c, { max_media_bytes: 1000, voice: true, x_new: 1 }, { avatar_url: "/avatar.html", x_top: true });
  assert.equal(c.ready?.avatarUrl, "https://agent.example.com/avatar.html", "relative avatar_url resolved over https");
  const events: string[] = [];
  for (const name of ["message", "invalidFrame", "error", "prompt", "media"] as const) c.on(name, () => events.push(name));
  ws.say({ t: "sticker", id: "s1", url: "x" });
  ws.say({ t: "status" });
  ws.say({ t: "message", id: "r1", text: "hi", final: true, x_markdown: true, meta: { model: "m" } });
  ws.say({ t: "prompt", id: "p9", kind: "poll", text: "?", options: [{ id: "a", label: "A", style: "glow" }, { id: "b", label: "B" }], session: "mobile:fake", timeout_seconds: 60 });
  ws.say({ t: "avatar", state: "dancing" });
  ws.say("<html>");
  ws.say({ t: "media", id: "a6", kind: "hologram", mime: "application/octet-stream", part: 0, parts: 1, final: true, size: 1, data: "eA==" });
  assert.deepEqual(events, ["message", "prompt", "invalidFrame", "invalidFrame", "media"]);
  assert.equal(c.openCards[0]?.options[1]?.style, "");
  assert.equal(c.state, "ready");
  c.close();
});

test("capabilities are honoured: absent ones are not used", async () => {
  const c = fakeClient();
  const ws = await readyWith(c, { max_media_bytes: 100_000, max_frame_bytes: 20_000, media_chunk_bytes: 8192 });
  assert.throws(() => c.sendVoice(new Uint8Array(44)), (e: unknown) => e instanceof HeraldError && e.code === "not_supported");
  assert.throws(() => c.upload(new Uint8Array(100_001), { kind: "document" }), /over the limit of 100000/);
  // 8 KiB parts: 20 000 bytes of file is three frames, each under max_frame_bytes.
  const progress: number[] = [];
  c.on("uploadProgress", (p) => progress.push(p.part));
  c.upload(new Uint8Array(20_000), { kind: "document", filename: "a.bin" });
  await new Promise((r) => setTimeout(r, 0));
  const parts = ws.sent.slice(1).map((s) => JSON.parse(s) as { part: number; parts: number; data: string });
  assert.deepEqual(parts.map((p) => [p.part, p.parts]), [[0, 3], [1, 3], [2, 3]]);
  assert.deepEqual(progress, [0, 1, 2]);
  assert.throws(() => c.send("x".repeat(20_001)), /over the limit of 20000/);
  c.close();
  const none = fakeClient();
  await readyWith(none, {});
  assert.throws(() => none.upload(new Uint8Array(1), { kind: "image" }), /does not take files/);
  none.close();
});

test("messages sent while away wait for ready, then go in order; a drop resends the unanswered", async () => {
  const c = new HeraldClient({ url: "ws://x/ws", token: "t", device: { id: "fake" }, WebSocket: FakeSocket, backoff: { initialMs: 1, maxMs: 1, jitter: 0 } });
  const a = c.send("one");
  const b = c.send("two");
  const ws = await readyWith(c, { max_media_bytes: 1 });
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(ws.sent.slice(1).map((s) => (JSON.parse(s) as { id: string }).id), [a, b]);
  ws.say({ t: "typing" }); // the turn for "one"
  assert.deepEqual(c.pending.map((p) => p.id), [b]);
  const again = c.once("ready");
  const reconnected = nextSocket(c);
  ws.close(1006, "gone");
  const ws2 = await reconnected;
  assert.notEqual(ws2, ws);
  ws2.say({ t: "ready", session: "mobile:fake", capabilities: {} });
  await again;
  // A marker sent now goes after anything the reconnection resends.
  const marker = c.send("marker");
  assert.deepEqual(ws2.sent.slice(1).map((s) => (JSON.parse(s) as { id: string }).id), [b, marker], "only the unanswered one, same id");
  c.close();
});

test("ids are checked before anything is queued", () => {
  const c = fakeClient();
  // Control characters as the server counts them (Unicode Cc): C0, DEL and C1.
  for (const id of ["", "x".repeat(257), "m\n1", "m\u007f", "m\u0085"]) {
    assert.throws(() => c.send("hi", { id }), (e: unknown) => e instanceof HeraldError && e.code === "bad_frame" && e.local, JSON.stringify(id));
  }
  assert.equal(c.send("hi", { id: "é".repeat(128) }), "é".repeat(128));
  assert.equal(c.pending.length, 1);
  // A device id the server would refuse at hello (close 1008) is refused here instead.
  assert.throws(
    () => new HeraldClient({ url: "ws://x/ws", token: "t", device: { id: "é".repeat(129) }, WebSocket: FakeSocket }),
    (e: unknown) => e instanceof HeraldError && e.code === "bad_frame" && /device\.id/.test(e.message),
  );
});

// The browser's WebSocket fits the injected type; this file would not compile otherwise.
const browserSocketFits: typeof globalThis.WebSocket extends WebSocketConstructor ? true : false = true;
void browserSocketFits;

test("an upload held back by a full socket goes on the next connection, even one made at once", async (t) => {
  const c = new HeraldClient({ url: "ws://x/ws", token: "t", device: { id: "fake" }, WebSocket: FakeSocket, backoff: { initialMs: 1, maxMs: 1, jitter: 0 } });
  t.after(() => c.close());
  const ws = await readyWith(c, { max_media_bytes: 100_000, max_frame_bytes: 1_000_000, media_chunk_bytes: 8192 });
  // The socket is full: the upload waits. Each look at the buffer is counted; the second
  // comes after the client waited once and found it still full, without sending.
  let looks = 0;
  const lookedTwice = new Promise<void>((resolve) => {
    Object.defineProperty(ws, "bufferedAmount", {
      get: () => {
        if (++looks === 2) resolve();
        return 2 * 1024 * 1024;
      },
    });
  });
  const id = c.upload(new Uint8Array(20_000), { kind: "document" });
  await lookedTwice;
  assert.equal(ws.sent.length, 1, "nothing but hello yet");
  const again = c.once("ready");
  const lastPart = c.once("uploadProgress", (p) => p.part === 2);
  const reconnected = nextSocket(c);
  ws.close(1006, "gone");
  const ws2 = await reconnected;
  ws2.say({ t: "ready", session: "mobile:fake", capabilities: { max_media_bytes: 100_000, max_frame_bytes: 1_000_000, media_chunk_bytes: 8192 } });
  await again;
  await lastPart;
  const parts = ws2.sent.slice(1).map((s) => JSON.parse(s) as { id: string; part: number });
  assert.deepEqual(parts.map((p) => [p.id, p.part]), [[id, 0], [id, 1], [id, 2]]);
  c.close();
});

test("the backoff doubles while attempts fail and starts over after ready", async (t) => {
  const c = new HeraldClient({ url: "ws://x/ws", token: "t", device: { id: "fake" }, WebSocket: FakeSocket, backoff: { initialMs: 1, maxMs: 100, jitter: 0 } });
  t.after(() => c.close());
  const waits: number[] = [];
  c.on("disconnect", (d) => waits.push(d.retryInMs));
  let socket = nextSocket(c);
  c.connect();
  for (let i = 0; i < 3; i++) {
    const ws = await socket;
    socket = nextSocket(c);
    ws.close(1006, "refused before ready");
  }
  const ws = await socket;
  ws.say({ t: "ready", session: "mobile:fake", capabilities: {} });
  socket = nextSocket(c);
  ws.close(1006, "lost after ready");
  await socket;
  assert.deepEqual(waits, [1, 2, 4, 1]);
});

test("a server that never says ready is closed after readyTimeoutMs, then tried again", async (t) => {
  const c = new HeraldClient({
    url: "ws://x/ws",
    token: "t",
    device: { id: "fake" },
    WebSocket: FakeSocket,
    readyTimeoutMs: 20,
    backoff: { initialMs: 1, maxMs: 1, jitter: 0 },
  });
  t.after(() => c.close());
  const lost = c.once("disconnect");
  c.connect();
  const d = await lost;
  assert.equal(d.code, 4000);
  assert.equal(d.reason, "no ready in time");
  assert.equal(c.state, "waiting");
  await c.once("state", (s) => s === "connecting");
});

test("a frame over the server's max_frame_bytes is refused locally, before it is sent", async () => {
  const c = fakeClient();
  const ws = await readyWith(c, { max_frame_bytes: 100 });
  const before = ws.sent.length;
  assert.throws(() => c.send("x".repeat(200)), (e: unknown) => e instanceof HeraldError && e.code === "too_big" && e.local);
  assert.equal(ws.sent.length, before);
  c.close();
});

// ---- Web Push: the frames, and how their answers are told apart from a message's ----

const VAPID = `B${"A".repeat(86)}`;
const SUBSCRIPTION = {
  endpoint: "https://push.example.net/send/abc",
  keys: { p256dh: `BP${"A".repeat(85)}`, auth: "tBHItJI5svbpez7KI4CCXg" },
};
const sentFrames = (ws: FakeSocket, from = 1) => ws.sent.slice(from).map((s) => JSON.parse(s) as Record<string, unknown>);

test("push: capabilities.push is exposed; subscribe sends the subscription's fields and resolves on push_subscribed", async () => {
  const c = fakeClient();
  const ws = await readyWith(c, { push: { vapid_key: VAPID, x_new: 1 } });
  assert.deepEqual(c.ready?.push, { vapidKey: VAPID });
  assert.deepEqual(c.ready?.capabilities.push, { vapid_key: VAPID });
  // Extra fields of PushSubscription.toJSON() (expirationTime) are not sent.
  const done = c.subscribePush({ ...SUBSCRIPTION, expirationTime: null } as typeof SUBSCRIPTION);
  assert.deepEqual(sentFrames(ws), [{ t: "push_subscribe", ...SUBSCRIPTION }]);
  let settled = false;
  void done.then(() => (settled = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(settled, false, "waits for the answer");
  ws.say({ t: "push_subscribed" });
  await done;
  const off = c.unsubscribePush();
  assert.deepEqual(sentFrames(ws, 2), [{ t: "push_unsubscribe" }]);
  ws.say({ t: "push_unsubscribed" });
  await off;
  c.close();
});

test("push: the server's error rejects the request and answers no message; other errors still do", async () => {
  const c = fakeClient();
  const ws = await readyWith(c, { push: { vapid_key: VAPID } });
  const errors: string[] = [];
  c.on("error", (e) => errors.push(e.code));
  c.send("waiting for the agent");
  const refused = c.subscribePush(SUBSCRIPTION);
  ws.say({ t: "error", code: "bad_frame", message: "push_subscribe: the endpoint is not https" });
  await assert.rejects(refused, (e: unknown) => e instanceof HeraldError && e.code === "bad_frame" && !e.local && /not https/.test(e.message));
  assert.equal(c.pending.length, 1, "the message is still unanswered");
  assert.deepEqual(errors, [], "the refusal is the promise's, not an error event");
  ws.say({ t: "error", code: "too_big", message: "x" });
  assert.equal(c.pending.length, 0, "with no push request waiting, an error answers the message");
  assert.deepEqual(errors, ["too_big"]);
  c.close();
});

test("push: a subscription Herald would refuse is refused before it is sent", async () => {
  const c = fakeClient();
  const ws = await readyWith(c, { push: { vapid_key: VAPID } });
  const bad: [string, typeof SUBSCRIPTION][] = [
    ["not a URL", { ...SUBSCRIPTION, endpoint: "push.example.net/x" }],
    ["ftp", { ...SUBSCRIPTION, endpoint: "ftp://push.example.net/x" }],
    ["p256dh too short", { ...SUBSCRIPTION, keys: { ...SUBSCRIPTION.keys, p256dh: "BAAA" } }],
    ["p256dh compressed", { ...SUBSCRIPTION, keys: { ...SUBSCRIPTION.keys, p256dh: `Ag${"A".repeat(85)}` } }],
    ["auth 15 bytes", { ...SUBSCRIPTION, keys: { ...SUBSCRIPTION.keys, auth: "AAAAAAAAAAAAAAAAAAAA" } }],
    ["auth not base64url", { ...SUBSCRIPTION, keys: { ...SUBSCRIPTION.keys, auth: "tBHItJI5svbpez7KI4CC+g" } }],
    ["over 1 KiB", { ...SUBSCRIPTION, endpoint: `https://push.example.net/${"x".repeat(1000)}` }],
  ];
  for (const [name, sub] of bad) {
    await assert.rejects(c.subscribePush(sub), (e: unknown) => e instanceof HeraldError && e.code === "bad_frame" && e.local, name);
  }
  assert.equal(ws.sent.length, 1, "nothing but hello");
  c.close();
});

test("push: not offered, or not connected, is refused locally; a lost connection fails the waiting request", async () => {
  const none = fakeClient();
  await assert.rejects(none.subscribePush(SUBSCRIPTION), (e: unknown) => e instanceof HeraldError && e.code === "not_ready");
  const ws0 = await readyWith(none, {});
  assert.equal(none.ready?.push, undefined);
  await assert.rejects(none.subscribePush(SUBSCRIPTION), (e: unknown) => e instanceof HeraldError && e.code === "not_supported");
  await assert.rejects(none.unsubscribePush(), (e: unknown) => e instanceof HeraldError && e.code === "not_supported");
  none.setVisible(false);
  assert.equal(ws0.sent.length, 1, "no push frame to a server without push");
  none.close();

  const c = new HeraldClient({ url: "ws://x/ws", token: "t", device: { id: "fake" }, WebSocket: FakeSocket, backoff: { initialMs: 1, maxMs: 1, jitter: 0 } });
  const ws = await readyWith(c, { push: { vapid_key: VAPID } });
  const waiting = c.subscribePush(SUBSCRIPTION);
  ws.close(1006, "gone");
  await assert.rejects(waiting, (e: unknown) => e instanceof HeraldError && e.code === "not_ready" && /lost/.test(e.message));
  c.close();
});

test("push: visibility is sent when it changes and again after each ready while hidden", async () => {
  const c = new HeraldClient({ url: "ws://x/ws", token: "t", device: { id: "fake" }, WebSocket: FakeSocket, backoff: { initialMs: 1, maxMs: 1, jitter: 0 } });
  c.setVisible(false); // before connecting: said at ready
  const queued = c.send("hello");
  const ws = await readyWith(c, { push: { vapid_key: VAPID } });
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(sentFrames(ws).map((f) => f["t"] === "text" ? f["id"] : f), [{ t: "visibility", visible: false }, queued], "before anything else");
  c.setVisible(false);
  assert.equal(ws.sent.length, 3, "unchanged: nothing sent");
  c.setVisible(true);
  c.setVisible(false);
  assert.deepEqual(sentFrames(ws, 3), [{ t: "visibility", visible: true }, { t: "visibility", visible: false }]);
  ws.say({ t: "typing" });
  const again = c.once("ready");
  const reconnected = nextSocket(c);
  ws.close(1006, "gone");
  const ws2 = await reconnected;
  ws2.say({ t: "ready", session: "mobile:fake", capabilities: { push: { vapid_key: VAPID } } });
  await again;
  assert.deepEqual(sentFrames(ws2), [{ t: "visibility", visible: false }]);
  c.setVisible(true);
  assert.deepEqual(sentFrames(ws2, 2), [{ t: "visibility", visible: true }]);
  c.close();
});
