// The pure parts: backoff, the outbox, reply and media assembly, base64, WAV.

import assert from "node:assert/strict";
import { test } from "node:test";

import { applyMedia, applyMessage, completed } from "../src/assembly.js";
import { resolveAvatarUrl } from "../src/client.js";
import { backoffDelay, DEFAULT_BACKOFF, nextAttempt } from "../src/backoff.js";
import { base64DecodedLength, decodeBase64, decodeBase64Url, encodeBase64, encodeBase64Url } from "../src/base64.js";
import { acknowledge, afterDisconnect, due, EMPTY_OUTBOX, enqueue, markSent, openUploads, RESEND_TTL_MS, type Outbox, type Pending } from "../src/outbox.js";
import { decodePushPayload, decodeServerFrame, utf8Length, type MediaDownFrame, type MessageFrame } from "../src/protocol.js";
import { encodeWav, inspectWav, isVoiceWav, toVoiceSamples } from "../src/wav.js";

test("backoff doubles up to the cap, with jitter never under half", () => {
  const low = (n: number) => backoffDelay(n, DEFAULT_BACKOFF, () => 0);
  const high = (n: number) => backoffDelay(n, DEFAULT_BACKOFF, () => 0.999999);
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 40].map(high), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6].map(low), [500, 1000, 2000, 4000, 8000, 15000, 15000]);
  assert.equal(backoffDelay(2, { initialMs: 100, maxMs: 1000, jitter: 0 }, () => 0.7), 400);
  assert.equal(backoffDelay(-3, DEFAULT_BACKOFF, () => 0), 500);
  for (let i = 0; i < 100; i++) {
    const d = backoffDelay(3);
    assert.ok(d >= 4000 && d <= 8000, String(d));
  }
});

test("the attempt counter is reset by ready only", () => {
  assert.equal(nextAttempt(4, true), 0);
  assert.equal(nextAttempt(4, false), 5);
  assert.equal(nextAttempt(0, false), 1);
});

const entry = (id: string, kind: Pending["kind"] = "text", queuedAt = 0): Pending => ({ id, kind, frames: [`{"id":"${id}"}`], bytes: 1, queuedAt, sent: false });
const sentAll = (o: Outbox) => o.entries.reduce((acc, p) => markSent(acc, p.id, p.kind), o);

test("outbox: due in order, answered by the first sign of a turn", () => {
  let o = enqueue(enqueue(EMPTY_OUTBOX, entry("m1")), entry("m2"));
  assert.deepEqual(due(o).map((p) => p.id), ["m1", "m2"]);
  o = sentAll(o);
  assert.deepEqual(due(o), []);
  let r = acknowledge(o, { t: "typing" }, false);
  assert.equal(r.answered?.id, "m1");
  o = r.outbox;
  // Typing again while on is not a new turn; edits inside a turn answer nothing.
  r = acknowledge(o, { t: "typing" }, false);
  assert.equal(r.answered, undefined);
  r = acknowledge(r.outbox, { t: "message", id: "r1", text: "x", final: true }, true);
  assert.equal(r.answered, undefined);
  r = acknowledge(r.outbox, { t: "typing", stop: true }, false);
  r = acknowledge(r.outbox, { t: "typing" }, false);
  assert.equal(r.answered?.id, "m2");
  assert.deepEqual(r.outbox.entries, []);
});

test("outbox: a reply outside a turn, a card, an error answer; a replayed edit does not", () => {
  let o = sentAll(enqueue(enqueue(enqueue(enqueue(EMPTY_OUTBOX, entry("a")), entry("b")), entry("c")), entry("d")));
  let r = acknowledge(o, { t: "message", id: "pairing", text: "code", final: true }, true);
  assert.equal(r.answered?.id, "a");
  r = acknowledge(r.outbox, { t: "message", id: "pairing", text: "code", final: true, edit: true }, false);
  assert.equal(r.answered, undefined);
  r = acknowledge(r.outbox, { t: "prompt", id: "p", kind: "confirm", text: "?", options: [], session: "s", timeout_seconds: 1 }, false);
  assert.equal(r.answered?.id, "b");
  r = acknowledge(r.outbox, { t: "error", code: "too_big", message: "x" }, false);
  assert.equal(r.answered?.id, "c");
  r = acknowledge(r.outbox, { t: "error", code: "device_offline", message: "x" }, false);
  assert.equal(r.answered, undefined);
  o = r.outbox;
  assert.deepEqual(o.entries.map((p) => p.id), ["d"]);
});

test("outbox: card answers leave with their prompt_done; unsent entries are never answered", () => {
  let o = enqueue(enqueue(EMPTY_OUTBOX, entry("card1", "prompt")), entry("m1"));
  let r = acknowledge(o, { t: "typing" }, false);
  assert.equal(r.answered, undefined, "nothing was sent yet");
  o = sentAll(r.outbox);
  r = acknowledge({ ...o, typing: false }, { t: "typing" }, false);
  assert.equal(r.answered?.id, "m1", "a turn answers messages, not card answers");
  r = acknowledge(r.outbox, { t: "prompt_done", prompt_id: "card1", option_id: "once" }, false);
  assert.equal(r.answered?.id, "card1");
  assert.equal(r.outbox.entries.length, 0);
});

test("outbox: a disconnect makes sent entries due again, except stale ones", () => {
  let o = sentAll(enqueue(enqueue(EMPTY_OUTBOX, entry("old", "text", 0)), entry("new", "media", RESEND_TTL_MS)));
  o = { ...o, typing: true };
  assert.equal(openUploads(o), 1);
  const after = afterDisconnect(o, RESEND_TTL_MS + 1);
  assert.deepEqual(due(after).map((p) => p.id), ["new"]);
  assert.equal(after.typing, false);
});

test("outbox: bounded, oldest dropped first", () => {
  let o: Outbox = EMPTY_OUTBOX;
  for (let i = 0; i < 300; i++) o = enqueue(o, entry(`m${i}`));
  assert.equal(o.entries.length, 256);
  assert.equal(o.entries[0]!.id, "m44");
});

test("replies: chunks concatenate by id, edits replace", () => {
  const m = (f: Partial<MessageFrame>): MessageFrame => ({ t: "message", id: "r1", text: "", final: false, ...f });
  let r = applyMessage(undefined, m({ text: "B", chunk: { index: 1, total: 2 }, final: true }));
  assert.equal(r.text, "B");
  assert.equal(r.received, 1);
  r = applyMessage(r, m({ text: "A", chunk: { index: 0, total: 2 } }));
  assert.deepEqual([r.text, r.final, r.received, r.total], ["AB", true, 2, 2]);
  let s = applyMessage(undefined, m({ id: "r2", text: "Count", edit: true, chunk: { index: 0, total: 1 } }));
  s = applyMessage(s, m({ id: "r2", text: "Counting", edit: true, final: true }));
  assert.deepEqual([s.text, s.final, s.streamed], ["Counting", true, true]);
  const one = applyMessage(undefined, m({ id: "r3", text: "whole", final: true, reply_to: "m1" }));
  assert.deepEqual([one.text, one.final, one.replyTo], ["whole", true, "m1"]);
});

test("media: assembled by id on final, or a url", () => {
  const f = (part: number, data: string | undefined, final: boolean, extra: Partial<MediaDownFrame> = {}): MediaDownFrame => ({
    t: "media", id: "a1", kind: "image", mime: "image/png", part, parts: 2, final, size: 5, ...(data === undefined ? {} : { data }), ...extra,
  });
  let d = applyMedia(undefined, f(0, encodeBase64(new Uint8Array([1, 2, 3])), false, { filename: "x.png" }));
  assert.equal(completed(d), undefined);
  assert.equal(d.receivedBytes, 3);
  d = applyMedia(d, f(1, encodeBase64(new Uint8Array([4, 5])), true));
  const done = completed(d);
  assert.deepEqual(done?.data, new Uint8Array([1, 2, 3, 4, 5]));
  assert.equal(done?.filename, "x.png");
  const u = completed(applyMedia(undefined, f(0, undefined, true, { parts: 1, url: "https://x/y.mp4", kind: "video" })));
  assert.deepEqual([u?.url, u?.data], ["https://x/y.mp4", undefined]);
  assert.throws(() => applyMedia(undefined, f(0, "!!", true)));
});

test("base64 round trips and tolerates what platforms send", () => {
  for (let len = 0; len < 40; len++) {
    const bytes = Uint8Array.from({ length: len }, (_, i) => (i * 37 + len) & 255);
    const text = encodeBase64(bytes);
    assert.equal(text, Buffer.from(bytes).toString("base64"));
    assert.deepEqual(decodeBase64(text), bytes);
    assert.deepEqual(decodeBase64(text.replace(/=+$/, "")), bytes);
    assert.equal(base64DecodedLength(text), len);
  }
  const big = Uint8Array.from({ length: 200_000 }, (_, i) => i & 255);
  assert.equal(encodeBase64(big), Buffer.from(big).toString("base64"));
  const wrapped = Buffer.from(big.subarray(0, 300)).toString("base64").replace(/(.{76})/g, "$1\n");
  assert.deepEqual(decodeBase64(wrapped), big.subarray(0, 300));
  assert.throws(() => decodeBase64("<base64>"));
  assert.throws(() => decodeBase64("aGVsbG8=-_"));
});

test("WAV: written as 16 kHz mono PCM16, read back, resampled", () => {
  const wav = encodeWav(new Int16Array(16000));
  const info = inspectWav(wav);
  assert.deepEqual(info, { pcm: true, channels: 1, rate: 16000, bitsPerSample: 16, durationMs: 1000 });
  assert.ok(isVoiceWav(info));
  assert.ok(!isVoiceWav(inspectWav(encodeWav(new Int16Array(10), 44100))));
  assert.throws(() => inspectWav(new Uint8Array([1, 2, 3])));
  const s = toVoiceSamples(new Float32Array(48000).fill(0.5), 48000);
  assert.equal(s.length, 16000);
  assert.equal(s[100], Math.round(0.5 * 0x7fff));
});

test("avatar_url is made absolute against the WebSocket's URL", () => {
  assert.equal(resolveAvatarUrl("/avatar.html", "ws://10.0.0.2:8787/ws"), "http://10.0.0.2:8787/avatar.html");
  assert.equal(resolveAvatarUrl("/avatar.html", "wss://agent.example.com/ws"), "https://agent.example.com/avatar.html");
  assert.equal(resolveAvatarUrl("avatar.html", "wss://agent.example.com/herald/ws?x=1"), "https://agent.example.com/herald/avatar.html");
  assert.equal(resolveAvatarUrl("//cdn.example.com/a.html", "wss://agent.example.com/ws"), "https://cdn.example.com/a.html");
  assert.equal(resolveAvatarUrl("https://faces.example.com/", "ws://h/ws"), "https://faces.example.com/");
  assert.equal(resolveAvatarUrl("/a.html", "not a url"), "/a.html");
});

test("utf8Length counts what TextEncoder writes, lone surrogates included", () => {
  for (const text of ["", "abc", "é", "€", "😀", "a😀b", "\ud83d", "\ude00", "\ud83dx", "\ud83d\ud83d\ude00", "x\udc00\ud800"]) {
    assert.equal(utf8Length(text), new TextEncoder().encode(text).length, JSON.stringify(text));
  }
});

test("base64url: Web Push's keys, unpadded; padding tolerated, the standard alphabet refused", () => {
  for (let len = 0; len < 40; len++) {
    const bytes = Uint8Array.from({ length: len }, (_, i) => (i * 91 + len * 7) & 255);
    const text = encodeBase64Url(bytes);
    assert.equal(text, Buffer.from(bytes).toString("base64url"));
    assert.deepEqual(decodeBase64Url(text), bytes);
    assert.deepEqual(decodeBase64Url(Buffer.from(bytes).toString("base64").replace(/\+/g, "-").replace(/\//g, "_")), bytes);
  }
  assert.throws(() => decodeBase64Url("ab+/"));
  assert.throws(() => decodeBase64Url("ab cd"));
  assert.throws(() => decodeBase64Url("a"));
});

test("ready: capabilities.push is kept when present, absent otherwise, refused when it cannot be used", () => {
  const ready = (caps: unknown) => decodeServerFrame(JSON.stringify({ t: "ready", session: "mobile:x", capabilities: caps }));
  const on = ready({ push: { vapid_key: "BOr7", later: true } });
  assert.ok(on.ok && on.frame.t === "ready");
  assert.deepEqual(on.frame.capabilities.push, { vapid_key: "BOr7" });
  const off = ready({ voice: true });
  assert.ok(off.ok && off.frame.t === "ready");
  assert.ok(!("push" in off.frame.capabilities));
  for (const bad of [{ push: "BOr7" }, { push: {} }, { push: { vapid_key: 7 } }]) {
    const d = ready(bad);
    assert.ok(!d.ok && !d.ignored, JSON.stringify(bad));
  }
  for (const t of ["push_subscribed", "push_unsubscribed"]) {
    assert.deepEqual(decodeServerFrame(JSON.stringify({ t, extra: 1 })), { ok: true, frame: { t } });
  }
});

test("push payloads decode as the protocol writes them; unknown fields dropped, wrong types refused", () => {
  const question = decodePushPayload(
    JSON.stringify({
      v: 1, kind: "question", title: "Kitchen asks", body: "Allow this command?\nrm -rf build/", tag: "q-5f6a0c9e", device: "tel-1",
      prompt_id: "5f6a0c9e1d2b3a47", options: [{ id: "once", label: "Allow once", style: "primary" }, { id: "deny", label: "Deny" }], x_new: [1],
    }),
  );
  assert.deepEqual(question, {
    ok: true,
    payload: {
      v: 1, kind: "question", title: "Kitchen asks", body: "Allow this command?\nrm -rf build/", tag: "q-5f6a0c9e", device: "tel-1",
      prompt_id: "5f6a0c9e1d2b3a47", options: [{ id: "once", label: "Allow once" }, { id: "deny", label: "Deny" }],
    },
  });
  const reply = decodePushPayload('{"v":1,"kind":"reply","title":"Hermes","body":"The report…","tag":"m-1a2b","message_id":"1a2b3c","truncated":true}');
  assert.ok(reply.ok);
  assert.deepEqual([reply.payload.message_id, reply.payload.truncated], ["1a2b3c", true]);
  const bare = decodePushPayload('{"kind":"event","title":"Door"}');
  assert.deepEqual(bare, { ok: true, payload: { v: 1, kind: "event", title: "Door", body: "" } });
  for (const bad of ["", "[]", "{}", '{"kind":"reply","title":1}', '{"kind":"question","title":"t","options":{}}', '{"kind":"question","title":"t","options":[{"id":"a"}]}', '{"kind":"reply","title":"t","truncated":"yes"}']) {
    const d = decodePushPayload(bad);
    assert.ok(!d.ok, bad);
  }
});
