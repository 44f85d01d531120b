//! What goes into the core ([`Event`]) and what comes out ([`Action`]).
//!
//! Events borrow the host's buffers, so a frame or a block of mic samples is never copied
//! just to be looked at. Actions own their data because the host performs them later,
//! after [`crate::Device::poll_action`] hands them over.

use alloc::string::String;
use alloc::vec::Vec;

use herald_gadget_proto::DeviceMessage;
use serde_json::Value;

use crate::config::Button;

/// Something that happened to the device. Time passing is [`crate::Device::handle_timeout`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// The WebSocket asked for by [`Action::Connect`] is open.
    Connected,
    /// The connection attempt failed or the open connection ended, without the core
    /// asking for it. `reason` is the close reason, empty when there was none.
    Closed {
        /// WebSocket close code, when a close frame arrived.
        code: Option<u16>,
        /// Close reason; the server puts its error code here.
        reason: &'a str,
    },
    /// A text frame arrived.
    Text(&'a str),
    /// A binary frame arrived.
    Binary(&'a [u8]),
    /// A button went down.
    ButtonDown(Button),
    /// A button came up.
    ButtonUp(Button),
    /// Microphone samples (PCM16 mono at the configured rate), while recording.
    MicSamples(&'a [i16]),
    /// The firmware hit a fatal error: on probation this means going back to the previous
    /// image.
    Crashed,
}

/// Something the host must do, in order.
// `Send` is the large variant (a `hello` is big); actions live only until the host polls
// them, and boxing would make every match on them clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Open the WebSocket to the server (offering subprotocol `hermes-gadget.v1`), then
    /// report [`Event::Connected`] or [`Event::Closed`].
    Connect,
    /// Close the connection. The core already counts it as gone: report nothing more for
    /// it.
    Close {
        /// WebSocket close code.
        code: u16,
        /// Close reason.
        reason: &'static str,
    },
    /// Send this message as a text frame (`DeviceMessage::encode`).
    Send(DeviceMessage),
    /// Send these bytes as a binary frame.
    SendBinary(Vec<u8>),
    /// What [`crate::Device::view`] shows has changed: draw it again.
    Redraw,
    /// Start delivering [`Event::MicSamples`].
    StartMic,
    /// Stop delivering mic samples.
    StopMic,
    /// Queue these samples (PCM16 mono at `rate`) on the speaker, after those queued before.
    Play {
        /// Sample rate.
        rate: u32,
        /// Samples, already paced by the core's jitter buffer.
        samples: Vec<i16>,
    },
    /// Drop whatever the speaker still has queued.
    StopPlayback,
    /// Set the speaker volume, in percent.
    SetVolume(u8),
    /// Set the screen brightness, in percent.
    SetBrightness(u8),
    /// Persist this device key; pass it back at every boot.
    StoreKey([u8; 32]),
    /// Run an action the application registered; answer with
    /// [`crate::Device::complete_action`].
    Invoke {
        /// Action id, to pass back with the result.
        id: String,
        /// Action name.
        name: String,
        /// Arguments from the server.
        args: Value,
    },
    /// The firmware on probation reached a server: keep it.
    ConfirmFirmware,
    /// The firmware on probation failed: boot the previous image.
    Rollback,
    /// Restart the device (into a freshly installed image, after `ota.done`).
    Restart,
}
