//! The conversation port: the only seam between Herald's transports and its agent
//! backends.
//!
//! A transport (the gadget hub, the mobile adapter) turns frames into [`Inbound`] events
//! and hands them to an [`Agent`]. The agent answers through [`Outbound`], which the
//! transports implement: every operation is one variant of [`Request`], answered with a
//! [`Response`]. Neither side ever sees the other's internals: a transport does
//! not know which backend serves it, and a backend never sees a socket or a frame.
//!
//! The shape follows Hermes's platform adapter (`send`, `edit_message`, `send_typing`,
//! `on_processing_start`, `send_exec_approval`, ...) so that the Hermes bridge is a
//! direct mapping rather than a translation layer.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod outbound;
mod request;
mod speech;

pub use outbound::Outbound;
pub use request::{Notification, Request, RequestError, Response, TurnId};
pub use speech::{
    PcmChunk, PcmFormat, SpeechId, SpeechStopReason, MAX_SPEECH_CHUNK, MAX_SPEECH_ID,
    MAX_SPEECH_RATE, MIN_SPEECH_RATE,
};

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds of client Herald serves; each is a platform in Hermes's sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Gadget,
    Mobile,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Gadget => "gadget",
            Platform::Mobile => "mobile",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One conversation: a gadget (by device id) or a phone (by its `device.id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Chat {
    pub platform: Platform,
    pub id: String,
}

impl Chat {
    pub fn gadget(id: impl Into<String>) -> Self {
        Chat {
            platform: Platform::Gadget,
            id: id.into(),
        }
    }

    pub fn mobile(id: impl Into<String>) -> Self {
        Chat {
            platform: Platform::Mobile,
            id: id.into(),
        }
    }
}

impl fmt::Display for Chat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.platform, self.id)
    }
}

/// Who sent an inbound event, and in which conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub chat: Chat,
    /// The identity authorization is decided on: a gadget's device id, a phone user's id.
    pub user_id: String,
    pub user_name: Option<String>,
}

/// Something a device sent that the agent should see.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    pub source: Source,
    /// Stable per message, so a backend can drop duplicates and thread replies.
    pub message_id: String,
    pub body: InboundBody,
    /// A gadget's profile as it is when the message arrives, so the agent can describe
    /// the device without asking; `None` from phones.
    pub profile: Option<Box<DeviceProfile>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InboundBody {
    Text {
        text: String,
        reply_to: Option<String>,
    },
    /// A recorded utterance as a mono 16-bit WAV file; speech-to-text is the agent's job.
    Voice {
        path: PathBuf,
        duration_ms: u32,
        /// A transcript the client made itself, when it has one.
        transcript: Option<String>,
    },
    Media {
        path: PathBuf,
        kind: MediaKind,
        mime: Option<String>,
        caption: Option<String>,
    },
    Command(Command),
    PromptAnswer(PromptAnswer),
    /// Herald stopped the speech stream `speech_id` before its end; later writes for it
    /// are dropped.
    SpeechStopped {
        speech_id: SpeechId,
        reason: SpeechStopReason,
    },
    /// Herald gave turn `turn_id` up as failed: the agent was silent on it for the turn
    /// timeout, and the device has been told. What the agent sends for it later is still
    /// delivered.
    TurnTimedOut {
        turn_id: TurnId,
    },
}

/// Conversation commands a device can give without typing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Stop the current turn (Hermes's `/stop`).
    Stop,
    /// Start a fresh conversation (Hermes's `/new`).
    New,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaKind {
    Image,
    Video,
    Document,
    Audio,
}

/// A question the agent asks the user, rendered as a gadget prompt or a mobile card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Prompt {
    /// Hermes wants to run a command it considers dangerous.
    ExecApproval {
        command: String,
        #[serde(default)]
        description: String,
        /// Whether "always allow" may be offered; Hermes withholds it for some commands.
        #[serde(default = "offered")]
        allow_permanent: bool,
        /// Whether "allow for this session" may be offered ("always" needs it too).
        #[serde(default = "offered")]
        allow_session: bool,
    },
    /// A yes/no confirmation, such as a slash command's.
    Confirm {
        #[serde(default)]
        title: String,
        text: String,
    },
    /// The agent needs the user to pick (or type) an answer.
    Clarify {
        question: String,
        #[serde(default)]
        choices: Vec<String>,
        /// Any number of the choices may be picked.
        #[serde(default)]
        multi_select: bool,
    },
}

/// "Always" and "for this session" are offered unless the agent says otherwise.
fn offered() -> bool {
    true
}

/// The answer a user gave, already validated by the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptAnswer {
    pub prompt_id: String,
    pub choice: Choice,
}

/// Answers in Hermes's own vocabulary, so the bridge passes them on unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Exec approval: allow once / for this session / always, or deny.
    Once,
    Session,
    Always,
    Deny,
    /// Confirm or clarify withdrawn by the user.
    Cancel,
    /// Clarify: the index of the chosen option.
    Option(usize),
    /// Multi-select clarify: the indices of every chosen option, in order (none at all
    /// when the user turned each one down).
    Options(Vec<usize>),
    /// Clarify: the user's own words.
    Other(String),
}

impl Choice {
    /// The wire name Hermes's resolvers expect (`once`, `deny`, `c1`, ...).
    pub fn as_wire(&self) -> String {
        match self {
            Choice::Once => "once".into(),
            Choice::Session => "session".into(),
            Choice::Always => "always".into(),
            Choice::Deny => "deny".into(),
            Choice::Cancel => "cancel".into(),
            Choice::Option(i) => format!("c{i}"),
            Choice::Options(_) => "options".into(),
            Choice::Other(_) => "other".into(),
        }
    }

    /// Whether this answer lets the asked-about thing go ahead.
    pub fn is_affirmative(&self) -> bool {
        !matches!(self, Choice::Deny | Choice::Cancel)
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Success,
    Failure,
    Cancelled,
}

/// A card for a device's screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Card {
    pub title: String,
    #[serde(default)]
    pub body: String,
    /// Seconds to show it; `Some(0)` keeps it until dismissed, `None` the device default.
    #[serde(default)]
    pub ttl_s: Option<u32>,
}

/// Options for [`Outbound::send_text`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SendOptions {
    pub reply_to: Option<String>,
    /// More edits will follow (a streaming preview); the last comes with `finalize`.
    pub streaming: bool,
    /// Progress commentary rather than the answer.
    pub interim: bool,
}

/// Why something could not reach a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    #[error("{0} is not connected")]
    Offline(Chat),
    #[error("{0} is not known")]
    UnknownChat(Chat),
    #[error("{chat} cannot show this: {reason}")]
    Unsupported { chat: Chat, reason: String },
    #[error("unknown message {0}")]
    UnknownMessage(String),
    #[error("{0}")]
    Failed(String),
}

/// Why a device action gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    #[error("the device has no action named {0}")]
    UnknownAction(String),
    #[error("the device did not answer in time")]
    Timeout,
    #[error("the device disconnected")]
    Disconnected,
    #[error("{0}")]
    Device(String),
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

/// What a device offers the agent as tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionSpec {
    pub name: String,
    pub description: String,
    pub params: Value,
}

/// A device as an agent's tools see it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSummary {
    pub chat: Chat,
    pub name: Option<String>,
    pub online: bool,
    /// What the connected device said about itself; `None` while it is offline and for
    /// phones, which describe nothing.
    pub profile: Option<DeviceProfile>,
}

/// A connected gadget as the agent should know it: whether it may talk to the agent,
/// what its screen can show, whether it can speak, and what it can do.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct DeviceProfile {
    /// Approved or allowed; the agent can reach only such devices.
    pub paired: bool,
    pub screen: Option<Screen>,
    /// The font's repertoire: `"ascii"` (text is folded to it) or `"utf8"`.
    pub charset: String,
    /// The speaker's sample rate; `None` when the device has no speaker.
    pub speaker_rate: Option<u32>,
    pub actions: Vec<ActionSpec>,
}

/// A screen's size, in pixels and (when the device says) in text cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Screen {
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub text_cols: Option<u32>,
    pub text_rows: Option<u32>,
}

/// A code the owner approves to let a new user in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingCode {
    pub code: String,
    /// What the owner types, e.g. `hermes pairing approve gadget ABCD2345`.
    pub command: String,
}

/// A pairing as the owner manages it: waiting for approval (with its code) or approved.
/// Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingRecord {
    pub platform: Platform,
    pub user_id: String,
    pub user_name: Option<String>,
    /// Present while pending.
    pub code: Option<String>,
    pub created_at: i64,
    pub approved_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("authorization is unavailable: {0}")]
pub struct AccessError(pub String);

/// Who may reach the agent. Standalone Herald keeps its own pairing store; behind
/// Hermes, Hermes decides (its allowlists and its pairing codes).
#[async_trait]
pub trait Authorizer: Send + Sync {
    async fn is_authorized(&self, platform: Platform, user_id: &str) -> Result<bool, AccessError>;

    /// The code an unauthorized user should show the owner (the same one while fresh).
    async fn pairing_code(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
    ) -> Result<PairingCode, AccessError>;

    /// The pairings waiting for the owner and the approved ones, for the console.
    async fn pairings(&self) -> Result<Vec<PairingRecord>, AccessError>;

    /// Approve the pairing waiting with `code`; `None` when no such code is waiting.
    async fn approve_code(
        &self,
        platform: Platform,
        code: &str,
    ) -> Result<Option<PairingRecord>, AccessError>;

    /// Deny `user_id`'s waiting pairing or revoke its approved one; whether there was
    /// one. An allowlist may still let the user in: ask [`Authorizer::is_authorized`].
    async fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, AccessError>;
}

/// An agent backend: the demo agent, the Hermes bridge, an OpenAI-compatible model.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Take one authorized inbound event. Returns once the event is accepted, not when
    /// the turn it starts is over, so a slow turn never holds up the device's reader.
    async fn handle(&self, inbound: Inbound);
}

/// What a backend brings: the agent, and optionally its own authorization (Hermes has
/// one; without it the server's own pairing store decides).
pub struct Backend {
    pub agent: Arc<dyn Agent>,
    pub authorizer: Option<Arc<dyn Authorizer>>,
}

impl Backend {
    pub fn agent(agent: Arc<dyn Agent>) -> Self {
        Backend {
            agent,
            authorizer: None,
        }
    }
}

/// Builds a backend once the transports exist, handing it the way back to devices.
pub type AgentFactory = Box<dyn FnOnce(Arc<dyn Outbound>) -> Backend + Send>;
