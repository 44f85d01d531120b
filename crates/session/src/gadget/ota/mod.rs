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

pub use herald_admin_api::{OtaImage, OtaProgress, OtaStatus, OtaUpdate};
pub use transfer::{Chunk, Timeouts};
pub use updates::{OtaEffect, OtaOutput, Updates};

use std::path::PathBuf;

use herald_gadget_proto::OtaRefusal;

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
    #[error(transparent)]
    Store(#[from] StoreFailed),
}

/// The store could not read or write an update's record: its own words, which the owner
/// reads in the update's record and the admin API's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreFailed(pub String);

/// Why the shell could not prepare an attempt (the device's key, the staged image).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPrepared {
    #[error("the device was forgotten")]
    Forgotten,
    #[error("cannot read the staged image: {0}")]
    Image(String),
    #[error(transparent)]
    Store(#[from] StoreFailed),
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
