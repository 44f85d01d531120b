//! A firmware update as the server keeps it and the API shows it: the staged image,
//! how far its attempts got, and where it stands. The gadget session's update machine
//! tracks its progress in these same records.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a firmware update stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtaStatus {
    /// An attempt is running, or was when the server stopped.
    Sending,
    /// An attempt failed by disconnect; the next starts when the device reconnects.
    Retrying,
    Failed,
    Done,
}

impl OtaStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OtaStatus::Sending => "sending",
            OtaStatus::Retrying => "retrying",
            OtaStatus::Failed => "failed",
            OtaStatus::Done => "done",
        }
    }

    pub fn parse(s: &str) -> Option<OtaStatus> {
        [
            OtaStatus::Sending,
            OtaStatus::Retrying,
            OtaStatus::Failed,
            OtaStatus::Done,
        ]
        .into_iter()
        .find(|status| status.as_str() == s)
    }

    /// Sending or retrying: a new update for the device must wait.
    pub fn is_active(self) -> bool {
        matches!(self, OtaStatus::Sending | OtaStatus::Retrying)
    }
}

/// A checked firmware image, copied into the data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaImage {
    /// The staged copy the server streams from.
    pub file: PathBuf,
    /// Lowercase hex SHA-256 of the whole image.
    pub sha256: String,
    pub size: u64,
    /// The version in the image's application descriptor.
    pub version: String,
}

/// The latest firmware update of a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaUpdate {
    pub id: i64,
    pub device_id: String,
    #[serde(flatten)]
    pub image: OtaImage,
    #[serde(flatten)]
    pub progress: OtaProgress,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Milliseconds since the Unix epoch.
    pub updated_at: i64,
}

/// What changes while an update runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaProgress {
    pub status: OtaStatus,
    /// Attempts started so far.
    pub attempts: u32,
    /// Bytes the device confirmed (`ota.ack`) in the current or last attempt.
    pub bytes_sent: u64,
    /// Why the last attempt failed, if one did.
    pub error: Option<String>,
}

/// `GET /v1/ota`, `POST /v1/ota`: a firmware update as the API shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct OtaView {
    #[serde(flatten)]
    pub update: OtaUpdate,
    pub online: bool,
    /// Attempts an update gets in all.
    pub max_attempts: u32,
}
