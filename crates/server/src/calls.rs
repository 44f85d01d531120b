//! Conversation-port calls on their way to a device's session.
//!
//! The router turns each [`herald_port::Outbound`] method into one [`Call`] and sends it
//! to the session of the chat's device, whatever the platform; each session answers the
//! calls its device can honour and refuses the rest with a clear error. One enum for all
//! transports keeps the router a lookup instead of a table of copies.

use std::path::PathBuf;

use herald_port::{
    ActionError, ActionSpec, Card, DeliveryError, DeviceProfile, Outcome, Prompt, SendOptions,
};
use serde_json::Value;
use tokio::sync::oneshot;

pub(crate) type Reply<T> = oneshot::Sender<Result<T, DeliveryError>>;

pub(crate) enum Call {
    SendText {
        text: String,
        options: SendOptions,
        reply: Reply<String>,
    },
    EditText {
        message_id: String,
        text: String,
        finalize: bool,
        reply: Reply<()>,
    },
    Typing {
        on: bool,
        reply: Reply<()>,
    },
    Status {
        text: String,
        reply: Reply<()>,
    },
    Transcript {
        text: String,
        reply: Reply<()>,
    },
    TurnStarted {
        reply: Reply<String>,
    },
    TurnEnded {
        turn: String,
        outcome: Outcome,
        reply: Reply<()>,
    },
    Ask {
        prompt: Prompt,
        ttl_s: Option<u32>,
        reply: Reply<String>,
    },
    Withdraw {
        prompt_id: String,
        reply: Reply<()>,
    },
    Voice {
        path: PathBuf,
        reply: Reply<()>,
    },
    Image {
        path: PathBuf,
        caption: Option<String>,
        reply: Reply<()>,
    },
    Document {
        path: PathBuf,
        caption: Option<String>,
        reply: Reply<()>,
    },
    Display {
        card: Card,
        reply: Reply<()>,
    },
    Notice {
        text: String,
        reply: Reply<()>,
    },
    InvokeAction {
        name: String,
        args: Value,
        reply: oneshot::Sender<Result<Value, ActionError>>,
    },
    Actions {
        reply: Reply<Vec<ActionSpec>>,
    },
    /// What the connected device is (gadgets only).
    Profile {
        reply: Reply<DeviceProfile>,
    },
}
