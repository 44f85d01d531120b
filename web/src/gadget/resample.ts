// The microphone's samples from the browser's rate (44.1 or 48 kHz) down to the board's
// 16 kHz, block by block, as audio.ts hands them over.

/**
 * Converts a stream of blocks at one rate to another: each output sample is the mean of
 * the input over its own interval (a box filter, enough against aliasing for speech
 * going down from 44.1 or 48 kHz), or an interpolation when going up. Keeps its state
 * between blocks, so block boundaries do not click.
 */
export class Resampler {
  private readonly step: number;
  /** Input position (in input samples, relative to the next block) of the next output. */
  private pos = 0;
  private carry: number[] = [];

  constructor(
    readonly from: number,
    readonly to: number,
  ) {
    this.step = from / to;
  }

  push(block: ArrayLike<number>): Float32Array {
    const input = this.carry.length ? [...this.carry, ...Array.from(block)] : Array.from(block);
    const out: number[] = [];
    const step = this.step;
    for (;;) {
      const start = this.pos;
      const end = start + step;
      if (Math.ceil(end) + 1 > input.length) break;
      if (step <= 1) {
        const i = Math.floor(start);
        const f = start - i;
        out.push((input[i] ?? 0) * (1 - f) + (input[i + 1] ?? 0) * f);
      } else {
        let sum = 0;
        let weight = 0;
        for (let i = Math.floor(start); i < Math.ceil(end); i++) {
          const w = Math.min(end, i + 1) - Math.max(start, i);
          sum += (input[i] ?? 0) * w;
          weight += w;
        }
        out.push(weight > 0 ? sum / weight : 0);
      }
      this.pos = end;
    }
    const keep = Math.floor(this.pos);
    this.carry = input.slice(keep);
    this.pos -= keep;
    return Float32Array.from(out);
  }
}
