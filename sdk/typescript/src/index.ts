// @herald/mobile: a client for Herald's mobile protocol v1.
export * from "./protocol.js";
export * from "./client.js";
export { backoffDelay, nextAttempt, DEFAULT_BACKOFF, type BackoffPolicy } from "./backoff.js";
export { encodeBase64, decodeBase64, base64DecodedLength, encodeBase64Url, decodeBase64Url } from "./base64.js";
export { applyMessage, applyMedia, completed, type Reply, type Download, type MediaInfo, type ReceivedMedia } from "./assembly.js";
export * as outbox from "./outbox.js";
export { encodeWav, inspectWav, isVoiceWav, toVoiceSamples, VOICE_RATE, type WavInfo } from "./wav.js";
