//! Wire types and codecs for the Hermes gadget protocol, version 1.
//!
//! This crate is sans-IO: it turns text frames into typed messages and back, builds and
//! parses the 4-byte binary frame header, and computes the handshake and firmware-update
//! MACs. It never touches a socket or a clock, so the server, the device firmware core and
//! the simulator can all share it, and every parser can be tested and fuzzed in isolation.
//!
//! The crate is `no_std` with `alloc` because the ESP32 firmware core links it.
//!
//! Layout:
//! - [`DeviceMessage`] and [`ServerMessage`]: one enum per direction, one variant per
//!   message type, each carrying a struct named after the message.
//! - [`DecodeError`], [`HelloError`]: every way an inbound text frame can be wrong; all map
//!   to the protocol error code `protocol`.
//! - [`FrameHeader`], [`encode_frame`], [`decode_frame`]: binary media frames.
//! - [`auth`]: device ids, key decoding and the two HMACs.
//! - [`ota_image`]: the checks the server runs on a firmware image before offering it.
//! - [`limits`]: the numbers the spec fixes.
//!
//! ```
//! use herald_gadget_proto::{DeviceMessage, ServerMessage, Welcome, PROTO_VERSION};
//!
//! let msg = DeviceMessage::decode(r#"{"type":"text","text":"hi","future":1}"#)?;
//! assert_eq!(msg.type_name(), "text");
//!
//! let welcome = ServerMessage::Welcome(Welcome {
//!     session: "3f2a9c1b7d4e".into(),
//!     paired: false,
//!     heartbeat_s: 20,
//!     server: "hermes".into(),
//!     proto: PROTO_VERSION,
//! });
//! assert_eq!(
//!     welcome.encode(),
//!     r#"{"type":"welcome","session":"3f2a9c1b7d4e","paired":false,"heartbeat_s":20,"server":"hermes","proto":1}"#
//! );
//! # Ok::<(), herald_gadget_proto::DecodeError>(())
//! ```
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![warn(missing_docs)]

extern crate alloc;

#[macro_use]
mod envelope;

pub mod auth;
pub mod codes;
pub mod common;
pub mod device;
pub mod frame;
pub mod hello;
pub mod limits;
pub mod ota_image;
pub mod server;

pub use codes::{ErrorCode, OtaErrorCode, OtaRefusal, Outcome};
pub use common::{Ping, Pong, Unknown};
pub use device::{
    ActionResult, Answer, AudioCancel, Auth, Cancel, DeviceMessage, Event, OtaAck, OtaDone,
    OtaError, OtaReady, PromptReply, SessionNew, State, Text,
};
pub use envelope::DecodeError;
pub use frame::{decode_frame, encode_frame, Channel, FrameError, FrameHeader, HEADER_LEN};
pub use hello::{
    is_valid_device_id, ActionSpec, AudioCaps, Caps, DisplayCaps, Hello, HelloError, ImageBox,
    OtaCaps,
};
pub use server::{
    Action, AudioAbort, Challenge, Display, Error, ImageEnd, ImageStart, Notice, OtaAbort,
    OtaBegin, OtaEnd, OtaOffer, Paired, Pairing, Prompt, PromptClose, Reply, ReplyDelta,
    ServerMessage, Status, Transcript, TurnEnd, TurnStart, Unpaired, Welcome,
};

/// The protocol version this crate speaks; `hello.proto` and `welcome.proto` carry it.
pub const PROTO_VERSION: u32 = 1;

/// The WebSocket subprotocol devices offer and the server echoes.
pub const SUBPROTOCOL: &str = "hermes-gadget.v1";
