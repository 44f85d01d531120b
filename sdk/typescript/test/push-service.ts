// A Web Push service for tests, on 127.0.0.1 and a port the system picks: it plays the
// push service a phone or browser vendor runs, and the app behind it. Each subscription
// it hands out has its own P-256 key pair and auth secret (node's crypto), and each push
// Herald sends it is checked as a real service and app would: the VAPID header (RFC 8292:
// an ES256 JWT signed by the key in `k`, for this origin, expiring within 24 hours, with
// a contact), `Content-Encoding: aes128gcm` and `TTL` (RFC 8030), and the body decrypted
// with the subscription's keys (RFC 8291 over RFC 8188), written out here from the RFCs.
// A push that fails a check is answered 400 and fails the test waiting for it.

import { createECDH, createHmac, createDecipheriv, createPublicKey, randomBytes, verify, type ECDH } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

import { listenOnLoopback } from "./herald.js";

const b64url = (b: Uint8Array): string => Buffer.from(b).toString("base64url");
const unb64url = (s: string): Buffer => {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error(`not unpadded base64url: ${s.slice(0, 20)}`);
  return Buffer.from(s, "base64url");
};
const hmac = (key: Uint8Array, ...data: Uint8Array[]): Buffer => {
  const h = createHmac("sha256", key);
  for (const d of data) h.update(d);
  return h.digest();
};

/** The keys RFC 8291 derives for one message, exported so a test can hold them against the RFC's example. */
export interface MessageKeys {
  ecdhSecret: Buffer;
  prkKey: Buffer;
  ikm: Buffer;
  prk: Buffer;
  cek: Buffer;
  nonce: Buffer;
}

/**
 * RFC 8291 §3.3–3.4: from the app's key pair (`ua`), its auth secret, the sender's public
 * key and the salt, the content encryption key and nonce. HKDF with one block of output
 * is a single HMAC each for extract and expand.
 */
export function messageKeys(ua: ECDH, auth: Uint8Array, asPublic: Uint8Array, salt: Uint8Array): MessageKeys {
  const ecdhSecret = ua.computeSecret(asPublic);
  const prkKey = hmac(auth, ecdhSecret);
  const keyInfo = Buffer.concat([Buffer.from("WebPush: info\0"), ua.getPublicKey(), asPublic]);
  const ikm = hmac(prkKey, keyInfo, Buffer.from([1]));
  const prk = hmac(salt, ikm);
  const cek = hmac(prk, Buffer.from("Content-Encoding: aes128gcm\0"), Buffer.from([1])).subarray(0, 16);
  const nonce = hmac(prk, Buffer.from("Content-Encoding: nonce\0"), Buffer.from([1])).subarray(0, 12);
  return { ecdhSecret, prkKey, ikm, prk, cek, nonce };
}

/**
 * Decrypts an `aes128gcm` body (RFC 8188 §2: salt, record size, key id, records) for the
 * app `ua` with `auth`. Web Push sends one record whose key id is the sender's public key;
 * more records are read too, each with its sequence number in the nonce. Throws on
 * anything out of place.
 */
export function decryptPush(body: Buffer, ua: ECDH, auth: Uint8Array): Buffer {
  if (body.length < 21) throw new Error("body shorter than the aes128gcm header");
  const salt = body.subarray(0, 16);
  const rs = body.readUInt32BE(16);
  const idlen = body[20]!;
  if (idlen !== 65) throw new Error(`key id of ${idlen} bytes, not a 65-byte P-256 point`);
  const asPublic = body.subarray(21, 21 + idlen);
  if (asPublic[0] !== 0x04) throw new Error("key id is not an uncompressed point");
  if (rs < 18) throw new Error(`record size ${rs} too small`);
  const keys = messageKeys(ua, auth, asPublic, salt);
  const records = body.subarray(21 + idlen);
  if (records.length === 0) throw new Error("no records");
  const out: Buffer[] = [];
  for (let seq = 0, at = 0; at < records.length; seq++, at += rs) {
    const record = records.subarray(at, at + rs);
    const last = at + rs >= records.length;
    if (record.length < 17) throw new Error(`record ${seq} is ${record.length} bytes`);
    const iv = Buffer.from(keys.nonce);
    // The sequence number XORed into the nonce's low 48 bits is plenty for tests.
    for (let i = 0, n = seq; i < 6; i++, n = Math.floor(n / 256)) iv[11 - i]! ^= n & 0xff;
    const decipher = createDecipheriv("aes-128-gcm", keys.cek, iv);
    decipher.setAuthTag(record.subarray(record.length - 16));
    const plain = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
    let end = plain.length - 1;
    while (end >= 0 && plain[end] === 0) end--;
    if (end < 0) throw new Error(`record ${seq} has no padding delimiter`);
    const delimiter = plain[end];
    if (delimiter !== (last ? 2 : 1)) throw new Error(`record ${seq}: delimiter ${delimiter}, want ${last ? 2 : 1}`);
    out.push(plain.subarray(0, end));
  }
  return Buffer.concat(out);
}

/** What a test's app holds for a subscription: the subscription to send, and its secrets. */
export interface Subscriber {
  name: string;
  endpoint: string;
  keys: { p256dh: string; auth: string };
  ecdh: ECDH;
  auth: Buffer;
}

/** A push as the service received it, checked and decrypted. */
export interface ReceivedPush {
  name: string;
  /** What the service answered. */
  status: number;
  ttl: number;
  urgency: string | undefined;
  /** The VAPID key (`k`) and the JWT's claims. */
  vapidKey: string;
  claims: { aud: string; exp: number; sub: string } & Record<string, unknown>;
  /** The decrypted body, as bytes and as the JSON it holds. */
  plaintext: Buffer;
  payload: Record<string, unknown>;
}

interface Waiter {
  resolve(p: ReceivedPush): void;
  reject(e: Error): void;
}

/** Checks the VAPID header (RFC 8292 §2–3) and returns `k` and the claims; throws what is wrong. */
export function checkVapid(header: string | undefined, origin: string, nowSeconds: number): { vapidKey: string; claims: ReceivedPush["claims"] } {
  const m = /^vapid\s+(.*)$/i.exec(header ?? "");
  if (!m) throw new Error(`Authorization is not the vapid scheme: ${JSON.stringify(header?.slice(0, 30))}`);
  const params = new Map<string, string>();
  for (const part of m[1]!.split(",")) {
    const kv = /^\s*([a-z]+)\s*=\s*"?([^"\s]*)"?\s*$/i.exec(part);
    if (!kv) throw new Error(`unreadable vapid parameter: ${part}`);
    params.set(kv[1]!.toLowerCase(), kv[2]!);
  }
  const t = params.get("t");
  const k = params.get("k");
  if (!t || !k) throw new Error("vapid needs t and k");
  const point = unb64url(k);
  if (point.length !== 65 || point[0] !== 4) throw new Error("k is not an uncompressed P-256 point");
  const [h, p, s, ...rest] = t.split(".");
  if (!h || !p || !s || rest.length) throw new Error("t is not a compact JWS");
  const head = JSON.parse(unb64url(h).toString("utf8")) as Record<string, unknown>;
  if (head["alg"] !== "ES256") throw new Error(`JWT alg ${String(head["alg"])}, not ES256`);
  if (head["typ"] !== undefined && head["typ"] !== "JWT") throw new Error(`JWT typ ${String(head["typ"])}`);
  const key = createPublicKey({ key: { kty: "EC", crv: "P-256", x: b64url(point.subarray(1, 33)), y: b64url(point.subarray(33)) }, format: "jwk" });
  const sig = unb64url(s);
  if (sig.length !== 64) throw new Error(`ES256 signature of ${sig.length} bytes, not 64 (r||s)`);
  if (!verify("sha256", Buffer.from(`${h}.${p}`), { key, dsaEncoding: "ieee-p1363" }, sig)) throw new Error("the JWT's signature does not verify with k");
  const claims = JSON.parse(unb64url(p).toString("utf8")) as ReceivedPush["claims"];
  if (claims.aud !== origin) throw new Error(`aud ${JSON.stringify(claims.aud)}, not the endpoint's origin ${origin}`);
  if (typeof claims.exp !== "number" || claims.exp <= nowSeconds) throw new Error(`exp ${claims.exp} is not in the future`);
  // One second for the sender's clock rounding the other way.
  if (claims.exp > nowSeconds + 24 * 3600 + 1) throw new Error(`exp ${claims.exp} is more than 24 hours ahead`);
  if (typeof claims.sub !== "string" || !/^(mailto:|https:)/.test(claims.sub)) throw new Error(`sub ${JSON.stringify(claims.sub)} is not a mailto: or https: contact`);
  return { vapidKey: k, claims };
}

export class PushService {
  readonly origin: string;
  /** Every push received, checked or not, in order. */
  readonly received: ReceivedPush[] = [];
  /** What failed a check. */
  readonly problems: string[] = [];
  private readonly subscribers = new Map<string, Subscriber>();
  /** Status to answer per subscriber (default 201). */
  private readonly answers = new Map<string, number>();
  private readonly queues = new Map<string, ReceivedPush[]>();
  private readonly waiters = new Map<string, Waiter[]>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {
    this.origin = `http://127.0.0.1:${port}`;
  }

  static async open(): Promise<PushService> {
    let service: PushService | undefined;
    const server = createServer((req, res) => service?.handle(req, res));
    const port = await listenOnLoopback(server);
    service = new PushService(server, port);
    return service;
  }

  /** A new subscription: fresh keys, and an endpoint under this service. */
  subscribe(name: string): Subscriber {
    const ecdh = createECDH("prime256v1");
    ecdh.generateKeys();
    const auth = randomBytes(16);
    const s: Subscriber = {
      name,
      endpoint: `${this.origin}/push/${name}`,
      keys: { p256dh: b64url(ecdh.getPublicKey()), auth: b64url(auth) },
      ecdh,
      auth,
    };
    this.subscribers.set(name, s);
    return s;
  }

  /** From now on, answer pushes for `name` with `status` (410: the subscription is gone). */
  answer(name: string, status: number): void {
    this.answers.set(name, status);
  }

  /** How many pushes came for `name`. */
  count(name: string): number {
    return this.received.filter((p) => p.name === name).length;
  }

  /** The next push for `name` not yet taken (one that came earlier, or the next to come). */
  next(name: string): Promise<ReceivedPush> {
    const queued = this.queues.get(name)?.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const list = this.waiters.get(name) ?? [];
      list.push({ resolve, reject });
      this.waiters.set(name, list);
    });
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }

  private fail(name: string, res: ServerResponse, why: string): void {
    this.problems.push(`${name}: ${why}`);
    for (const w of this.waiters.get(name)?.splice(0) ?? []) w.reject(new Error(`a push for ${name} failed a check: ${why}`));
    res.writeHead(400, { "content-type": "text/plain" }).end(why);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const name = /^\/push\/([^/?]+)$/.exec(req.url ?? "")?.[1] ?? "";
      const sub = this.subscribers.get(name);
      if (!sub) {
        this.problems.push(`a push to an endpoint never handed out: ${req.url}`);
        res.writeHead(404).end();
        return;
      }
      if (req.method !== "POST") return this.fail(name, res, `method ${req.method}, not POST`);
      let vapid: ReturnType<typeof checkVapid>;
      try {
        vapid = checkVapid(req.headers.authorization, this.origin, Math.floor(Date.now() / 1000));
      } catch (e) {
        return this.fail(name, res, (e as Error).message);
      }
      if (req.headers["content-encoding"] !== "aes128gcm") return this.fail(name, res, `Content-Encoding ${req.headers["content-encoding"]}, not aes128gcm`);
      const ttl = req.headers["ttl"];
      if (typeof ttl !== "string" || !/^\d+$/.test(ttl)) return this.fail(name, res, `TTL ${JSON.stringify(ttl)} is not a number of seconds`);
      const body = Buffer.concat(chunks);
      // RFC 8030 §7.2: a push service need take no more than 4096 bytes of body.
      if (body.length > 4096) return this.fail(name, res, `a body of ${body.length} bytes, over 4096`);
      let plaintext: Buffer;
      let payload: Record<string, unknown>;
      try {
        plaintext = decryptPush(body, sub.ecdh, sub.auth);
        payload = JSON.parse(plaintext.toString("utf8")) as Record<string, unknown>;
      } catch (e) {
        return this.fail(name, res, `the body does not decrypt to JSON with the subscription's keys: ${(e as Error).message}`);
      }
      const status = this.answers.get(name) ?? 201;
      const urgency = req.headers["urgency"];
      const push: ReceivedPush = {
        name,
        status,
        ttl: Number(ttl),
        urgency: typeof urgency === "string" ? urgency : undefined,
        vapidKey: vapid.vapidKey,
        claims: vapid.claims,
        plaintext,
        payload,
      };
      this.received.push(push);
      const waiter = this.waiters.get(name)?.shift();
      if (waiter) waiter.resolve(push);
      else this.queues.set(name, [...(this.queues.get(name) ?? []), push]);
      res.writeHead(status, status === 201 ? { location: `/message/${this.received.length}` } : {}).end();
    });
  }
}
