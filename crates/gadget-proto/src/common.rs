//! Messages both sides send with the same shape.

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// `ping`: either side checks the other is alive; the server sends one every
/// `heartbeat_s` with its clock in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ping {
    /// Sender's timestamp, echoed in the `pong`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
}

/// `pong`: the answer to a `ping`, echoing its `ts`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pong {
    /// The `ts` of the `ping` being answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
}

/// A message whose `type` this version does not know. Receivers ignore it: new message
/// types do not change the protocol version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The `type` as received.
    pub type_name: String,
}
