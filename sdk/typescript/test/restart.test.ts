// Losing the server mid-conversation: a restart (the server forgets which ids it saw)
// and a network drop (it remembers). Either way every message is answered exactly once.
// The client always talks to a proxy that holds its port for the whole test: a restarted
// herald listens on a new port, and the proxy forwards there.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import WebSocket from "ws";

import { HeraldClient, type Reply, type WebSocketConstructor } from "../src/index.js";
import { Herald, TcpProxy, TOKEN, within } from "./herald.js";

let herald: Herald;
/** Forwards to herald's phone port, wherever the current process has it. */
const toHerald = (): number | undefined => herald.port("mobile");
before(async () => {
  herald = await Herald.start({ env: { MOBILE_ALLOW_ALL_USERS: "1" } });
});
after(async () => {
  await herald.stop();
});

const through = (proxy: TcpProxy): string => `ws://127.0.0.1:${proxy.port}/ws`;

/** Records every frame the client hands to a socket. */
function recorder(sent: string[]) {
  return class Recording extends WebSocket {
    override send(data: string): void {
      sent.push(data);
      super.send(data);
    }
  };
}

/** A client of `url` with quick retries, connected (ready) before it is returned. */
async function connected(url: string, device: string, ws: WebSocketConstructor = WebSocket): Promise<HeraldClient> {
  const c = new HeraldClient({ url, token: TOKEN, device: { id: `${device}-${process.pid}` }, WebSocket: ws, backoff: { initialMs: 100, maxMs: 300, jitter: 0.2 } });
  const ready = c.once("ready");
  c.connect();
  await within(5000, "ready", ready);
  return c;
}

function finals(c: HeraldClient): Reply[] {
  const out: Reply[] = [];
  c.on("message", (r) => {
    if (r.final) out.push(r);
  });
  return out;
}

test("a server restart mid-conversation: reconnect, resend what was unanswered, no duplicate reply", async () => {
  const proxy = await TcpProxy.open(toHerald);
  const sent: string[] = [];
  const c = await connected(through(proxy), "restart", recorder(sent));
  const replies = finals(c);
  const first = c.once("message", (r) => r.final && r.text === "You said: one");
  c.send("one");
  await within(5000, "reply one", first);
  assert.equal(c.pending.length, 0);

  const lost = c.once("disconnect");
  await herald.kill();
  await within(5000, "disconnect", lost);
  const two = c.send("two"); // while the server is down
  assert.deepEqual(c.pending.map((p) => p.id), [two]);

  const back = c.once("ready");
  await herald.run(); // on a new port, behind the same proxy
  await within(10_000, "ready again", back);
  await within(5000, "reply two", c.once("message", (r) => r.final && r.text === "You said: two"));
  // A marker: once "three" is answered, anything more for "one" would have come before it.
  const marker = c.once("message", (r) => r.final && r.text === "You said: three");
  c.send("three");
  await within(5000, "reply three", marker);
  assert.deepEqual(replies.map((r) => r.text), ["You said: one", "You said: two", "You said: three"]);
  const texts = sent.map((s) => JSON.parse(s) as { t: string; text?: string }).filter((f) => f.t === "text").map((f) => f.text);
  assert.deepEqual(texts, ["one", "two", "three"], "the answered message was not resent");
  c.close();
  await proxy.close();
});

test("a network drop before the answer arrives: the resend is dropped by the server, the reply comes once", async () => {
  const proxy = await TcpProxy.open(toHerald);
  const sent: string[] = [];
  const c = await connected(through(proxy), "drop", recorder(sent));
  const replies = finals(c);

  // The server gets the message and starts answering, but the phone hears nothing.
  proxy.muted = true;
  const answering = proxy.swallowedSomething();
  const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ");
  const id = c.send(words);
  await within(5000, "the server answering", answering);
  const back = c.once("ready");
  proxy.cut();
  proxy.muted = false;
  await within(5000, "ready again", back);
  const reply = await within(10_000, "the reply", c.once("message", (r) => r.final && r.text === `You said: ${words}`));
  assert.ok(reply);
  const marker = c.once("message", (r) => r.final && r.text === "You said: done");
  c.send("done");
  await within(5000, "marker", marker);
  assert.deepEqual(replies.map((r) => r.text), [`You said: ${words}`, "You said: done"], "one reply, not two");
  const resent = sent.filter((s) => s.includes(`"id":"${id}"`));
  assert.equal(resent.length, 2, "sent, then resent with the same id after the drop");
  c.close();
  await proxy.close();
});

test("a drop in the middle of an upload: all its parts go again, the file is answered once", async () => {
  const proxy = await TcpProxy.open(toHerald);
  const c = await connected(through(proxy), "upload-drop");
  const replies = finals(c);
  const parts: number[] = [];
  c.on("uploadProgress", (p) => parts.push(p.part));
  // Cut once more than one part (4 MiB of base64) but less than the file went up.
  const cutDone = new Promise<void>((resolve) => {
    proxy.onUpstream = () => {
      if (proxy.upstreamBytes > 5 * 1024 * 1024) {
        proxy.onUpstream = undefined;
        proxy.cut();
        resolve();
      }
    };
  });
  const bytes = new Uint8Array(7 * 1024 * 1024).fill(42);
  const id = c.upload(bytes, { kind: "document", filename: "big.bin", caption: "cut" });
  await within(10_000, "the cut", cutDone);
  await within(20_000, "the answer", c.once("message", (r) => r.final && r.text === "Got your document: cut."));
  const marker = c.once("message", (r) => r.final && r.text === "You said: after");
  c.send("after");
  await within(5000, "marker", marker);
  assert.deepEqual(replies.map((r) => r.text), ["Got your document: cut.", "You said: after"]);
  assert.ok(parts.filter((p) => p === 0).length >= 2, `part 0 was sent again: ${parts}`);
  assert.ok(!c.pending.some((p) => p.id === id));
  c.close();
  await proxy.close();
});
