//! Media preparation for Herald's small devices.
//!
//! Gadgets are ESP32 boards with a few hundred kilobytes of RAM, a tiny screen and sometimes
//! an ASCII-only font. They render what they are sent as-is, so the server does all shaping
//! here, once, before anything goes on the wire. Every function in this crate is pure (data
//! in, data out, no I/O), which keeps it usable from any task and testable without a device.
//!
//! - [`text`]: agent Markdown to plain text folded to the device's charset.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod text;
