// Every case of vectors/mobile-v1.json that concerns a client, decoded or encoded by the SDK.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  decodeServerFrame,
  encodeClientFrame,
  ERROR_CODES,
  LIMITS,
  safeChoice,
  sessionKey,
  userIdForToken,
  type ClientFrame,
} from "../src/index.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const vectors = JSON.parse(readFileSync(resolve(here, "../../../../vectors/mobile-v1.json"), "utf8")) as Record<string, unknown>;

interface FrameCase {
  name: string;
  wire: string;
  canonical: Record<string, unknown>;
}
interface ErrorCase {
  name: string;
  wire: string;
  code: string;
}

function cases<T>(key: string): T[] {
  const list = vectors[key];
  assert.ok(Array.isArray(list) && list.length > 0, `vectors have ${key}`);
  return list as T[];
}

test("limits and error codes match", () => {
  assert.deepEqual({ ...LIMITS }, vectors["limits"]);
  assert.deepEqual([...ERROR_CODES], vectors["error_codes"]);
});

test("server_frames decode to their canonical form", () => {
  for (const c of cases<FrameCase>("server_frames")) {
    const d = decodeServerFrame(c.wire);
    assert.ok(d.ok, `${c.name}: ${JSON.stringify(d)}`);
    assert.deepEqual(JSON.parse(JSON.stringify(d.frame)), c.canonical, c.name);
    const again = decodeServerFrame(JSON.stringify(c.canonical));
    assert.ok(again.ok, c.name);
    assert.deepEqual(again.frame, d.frame, `${c.name}: canonical decodes alike`);
  }
});

test("server_tolerated frames decode (not errors, not ignored)", () => {
  for (const c of cases<{ name: string; wire: string }>("server_tolerated")) {
    const d = decodeServerFrame(c.wire);
    assert.ok(d.ok, `${c.name}: ${JSON.stringify(d)}`);
  }
  // Missing capabilities mean "do not use".
  const ready = decodeServerFrame(cases<{ wire: string }>("server_tolerated")[0]!.wire);
  assert.ok(ready.ok && ready.frame.t === "ready");
  assert.equal(ready.frame.capabilities.streaming, false);
  assert.equal(ready.frame.capabilities.media_chunk_bytes, 0);
  assert.equal(ready.frame.capabilities.voice, true);
});

test("server_ignored frames are ignored", () => {
  for (const c of cases<{ name: string; wire: string }>("server_ignored")) {
    const d = decodeServerFrame(c.wire);
    assert.ok(!d.ok && d.ignored, c.name);
  }
});

test("server_errors are bad frames", () => {
  for (const c of cases<ErrorCase>("server_errors")) {
    assert.equal(c.code, "bad_frame");
    const d = decodeServerFrame(c.wire);
    assert.ok(!d.ok && !d.ignored, `${c.name}: ${JSON.stringify(d)}`);
  }
});

test("client_frames: the SDK writes the canonical form", () => {
  for (const c of cases<FrameCase>("client_frames")) {
    const text = encodeClientFrame(c.canonical as unknown as ClientFrame);
    assert.deepEqual(JSON.parse(text), c.canonical, c.name);
    assert.ok(!text.includes("null"), `${c.name}: no nulls`);
  }
});

test("user ids and session keys", async () => {
  for (const c of cases<{ token: string; user_id: string }>("user_ids")) {
    assert.equal(await userIdForToken(c.token), c.user_id);
  }
  for (const c of cases<{ device_id: string; session: string }>("session_keys")) {
    assert.equal(sessionKey(c.device_id), c.session);
  }
});

test("safe choices", () => {
  for (const c of cases<{ kind: string; safe: string }>("safe_choices")) {
    assert.equal(safeChoice(c.kind), c.safe);
  }
});
