//! Frames a client (phone app, or the cron sender) sends to the server.
//!
//! The server is the strict side: a frame that decodes here has ids that are usable as
//! dedup keys and session names, chunk numbers in range, and no undersized chunk before
//! the last one. Every check needs only the frame itself. Limits that depend on
//! configuration or state (sizes against `max_media_bytes`, open uploads, who may
//! `deliver`) are the server's to check.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};

use crate::data::{base64_decoded_len, decode_base64, Base64Error};
use crate::decode::{self, Decoded, Frame};
use crate::error::DecodeError;
use crate::limits::{MAX_ID_BYTES, MAX_PARTS, MAX_PUSH_SUBSCRIPTION_BYTES, MIN_CHUNK_BYTES};
use crate::server::MediaKindDown;
use crate::Elided;

/// A frame from a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ClientFrame {
    /// Must be the first frame of a connection.
    Hello(Hello),
    /// A chat message.
    Text(Text),
    /// A voice message.
    Audio(Audio),
    /// A file, or one chunk of it.
    Media(MediaUp),
    /// The answer to a question card.
    Prompt(PromptAnswer),
    /// A push to a device, from cron or a deliver token.
    Deliver(Deliver),
    /// Keepalive; answered with `pong`.
    Ping,
    /// Send notifications here while the app is closed.
    PushSubscribe(PushSubscription),
    /// Stop sending notifications.
    PushUnsubscribe,
    /// The app went out of sight, or came back.
    Visibility(Visibility),
}

/// A Web Push subscription (the W3C `PushSubscription.toJSON()`), or a UnifiedPush
/// endpoint with the same keys. Only its shape is checked here; the server checks the
/// keys and the endpoint's address.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushSubscription {
    pub endpoint: String,
    pub keys: PushKeys,
}

/// The subscription's keys, base64url: the app's P-256 public key and its auth secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushKeys {
    pub p256dh: String,
    pub auth: String,
}

/// Keeps the endpoint (a capability URL) and the keys out of logs.
impl fmt::Debug for PushSubscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PushSubscription(<redacted>)")
    }
}

/// `{"t":"visibility","visible":false}`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visibility {
    pub visible: bool,
}

/// `{"t":"hello","token":"...","device":{...}}`
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The app token. Optional on the wire so that a missing token is an auth failure
    /// (close 1008), not a malformed frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Who is connecting.
    pub device: DeviceInfo,
}

/// Keeps the token out of logs.
impl fmt::Debug for Hello {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hello")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("device", &self.device)
            .finish()
    }
}

/// The connecting device, as the app describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Chosen by the app and constant: the session, the delivery address and the allowlist
    /// entry are all derived from it.
    pub id: String,
    /// A human name for lists, e.g. "Pixel 8".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// E.g. `android`, `ios`, `web`; informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// `{"t":"text","id":"m1","text":"...","reply_to":"r7"}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    /// Stable across resends, so the server can drop duplicates.
    pub id: String,
    /// The message.
    pub text: String,
    /// The id of the message this one answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// `{"t":"audio","id":"v1","format":"wav","data":"<base64>","text":"..."}`
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audio {
    /// Stable across resends.
    pub id: String,
    /// Container format; `wav` (16 kHz mono PCM16) is the recommended one.
    pub format: String,
    /// The recording, base64.
    pub data: String,
    /// The app's own transcript; without it the agent transcribes the audio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Audio {
    /// The recording's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, Base64Error> {
        decode_base64(&self.data)
    }
}

impl fmt::Debug for Audio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Audio")
            .field("id", &self.id)
            .field("format", &self.format)
            .field("data", &Elided(self.data.len()))
            .field("text", &self.text)
            .finish()
    }
}

/// The kind of a file a client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    /// A picture.
    Image,
    /// A video.
    Video,
    /// Any other file.
    Document,
    /// A sound file that is not a voice message.
    Audio,
}

impl MediaKind {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Video => "video",
            MediaKind::Document => "document",
            MediaKind::Audio => "audio",
        }
    }
}

/// `{"t":"media","id":"m2","kind":"image",...,"data":"<base64>","part":0,"parts":1}`
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaUp {
    /// The same for every chunk of one file.
    pub id: String,
    /// What the file is.
    pub kind: MediaKind,
    /// E.g. `image/jpeg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// The file's name on the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Text to go with the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// This chunk, base64.
    pub data: String,
    /// This chunk's number, `0..parts`.
    #[serde(default)]
    pub part: u32,
    /// How many chunks the file has, `1..=MAX_PARTS`. Every chunk but the last carries at
    /// least [`MIN_CHUNK_BYTES`].
    #[serde(default = "one")]
    pub parts: u32,
}

fn one() -> u32 {
    1
}

impl MediaUp {
    /// This chunk's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, Base64Error> {
        decode_base64(&self.data)
    }

    /// Whether this is the last chunk of its file.
    pub fn is_last(&self) -> bool {
        self.part + 1 == self.parts
    }
}

impl fmt::Debug for MediaUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediaUp")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("mime", &self.mime)
            .field("filename", &self.filename)
            .field("caption", &self.caption)
            .field("data", &Elided(self.data.len()))
            .field("part", &self.part)
            .field("parts", &self.parts)
            .finish()
    }
}

/// `{"t":"prompt","prompt_id":"...","option_id":"c1","text":"..."}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptAnswer {
    /// The card's `id`.
    pub prompt_id: String,
    /// The chosen button; may be absent for a typed `clarify` answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
    /// A typed answer, for `clarify`'s `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `{"t":"deliver","to":"<device.id>","text":"...","media":[...]}`
///
/// Media travel inline as base64, not as file paths: a deliver token may be used from
/// another machine, and a path would let its holder make the server read any file it can.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deliver {
    /// The target `device.id`.
    pub to: String,
    /// A message to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Files to send; each reaches the device as `media` frames.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<DeliverMedia>,
}

/// One file of a `deliver`: `{"kind":"image","mime":"image/png","filename":"a.png",
/// "caption":"...","data":"<base64>"}`. The whole file, never a chunk: the frame limit
/// already bounds it, and the server does the chunking towards the device.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliverMedia {
    /// How the device should show it; one of the kinds the server sends.
    pub kind: MediaKindDown,
    /// E.g. `image/png`; the server guesses from `filename` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// The name to save it under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Text to go with the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// The file, base64.
    pub data: String,
}

impl DeliverMedia {
    /// The file's bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, Base64Error> {
        decode_base64(&self.data)
    }
}

impl fmt::Debug for DeliverMedia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliverMedia")
            .field("kind", &self.kind)
            .field("mime", &self.mime)
            .field("filename", &self.filename)
            .field("caption", &self.caption)
            .field("data", &Elided(self.data.len()))
            .finish()
    }
}

impl ClientFrame {
    /// Decodes one text frame. An unknown `t` is [`DecodeError::UnknownFrame`], which the
    /// server answers with `unsupported_frame` and keeps the connection; every other error
    /// is `bad_frame` or `too_big` (see [`DecodeError::code`]).
    pub fn decode(text: &str) -> Result<ClientFrame, DecodeError> {
        let frame = match decode::decode::<ClientFrame>(text)? {
            Decoded::Frame(frame) => frame,
            Decoded::Unknown(t) => return Err(DecodeError::UnknownFrame(t)),
        };
        frame.check()?;
        Ok(frame)
    }

    /// The frame as JSON text.
    pub fn encode(&self) -> String {
        // Serializing these types cannot fail: every map key is a string and every newtype
        // variant holds a struct. Should that ever change, the server answers `{}` with
        // `bad_frame`, which is louder than a panic in an app.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// The frame's `t`.
    pub fn t(&self) -> &'static str {
        match self {
            ClientFrame::Hello(_) => "hello",
            ClientFrame::Text(_) => "text",
            ClientFrame::Audio(_) => "audio",
            ClientFrame::Media(_) => "media",
            ClientFrame::Prompt(_) => "prompt",
            ClientFrame::Deliver(_) => "deliver",
            ClientFrame::Ping => "ping",
            ClientFrame::PushSubscribe(_) => "push_subscribe",
            ClientFrame::PushUnsubscribe => "push_unsubscribe",
            ClientFrame::Visibility(_) => "visibility",
        }
    }

    /// The structural rules serde cannot express.
    fn check(&self) -> Result<(), DecodeError> {
        let t = self.t();
        match self {
            ClientFrame::Hello(h) => check_id(t, "device.id", &h.device.id),
            ClientFrame::Text(m) => check_id(t, "id", &m.id),
            ClientFrame::Audio(a) => check_id(t, "id", &a.id),
            ClientFrame::Media(m) => {
                check_id(t, "id", &m.id)?;
                if m.parts == 0 || m.parts > MAX_PARTS {
                    return Err(DecodeError::malformed(
                        t,
                        format!("`parts` must be 1..={MAX_PARTS}, got {}", m.parts),
                    ));
                }
                if m.part >= m.parts {
                    return Err(DecodeError::malformed(
                        t,
                        format!("`part` {} is not below `parts` {}", m.part, m.parts),
                    ));
                }
                // Tiny chunks would make the server do a lot of bookkeeping for little
                // data. Measured from the base64 length, so no decoding is needed here.
                if !m.is_last() && base64_decoded_len(&m.data) < MIN_CHUNK_BYTES {
                    return Err(DecodeError::malformed(
                        t,
                        format!("a chunk other than the last is under {MIN_CHUNK_BYTES} bytes"),
                    ));
                }
                Ok(())
            }
            ClientFrame::Prompt(p) => check_id(t, "prompt_id", &p.prompt_id),
            ClientFrame::Deliver(d) => {
                check_id(t, "to", &d.to)?;
                if d.text.is_none() && d.media.is_empty() {
                    return Err(DecodeError::malformed(t, "nothing to deliver"));
                }
                if d.media.iter().any(|m| m.kind == MediaKindDown::Unknown) {
                    return Err(DecodeError::malformed(t, "unknown media `kind`"));
                }
                Ok(())
            }
            ClientFrame::PushSubscribe(sub) => {
                let len = sub.endpoint.len() + sub.keys.p256dh.len() + sub.keys.auth.len();
                if len > MAX_PUSH_SUBSCRIPTION_BYTES {
                    return Err(DecodeError::malformed(
                        t,
                        format!("a subscription over {MAX_PUSH_SUBSCRIPTION_BYTES} bytes"),
                    ));
                }
                Ok(())
            }
            ClientFrame::Ping | ClientFrame::PushUnsubscribe | ClientFrame::Visibility(_) => Ok(()),
        }
    }
}

impl Frame for ClientFrame {
    fn from_members<'de, D: Deserializer<'de>>(
        t: &str,
        members: D,
    ) -> Option<Result<Self, D::Error>> {
        Some(match t {
            "hello" => Hello::deserialize(members).map(ClientFrame::Hello),
            "text" => Text::deserialize(members).map(ClientFrame::Text),
            "audio" => Audio::deserialize(members).map(ClientFrame::Audio),
            "media" => MediaUp::deserialize(members).map(ClientFrame::Media),
            "prompt" => PromptAnswer::deserialize(members).map(ClientFrame::Prompt),
            "deliver" => Deliver::deserialize(members).map(ClientFrame::Deliver),
            "ping" => IgnoredAny::deserialize(members).map(|_| ClientFrame::Ping),
            "push_subscribe" => {
                PushSubscription::deserialize(members).map(ClientFrame::PushSubscribe)
            }
            "push_unsubscribe" => {
                IgnoredAny::deserialize(members).map(|_| ClientFrame::PushUnsubscribe)
            }
            "visibility" => Visibility::deserialize(members).map(ClientFrame::Visibility),
            _ => return None,
        })
    }
}

/// Ids are dedup keys, session names and log fields: non-empty, short, printable.
fn check_id(frame: &str, field: &str, id: &str) -> Result<(), DecodeError> {
    if id.is_empty() {
        return Err(DecodeError::malformed(frame, format!("`{field}` is empty")));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(DecodeError::malformed(
            frame,
            format!("`{field}` is longer than {MAX_ID_BYTES} bytes"),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(DecodeError::malformed(
            frame,
            format!("`{field}` contains control characters"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn malformed(text: &str) -> String {
        match ClientFrame::decode(text) {
            Err(DecodeError::Malformed { frame, reason }) => format!("{frame}: {reason}"),
            other => panic!("expected Malformed for {text}, got {other:?}"),
        }
    }

    #[test]
    fn media_defaults_to_a_single_part() {
        let f = ClientFrame::decode(r#"{"t":"media","id":"m","kind":"audio","data":""}"#).unwrap();
        let ClientFrame::Media(m) = f else { panic!() };
        assert_eq!((m.part, m.parts), (0, 1));
        assert!(m.is_last());
    }

    #[test]
    fn chunk_size_floor_spares_the_last_chunk() {
        let chunk = |part: u32, bytes: usize| {
            let data = crate::encode_base64(&vec![0u8; bytes]);
            format!(
                r#"{{"t":"media","id":"m","kind":"document","data":"{data}","part":{part},"parts":2}}"#
            )
        };
        assert!(ClientFrame::decode(&chunk(0, MIN_CHUNK_BYTES)).is_ok());
        assert!(ClientFrame::decode(&chunk(0, MIN_CHUNK_BYTES - 1)).is_err());
        assert!(ClientFrame::decode(&chunk(1, 1)).is_ok());
    }

    #[test]
    fn null_reads_as_absent_for_optional_fields() {
        let f =
            ClientFrame::decode(r#"{"t":"text","id":"m","text":"hi","reply_to":null}"#).unwrap();
        assert_eq!(
            f,
            ClientFrame::Text(Text {
                id: "m".into(),
                text: "hi".into(),
                reply_to: None
            })
        );
        assert!(!f.encode().contains("null"));
    }

    #[test]
    fn missing_token_is_not_malformed() {
        let f = ClientFrame::decode(r#"{"t":"hello","device":{"id":"cli"}}"#).unwrap();
        let ClientFrame::Hello(h) = f else { panic!() };
        assert_eq!(h.token, None);
    }

    #[test]
    fn each_error_path() {
        use DecodeError::*;
        let big = format!(
            r#"{{"t":"ping","x":"{}"}}"#,
            "a".repeat(crate::limits::MAX_FRAME_BYTES)
        );
        assert!(matches!(ClientFrame::decode(&big), Err(TooBig { .. })));
        let deep = format!(r#"{{"t":"ping","x":{}{}}}"#, "[".repeat(40), "]".repeat(40));
        assert_eq!(ClientFrame::decode(&deep), Err(TooDeep));
        assert!(matches!(ClientFrame::decode("hello"), Err(NotJson(_))));
        assert_eq!(ClientFrame::decode("[]"), Err(NotObject));
        assert_eq!(ClientFrame::decode(r#"{"id":"m"}"#), Err(MissingT));
        assert_eq!(
            ClientFrame::decode(r#"{"t":"sticker","id":"m"}"#),
            Err(UnknownFrame("sticker".into()))
        );
        // An unknown type is unsupported even when its body would be nonsense.
        assert_eq!(
            ClientFrame::decode(r#"{"t":"pong","x":[1,{}]}"#).map_err(|e| e.code()),
            Err(ErrorCode::UnsupportedFrame)
        );
    }

    #[test]
    fn malformed_bodies() {
        let cases = [
            (r#"{"t":"text","id":"m"}"#, "missing field `text`"),
            (r#"{"t":"text","id":5,"text":"x"}"#, "invalid type"),
            (r#"{"t":"text","id":"","text":"x"}"#, "`id` is empty"),
            (r#"{"t":"text","id":"a\nb","text":"x"}"#, "control"),
            (r#"{"t":"hello","token":"x"}"#, "missing field `device`"),
            (
                r#"{"t":"hello","device":{"id":""}}"#,
                "`device.id` is empty",
            ),
            (
                r#"{"t":"audio","id":"v","data":"AAAA"}"#,
                "missing field `format`",
            ),
            (
                r#"{"t":"media","id":"m","kind":"sticker","data":""}"#,
                "unknown variant",
            ),
            (
                r#"{"t":"media","id":"m","kind":"image","data":"","parts":0}"#,
                "`parts`",
            ),
            (
                r#"{"t":"media","id":"m","kind":"image","data":"","parts":2049}"#,
                "`parts`",
            ),
            (
                r#"{"t":"media","id":"m","kind":"image","data":"","part":2,"parts":2}"#,
                "`part`",
            ),
            (
                r#"{"t":"media","id":"m","kind":"image","data":"AAAA","parts":2}"#,
                "under 4096",
            ),
            (
                r#"{"t":"media","id":"m","kind":"image","data":"","part":-1}"#,
                "invalid value",
            ),
            (
                r#"{"t":"prompt","option_id":"once"}"#,
                "missing field `prompt_id`",
            ),
            (r#"{"t":"prompt","prompt_id":""}"#, "`prompt_id` is empty"),
            (r#"{"t":"deliver","to":"tel-1"}"#, "nothing to deliver"),
            (r#"{"t":"deliver","to":"","text":"x"}"#, "`to` is empty"),
            (
                r#"{"t":"deliver","to":"d","media":[{"kind":"sticker","data":""}]}"#,
                "unknown media",
            ),
            (
                r#"{"t":"deliver","to":"d","media":[{"kind":"image"}]}"#,
                "missing field `data`",
            ),
            (
                r#"{"t":"text","t":"text","id":"m","text":"x"}"#,
                "duplicate field `t`",
            ),
            (
                r#"{"t":"text","id":"m","id":"n","text":"x"}"#,
                "duplicate field `id`",
            ),
        ];
        for (text, want) in cases {
            let got = malformed(text);
            assert!(got.contains(want), "{text}: {got}");
        }
        let long = format!(
            r#"{{"t":"text","id":"{}","text":"x"}}"#,
            "i".repeat(MAX_ID_BYTES + 1)
        );
        assert!(malformed(&long).contains("longer than"));
        let longest = format!(
            r#"{{"t":"text","id":"{}","text":"x"}}"#,
            "i".repeat(MAX_ID_BYTES)
        );
        assert!(ClientFrame::decode(&longest).is_ok());
    }

    #[test]
    fn debug_hides_secrets_and_payloads() {
        let hello = Hello {
            token: Some("s3cret".into()),
            device: DeviceInfo {
                id: "d".into(),
                name: None,
                platform: None,
            },
        };
        let audio = Audio {
            id: "v".into(),
            format: "wav".into(),
            data: "QUJD".repeat(1000),
            text: None,
        };
        assert!(!format!("{hello:?}").contains("s3cret"));
        assert!(format!("{audio:?}").contains("<4000 base64 chars>"));
        assert_eq!(audio.bytes().unwrap().len(), 3000);
    }
}
