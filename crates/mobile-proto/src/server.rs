//! Frames the server sends to a client.
//!
//! The client is the tolerant side: an unknown `t` decodes to [`ServerFrame::Unknown`],
//! unknown fields are skipped, missing capability fields read as "not supported", and an
//! unfamiliar card or media kind decodes to an `Unknown` kind so the app can still show a
//! generic view, as the guide asks.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};

use crate::decode::{self, Decoded, Frame};
use crate::error::{DecodeError, ErrorCode};
use crate::limits;
use crate::prompt::{PromptCard, PromptKind};
use crate::{is_false, Elided};

/// A frame from the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ServerFrame {
    /// `hello` was accepted.
    Ready {
        /// The Hermes session, `mobile:<device.id>`.
        session: String,
        /// The avatar page (`MOBILE_AVATAR_URL`); without it the app uses its own.
        #[serde(skip_serializing_if = "Option::is_none")]
        avatar_url: Option<String>,
        /// What the client may use; the source of truth.
        capabilities: Capabilities,
    },
    /// A reply, a chunk of one, or a streaming edit.
    Message(Message),
    /// Typing indicator on, or off at once with `stop`.
    Typing {
        /// Turn the indicator off now.
        #[serde(skip_serializing_if = "is_false")]
        stop: bool,
    },
    /// Avatar animation state.
    Avatar {
        /// What the avatar should look like.
        state: AvatarState,
    },
    /// A question card.
    Prompt(PromptCard),
    /// A card is closed.
    PromptDone {
        /// The card's id.
        prompt_id: String,
        /// The choice that counted, after replacing an invalid one with the safe choice.
        #[serde(skip_serializing_if = "Option::is_none")]
        option_id: Option<String>,
        /// The card expired or was unknown; the answer did nothing.
        #[serde(skip_serializing_if = "is_false")]
        expired: bool,
    },
    /// A file, or one chunk of it.
    Media(MediaDown),
    /// Something went wrong; see [`ErrorCode`].
    Error {
        /// What kind of problem.
        code: ErrorCode,
        /// For humans and logs.
        message: String,
    },
    /// Answer to `ping`.
    Pong,
    /// The app's push subscription is kept.
    PushSubscribed,
    /// The app's push subscription is gone.
    PushUnsubscribed,
    /// A frame type this build does not know, from a newer server; clients ignore it.
    /// Encoding it writes just its `t`, so it should never be built with a known `t`.
    #[serde(untagged)]
    Unknown {
        /// The frame's `t`.
        t: String,
    },
}

/// What the server offers, in `ready`.
///
/// A field missing on the wire decodes as 0 / `false` / empty: the guide says an absent
/// capability is one the client must not use. [`Default`] is instead what this server
/// offers out of the box.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Largest file the client may send.
    #[serde(default)]
    pub max_media_bytes: u64,
    /// Largest text frame.
    #[serde(default)]
    pub max_frame_bytes: u64,
    /// Chunk size for larger files.
    #[serde(default)]
    pub media_chunk_bytes: u64,
    /// Longest `message` text; longer replies come in chunks.
    #[serde(default)]
    pub max_message_chars: u32,
    /// Replies may arrive as `edit: true` frames.
    #[serde(default)]
    pub streaming: bool,
    /// `audio` frames are accepted.
    #[serde(default)]
    pub voice: bool,
    /// Card kinds the server may send.
    #[serde(default)]
    pub prompts: Vec<PromptKind>,
    /// Notifications while the app is closed (Web Push), when the server sends them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushCapability>,
}

/// How an app subscribes to notifications: the server's VAPID key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushCapability {
    /// The server's public key, an uncompressed P-256 point in base64url without
    /// padding: the `applicationServerKey` of a subscription.
    pub vapid_key: String,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            max_media_bytes: limits::MAX_MEDIA_BYTES as u64,
            max_frame_bytes: limits::MAX_FRAME_BYTES as u64,
            media_chunk_bytes: limits::MEDIA_CHUNK_BYTES as u64,
            max_message_chars: limits::MAX_MESSAGE_CHARS,
            streaming: true,
            voice: true,
            prompts: PromptKind::ALL.to_vec(),
            push: None,
        }
    }
}

/// `{"t":"message","id":"r1","text":"...","chunk":{"index":0,"total":2},"final":false}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Chunks and edits of one reply share it; the client concatenates or redraws by it.
    pub id: String,
    /// This chunk's text, or the whole text so far for an edit.
    pub text: String,
    /// Which part of a split reply this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<Chunk>,
    /// The last frame of this reply.
    #[serde(rename = "final")]
    pub final_: bool,
    /// Replace the text of the message with this `id` instead of adding to it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub edit: bool,
    /// The client message this replies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// Position of a chunk in a split reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Chunk {
    /// 0-based.
    pub index: u32,
    /// How many chunks in all.
    pub total: u32,
}

/// The avatar's animation state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AvatarState {
    /// Waiting.
    Idle,
    /// The agent is working on a reply.
    Thinking,
    /// A reply is being spoken or shown.
    Speaking,
}

impl AvatarState {
    /// The wire name, also what `window.hermesAvatar.setState` takes.
    pub fn as_str(&self) -> &'static str {
        match self {
            AvatarState::Idle => "idle",
            AvatarState::Thinking => "thinking",
            AvatarState::Speaking => "speaking",
        }
    }
}

/// The kind of a file the server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKindDown {
    /// A picture.
    Image,
    /// A voice message to play.
    Voice,
    /// A video.
    Video,
    /// Any other file.
    Document,
    /// An animated picture (GIF and the like).
    Animation,
    /// A kind this build does not know, from a newer server; shown as a generic file.
    /// Never valid in a `deliver`.
    #[serde(other)]
    Unknown,
}

impl MediaKindDown {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            MediaKindDown::Image => "image",
            MediaKindDown::Voice => "voice",
            MediaKindDown::Video => "video",
            MediaKindDown::Document => "document",
            MediaKindDown::Animation => "animation",
            MediaKindDown::Unknown => "unknown",
        }
    }
}

/// `{"t":"media","id":"a1","kind":"image","mime":"image/png",...,"final":true,"size":20480,
/// "data":"<base64>"}`, or with `url` instead of `data`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaDown {
    /// The same for every chunk of one file.
    pub id: String,
    /// How to show it.
    pub kind: MediaKindDown,
    /// E.g. `image/png`; `application/octet-stream` when unknown.
    pub mime: String,
    /// The name to save it under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Text to go with the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// This chunk's number, `0..parts`.
    pub part: u32,
    /// How many chunks the file has.
    pub parts: u32,
    /// The last chunk: the file is complete.
    #[serde(rename = "final")]
    pub final_: bool,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// This chunk, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Where to download the file instead, when there is no `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl fmt::Debug for MediaDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediaDown")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("mime", &self.mime)
            .field("filename", &self.filename)
            .field("caption", &self.caption)
            .field("part", &self.part)
            .field("parts", &self.parts)
            .field("final_", &self.final_)
            .field("size", &self.size)
            .field("data", &self.data.as_ref().map(|d| Elided(d.len())))
            .field("url", &self.url)
            .finish()
    }
}

// Bodies of the struct variants, for decoding only: the variants keep the flat shape the
// server code builds, and these give serde something to fill.

#[derive(Deserialize)]
struct ReadyBody {
    session: String,
    #[serde(default)]
    avatar_url: Option<String>,
    capabilities: Capabilities,
}

#[derive(Deserialize)]
struct TypingBody {
    #[serde(default)]
    stop: bool,
}

#[derive(Deserialize)]
struct AvatarBody {
    state: AvatarState,
}

#[derive(Deserialize)]
struct PromptDoneBody {
    prompt_id: String,
    #[serde(default)]
    option_id: Option<String>,
    #[serde(default)]
    expired: bool,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: ErrorCode,
    message: String,
}

impl ServerFrame {
    /// Decodes one text frame on the client side. An unknown `t` is not an error but
    /// [`ServerFrame::Unknown`], to be ignored; errors are frames that are not frames at
    /// all, or known frames with wrong fields.
    pub fn decode(text: &str) -> Result<ServerFrame, DecodeError> {
        Ok(match decode::decode(text)? {
            Decoded::Frame(frame) => frame,
            Decoded::Unknown(t) => ServerFrame::Unknown { t },
        })
    }

    /// The frame as JSON text.
    pub fn encode(&self) -> String {
        // Serializing these types cannot fail (string keys only, newtype variants hold
        // structs). Should that change, the client gets a frame it can parse and show
        // rather than a server that panics mid-connection.
        serde_json::to_string(self).unwrap_or_else(|_| {
            String::from(r#"{"t":"error","code":"internal","message":"frame encoding failed"}"#)
        })
    }

    /// The frame's `t`.
    pub fn t(&self) -> &str {
        match self {
            ServerFrame::Ready { .. } => "ready",
            ServerFrame::Message(_) => "message",
            ServerFrame::Typing { .. } => "typing",
            ServerFrame::Avatar { .. } => "avatar",
            ServerFrame::Prompt(_) => "prompt",
            ServerFrame::PromptDone { .. } => "prompt_done",
            ServerFrame::Media(_) => "media",
            ServerFrame::Error { .. } => "error",
            ServerFrame::Pong => "pong",
            ServerFrame::PushSubscribed => "push_subscribed",
            ServerFrame::PushUnsubscribed => "push_unsubscribed",
            ServerFrame::Unknown { t } => t,
        }
    }

    /// An `error` frame.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> ServerFrame {
        ServerFrame::Error {
            code,
            message: message.into(),
        }
    }
}

impl Frame for ServerFrame {
    fn from_members<'de, D: Deserializer<'de>>(
        t: &str,
        members: D,
    ) -> Option<Result<Self, D::Error>> {
        Some(match t {
            "ready" => ReadyBody::deserialize(members).map(|b| ServerFrame::Ready {
                session: b.session,
                avatar_url: b.avatar_url,
                capabilities: b.capabilities,
            }),
            "message" => Message::deserialize(members).map(ServerFrame::Message),
            "typing" => {
                TypingBody::deserialize(members).map(|b| ServerFrame::Typing { stop: b.stop })
            }
            "avatar" => {
                AvatarBody::deserialize(members).map(|b| ServerFrame::Avatar { state: b.state })
            }
            "prompt" => PromptCard::deserialize(members).map(ServerFrame::Prompt),
            "prompt_done" => {
                PromptDoneBody::deserialize(members).map(|b| ServerFrame::PromptDone {
                    prompt_id: b.prompt_id,
                    option_id: b.option_id,
                    expired: b.expired,
                })
            }
            "media" => MediaDown::deserialize(members).map(ServerFrame::Media),
            "error" => ErrorBody::deserialize(members).map(|b| ServerFrame::Error {
                code: b.code,
                message: b.message,
            }),
            "pong" => IgnoredAny::deserialize(members).map(|_| ServerFrame::Pong),
            "push_subscribed" => {
                IgnoredAny::deserialize(members).map(|_| ServerFrame::PushSubscribed)
            }
            "push_unsubscribed" => {
                IgnoredAny::deserialize(members).map(|_| ServerFrame::PushUnsubscribed)
            }
            _ => return None,
        })
    }
}

impl From<&DecodeError> for ServerFrame {
    /// The server's answer to a frame it could not decode.
    fn from(e: &DecodeError) -> ServerFrame {
        ServerFrame::error(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_frames_are_tolerated_and_keep_their_tag() {
        let f = ServerFrame::decode(r#"{"t":"sticker","id":"s1","url":"x"}"#).unwrap();
        assert_eq!(
            f,
            ServerFrame::Unknown {
                t: "sticker".into()
            }
        );
        assert_eq!(f.t(), "sticker");
        assert_eq!(f.encode(), r#"{"t":"sticker"}"#);
    }

    #[test]
    fn not_frames_are_still_errors_on_the_client() {
        assert!(matches!(
            ServerFrame::decode("nope"),
            Err(DecodeError::NotJson(_))
        ));
        assert_eq!(ServerFrame::decode("1"), Err(DecodeError::NotObject));
        assert_eq!(ServerFrame::decode("{}"), Err(DecodeError::MissingT));
        assert!(matches!(
            ServerFrame::decode(r#"{"t":"avatar","state":"dancing"}"#),
            Err(DecodeError::Malformed { .. })
        ));
        assert!(matches!(
            ServerFrame::decode(r#"{"t":"message","id":"r","text":"x"}"#),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn flags_and_renames() {
        assert_eq!(
            ServerFrame::Typing { stop: false }.encode(),
            r#"{"t":"typing"}"#
        );
        assert_eq!(
            ServerFrame::Typing { stop: true }.encode(),
            r#"{"t":"typing","stop":true}"#
        );
        let m = ServerFrame::Message(Message {
            id: "r1".into(),
            text: "hi".into(),
            chunk: None,
            final_: true,
            edit: false,
            reply_to: None,
        });
        assert_eq!(
            m.encode(),
            r#"{"t":"message","id":"r1","text":"hi","final":true}"#
        );
        let done = ServerFrame::PromptDone {
            prompt_id: "p".into(),
            option_id: None,
            expired: true,
        };
        assert_eq!(
            done.encode(),
            r#"{"t":"prompt_done","prompt_id":"p","expired":true}"#
        );
        assert_eq!(ServerFrame::Pong.encode(), r#"{"t":"pong"}"#);
    }

    #[test]
    fn absent_capabilities_are_off() {
        let f =
            ServerFrame::decode(r#"{"t":"ready","session":"mobile:x","capabilities":{}}"#).unwrap();
        let ServerFrame::Ready { capabilities, .. } = f else {
            panic!()
        };
        assert!(!capabilities.streaming && !capabilities.voice);
        assert_eq!(capabilities.max_media_bytes, 0);
        assert!(capabilities.prompts.is_empty());
    }

    #[test]
    fn default_capabilities() {
        let c = Capabilities::default();
        assert_eq!(c.max_media_bytes, 8 * 1024 * 1024);
        assert_eq!(c.max_frame_bytes, 16 * 1024 * 1024);
        assert_eq!(c.media_chunk_bytes, 3 * 1024 * 1024);
        assert_eq!(c.max_message_chars, 4000);
        assert!(c.streaming && c.voice);
        assert_eq!(c.prompts, PromptKind::ALL.to_vec());
    }

    #[test]
    fn unfamiliar_kinds_still_decode() {
        let card = r#"{"t":"prompt","id":"p","kind":"poll","text":"?","options":[
            {"id":"a","label":"A","style":"glow"},{"id":"b","label":"B"}],
            "session":"mobile:x","timeout_seconds":60}"#;
        let ServerFrame::Prompt(c) = ServerFrame::decode(card).unwrap() else {
            panic!()
        };
        assert_eq!(c.kind, PromptKind::Unknown);
        assert_eq!(c.options.len(), 2);
        let media = r#"{"t":"media","id":"a","kind":"hologram","mime":"x/y","part":0,
            "parts":1,"final":true,"size":3,"url":"https://x"}"#;
        let ServerFrame::Media(m) = ServerFrame::decode(media).unwrap() else {
            panic!()
        };
        assert_eq!(m.kind, MediaKindDown::Unknown);
    }

    #[test]
    fn decode_errors_become_error_frames() {
        let Err(e) = crate::ClientFrame::decode(r#"{"t":"nope"}"#) else {
            panic!()
        };
        let frame = ServerFrame::from(&e);
        assert_eq!(
            frame.encode(),
            r#"{"t":"error","code":"unsupported_frame","message":"unsupported frame type \"nope\""}"#
        );
    }
}
