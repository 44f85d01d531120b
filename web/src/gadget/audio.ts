// The gadget's microphone and speaker, on Web Audio.
//
// Microphone: getUserMedia, an AudioWorklet (mic-worklet.ts, served beside this script)
// that hands over blocks of samples at the context's rate from the audio thread, and a
// resampler down to 16 kHz PCM16. The stream stays open for a while after a release, so
// the next press does not lose its first syllable to the browser opening the device
// again.
//
// Speaker: the device core's jitter buffer already paces what it hands over (its `play`
// actions), so each block is scheduled on the audio clock right after the one before;
// a block that comes after the last has finished starts a little ahead of now.

import { Resampler } from "./resample.js";

/** How far ahead of the audio clock a block starts when nothing is playing. */
const LEAD_S = 0.03;
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

export interface SpeakerStats {
  /** Blocks handed to Web Audio. */
  blocks: number;
  /** Milliseconds of audio handed to Web Audio. */
  scheduledMs: number;
}

export class Speaker {
  private gain: GainNode | undefined;
  private volumeNow = 0.8;
  /** Where on the audio clock the next block starts. */
  private nextTime = 0;
  private readonly sources = new Set<AudioBufferSourceNode>();
  readonly stats: SpeakerStats = { blocks: 0, scheduledMs: 0 };

  constructor(private readonly onChange: () => void) {}

  /** "playing" while anything is scheduled, else "idle". */
  get state(): string {
    return this.sources.size > 0 ? "playing" : "idle";
  }

  /** 0..1. */
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

  /** Queue PCM16 `samples` at `rate` after what is queued. */
  play(rate: number, samples: Int16Array): void {
    if (samples.length === 0) return;
    const { ctx, gain } = this.output();
    const rateHz = Math.max(3000, Math.min(768_000, rate));
    const buffer = ctx.createBuffer(1, samples.length, rateHz);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i]! / 0x8000;
    if (this.nextTime < ctx.currentTime) this.nextTime = ctx.currentTime + LEAD_S;
    const src = ctx.createBufferSource();
    src.buffer = buffer;
    src.connect(gain);
    src.onended = () => {
      this.sources.delete(src);
      if (this.sources.size === 0) this.onChange();
    };
    src.start(this.nextTime);
    const starting = this.sources.size === 0;
    this.sources.add(src);
    this.nextTime += buffer.duration;
    this.stats.blocks++;
    this.stats.scheduledMs += buffer.duration * 1000;
    if (starting) this.onChange();
  }

  /** Drop whatever is queued. */
  stop(): void {
    const was = this.sources.size > 0;
    for (const src of this.sources) {
      src.onended = null;
      try {
        src.stop();
      } catch {
        // never started
      }
    }
    this.sources.clear();
    this.nextTime = 0;
    if (was) this.onChange();
  }
}
