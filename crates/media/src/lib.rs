//! Media preparation for Herald's small devices.
//!
//! Gadgets are ESP32 boards with a few hundred kilobytes of RAM, a tiny screen, a small
//! speaker and sometimes an ASCII-only font. They play and show what they are sent as-is, so
//! the server does all the preparation here, once, before anything goes on the wire:
//!
//! - [`text`]: agent Markdown to plain text folded to the device's charset;
//! - [`wav`]: a received utterance as a WAV file, written from the receive buffer;
//! - [`audio`]: any audio file decoded, downmixed and resampled into PCM16 frames;
//! - [`pacing`]: when each of those frames may be sent (a clock with no clock inside);
//! - [`cue`]: Herald's own short tones for a gadget's speaker (heard, working, failed);
//! - [`image`]: any picture fitted into the device's box as RGB565.
//!
//! Nothing here knows the wire protocol or runs a task: data (or a file) in, data out, with
//! time passed in where it matters, so every piece is testable without a device or a runtime.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod audio;
pub mod cue;
pub mod image;
pub mod pacing;
pub mod text;
pub mod wav;
