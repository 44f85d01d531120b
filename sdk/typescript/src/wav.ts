// Voice messages are WAV files: 16 kHz, mono, 16-bit PCM. These helpers make one from
// microphone samples and check one before it is sent.

export const VOICE_RATE = 16_000;

export interface WavInfo {
  rate: number;
  channels: number;
  bitsPerSample: number;
  /** PCM format tag 1. */
  pcm: boolean;
  durationMs: number;
}

/** A WAV file holding `samples` (mono PCM16) at `rate`. */
export function encodeWav(samples: Int16Array, rate: number = VOICE_RATE): Uint8Array {
  const dataBytes = samples.length * 2;
  const out = new Uint8Array(44 + dataBytes);
  const v = new DataView(out.buffer);
  const ascii = (at: number, s: string) => {
    for (let i = 0; i < s.length; i++) out[at + i] = s.charCodeAt(i);
  };
  ascii(0, "RIFF");
  v.setUint32(4, 36 + dataBytes, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true); // PCM
  v.setUint16(22, 1, true); // mono
  v.setUint32(24, rate, true);
  v.setUint32(28, rate * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  ascii(36, "data");
  v.setUint32(40, dataBytes, true);
  for (let i = 0; i < samples.length; i++) v.setInt16(44 + i * 2, samples[i]!, true);
  return out;
}

/** Reads a WAV header; throws if `bytes` is not a WAV file. */
export function inspectWav(bytes: Uint8Array): WavInfo {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
  if (bytes.length < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new Error("not a WAV file");
  let at = 12;
  let fmt: Omit<WavInfo, "durationMs"> | undefined;
  while (at + 8 <= bytes.length) {
    const id = tag(at);
    const size = v.getUint32(at + 4, true);
    const body = at + 8;
    if (id === "fmt " && body + 16 <= bytes.length) {
      fmt = {
        pcm: v.getUint16(body, true) === 1,
        channels: v.getUint16(body + 2, true),
        rate: v.getUint32(body + 4, true),
        bitsPerSample: v.getUint16(body + 14, true),
      };
    } else if (id === "data") {
      if (!fmt) throw new Error("WAV data before its format");
      const length = Math.min(size, bytes.length - body);
      const frame = fmt.channels * (fmt.bitsPerSample / 8);
      return { ...fmt, durationMs: frame > 0 && fmt.rate > 0 ? Math.round((length / frame / fmt.rate) * 1000) : 0 };
    }
    at = body + size + (size % 2);
  }
  throw new Error("WAV file without data");
}

/** True for the format voice messages should have: 16 kHz mono PCM16. */
export function isVoiceWav(info: WavInfo): boolean {
  return info.pcm && info.rate === VOICE_RATE && info.channels === 1 && info.bitsPerSample === 16;
}

/**
 * Microphone samples (floats in -1..1, as Web Audio gives them) at `inputRate`, turned
 * into 16 kHz PCM16 by averaging each output sample's span of input.
 */
export function toVoiceSamples(input: Float32Array, inputRate: number): Int16Array {
  const ratio = inputRate / VOICE_RATE;
  const n = Math.floor(input.length / ratio);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const from = Math.floor(i * ratio);
    const to = Math.max(from + 1, Math.floor((i + 1) * ratio));
    let sum = 0;
    for (let j = from; j < to && j < input.length; j++) sum += input[j]!;
    const s = Math.max(-1, Math.min(1, sum / (to - from)));
    out[i] = Math.round(s < 0 ? s * 0x8000 : s * 0x7fff);
  }
  return out;
}
