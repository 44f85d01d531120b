//! The gadget device core: everything a Hermes gadget does, with no I/O in it.
//!
//! Firmware, the `herald sim` simulator and the tests drive the same [`Device`]: they feed
//! it [`Event`]s (connection opened or closed, a text or binary frame, a button, mic
//! samples) and the current time, and carry out the [`Action`]s it hands back (open or
//! close the WebSocket, send a frame, redraw, play samples, store the key, restart). The
//! core reads no clock: time is an [`Instant`] the host passes in, and
//! [`Device::next_deadline`] says when to call [`Device::handle_timeout`]. The two things
//! the core needs answered on the spot, random bytes and firmware writes, go through the
//! [`Host`] trait.
//!
//! ```
//! use herald_device::{Action, Boot, Device, DeviceConfig, Event, FlashError, Host, Instant};
//!
//! struct NoFlash(u8);
//! impl Host for NoFlash {
//!     fn fill_random(&mut self, buf: &mut [u8]) {
//!         // A real host uses its hardware RNG.
//!         buf.iter_mut().for_each(|b| { self.0 = self.0.wrapping_add(1); *b = self.0 });
//!     }
//!     fn ota_begin(&mut self, _: u64) -> Result<(), FlashError> { Err(FlashError::Io) }
//!     fn ota_write(&mut self, _: &[u8]) -> Result<(), FlashError> { Err(FlashError::Io) }
//!     fn ota_finish(&mut self) -> Result<(), FlashError> { Err(FlashError::Io) }
//!     fn ota_abort(&mut self) {}
//! }
//!
//! let t0 = Instant::from_millis(0);
//! let mut device = Device::new(DeviceConfig::reference("Kitchen"), Boot::default(), NoFlash(0), t0);
//! assert!(matches!(device.poll_action(), Some(Action::StoreKey(_))));
//! assert_eq!(device.screen().name(), "boot");
//!
//! device.handle_timeout(device.next_deadline().unwrap());
//! let actions: Vec<Action> = std::iter::from_fn(|| device.poll_action()).collect();
//! assert!(actions.contains(&Action::Connect));
//! device.handle(Event::Connected, Instant::from_millis(40));
//! assert!(matches!(device.poll_action(), Some(Action::Send(m)) if m.type_name() == "hello"));
//! assert_eq!(device.screen().name(), "connecting");
//! ```
//!
//! Layout: `device` is the state machine, split by concern (link, conversation, input,
//! screen); the pieces it is built from have a module each: `mic` (push-to-talk framing),
//! `playback` (the jitter buffer), `ota` (the update receiver), `text` (wrap and pages),
//! `identity` (key, id and MACs, computed by the protocol crate), `view` (screens and
//! the render model), `config` (the board profile), `io` (events and actions).
//!
//! The crate is `no_std` with `alloc` so the ESP32 firmware links it unchanged;
//! `cargo build -p herald-device` builds it without `std` (the workspace's other crates
//! turn on `std` features of shared dependencies only when built together with them).
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod config;
mod device;
mod host;
mod identity;
mod io;
mod mic;
mod ota;
mod playback;
mod text;
mod time;
mod view;

pub use config::{Button, DeviceConfig, DisplayProfile, ImageSize};
pub use device::{
    Boot, CommandError, Device, Stats, ACTION_ANSWER_SECS, BRIGHTNESS_ACTION, DEFAULT_LEVEL,
    STATE_INTERVAL_SECS, VOLUME_ACTION,
};
pub use host::{FlashError, Host};
pub use identity::Identity;
pub use io::{Action, Event};
pub use ota::OtaProgress;
pub use playback::{PlaybackStats, CAPACITY_MS, LEAD_MS, PREBUFFER_MS};
pub use time::Instant;
pub use view::{Image, Mode, Phase, Screen, View};
