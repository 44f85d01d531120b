// The test push service's own checks, before any test trusts them: its key schedule
// against the example in RFC 8291 (Appendix A), decryption of a message made from those
// keys, and the VAPID check taking a good token and refusing each kind of bad one.

import assert from "node:assert/strict";
import { createCipheriv, createECDH, generateKeyPairSync, sign } from "node:crypto";
import { test } from "node:test";

import { checkVapid, decryptPush, messageKeys } from "./push-service.js";

const u = (s: string): Buffer => Buffer.from(s, "base64url");

// RFC 8291, Appendix A: inputs and intermediate values of the example in section 5.
const RFC = {
  plaintext: "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24",
  asPublic: "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
  uaPublic: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
  uaPrivate: "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94",
  salt: "DGv6ra1nlYgDCS1FRnbzlw",
  auth: "BTBZMqHH6r4Tts7J_aSIgg",
  ecdhSecret: "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs",
  prkKey: "Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k",
  ikm: "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg",
  prk: "09_eUZGrsvxChDCGRCdkLiDXrReGOEVeSCdCcPBSJSc",
  cek: "oIhVW04MRdy2XN9CiKLxTg",
  noncePrefix: "4h_95klXJ5E",
};

function rfcApp() {
  const ua = createECDH("prime256v1");
  ua.setPrivateKey(u(RFC.uaPrivate));
  return ua;
}

/** An aes128gcm body of one record, sealed with the keys the RFC's inputs give. */
function sealed(plaintext: Buffer, padding = 0, rs = 4096): Buffer {
  const keys = messageKeys(rfcApp(), u(RFC.auth), u(RFC.asPublic), u(RFC.salt));
  const cipher = createCipheriv("aes-128-gcm", keys.cek, keys.nonce);
  const record = Buffer.concat([cipher.update(Buffer.concat([plaintext, Buffer.from([2]), Buffer.alloc(padding)])), cipher.final(), cipher.getAuthTag()]);
  const header = Buffer.alloc(21);
  u(RFC.salt).copy(header, 0);
  header.writeUInt32BE(rs, 16);
  header[20] = 65;
  return Buffer.concat([header, u(RFC.asPublic), record]);
}

test("the key schedule gives RFC 8291's intermediate values", () => {
  const ua = rfcApp();
  assert.equal(ua.getPublicKey().toString("base64url"), RFC.uaPublic);
  const keys = messageKeys(ua, u(RFC.auth), u(RFC.asPublic), u(RFC.salt));
  assert.equal(keys.ecdhSecret.toString("base64url"), RFC.ecdhSecret);
  assert.equal(keys.prkKey.toString("base64url"), RFC.prkKey);
  assert.equal(keys.ikm.toString("base64url"), RFC.ikm);
  assert.equal(keys.prk.toString("base64url"), RFC.prk);
  assert.equal(keys.cek.toString("base64url"), RFC.cek);
  assert.ok(keys.nonce.toString("base64url").startsWith(RFC.noncePrefix), keys.nonce.toString("base64url"));
});

test("a sealed message decrypts; a wrong key, a flipped bit or a bad delimiter does not", () => {
  const plain = u(RFC.plaintext);
  assert.equal(plain.toString(), "When I grow up, I want to be a watermelon");
  assert.deepEqual(decryptPush(sealed(plain), rfcApp(), u(RFC.auth)), plain);
  assert.deepEqual(decryptPush(sealed(plain, 30), rfcApp(), u(RFC.auth)), plain, "padding after the delimiter");
  const other = createECDH("prime256v1");
  other.generateKeys();
  assert.throws(() => decryptPush(sealed(plain), other, u(RFC.auth)));
  assert.throws(() => decryptPush(sealed(plain), rfcApp(), Buffer.alloc(16)));
  const flipped = sealed(plain);
  flipped[flipped.length - 20]! ^= 1;
  assert.throws(() => decryptPush(flipped, rfcApp(), u(RFC.auth)));
  assert.throws(() => decryptPush(sealed(plain).subarray(0, 40), rfcApp(), u(RFC.auth)));
});

test("the VAPID check takes a good token and names what is wrong with a bad one", () => {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = publicKey.export({ format: "jwk" });
  const k = Buffer.concat([Buffer.from([4]), u(jwk.x!), u(jwk.y!)]).toString("base64url");
  const now = 1_700_000_000;
  const origin = "http://127.0.0.1:4567";
  const token = (claims: Record<string, unknown>, alg = "ES256", key = privateKey) => {
    const h = Buffer.from(JSON.stringify({ typ: "JWT", alg })).toString("base64url");
    const p = Buffer.from(JSON.stringify(claims)).toString("base64url");
    const s = sign("sha256", Buffer.from(`${h}.${p}`), { key, dsaEncoding: "ieee-p1363" }).toString("base64url");
    return `${h}.${p}.${s}`;
  };
  const good = { aud: origin, exp: now + 12 * 3600, sub: "mailto:owner@example.com" };
  const ok = checkVapid(`vapid t=${token(good)}, k=${k}`, origin, now);
  assert.equal(ok.vapidKey, k);
  assert.deepEqual(ok.claims, good);
  const refused: [string, string, RegExp][] = [
    ["another scheme", `WebPush ${token(good)}`, /vapid scheme/],
    ["no k", `vapid t=${token(good)}`, /needs t and k/],
    ["aud of another origin", `vapid t=${token({ ...good, aud: "https://push.example.net" })}, k=${k}`, /aud/],
    ["expired", `vapid t=${token({ ...good, exp: now - 1 })}, k=${k}`, /not in the future/],
    ["more than 24 h", `vapid t=${token({ ...good, exp: now + 25 * 3600 })}, k=${k}`, /24 hours/],
    ["no sub", `vapid t=${token({ aud: origin, exp: now + 60 })}, k=${k}`, /sub/],
    ["signed by another key", `vapid t=${token(good, "ES256", generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey)}, k=${k}`, /does not verify/],
    ["another alg", `vapid t=${token(good, "HS256")}, k=${k}`, /not ES256/],
  ];
  for (const [name, header, why] of refused) assert.throws(() => checkVapid(header, origin, now), why, name);
});
