//! Messages the server sends to the device.
//!
//! `AudioStart` and `AudioEnd` exist in both directions with different fields, so they are
//! reached as `server::AudioStart` and `device::AudioStart` rather than from the crate root.

use alloc::string::String;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codes::{ErrorCode, Outcome};
use crate::common::{Ping, Pong};
use crate::envelope::is_false;

message_enum! {
    /// A text frame from server to device.
    pub enum ServerMessage via ServerWire {
        /// A nonce to authenticate with, and whether the device is enrolled.
        Challenge(Challenge) = "challenge",
        /// The handshake succeeded.
        Welcome(Welcome) = "welcome",
        /// Show a pairing code for the owner to approve.
        Pairing(Pairing) = "pairing",
        /// The owner approved the device.
        Paired(Paired) = "paired",
        /// Approval was revoked.
        Unpaired(Unpaired) = "unpaired",
        /// The agent started on a message.
        TurnStart(TurnStart) = "turn.start",
        /// What speech-to-text heard.
        Transcript(Transcript) = "transcript",
        /// Live working phrase.
        Status(Status) = "status",
        /// Streaming preview of a reply.
        ReplyDelta(ReplyDelta) = "reply.delta",
        /// A reply.
        Reply(Reply) = "reply",
        /// The turn is over.
        TurnEnd(TurnEnd) = "turn.end",
        /// A transient one-line message.
        Notice(Notice) = "notice",
        /// A yes/no question.
        Prompt(Prompt) = "prompt",
        /// A question was withdrawn.
        PromptClose(PromptClose) = "prompt.close",
        /// A protocol or auth error; the connection closes after it.
        Error(Error) = "error",
        /// A card.
        Display(Display) = "display",
        /// Image rows follow on channel 2.
        ImageStart(ImageStart) = "image.start",
        /// End of image data.
        ImageEnd(ImageEnd) = "image.end",
        /// Audio follows on channel 1.
        AudioStart(AudioStart) = "audio.start",
        /// The audio stream completed normally.
        AudioEnd(AudioEnd) = "audio.end",
        /// Stop playing the audio stream now.
        AudioAbort(AudioAbort) = "audio.abort",
        /// Run a device action.
        Action(Action) = "action",
        /// A firmware image is available.
        OtaOffer(OtaOffer) = "ota.offer",
        /// Authorizes the offered image.
        OtaBegin(OtaBegin) = "ota.begin",
        /// All firmware bytes were sent.
        OtaEnd(OtaEnd) = "ota.end",
        /// Abandon the update in progress.
        OtaAbort(OtaAbort) = "ota.abort",
        /// Heartbeat.
        Ping(Ping) = "ping",
        /// Answer to the device's `ping`.
        Pong(Pong) = "pong",
    }
}

/// `challenge`: the nonce the device's MAC must cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// Standard base64 of 16 random bytes; the MAC covers this string as sent.
    pub nonce: String,
    /// Whether the server already holds the device's key: `auth` then carries a MAC.
    pub enrolled: bool,
}

/// `welcome`: the device is authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// 12 lowercase hex characters naming this connection.
    pub session: String,
    /// Whether the agent accepts messages from this device; drives the device UI only.
    pub paired: bool,
    /// Seconds between server pings.
    pub heartbeat_s: u32,
    /// Server name.
    pub server: String,
    /// Protocol version.
    pub proto: u32,
}

/// `pairing`: show the code; the owner approves it on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pairing {
    /// 8 characters from [`crate::limits::PAIRING_CODE_ALPHABET`].
    pub code: String,
    /// The host command that approves it.
    pub command: String,
}

/// `paired`: approved; no reconnect needed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Paired {}

/// `unpaired`: approval revoked; pairing starts again.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Unpaired {}

/// `turn.start`: the agent started on a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn id, repeated by the messages of this turn.
    pub turn: String,
}

/// `transcript`: what speech-to-text heard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// The recognised text.
    pub text: String,
}

/// `status`: live working phrase; empty text clears it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The phrase.
    pub text: String,
}

/// `reply.delta`: streaming preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyDelta {
    /// Turn id.
    pub turn: String,
    /// The reply so far: cumulative, not an increment.
    pub text: String,
}

/// `reply`: a reply, already shaped for the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// Turn id, absent for messages outside a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// The text, rendered as-is.
    pub text: String,
    /// Progress commentary rather than the answer; sent only when true.
    #[serde(default, skip_serializing_if = "is_false")]
    pub interim: bool,
}

/// `turn.end`: the turn is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// Turn id.
    pub turn: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// `notice`: transient one-line message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// The message.
    pub text: String,
    /// Seconds to show it; the device's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
}

/// `prompt`: a yes/no question, answered with `prompt.reply`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// Prompt id, echoed in the reply.
    pub id: String,
    /// Short title.
    pub title: String,
    /// The question.
    pub text: String,
    /// Seconds until the question expires; no expiry when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
}

/// `prompt.close`: the question was withdrawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptClose {
    /// Prompt id.
    pub id: String,
}

/// `error`: a protocol or auth error; the server closes with code 1008 right after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    /// What went wrong; also the close reason.
    pub code: ErrorCode,
    /// Details for humans.
    pub message: String,
}

/// `display`: a card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Display {
    /// Card title.
    pub title: String,
    /// Card body.
    pub body: String,
    /// Seconds to show it; `0` keeps it until dismissed, absent means the device default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
}

/// `image.start`: RGB565 rows follow on channel 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageStart {
    /// Stream id of the channel-2 frames.
    pub stream: u8,
    /// Width in pixels, within `caps.display.image`.
    pub width: u32,
    /// Height in pixels, within `caps.display.image`.
    pub height: u32,
    /// Pixel format: `rgb565`.
    pub format: String,
    /// Seconds to show it; the device's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
}

/// `image.end`: end of image data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageEnd {
    /// Stream id.
    pub stream: u8,
}

/// `audio.start` (server): audio for the speaker follows on channel 1. It replaces any
/// stream that is playing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioStart {
    /// Stream id of the channel-1 frames.
    pub stream: u8,
    /// Sample rate, the device's declared speaker rate.
    pub rate: u32,
    /// Sample format: `pcm16`.
    pub format: String,
    /// Turn the audio belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
}

/// `audio.end` (server): the stream completed normally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioEnd {
    /// Stream id.
    pub stream: u8,
}

/// `audio.abort`: stop playing now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioAbort {
    /// Stream id.
    pub stream: u8,
}

/// `action`: run one of the device's `hello.actions`; answered by `action.result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// 12 hex characters, echoed in the result.
    pub id: String,
    /// Action name from the device's manifest.
    pub name: String,
    /// Arguments matching the action's `params` schema.
    pub args: Value,
}

/// `ota.offer`: a firmware image is available.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaOffer {
    /// Stream id of the channel-3 frames.
    pub stream: u8,
    /// Image size in bytes.
    pub size: u64,
    /// Lowercase hex SHA-256 of the whole image.
    pub sha256: String,
    /// Version of the image.
    pub version: String,
}

/// `ota.begin`: authorizes the image (see [`crate::auth::ota_mac`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaBegin {
    /// Standard base64 of the HMAC over nonce, SHA-256 and size.
    pub mac: String,
}

/// `ota.end`: all bytes sent; the device verifies and installs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OtaEnd {}

/// `ota.abort`: abandon the update in progress.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OtaAbort {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::DecodeError;
    use alloc::string::ToString;

    #[test]
    fn interim_is_sent_only_when_true() {
        let reply = Reply {
            turn: None,
            text: "hi".to_string(),
            interim: false,
        };
        assert_eq!(
            ServerMessage::Reply(reply.clone()).encode(),
            r#"{"type":"reply","text":"hi"}"#
        );
        let interim = Reply {
            interim: true,
            ..reply
        };
        assert_eq!(
            ServerMessage::Reply(interim).encode(),
            r#"{"type":"reply","text":"hi","interim":true}"#
        );
    }

    #[test]
    fn error_uses_wire_code() {
        let msg = ServerMessage::Error(Error {
            code: ErrorCode::AuthFailed,
            message: "bad mac".to_string(),
        });
        assert_eq!(
            msg.encode(),
            r#"{"type":"error","code":"auth_failed","message":"bad mac"}"#
        );
        let err =
            ServerMessage::decode(r#"{"type":"error","code":"nope","message":""}"#).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::InvalidFields {
                type_name: "error",
                ..
            }
        ));
    }

    #[test]
    fn bad_outcome_is_invalid() {
        let err =
            ServerMessage::decode(r#"{"type":"turn.end","turn":"t","outcome":"meh"}"#).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::InvalidFields {
                type_name: "turn.end",
                ..
            }
        ));
    }

    #[test]
    fn types_table_is_complete() {
        assert_eq!(ServerMessage::TYPES.len(), 28);
        for t in ServerMessage::TYPES {
            match ServerMessage::decode(&alloc::format!("{{\"type\":\"{t}\"}}")) {
                Ok(m) => assert_eq!(m.type_name(), *t),
                Err(DecodeError::InvalidFields { type_name, .. }) => assert_eq!(type_name, *t),
                Err(e) => panic!("{t}: {e}"),
            }
        }
    }
}
