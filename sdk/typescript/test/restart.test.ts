// Losing the server mid-conversation: a restart (the server forgets which ids it saw)
// and a network drop (it remembers). Either way every message is answered exactly once.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createServer, connect, type Server, type Socket } from "node:net";
import WebSocket from "ws";

import { HeraldClient, type Reply, type WebSocketConstructor } from "../src/index.js";
import { freePort, Herald, TOKEN, within } from "./herald.js";

let herald: Herald;
before(async () => {
  herald = await Herald.start({ env: { MOBILE_ALLOW_ALL_USERS: "1" } });
});
after(async () => {
  await herald.stop();
});

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
  const sent: string[] = [];
  const c = await connected(herald.url, "restart", recorder(sent));
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
  await herald.run();
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
});

/** A TCP proxy that can swallow what the server says and cut every connection. */
class Proxy {
  private server: Server;
  private pairs: [Socket, Socket][] = [];
  muted = false;
  swallowed = 0;
  /** Bytes forwarded from the client to the server. */
  upstreamBytes = 0;
  /** Called after each forwarded piece from the client. */
  onUpstream: (() => void) | undefined;
  port = 0;
  private onSwallow: (() => void) | undefined;
  constructor(target: number) {
    this.server = createServer((client) => {
      const upstream = connect(target, "127.0.0.1");
      this.pairs.push([client, upstream]);
      client.on("data", (d) => {
        upstream.write(d);
        this.upstreamBytes += d.length;
        this.onUpstream?.();
      });
      upstream.on("data", (d) => {
        if (this.muted) {
          this.swallowed += d.length;
          this.onSwallow?.();
        } else client.write(d);
      });
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("close", end).on("error", end);
      upstream.on("close", end).on("error", end);
    });
  }
  async listen(): Promise<void> {
    this.port = await freePort();
    await new Promise<void>((r) => this.server.listen(this.port, "127.0.0.1", r));
  }
  /** Resolves once the server said something that was swallowed. */
  swallowedSomething(): Promise<void> {
    return new Promise((r) => (this.onSwallow = r));
  }
  cut(): void {
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs = [];
  }
  close(): Promise<void> {
    this.cut();
    return new Promise((r) => this.server.close(() => r()));
  }
}

test("a network drop before the answer arrives: the resend is dropped by the server, the reply comes once", async () => {
  const proxy = new Proxy(herald.mobilePort);
  await proxy.listen();
  const sent: string[] = [];
  const c = await connected(`ws://127.0.0.1:${proxy.port}/ws`, "drop", recorder(sent));
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
  const proxy = new Proxy(herald.mobilePort);
  await proxy.listen();
  const c = await connected(`ws://127.0.0.1:${proxy.port}/ws`, "upload-drop");
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
