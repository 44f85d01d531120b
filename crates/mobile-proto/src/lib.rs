#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
//! Wire types and codecs for the Herald mobile protocol v1, with no I/O.
//!
//! A phone app speaks JSON text frames over a WebSocket, each an object tagged by its `t`
//! field: [`ClientFrame`] upwards, [`ServerFrame`] downwards. This crate turns text into
//! typed frames and back, and holds the small pieces of protocol logic every side must
//! agree on: limits, card option sets and the safe choice, token user ids, session keys.
//! It knows nothing of sockets, clocks or Hermes, so the server, tests and any Rust client
//! share it as is; `vectors/mobile-v1.json` pins the same behaviour for the TypeScript SDK
//! and the Python plugin.
//!
//! The two directions are deliberately asymmetric. The server decodes strictly and reports
//! every problem as a [`DecodeError`] that maps onto one [`ErrorCode`]; an unknown `t` is
//! kept apart ([`DecodeError::UnknownFrame`]) because it earns `unsupported_frame` and the
//! connection stays open. A client decodes tolerantly: an unknown `t` is
//! [`ServerFrame::Unknown`], to be ignored, because the protocol grows by new frame types.
//!
//! Both directions write optional fields by omitting them, never as `null`, and skip fields
//! they do not know.

mod client;
mod data;
mod decode;
mod error;
mod identity;
pub mod limits;
mod prompt;
mod server;

use std::fmt;

pub use client::{
    Audio, ClientFrame, Deliver, DeliverMedia, DeviceInfo, Hello, MediaKind, MediaUp, PromptAnswer,
    PushKeys, PushSubscription, Text, Visibility,
};
pub use data::{base64_decoded_len, decode_base64, encode_base64, media_pieces, Base64Error};
pub use error::{DecodeError, ErrorCode};
pub use identity::{session_key, user_id_for_token, TokenError, TokenSet};
pub use prompt::{OptionStyle, PromptCard, PromptKind, PromptOption, Resolution, CLARIFY_OTHER};
pub use server::{
    AvatarState, Capabilities, Chunk, MediaDown, MediaKindDown, Message, PushCapability,
    ServerFrame,
};

/// For `skip_serializing_if`: flags that are off are left out of the frame.
fn is_false(b: &bool) -> bool {
    !*b
}

/// Shows a base64 payload as its length in `Debug` output, so logging a frame does not
/// dump megabytes.
struct Elided(usize);

impl fmt::Debug for Elided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} base64 chars>", self.0)
    }
}
