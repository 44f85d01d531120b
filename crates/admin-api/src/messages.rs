//! What the API takes and gives, as JSON: the shapes are the tools' contract.

use std::path::{Path, PathBuf};

use herald_port::{Chat, Platform};
use serde::{Deserialize, Serialize};

/// Every refusal's body, whatever its status.
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

/// `GET /v1/info`: what `herald info` shows about a running server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    pub version: String,
    pub gadget_url: String,
    pub mobile_url: String,
    /// The file holding the generated app token, when `MOBILE_TOKEN` is not set.
    pub mobile_token: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub store: PathBuf,
}

/// The browser chat's page, served at `/` beside the phones' WebSocket endpoint
/// `mobile_url` (`ws://host:port/ws` gives `http://host:port/`).
pub fn chat_page_url(mobile_url: &str) -> String {
    let (scheme, rest) = match mobile_url.split_once("://") {
        Some(("wss", rest)) => ("https", rest),
        Some((_, rest)) => ("http", rest),
        None => ("http", mobile_url),
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{authority}/")
}

/// `GET /v1/devices`: an enrolled gadget and whether it is connected.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeviceView {
    #[serde(flatten)]
    pub record: DeviceRecordView,
    pub online: bool,
}

/// A device record as the API shows it: everything but the key.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeviceRecordView {
    pub id: String,
    pub name: Option<String>,
    pub board: Option<String>,
    pub firmware: Option<String>,
    /// Milliseconds since the Unix epoch, as `last_seen`.
    pub enrolled_at: i64,
    pub last_seen: Option<i64>,
    pub sensors: serde_json::Map<String, serde_json::Value>,
    /// The person the gadget belongs to (a phone user's id), once set; its questions
    /// show on that person's phones too.
    #[serde(default)]
    pub owner: Option<String>,
}

/// `GET /v1/phones`: a phone and whether it is connected.
#[derive(Debug, Serialize, Deserialize)]
pub struct PhoneView {
    #[serde(flatten)]
    pub record: PhoneRecordView,
    pub online: bool,
}

/// A phone as the API shows it: its device id, its owner and what it says of itself.
#[derive(Debug, Serialize, Deserialize)]
pub struct PhoneRecordView {
    pub id: String,
    pub user_id: String,
    pub name: Option<String>,
    pub platform: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub first_seen: i64,
    /// Milliseconds since the Unix epoch.
    pub last_seen: i64,
    /// The app takes notifications while it is closed (it has a push subscription).
    #[serde(default)]
    pub notifications: bool,
}

/// `GET /v1/push`: a phone's push subscription, as the owner may see it: the push
/// service's host, never the endpoint (whoever has it may push to the app) or keys.
#[derive(Debug, Serialize, Deserialize)]
pub struct PushView {
    pub device_id: String,
    pub user_id: String,
    pub service: String,
}

/// `POST /v1/pairing/approve`: a pending pairing by its code, or a user by id.
#[derive(Debug, Serialize, Deserialize)]
pub struct ApproveRequest {
    pub platform: Platform,
    pub code: Option<String>,
    pub user_id: Option<String>,
    /// A gadget's owner: a phone user's id (an app token's label, or its `u-…` id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// `PUT /v1/devices/{id}/owner`: whose gadget it is; `null` clears it.
#[derive(Debug, Serialize, Deserialize)]
pub struct OwnerRequest {
    pub owner: Option<String>,
}

/// `POST /v1/pairing/revoke`.
#[derive(Debug, Serialize, Deserialize)]
pub struct RevokeRequest {
    pub platform: Platform,
    pub user_id: String,
}

/// `POST /v1/deliver`: a message from outside any conversation (`herald send`, which
/// `hermes send` and cron use), through the same port the agent uses.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeliverRequest {
    pub chat: Chat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<DeliverMedia>,
}

/// A file to deliver: an absolute path on this machine, read before the answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeliverMedia {
    pub path: PathBuf,
    /// Guessed from the file name when absent ([`DeliverKind::of`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<DeliverKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliverKind {
    Voice,
    Image,
    Document,
}

impl DeliverKind {
    /// The kind of a file sent without one, by its extension.
    pub fn of(path: &Path) -> DeliverKind {
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        match extension.as_str() {
            "png" | "jpg" | "jpeg" | "gif" | "webp" => DeliverKind::Image,
            "wav" | "mp3" | "ogg" | "oga" | "opus" | "flac" | "m4a" => DeliverKind::Voice,
            _ => DeliverKind::Document,
        }
    }
}

/// `POST /v1/deliver`'s answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Delivered {
    /// The id of the text message, when there was text.
    pub message_id: Option<String>,
}

/// `POST /v1/ota`: send a firmware image to a connected gadget. The image is a path on
/// this machine (the CLI runs here too); the server checks it and copies it into its own
/// staging directory before anything is sent.
#[derive(Debug, Serialize, Deserialize)]
pub struct OtaRequest {
    pub device_id: String,
    pub image: PathBuf,
}

/// `POST /v1/console/link`'s answer: the code to put in the link's fragment.
#[derive(Clone, Serialize, Deserialize)]
pub struct LoginLink {
    pub code: String,
    /// How long the code works from now.
    pub expires_in_ms: u64,
}

/// Everything but the code, which a logged answer must not give away.
impl std::fmt::Debug for LoginLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginLink")
            .field("code", &"<secret>")
            .field("expires_in_ms", &self.expires_in_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chat_page_is_at_the_root_of_the_phone_port() {
        assert_eq!(
            chat_page_url("ws://192.168.1.5:8787/ws"),
            "http://192.168.1.5:8787/"
        );
        assert_eq!(
            chat_page_url("wss://[::1]:443/phone/ws"),
            "https://[::1]:443/"
        );
    }
}
