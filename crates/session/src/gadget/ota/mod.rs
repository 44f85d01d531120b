//! A device's firmware updates, as a sub-machine of its session core.
//!
//! - **`Transfer`** (`transfer.rs`): one attempt as a sans-IO state machine.
//! - **[`Updates`]** (`updates.rs`): the attempts of a device's updates: resuming,
//!   recording progress, retrying, and the effects on the store and the staged copy
//!   that the session's shell carries out.
//!
//! Checking an image against the device ([`Target`]) is here too; reading and staging
//! it is the server's (`herald_server`'s `gadget::ota`).

mod transfer;
mod updates;

pub use transfer::{Chunk, Timeouts};
pub use updates::{OtaEffect, OtaOutput, Updates};

use std::path::PathBuf;

use herald_gadget_proto::OtaRefusal;
use serde::{Deserialize, Serialize};

use super::Peer;
use crate::CallId;

/// Why an update was not started.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{0} is not connected; firmware goes to an online device (see `herald devices`)")]
    Offline(String),
    #[error("refused ({refusal}): {reason}")]
    Refused { refusal: OtaRefusal, reason: String },
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot stage the image in {path}: {source}")]
    Staging {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The store failed.
    #[error("{0}")]
    Store(String),
}

/// A refusal of `refusal`, for `reason`.
pub fn refused(refusal: OtaRefusal, reason: String) -> PushError {
    PushError::Refused { refusal, reason }
}

/// What an image must fit: the connected device, as its `hello` described it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The device.
    pub device_id: String,
    /// The board it named in its `hello`.
    pub board: Option<String>,
    /// The largest image it takes.
    pub max_size: u64,
}

impl Target {
    /// The device's limits, or `unsupported` when it does not take updates.
    pub fn of(device_id: &str, peer: &Peer) -> Result<Target, PushError> {
        let Some(max_size) = peer.ota_max_size else {
            return Err(refused(
                OtaRefusal::Unsupported,
                format!("{device_id} does not install firmware updates (no caps.ota)"),
            ));
        };
        Ok(Target {
            device_id: device_id.to_owned(),
            board: peer.board.as_deref().map(str::to_owned),
            max_size,
        })
    }

    /// Whether an image of `size` bytes fits.
    pub fn check_size(&self, size: u64) -> Result<(), PushError> {
        if size > self.max_size {
            return Err(refused(
                OtaRefusal::TooLarge,
                format!(
                    "the image is {size} bytes; {} takes at most {}",
                    self.device_id, self.max_size
                ),
            ));
        }
        Ok(())
    }

    /// Whether an image built for `image_board` may go to this device.
    pub fn check_board(&self, image_board: Option<&str>) -> Result<(), PushError> {
        let reason = match (image_board, self.board.as_deref()) {
            (Some(image), Some(device)) if image == device => return Ok(()),
            (Some(image), Some(device)) => {
                format!(
                    "the image is built for board {image}; {} is a {device}",
                    self.device_id
                )
            }
            (None, _) => "the image has no HGBOARD= tag naming its board".to_owned(),
            (Some(_), None) => format!("{} did not name its board", self.device_id),
        };
        Err(refused(OtaRefusal::WrongBoard, reason))
    }
}

/// An image that passed the checks, copied into the data directory.
#[derive(Debug)]
pub struct Staged {
    /// The staged copy and what it is.
    pub image: OtaImage,
    /// The board the image names.
    pub board: Option<String>,
}

/// What the admin API asks of a device's session.
pub enum Request {
    /// The device's limits, before the image is read.
    Target {
        /// Answered by [`OtaEffect::Target`].
        call: CallId,
    },
    /// Record a staged image and start sending it.
    Start {
        /// The checked image, staged.
        staged: Staged,
        /// Answered by [`OtaEffect::Started`].
        call: CallId,
    },
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn target(board: Option<&str>, max_size: u64) -> Target {
        Target {
            device_id: "hg-0123456789abcdef".into(),
            board: board.map(Into::into),
            max_size,
        }
    }

    fn refusal(result: Result<(), PushError>) -> OtaRefusal {
        match result {
            Err(PushError::Refused { refusal, .. }) => refusal,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn targets_check_board_and_size() {
        let t = target(Some("s3-box"), 1000);
        assert!(t.check_size(1000).is_ok());
        assert_eq!(refusal(t.check_size(1001)), OtaRefusal::TooLarge);
        assert!(t.check_board(Some("s3-box")).is_ok());
        assert_eq!(refusal(t.check_board(Some("m5"))), OtaRefusal::WrongBoard);
        assert_eq!(refusal(t.check_board(None)), OtaRefusal::WrongBoard);
        let nameless = target(None, 1000);
        assert_eq!(
            refusal(nameless.check_board(Some("s3-box"))),
            OtaRefusal::WrongBoard
        );
    }
}
