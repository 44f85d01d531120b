// Standard base64 with padding, for `data` fields. Written out here (rather than btoa)
// so that it works on bytes, in browsers, React Native and Node alike, with no
// dependency and without building a binary string first.

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LOOKUP = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) LOOKUP[ALPHABET.charCodeAt(i)] = i;

/** Padded standard base64 of `bytes`. */
export function encodeBase64(bytes: Uint8Array): string {
  const parts: string[] = [];
  // Build in slices so a multi-megabyte file never becomes one giant concatenation.
  const SLICE = 3 * 16 * 1024;
  for (let start = 0; start < bytes.length; start += SLICE) {
    const end = Math.min(start + SLICE, bytes.length);
    let out = "";
    let i = start;
    for (; i + 2 < end; i += 3) {
      const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
      out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!;
    }
    const left = end - i;
    if (left === 1) {
      const n = bytes[i]! << 16;
      out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + "==";
    } else if (left === 2) {
      const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
      out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + "=";
    }
    parts.push(out);
  }
  return parts.join("");
}

/** Bytes of standard base64, padded or not; ASCII whitespace is skipped. Throws on anything else. */
export function decodeBase64(text: string): Uint8Array {
  const out = new Uint8Array(Math.floor((text.length * 3) / 4) + 3);
  let n = 0;
  let bits = 0;
  let acc = 0;
  let padding = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    if (c === 0x3d) {
      padding = true;
      continue;
    }
    const v = c < 128 ? LOOKUP[c]! : -1;
    if (v < 0 || padding) throw new Error("data is not valid base64");
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  if (bits >= 6) throw new Error("data is not valid base64");
  return out.subarray(0, n);
}

/** The number of bytes `text` (unwrapped base64) decodes to, without decoding it. */
export function base64DecodedLength(text: string): number {
  let n = text.length;
  while (n > 0 && text.charCodeAt(n - 1) === 0x3d) n--;
  return Math.floor(n / 4) * 3 + (n % 4 === 2 ? 1 : n % 4 === 3 ? 2 : 0);
}

/** Base64 length of `bytes` bytes, padded. */
export function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}

/** Unpadded base64url (RFC 4648 §5) of `bytes`: how Web Push writes keys. */
export function encodeBase64Url(bytes: Uint8Array): string {
  return encodeBase64(bytes).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
}

/** Bytes of base64url, padded or not. Throws on anything else (`+`, `/`, whitespace). */
export function decodeBase64Url(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(text)) throw new Error("not base64url");
  return decodeBase64(text.replace(/-/g, "+").replace(/_/g, "/"));
}
