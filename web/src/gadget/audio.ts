// The gadget's microphone and speaker, on Web Audio.
//
// Microphone: getUserMedia, an AudioWorklet (mic-worklet.ts, served beside this script)
// that hands over blocks of samples at the context's rate from the audio thread, and a
// resampler down to 16 kHz PCM16. The stream stays open for a while after a release, so
// the next press does not lose its first syllable to the browser opening the device
// again.
//
// Speaker: a jitter buffer in front of Web Audio. The server paces audio to real time,
// at most 0.5 s ahead; frames still come in bursts and gaps, so playback waits for
// PREBUFFER_MS of audio (or the stream's end) and then schedules every frame back to
// back on the audio clock. Running dry mid-stream goes back to buffering; more than
// CAPACITY_MS waiting is dropped and counted.

import { pcm16ToFloat, Resampler } from "./proto.js";
import type { SpeakerLike } from "./device.js";

export const PREBUFFER_MS = 200;
export const CAPACITY_MS = 1000;
/** How long the microphone stays open after the last release. */
const MIC_LINGER_MS = 30_000;

let shared: AudioContext | undefined;

/**
 * The page's one AudioContext, made and resumed on demand (browsers let it run only after
 * a user gesture, so every gesture calls this). `create: false` only looks.
 */
export function audioContext(): AudioContext;
export function audioContext(create: false): AudioContext | undefined;
export function audioContext(create = true): AudioContext | undefined {
  if (!create) return shared;
  shared ??= new AudioContext({ latencyHint: "interactive" });
  if (shared.state === "suspended") void shared.resume();
  return shared;
}

/** The microphone tap's module, relative to the page; loaded once per context. */
const MIC_WORKLET = "mic-worklet.js";
let micWorklet: Promise<void> | undefined;

export class Microphone {
  private media: MediaStream | undefined;
  private source: MediaStreamAudioSourceNode | undefined;
  private node: AudioWorkletNode | undefined;
  private resampler: Resampler | undefined;
  private live = false;
  private opening: Promise<void> | undefined;
  private closeTimer: ReturnType<typeof setTimeout> | undefined;
  /** Peak level of the last block, 0..1, for the meter. */
  level = 0;
  error: string | undefined;

  constructor(
    private readonly rate: number,
    private readonly onSamples: (samples: Int16Array) => void,
    private readonly onError: (why: string) => void,
  ) {}

  /** Starts delivering samples (opening the device first when needed). */
  start(): void {
    this.live = true;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.closeTimer = undefined;
    if (!this.media && !this.opening) {
      this.opening = this.open().catch((e: unknown) => {
        this.error = e instanceof Error ? e.message : String(e);
        this.live = false;
        this.onError(this.error);
      });
      void this.opening.finally(() => (this.opening = undefined));
    }
  }

  stop(): void {
    this.live = false;
    this.level = 0;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.closeTimer = setTimeout(() => this.close(), MIC_LINGER_MS);
  }

  private async open(): Promise<void> {
    if (!navigator.mediaDevices?.getUserMedia) throw new Error("this browser gives no microphone here (open the page from localhost or over https)");
    const ctx = audioContext();
    micWorklet ??= ctx.audioWorklet.addModule(MIC_WORKLET).catch((err: unknown) => {
      micWorklet = undefined; // the next press tries again
      throw err;
    });
    const [media] = await Promise.all([
      navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true },
      }),
      micWorklet,
    ]);
    this.error = undefined;
    this.media = media;
    this.source = ctx.createMediaStreamSource(media);
    this.node = new AudioWorkletNode(ctx, "herald-mic", { numberOfInputs: 1, numberOfOutputs: 1 });
    this.resampler = new Resampler(ctx.sampleRate, this.rate);
    this.node.port.onmessage = (e: MessageEvent<Float32Array>) => this.block(e.data);
    this.source.connect(this.node);
    // Pulled by the output, as every node that should run; it writes silence there.
    this.node.connect(ctx.destination);
    if (!this.live) this.stop();
  }

  private block(block: Float32Array): void {
    if (!this.live || !this.resampler) return;
    const out = this.resampler.push(block);
    let peak = 0;
    const pcm = new Int16Array(out.length);
    for (let i = 0; i < out.length; i++) {
      const s = Math.max(-1, Math.min(1, out[i]!));
      peak = Math.max(peak, Math.abs(s));
      pcm[i] = Math.round(s < 0 ? s * 0x8000 : s * 0x7fff);
    }
    this.level = peak;
    if (pcm.length) this.onSamples(pcm);
  }

  private close(): void {
    this.closeTimer = undefined;
    if (this.live) return;
    this.source?.disconnect();
    this.node?.disconnect();
    if (this.node) this.node.port.onmessage = null;
    for (const track of this.media?.getTracks() ?? []) track.stop();
    this.media = undefined;
    this.source = undefined;
    this.node = undefined;
  }
}

interface Playing {
  id: number;
  rate: number;
  /** Audio waiting to be scheduled. */
  queue: Float32Array<ArrayBuffer>[];
  queued: number;
  nextSeq: number | undefined;
  ended: boolean;
  /** Scheduled on the audio clock: where the next buffer starts. */
  playing: boolean;
  nextTime: number;
  sources: Set<AudioBufferSourceNode>;
}

export interface SpeakerStats {
  streams: number;
  frames: number;
  /** Milliseconds of audio handed to Web Audio. */
  scheduledMs: number;
  gaps: number;
  underruns: number;
  overflowMs: number;
}

export class Speaker implements SpeakerLike {
  private stream: Playing | undefined;
  private gain: GainNode | undefined;
  private volumeNow = 0.8;
  readonly stats: SpeakerStats = { streams: 0, frames: 0, scheduledMs: 0, gaps: 0, underruns: 0, overflowMs: 0 };

  constructor(private readonly onChange: () => void) {}

  get active(): boolean {
    return this.stream !== undefined;
  }

  /** "idle", "buffering" or "playing". */
  get state(): string {
    return !this.stream ? "idle" : this.stream.playing ? "playing" : "buffering";
  }

  get volume(): number {
    return this.volumeNow;
  }

  set volume(v: number) {
    this.volumeNow = Math.max(0, Math.min(1, v));
    if (this.gain) this.gain.gain.value = this.volumeNow;
  }

  private output(): { ctx: AudioContext; gain: GainNode } {
    const ctx = audioContext();
    if (!this.gain) {
      this.gain = ctx.createGain();
      this.gain.gain.value = this.volumeNow;
      this.gain.connect(ctx.destination);
    }
    return { ctx, gain: this.gain };
  }

  start(id: number, rate: number): void {
    this.silence();
    this.stream = { id, rate: Math.max(3000, Math.min(768_000, rate)), queue: [], queued: 0, nextSeq: undefined, ended: false, playing: false, nextTime: 0, sources: new Set() };
    this.stats.streams++;
    this.onChange();
  }

  push(id: number, seq: number, pcm: Uint8Array): void {
    const s = this.stream;
    if (!s || s.id !== id || s.ended) return;
    this.stats.frames++;
    if (s.nextSeq !== undefined && seq !== s.nextSeq) this.stats.gaps++;
    s.nextSeq = (seq + 1) & 0xffff;
    const samples = pcm16ToFloat(pcm);
    const { ctx } = this.output();
    const ahead = s.queued / s.rate + (s.playing ? Math.max(0, s.nextTime - ctx.currentTime) : 0);
    if ((ahead + samples.length / s.rate) * 1000 > CAPACITY_MS) {
      this.stats.overflowMs += (samples.length * 1000) / s.rate;
      return;
    }
    s.queue.push(samples);
    s.queued += samples.length;
    this.pump();
  }

  end(id: number): void {
    const s = this.stream;
    if (!s || s.id !== id) return;
    s.ended = true;
    this.pump();
  }

  abort(id: number): boolean {
    if (!this.stream || this.stream.id !== id) return false;
    this.stop();
    return true;
  }

  stop(): boolean {
    const was = this.stream !== undefined;
    this.silence();
    if (was) this.onChange();
    return was;
  }

  private silence(): void {
    const s = this.stream;
    this.stream = undefined;
    for (const src of s?.sources ?? []) {
      src.onended = null;
      try {
        src.stop();
      } catch {
        // never started
      }
    }
  }

  private pump(): void {
    const s = this.stream;
    if (!s) return;
    const { ctx, gain } = this.output();
    if (s.playing && s.nextTime < ctx.currentTime && !s.ended) {
      // Ran dry mid-stream: buffer up again before going on.
      s.playing = false;
      this.stats.underruns++;
    }
    if (!s.playing) {
      const ready = s.queued >= (s.rate * PREBUFFER_MS) / 1000 || (s.ended && s.queued > 0);
      if (!ready) {
        if (s.ended && s.sources.size === 0) this.finish(s);
        return;
      }
      s.playing = true;
      s.nextTime = ctx.currentTime + 0.03;
      this.onChange();
    }
    for (const chunk of s.queue) {
      const buffer = ctx.createBuffer(1, chunk.length, s.rate);
      buffer.copyToChannel(chunk, 0);
      const src = ctx.createBufferSource();
      src.buffer = buffer;
      src.connect(gain);
      src.onended = () => {
        s.sources.delete(src);
        if (s.ended && s.queued === 0 && s.sources.size === 0) this.finish(s);
      };
      src.start(s.nextTime);
      s.sources.add(src);
      s.nextTime += buffer.duration;
      this.stats.scheduledMs += buffer.duration * 1000;
    }
    s.queue = [];
    s.queued = 0;
    if (s.ended && s.sources.size === 0) this.finish(s);
  }

  private finish(s: Playing): void {
    if (this.stream !== s) return;
    this.stream = undefined;
    this.onChange();
  }
}
