var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

// src/gadget/mic-worklet.ts
var BLOCK = 1024;
var MicTap = class extends AudioWorkletProcessor {
  constructor() {
    super(...arguments);
    __publicField(this, "block", new Float32Array(BLOCK));
    __publicField(this, "filled", 0);
  }
  process(inputs) {
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
    return true;
  }
};
registerProcessor("herald-mic", MicTap);
