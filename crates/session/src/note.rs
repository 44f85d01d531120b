//! What a person is told while none of their apps is in sight: a question, a finished
//! reply, a delivery, a gadget's event. Either core hands one back; the server pushes it
//! (Web Push), and docs/mobile-protocol.md describes the payload an app decrypts.

use serde::Serialize;

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteKind {
    Question,
    Reply,
    Deliver,
    Event,
}

/// A notification for a person who is not looking: the payload an app decrypts (see
/// docs/mobile-protocol.md), before it is cut to fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub kind: NoteKind,
    pub title: String,
    pub body: String,
    /// A newer notification with the same tag replaces the older.
    pub tag: String,
    /// The device it concerns.
    pub device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<String>,
    /// A question's choices: `(id, label)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<NoteOption>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoteOption {
    pub id: String,
    pub label: String,
}
