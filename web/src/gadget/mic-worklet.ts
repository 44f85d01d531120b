// The microphone tap, run on the audio thread as an AudioWorklet module (served beside
// gadget.js, so the page's content policy allows it): it gathers the input's samples
// into blocks of BLOCK and posts each to the page, which resamples and sends them.

// The worklet scope's globals; TypeScript's DOM library does not describe them.
declare class AudioWorkletProcessor {
  readonly port: MessagePort;
}
declare function registerProcessor(name: string, processor: typeof AudioWorkletProcessor): void;

/** Samples per block posted: about 21 ms at 48 kHz, 8 render quanta. */
const BLOCK = 1024;

class MicTap extends AudioWorkletProcessor {
  private block = new Float32Array(BLOCK);
  private filled = 0;

  process(inputs: Float32Array[][]): boolean {
    const samples = inputs[0]?.[0];
    if (!samples) return true;
    let at = 0;
    while (at < samples.length) {
      const n = Math.min(samples.length - at, BLOCK - this.filled);
      this.block.set(samples.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled === BLOCK) {
        this.port.postMessage(this.block, [this.block.buffer]);
        this.block = new Float32Array(BLOCK);
        this.filled = 0;
      }
    }
    // Kept alive for as long as the page holds the node.
    return true;
  }
}

registerProcessor("herald-mic", MicTap);
