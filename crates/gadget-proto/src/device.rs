//! Messages the device sends to the server.
//!
//! `AudioStart` and `AudioEnd` exist in both directions with different fields, so they are
//! reached as `device::AudioStart` and `server::AudioStart` rather than from the crate root.

use alloc::string::String;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::codes::OtaErrorCode;
use crate::common::{Ping, Pong};
use crate::envelope::is_none_or_null;
use crate::hello::Hello;

message_enum! {
    /// A text frame from device to server.
    // `Hello` dwarfs the other variants, but it is sent once per connection and values
    // are short-lived; boxing it would make every match and constructor clumsier.
    #[allow(clippy::large_enum_variant)]
    pub enum DeviceMessage via DeviceWire {
        /// Identity, capabilities and actions; the first frame.
        Hello(Hello) = "hello",
        /// The enrollment key or the challenge MAC.
        Auth(Auth) = "auth",
        /// A typed message for the agent.
        Text(Text) = "text",
        /// An utterance begins; channel-1 frames follow.
        AudioStart(AudioStart) = "audio.start",
        /// The utterance is complete.
        AudioEnd(AudioEnd) = "audio.end",
        /// Discard the utterance.
        AudioCancel(AudioCancel) = "audio.cancel",
        /// Stop the current turn.
        Cancel(Cancel) = "cancel",
        /// Start a fresh conversation.
        SessionNew(SessionNew) = "session.new",
        /// The answer to a `prompt`.
        PromptReply(PromptReply) = "prompt.reply",
        /// The outcome of an `action`.
        ActionResult(ActionResult) = "action.result",
        /// Latest sensor readings.
        State(State) = "state",
        /// Something happened on the device.
        Event(Event) = "event",
        /// Liveness check.
        Ping(Ping) = "ping",
        /// Answer to the server's `ping`.
        Pong(Pong) = "pong",
        /// Accepts an `ota.offer` with a fresh nonce.
        OtaReady(OtaReady) = "ota.ready",
        /// Firmware bytes written so far.
        OtaAck(OtaAck) = "ota.ack",
        /// The new firmware is installed.
        OtaDone(OtaDone) = "ota.done",
        /// The update was abandoned.
        OtaError(OtaError) = "ota.error",
    }
}

/// `auth`: `key` on first contact (challenge `enrolled: false`), `mac` afterwards.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Auth {
    /// Standard base64 of the 32-byte device key; sent exactly once, at enrollment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Standard base64 of the HMAC over the challenge nonce (see [`crate::auth::auth_mac`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The key is the device's lasting secret: a logged `auth` shows only whether it came.
impl core::fmt::Debug for Auth {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Auth")
            .field("key", &self.key.as_ref().map(|_| "<secret>"))
            .field("mac", &self.mac)
            .finish()
    }
}

/// `text`: a typed message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    /// Device-chosen id, echoed in logs and replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The message.
    pub text: String,
}

/// `audio.start` (device): an utterance begins on `stream`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioStart {
    /// Device-chosen id of the utterance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Stream id of the channel-1 frames that follow.
    pub stream: u8,
    /// Sample rate; the server accepts 4000 to 48000.
    pub rate: u32,
    /// Sample format; the server accepts only `pcm16`.
    pub format: String,
    /// `hold` (push-to-talk) or `tap` (voice activity ended it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// `audio.end` (device): the utterance is complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioEnd {
    /// Id of the utterance, as in `audio.start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Stream id of the utterance.
    pub stream: u8,
    /// Length the device recorded, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// `audio.cancel`: discard the utterance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioCancel {
    /// Id of the utterance, as in `audio.start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Stream id of the utterance.
    pub stream: u8,
    /// Why, for logs, e.g. "too short".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `cancel`: stop the current turn (the agent's `/stop`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Cancel {}

/// `session.new`: start a fresh conversation (the agent's `/new`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionNew {}

/// The two answers to a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Approve.
    Yes,
    /// Decline.
    No,
}

impl Answer {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Yes => "yes",
            Self::No => "no",
        }
    }
}

/// `prompt.reply`: the answer to a `prompt`, sent at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptReply {
    /// The prompt's id.
    pub id: String,
    /// `yes` or `no`.
    pub answer: Answer,
}

/// `action.result`: the outcome of an `action`, sent exactly once per action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionResult {
    /// The action's id.
    pub id: String,
    /// Whether the action succeeded.
    pub ok: bool,
    /// What it produced, when `ok`.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub result: Option<Value>,
    /// What went wrong, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `state`: latest sensor readings, merged into those of `hello`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct State {
    /// Readings by name.
    #[serde(default)]
    pub sensors: Map<String, Value>,
}

/// `event`: something happened on the device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Event name, e.g. `button.long_press`.
    pub name: String,
    /// Details.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub data: Option<Value>,
    /// Whether the agent receives the event as a message.
    #[serde(default)]
    pub notify: bool,
}

/// `ota.ready`: the device accepts an offer and supplies the nonce the MAC must cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaReady {
    /// Standard base64 of 16 fresh random bytes.
    pub nonce: String,
}

/// `ota.ack`: firmware bytes written so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaAck {
    /// Bytes written.
    pub offset: u64,
}

/// `ota.done`: installed; the device restarts about a second later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaDone {
    /// Version of the installed image.
    pub version: String,
}

/// `ota.error`: the device abandoned the update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaError {
    /// Why.
    pub code: OtaErrorCode,
    /// Details for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::DecodeError;
    use alloc::string::ToString;

    #[test]
    fn debug_hides_the_key() {
        let auth = Auth {
            key: Some("a2V5LWtleS1rZXkta2V5".to_string()),
            mac: None,
        };
        let shown = alloc::format!("{auth:?}");
        assert!(!shown.contains("a2V5"), "{shown}");
        assert!(shown.contains("<secret>"));
    }

    #[test]
    fn unit_messages_carry_only_their_type() {
        assert_eq!(
            DeviceMessage::Cancel(Cancel {}).encode(),
            r#"{"type":"cancel"}"#
        );
        assert_eq!(
            DeviceMessage::decode(r#"{"type":"session.new","extra":1}"#),
            Ok(DeviceMessage::SessionNew(SessionNew {}))
        );
    }

    #[test]
    fn invalid_fields_name_the_type() {
        let err = DeviceMessage::decode(r#"{"type":"ota.ack","offset":"x"}"#).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::InvalidFields {
                type_name: "ota.ack",
                ..
            }
        ));
        let err = DeviceMessage::decode(r#"{"type":"prompt.reply","id":"q1","answer":"maybe"}"#)
            .unwrap_err();
        assert!(matches!(
            err,
            DecodeError::InvalidFields {
                type_name: "prompt.reply",
                ..
            }
        ));
        let err = DeviceMessage::decode(
            r#"{"type":"audio.start","stream":256,"rate":16000,"format":"pcm16"}"#,
        )
        .unwrap_err();
        assert!(matches!(err, DecodeError::InvalidFields { .. }));
    }

    #[test]
    fn unknown_type_keeps_its_name() {
        let msg = DeviceMessage::decode(r#"{"type":"telemetry.v2","x":[1]}"#).unwrap();
        assert_eq!(msg.type_name(), "telemetry.v2");
        assert_eq!(msg.encode(), r#"{"type":"telemetry.v2"}"#);
    }

    #[test]
    fn null_payloads_are_omitted_and_read_as_absent() {
        let msg = DeviceMessage::ActionResult(ActionResult {
            id: "x1".to_string(),
            ok: true,
            result: Some(Value::Null),
            error: None,
        });
        assert_eq!(
            msg.encode(),
            r#"{"type":"action.result","id":"x1","ok":true}"#
        );
        let back = DeviceMessage::decode(
            r#"{"type":"action.result","id":"x1","ok":true,"result":null,"error":null}"#,
        )
        .unwrap();
        assert_eq!(
            back,
            DeviceMessage::ActionResult(ActionResult {
                id: "x1".to_string(),
                ok: true,
                result: None,
                error: None,
            })
        );
    }

    #[test]
    fn event_notify_defaults_to_false() {
        let msg = DeviceMessage::decode(r#"{"type":"event","name":"boot"}"#).unwrap();
        assert_eq!(
            msg,
            DeviceMessage::Event(Event {
                name: "boot".to_string(),
                data: None,
                notify: false
            })
        );
    }

    #[test]
    fn unknown_ota_error_code_still_decodes() {
        let msg = DeviceMessage::decode(r#"{"type":"ota.error","code":"brownout"}"#).unwrap();
        assert_eq!(
            msg,
            DeviceMessage::OtaError(OtaError {
                code: OtaErrorCode::Other("brownout".to_string()),
                message: None
            })
        );
    }

    #[test]
    fn serialize_matches_encode() {
        let msg = DeviceMessage::decode(r#"{"type":"pong","ts":5}"#).unwrap();
        assert_eq!(msg, DeviceMessage::Pong(Pong { ts: Some(5) }));
        assert_eq!(serde_json::to_string(&msg).unwrap(), msg.encode());
        assert!(DeviceMessage::decode("[]").is_err());
    }

    #[test]
    fn types_table_is_complete() {
        assert_eq!(DeviceMessage::TYPES.len(), 18);
        for t in DeviceMessage::TYPES {
            let decoded = DeviceMessage::decode(&alloc::format!("{{\"type\":\"{t}\"}}"));
            // Either it decodes as the known type or fails naming it; never Unknown.
            match decoded {
                Ok(m) => assert_eq!(m.type_name(), *t),
                Err(DecodeError::InvalidFields { type_name, .. }) => assert_eq!(type_name, *t),
                Err(e) => panic!("{t}: {e}"),
            }
        }
    }
}
