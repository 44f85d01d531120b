// The client against a real `herald serve` (demo agent, every user allowed): each promise
// of the SDK, one test each.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import WebSocket from "ws";

import { encodeWav, HeraldClient, HeraldError, type Card, type ClientOptions, type Reply } from "../src/index.js";
import { Herald, TcpProxy, TOKEN, within } from "./herald.js";

/** A second user's app token. */
const OTHER_TOKEN = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d";

let herald: Herald;
const clients: HeraldClient[] = [];

before(async () => {
  herald = await Herald.start({ env: { MOBILE_ALLOW_ALL_USERS: "1", MOBILE_DELIVER_FROM_LOOPBACK: "1", MOBILE_EXTRA_TOKENS: `other:${OTHER_TOKEN}` } });
});
after(async () => {
  for (const c of clients) c.close();
  await herald.stop();
});

let devices = 0;
function client(extra: Partial<ClientOptions> = {}): HeraldClient {
  const c = new HeraldClient({
    url: herald.url,
    token: TOKEN,
    device: { id: `sdk-test-${process.pid}-${devices++}`, name: "SDK test", platform: "node" },
    WebSocket,
    backoff: { initialMs: 100, maxMs: 1000, jitter: 0.5 },
    ...extra,
  });
  clients.push(c);
  return c;
}

async function connected(extra: Partial<ClientOptions> = {}): Promise<HeraldClient> {
  const c = client(extra);
  const ready = c.once("ready");
  c.connect();
  await within(5000, "ready", ready);
  return c;
}

/** The final form of the reply whose text matches. */
function finalReply(c: HeraldClient, match: (text: string) => boolean): Promise<Reply> {
  return within(10_000, "a final reply", c.once("message", (r) => r.final && match(r.text)));
}

test("connects, says hello, exposes ready and its capabilities", async () => {
  const c = client();
  const states: string[] = [];
  c.on("state", (s) => states.push(s));
  const ready = c.once("ready");
  c.connect();
  const info = await within(5000, "ready", ready);
  assert.match(info.session, /^mobile:sdk-test-/);
  assert.equal(c.state, "ready");
  assert.deepEqual(states, ["connecting", "ready"]);
  const caps = info.capabilities;
  assert.equal(caps.max_media_bytes, 8 * 1024 * 1024);
  assert.equal(caps.media_chunk_bytes, 3 * 1024 * 1024);
  assert.equal(caps.max_frame_bytes, 16 * 1024 * 1024);
  assert.ok(caps.streaming && caps.voice);
  assert.deepEqual(caps.prompts, ["exec_approval", "confirm", "clarify"]);
  assert.equal(info.avatarUrl, `http://127.0.0.1:${herald.mobilePort}/avatar.html`, "herald's own avatar page, made absolute");
  const pong = c.once("frame", (f) => f.t === "pong");
  c.ping();
  await within(2000, "pong", pong);
});

test("a text turn: typing, avatar states, streaming edits in place, final, typing off", async () => {
  const c = await connected();
  const seen: string[] = [];
  const texts: string[] = [];
  c.on("typing", (on) => seen.push(on ? "typing" : "typing off"));
  c.on("avatar", (s) => seen.push(`avatar ${s}`));
  c.on("message", (r) => {
    texts.push(r.text);
    if (r.final) seen.push("final");
  });
  const idle = c.once("avatar", (s) => s === "idle");
  const id = c.send("the quick brown fox jumps");
  assert.match(id, /^m-[0-9a-f]{16}$/);
  const reply = await finalReply(c, (t) => t.startsWith("You said:"));
  assert.equal(reply.text, "You said: the quick brown fox jumps");
  assert.ok(reply.streamed, "the reply was streamed");
  await within(5000, "avatar idle", idle);
  // Every edit grew the same message: each text is a prefix of the next.
  assert.ok(texts.length >= 3, `several edits: ${texts.length}`);
  for (let i = 1; i < texts.length; i++) assert.ok(texts[i]!.startsWith(texts[i - 1]!), `${texts[i - 1]} -> ${texts[i]}`);
  assert.deepEqual(seen.filter((s) => s !== "avatar speaking"), ["typing", "avatar thinking", "final", "typing off", "avatar idle"]);
  assert.ok(seen.indexOf("avatar speaking") > seen.indexOf("avatar thinking"));
  assert.equal(c.pending.length, 0, "answered messages leave the outbox");
});

test("a long reply arrives in chunks and is assembled by id", async () => {
  const c = await connected();
  const reply = await (async () => {
    const r = finalReply(c, (t) => t.startsWith("This is sentence number 1 "));
    c.send("/long");
    return r;
  })();
  assert.ok(reply.total > 1, `chunks: ${reply.total}`);
  assert.equal(reply.received, reply.total);
  assert.ok(reply.text.length > 4000);
  assert.ok(reply.text.trimEnd().endsWith("of a long reply."));
  assert.ok(!reply.streamed);
});

async function card(c: HeraldClient, text: string): Promise<Card> {
  const p = within(5000, "a card", c.once("prompt"));
  c.send(text);
  return p;
}

test("a confirm card answered by option id", async () => {
  const c = await connected();
  const q = await card(c, "/ask Is it raining?");
  assert.equal(q.kind, "confirm");
  assert.match(q.text, /Is it raining\?/);
  assert.deepEqual(q.options.map((o) => o.id), ["once", "always", "cancel"]);
  assert.equal(q.timeoutSeconds, 300);
  assert.equal(c.openCards.length, 1);
  const done = c.once("promptDone");
  const reply = finalReply(c, (t) => t.startsWith("You answered"));
  c.answer(q.id, "once");
  assert.deepEqual(await within(5000, "prompt_done", done), { promptId: q.id, optionId: "once", expired: false });
  assert.equal((await reply).text, "You answered yes.");
  assert.equal(c.openCards.length, 0);
});

test("an exec approval shows its command; an invalid option counts as deny", async () => {
  const c = await connected();
  const q = await card(c, "/approve rm -rf /tmp/x");
  assert.equal(q.kind, "exec_approval");
  assert.equal(q.command, "rm -rf /tmp/x");
  assert.ok(q.description);
  assert.deepEqual(q.options.map((o) => [o.id, o.style]), [["once", "primary"], ["session", ""], ["always", ""], ["deny", "danger"]]);
  const done = c.once("promptDone");
  const reply = finalReply(c, (t) => t.startsWith("Denied"));
  c.answer(q.id, "please-allow");
  assert.equal((await within(5000, "prompt_done", done)).optionId, "deny");
  assert.equal((await reply).text, "Denied: rm -rf /tmp/x");
});

test("a clarify card answered with other and text", async () => {
  const c = await connected();
  const q = await card(c, "/choose CSV, JSON");
  assert.equal(q.kind, "clarify");
  assert.ok(q.allowsText);
  assert.deepEqual(q.options.map((o) => o.id), ["c0", "c1", "other"]);
  const done = c.once("promptDone");
  const reply = finalReply(c, (t) => t.startsWith("You wrote"));
  c.answerText(q.id, "YAML");
  assert.equal((await within(5000, "prompt_done", done)).optionId, "other");
  assert.equal((await reply).text, "You wrote: YAML");
});

test("answering an unknown or expired card reports expired", async () => {
  const c = await connected();
  const done = c.once("promptDone");
  c.answer("0123456789abcdef", "once");
  assert.deepEqual(await within(5000, "prompt_done", done), { promptId: "0123456789abcdef", expired: true });
  assert.equal(c.pending.length, 0);
});

test("uploads a file in parts of media_chunk_bytes with progress", async () => {
  const c = await connected();
  const size = 7 * 1024 * 1024 + 123;
  const bytes = Uint8Array.from({ length: size }, (_, i) => (i * 7) & 255);
  const progress: number[] = [];
  c.on("uploadProgress", (p) => progress.push(p.sentBytes));
  const reply = finalReply(c, (t) => t.startsWith("Got your"));
  const id = c.upload(bytes, { kind: "document", mime: "application/octet-stream", filename: "big.bin", caption: "three parts" });
  assert.equal((await reply).text, "Got your document: three parts.");
  assert.equal(progress.length, 3, "one progress report per part");
  assert.equal(progress[2], size);
  assert.ok(progress[0]! < progress[1]! && progress[1]! < progress[2]!);
  assert.ok(!c.pending.some((p) => p.id === id));
});

test("upload limits are checked before anything is sent", async () => {
  const c = await connected();
  const sent: string[] = [];
  c.on("uploadProgress", (p) => sent.push(p.id));
  assert.throws(() => c.upload(new Uint8Array(8 * 1024 * 1024 + 1), { kind: "image" }), (e: unknown) => e instanceof HeraldError && e.code === "too_big" && e.local);
  // Open uploads: eight unanswered files, then a refusal (on a client that is not connected).
  const offline = client();
  for (let i = 0; i < 8; i++) offline.upload(new Uint8Array(10), { kind: "document" });
  assert.throws(() => offline.upload(new Uint8Array(10), { kind: "document" }), /8 uploads are unfinished/);
  assert.deepEqual(sent, []);
});

test("media from the agent is assembled by id", async () => {
  const c = await connected();
  const progress: number[] = [];
  c.on("mediaProgress", (p) => progress.push(p.receivedBytes));
  const media = within(10_000, "media", c.once("media"));
  c.send("/media");
  const m = await media;
  assert.equal(m.kind, "image");
  assert.equal(m.mime, "image/png");
  assert.equal(m.caption, "A demo picture");
  assert.ok(m.data);
  assert.equal(m.data.length, m.size);
  assert.deepEqual([...m.data.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(progress.at(-1), m.size);
});

test("voice: a 16 kHz mono WAV, with or without a transcript; the agent's voice comes back", async () => {
  const c = await connected();
  const wav = encodeWav(Int16Array.from({ length: 24000 }, (_, i) => Math.round(Math.sin(i / 10) * 8000)));
  const reply = finalReply(c, (t) => t.startsWith("I heard"));
  const voice = within(10_000, "voice back", c.once("media", (m) => m.kind === "voice"));
  c.sendVoice(wav);
  assert.equal((await reply).text, "I heard 1.5 seconds of audio.");
  const back = await voice;
  assert.ok(back.data && back.data.length > 44);
  const second = finalReply(c, (t) => t.startsWith("I heard"));
  c.sendVoice(encodeWav(new Int16Array(16000)), { transcript: "hello" });
  assert.equal((await second).text, "I heard 1.0 seconds of audio.");
  assert.throws(() => c.sendVoice(encodeWav(new Int16Array(10), 44100)), /16 kHz mono/);
  assert.throws(() => c.sendVoice(new Uint8Array([1, 2, 3])), /WAV/);
});

test("unsupported_frame is surfaced typed and the connection stays", async () => {
  const c = await connected();
  const error = within(5000, "error", c.once("error"));
  c.sendRaw({ t: "sticker", id: "s1" });
  const e = await error;
  assert.ok(e instanceof HeraldError);
  assert.equal(e.code, "unsupported_frame");
  assert.equal(e.local, false);
  const reply = finalReply(c, (t) => t === "You said: still here");
  c.send("still here");
  await reply;
  assert.equal(c.state, "ready");
});

test("close 1008 (a wrong token) stops for good with a typed no-access event", async () => {
  let sockets = 0;
  class Counting extends WebSocket {
    constructor(url: string) {
      super(url);
      sockets++;
    }
  }
  const c = client({ token: "0".repeat(64), WebSocket: Counting, backoff: { initialMs: 20, maxMs: 20, jitter: 0 } });
  const errors: string[] = [];
  const states: string[] = [];
  const disconnects: number[] = [];
  c.on("error", (e) => errors.push(e.code));
  c.on("state", (s) => states.push(s));
  c.on("disconnect", (d) => disconnects.push(d.code));
  const denied = c.once("noAccess");
  c.connect();
  const refusal = await within(5000, "noAccess", denied);
  assert.equal(refusal.code, "auth_failed");
  assert.match(refusal.reason, /^auth_failed: /);
  assert.deepEqual(errors, ["auth_failed"]);
  // A retry is only ever scheduled from "waiting", with a disconnect event: neither came.
  assert.deepEqual(states, ["connecting", "stopped"]);
  assert.deepEqual(disconnects, []);
  assert.equal(sockets, 1);
  assert.throws(() => c.send("x"), /stopped/);
  assert.throws(() => c.connect(), /stopped/);
});

test("never hammers: waits at least the backoff between attempts, doubling", async (t) => {
  const opened: number[] = [];
  class Timed extends WebSocket {
    constructor(url: string) {
      super(url);
      opened.push(Date.now());
    }
  }
  // A port that refuses every connection, held by this test until it ends (a port found
  // free and let go could be taken meanwhile, by a server that answers).
  const dead = await TcpProxy.open(() => undefined);
  t.after(() => dead.close());
  const c = client({ url: `ws://127.0.0.1:${dead.port}/ws`, WebSocket: Timed, backoff: { initialMs: 50, maxMs: 400, jitter: 0.5 } });
  const waits: number[] = [];
  c.on("disconnect", (d) => waits.push(d.retryInMs));
  const fifth = c.once("disconnect", () => waits.length >= 5);
  c.connect();
  await within(10_000, "five failed attempts", fifth);
  c.close();
  assert.ok(waits[0]! >= 25 && waits[0]! <= 50, String(waits));
  assert.ok(waits[3]! >= 200 && waits[3]! <= 400, String(waits));
  for (let i = 1; i < opened.length; i++) {
    assert.ok(opened[i]! - opened[i - 1]! >= waits[i - 1]! - 2, `attempt ${i} came ${opened[i]! - opened[i - 1]!} ms after, planned ${waits[i - 1]}`);
  }
});

test("a second connection with the same device id replaces the first, which stops", async () => {
  const first = await connected();
  const id = first.ready!.session.slice("mobile:".length);
  const replaced = first.once("replaced");
  const second = await connected({ device: { id } });
  assert.match((await within(5000, "replaced", replaced)).reason, /replaced/);
  assert.equal(first.state, "stopped");
  const reply = finalReply(second, (t) => t === "You said: mine now");
  second.send("mine now");
  await reply;
});

test("every client_errors case of the vectors gets its code from the real server, and the connection stays", async () => {
  const { readFileSync } = await import("node:fs");
  const vectors = JSON.parse(readFileSync(new URL("../../../../vectors/mobile-v1.json", import.meta.url), "utf8")) as {
    client_errors: { name: string; wire: string; code: string }[];
  };
  const ws = new WebSocket(herald.url);
  const inbox: string[] = [];
  let wake: (() => void) | undefined;
  ws.on("message", (data) => {
    inbox.push(String(data));
    wake?.();
  });
  // Copies of questions the other tests' apps (the same user) are asked, their
  // withdrawals and "Answered on …" are not answers to these frames.
  const others = new Set(["prompt", "prompt_done", "message"]);
  const next = async (): Promise<Record<string, unknown>> => {
    for (;;) {
      while (inbox.length === 0) await within(5000, "a frame", new Promise<void>((r) => (wake = r)));
      const frame = JSON.parse(inbox.shift()!) as Record<string, unknown>;
      if (!others.has(frame["t"] as string)) return frame;
    }
  };
  await new Promise((r) => ws.once("open", r));
  ws.send(JSON.stringify({ t: "hello", token: TOKEN, device: { id: `vectors-${process.pid}` } }));
  assert.equal((await next())["t"], "ready");
  for (const c of vectors.client_errors) {
    ws.send(c.wire);
    const answer = await next();
    assert.deepEqual([answer["t"], answer["code"]], ["error", c.code], c.name);
  }
  ws.send(JSON.stringify({ t: "ping" }));
  assert.equal((await next())["t"], "pong", "still open");
  ws.close();
});

test("deliver from loopback (MOBILE_DELIVER_FROM_LOOPBACK) reaches the same user's device; another user's is forbidden, an unknown one offline", async () => {
  const phone = await connected();
  const target = phone.ready!.session.slice("mobile:".length);
  const cron = await connected();
  const pushed = within(5000, "the delivery", phone.once("message", (r) => r.text === "Reminder: stand up"));
  cron.deliver(target, "Reminder: stand up");
  assert.ok((await pushed).final);
  // A connected device of another user (another token) is not this user's: refused.
  const theirs = await connected({ token: OTHER_TOKEN });
  const refused = within(5000, "forbidden", cron.once("error"));
  cron.deliver(theirs.ready!.session.slice("mobile:".length), "hello?");
  assert.equal((await refused).code, "forbidden");
  // A device with no live connection is offline, whoever owns it: nothing says whose it is.
  const offline = within(5000, "device_offline", cron.once("error"));
  cron.deliver("nobody-here", "hello?");
  assert.equal((await offline).code, "device_offline");
});
