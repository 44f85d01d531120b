//! The bridge's line protocol as types: every line is decoded into one of these before
//! any logic sees it, and every line written is built from them.
//!
//! A line is one JSON object: `{"type":"request","id":N,"op":…,"args":{…}}`,
//! `{"type":"response","id":N,"ok":…,"result"|"error":…}` or
//! `{"type":"event","op":…,"args":{…}}`, which nobody answers. Decoding is two steps,
//! so that a request whose `op` or `args` are wrong can still be answered
//! (`bad_request`) by its id.

use herald_port::{
    AccessError, ActionError, Chat, Choice, Command, DeliveryError, DeviceProfile, DeviceSummary,
    Inbound, InboundBody, MediaKind, Notification, Platform, Request, RequestError,
    SpeechStopReason,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of this line protocol, announced in `ready`.
pub const PROTOCOL: u32 = 1;

/// A line as first decoded: its kind and id, with the payload still untyped.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Line {
    Request {
        id: u64,
        op: String,
        #[serde(default)]
        args: Value,
    },
    Response {
        id: u64,
        ok: bool,
        #[serde(default)]
        result: Value,
        #[serde(default)]
        error: Option<WireError>,
    },
    Event {
        op: String,
        #[serde(default)]
        args: Value,
    },
}

/// Just enough of a line to answer a request that did not decode.
#[derive(Debug, Deserialize)]
pub(crate) struct RequestId {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<u64>,
}

/// An error as both sides report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireError {
    pub kind: ErrorKind,
    #[serde(default)]
    pub message: String,
}

/// The port's error variants in snake case, plus the bridge's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorKind {
    Offline,
    UnknownChat,
    Unsupported,
    UnknownMessage,
    Failed,
    UnknownAction,
    Timeout,
    Disconnected,
    Device,
    BadRequest,
    Unavailable,
    Denied,
    /// A kind from a newer peer.
    #[serde(other)]
    Other,
}

impl WireError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        WireError {
            kind,
            message: message.into(),
        }
    }
}

impl From<DeliveryError> for WireError {
    fn from(err: DeliveryError) -> Self {
        let kind = match &err {
            DeliveryError::Offline(_) => ErrorKind::Offline,
            DeliveryError::UnknownChat(_) => ErrorKind::UnknownChat,
            DeliveryError::Unsupported { .. } => ErrorKind::Unsupported,
            DeliveryError::UnknownMessage(_) => ErrorKind::UnknownMessage,
            DeliveryError::Failed(_) => ErrorKind::Failed,
        };
        WireError::new(kind, err.to_string())
    }
}

impl From<ActionError> for WireError {
    fn from(err: ActionError) -> Self {
        let kind = match &err {
            ActionError::UnknownAction(_) => ErrorKind::UnknownAction,
            ActionError::Timeout => ErrorKind::Timeout,
            ActionError::Disconnected => ErrorKind::Disconnected,
            ActionError::Device(_) => ErrorKind::Device,
            ActionError::Delivery(delivery) => return delivery.clone().into(),
        };
        WireError::new(kind, err.to_string())
    }
}

impl From<RequestError> for WireError {
    fn from(err: RequestError) -> Self {
        match err {
            RequestError::Delivery(err) => err.into(),
            RequestError::Action(err) => err.into(),
        }
    }
}

impl From<WireError> for AccessError {
    fn from(err: WireError) -> Self {
        AccessError(err.message)
    }
}

/// What Hermes asks: a port [`Request`] for one device (its `args` name the `chat`), or
/// one of the two that are not about one device.
#[derive(Debug)]
pub(crate) enum HermesRequest {
    Device {
        chat: Chat,
        request: Request,
    },
    SetAuthorized {
        platform: Platform,
        user_id: String,
        authorized: bool,
    },
    Devices {
        platform: Option<Platform>,
    },
}

/// The requests that are not about one device.
#[derive(Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
enum HostRequest {
    SetAuthorized {
        platform: Platform,
        user_id: String,
        authorized: bool,
    },
    Devices {
        #[serde(default)]
        platform: Option<Platform>,
    },
}

/// The `chat` every device request names.
#[derive(Deserialize)]
struct Addressed {
    chat: Chat,
}

impl HermesRequest {
    /// The typed request for `op` and `args`, or why it is not one.
    pub fn decode(op: String, args: Value) -> Result<HermesRequest, WireError> {
        let bad =
            |err: serde_json::Error| WireError::new(ErrorKind::BadRequest, format!("{op}: {err}"));
        let tagged = serde_json::json!({ "op": op, "args": args });
        if matches!(op.as_str(), "set_authorized" | "devices") {
            return Ok(match serde_json::from_value(tagged).map_err(bad)? {
                HostRequest::SetAuthorized {
                    platform,
                    user_id,
                    authorized,
                } => HermesRequest::SetAuthorized {
                    platform,
                    user_id,
                    authorized,
                },
                HostRequest::Devices { platform } => HermesRequest::Devices { platform },
            });
        }
        let request: Request = serde_json::from_value(tagged).map_err(bad)?;
        let Addressed { chat } = serde_json::from_value(args).map_err(bad)?;
        Ok(HermesRequest::Device { chat, request })
    }
}

/// News from Hermes for one device (`turn_started`, `turn_ended`, `typing`, `status`).
pub(crate) fn decode_notification(
    op: String,
    args: Value,
) -> Result<(Chat, Notification), serde_json::Error> {
    let tagged = serde_json::json!({ "op": op, "args": args });
    let notification = serde_json::from_value(tagged)?;
    let Addressed { chat } = serde_json::from_value(args)?;
    Ok((chat, notification))
}

/// What herald asks Hermes.
#[derive(Debug, Serialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub(crate) enum Question<'a> {
    IsAuthorized {
        platform: Platform,
        user_id: &'a str,
    },
    PairingCode {
        platform: Platform,
        user_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        user_name: Option<&'a str>,
    },
    /// The users approved in Hermes's pairing store, for the console.
    Pairings { platform: Platform },
    /// Approve a code herald showed, as `hermes pairing approve` does.
    ApprovePairing { platform: Platform, code: &'a str },
    /// Drop a user's waiting code and approval, as `hermes pairing revoke` does.
    RevokePairing {
        platform: Platform,
        user_id: &'a str,
    },
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct Authorized {
    pub authorized: bool,
}

/// The answer to `pairings`.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct HermesPairings {
    pub approved: Vec<HermesUser>,
}

/// A user in Hermes's pairing store; `approved_at` is in seconds, as Hermes keeps it.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct HermesUser {
    pub user_id: String,
    #[serde(default)]
    pub user_name: Option<String>,
    #[serde(default)]
    pub approved_at: Option<f64>,
}

/// The answer to `approve_pairing`: who was approved, or `null` for a code Hermes does
/// not hold.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct ApprovedPairing {
    pub approved: Option<HermesUser>,
}

/// The answer to `revoke_pairing`.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct RevokedPairing {
    pub revoked: bool,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct IssuedCode {
    pub code: String,
    pub command: String,
    pub ttl_s: u64,
}

/// Lines herald writes.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum OutLine<'a> {
    Request {
        id: u64,
        #[serde(flatten)]
        question: Question<'a>,
    },
    Response {
        id: u64,
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<WireError>,
    },
    Event {
        #[serde(flatten)]
        event: Event<'a>,
    },
}

impl OutLine<'_> {
    pub fn answer(id: u64, outcome: Result<Value, WireError>) -> OutLine<'static> {
        match outcome {
            Ok(result) => OutLine::Response {
                id,
                ok: true,
                result: Some(result),
                error: None,
            },
            Err(error) => OutLine::Response {
                id,
                ok: false,
                result: None,
                error: Some(error),
            },
        }
    }

    /// The line as written, without its newline.
    pub fn encode(&self) -> String {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub(crate) enum Event<'a> {
    Ready(Ready),
    Inbound(WireInbound<'a>),
}

/// The first line herald writes: who it is and where devices connect.
#[derive(Debug, Clone, Serialize)]
pub struct Ready {
    pub protocol: u32,
    pub version: String,
    pub gadget_url: String,
    pub mobile_url: String,
    pub admin_url: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireInbound<'a> {
    source: WireSource<'a>,
    message_id: &'a str,
    body: WireBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<&'a DeviceProfile>,
}

#[derive(Debug, Serialize)]
struct WireSource<'a> {
    chat: &'a Chat,
    user_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_name: Option<&'a str>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum WireBody<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reply_to: Option<&'a str>,
    },
    Voice {
        path: &'a std::path::Path,
        duration_ms: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        transcript: Option<&'a str>,
    },
    Media {
        path: &'a std::path::Path,
        media_kind: MediaKind,
        #[serde(skip_serializing_if = "Option::is_none")]
        mime: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        caption: Option<&'a str>,
    },
    Command {
        command: &'static str,
    },
    /// `choice` in Hermes's words; `index` with `option`, `text` with `other`.
    PromptAnswer {
        prompt_id: &'a str,
        choice: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        index: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        indices: Option<&'a [usize]>,
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<&'a str>,
    },
    /// Herald stopped a speech stream (the user spoke over it, cancelled, or started anew).
    SpeechStopped {
        speech_id: &'a str,
        reason: SpeechStopReason,
    },
    /// Herald gave a turn up: the agent was silent on it for the turn timeout.
    TurnTimedOut {
        turn_id: &'a str,
    },
}

impl<'a> From<&'a Inbound> for WireInbound<'a> {
    fn from(inbound: &'a Inbound) -> Self {
        let body = match &inbound.body {
            InboundBody::Text { text, reply_to } => WireBody::Text {
                text,
                reply_to: reply_to.as_deref(),
            },
            InboundBody::Voice {
                path,
                duration_ms,
                transcript,
            } => WireBody::Voice {
                path,
                duration_ms: *duration_ms,
                transcript: transcript.as_deref(),
            },
            InboundBody::Media {
                path,
                kind,
                mime,
                caption,
            } => WireBody::Media {
                path,
                media_kind: *kind,
                mime: mime.as_deref(),
                caption: caption.as_deref(),
            },
            InboundBody::Command(command) => WireBody::Command {
                command: match command {
                    Command::Stop => "stop",
                    Command::New => "new",
                },
            },
            InboundBody::PromptAnswer(answer) => {
                let (mut index, mut indices, mut text) = (None, None, None);
                let choice = match &answer.choice {
                    Choice::Once => "once",
                    Choice::Session => "session",
                    Choice::Always => "always",
                    Choice::Deny => "deny",
                    Choice::Cancel => "cancel",
                    Choice::Option(chosen) => {
                        index = Some(*chosen);
                        "option"
                    }
                    Choice::Options(chosen) => {
                        indices = Some(chosen.as_slice());
                        "options"
                    }
                    Choice::Other(typed) => {
                        text = Some(typed.as_str());
                        "other"
                    }
                };
                WireBody::PromptAnswer {
                    prompt_id: &answer.prompt_id,
                    choice,
                    index,
                    indices,
                    text,
                }
            }
            InboundBody::SpeechStopped { speech_id, reason } => WireBody::SpeechStopped {
                speech_id: speech_id.as_str(),
                reason: *reason,
            },
            InboundBody::TurnTimedOut { turn_id } => WireBody::TurnTimedOut {
                turn_id: turn_id.as_str(),
            },
        };
        WireInbound {
            source: WireSource {
                chat: &inbound.source.chat,
                user_id: &inbound.source.user_id,
                user_name: inbound.source.user_name.as_deref(),
            },
            message_id: &inbound.message_id,
            body,
            profile: inbound.profile.as_deref(),
        }
    }
}

/// One entry of the `devices` answer: a connected gadget's profile (paired, screen,
/// charset, speaker, actions) is spread into it.
#[derive(Debug, Serialize)]
pub(crate) struct WireDevice {
    pub platform: Platform,
    pub id: String,
    pub name: Option<String>,
    pub online: bool,
    #[serde(flatten)]
    pub profile: Option<DeviceProfile>,
}

impl From<DeviceSummary> for WireDevice {
    fn from(device: DeviceSummary) -> Self {
        WireDevice {
            platform: device.chat.platform,
            id: device.chat.id,
            name: device.name,
            online: device.online,
            profile: device.profile,
        }
    }
}

#[cfg(test)]
mod tests;
