//! Firmware updates over the gadget connection: the server's part.
//!
//! The rules live in the session core (`herald_session::gadget::ota`): one attempt as a
//! sans-IO state machine, and the attempts of a device's updates (resuming, recording
//! progress, retrying). Here is what needs the disk: before anything is sent, the image
//! is read once and checked against the connected device (ESP-IDF header, the
//! `HGBOARD=` tag against `hello.board`, the size against `caps.ota.max_size`), then
//! copied atomically to `<data_dir>/ota/<device>-<sha256>.bin`. The update streams from
//! that copy, so it survives a restart and the owner's file may change meanwhile.
//!
//! Sending never blocks the conversation: the session asks for a frame only when the
//! window is open and the outbox has room for it, one frame per turn of its event loop,
//! so device messages and agent replies interleave with the image, and a slow device
//! holds the update back instead of making a buffer grow.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

use std::time::Duration;

use herald_gadget_proto::{self as proto, ota_image};
use herald_session::gadget::ota::{refused, PushError, Staged, Target, Timeouts};
use sha2::{Digest, Sha256};
use tracing::warn;

use crate::files;
use herald_config::GadgetConfig;
use herald_store::{OtaImage, OtaUpdate, Store, StoreError, StoreHandle};

/// Where staged images live, inside the data directory.
pub(crate) const STAGING_DIR: &str = "ota";

/// How long an attempt waits for each of the device's answers.
pub(crate) fn timeouts(config: &GadgetConfig) -> Timeouts {
    Timeouts {
        ready: Duration::from_secs(config.ota_ready_timeout_s),
        ack: Duration::from_secs(config.ota_ack_timeout_s),
        done: Duration::from_secs(config.ota_done_timeout_s),
    }
}

// ---- checking and staging ----

/// Read `source` (never more than the device takes), check it, and copy it to `dir`.
pub(super) fn stage(source: &Path, dir: &Path, target: &Target) -> Result<Staged, PushError> {
    let unreadable = |source_err| PushError::Unreadable {
        path: source.to_owned(),
        source: source_err,
    };
    let file = std::fs::File::open(source).map_err(unreadable)?;
    target.check_size(file.metadata().map_err(unreadable)?.len())?;
    let mut bytes = Vec::new();
    // The file may grow after the size check; reading one byte past the limit tells.
    file.take(target.max_size.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    target.check_size(size)?;
    let info = ota_image::inspect_image(&bytes).map_err(|err| {
        refused(
            err.refusal(),
            format!(
                "{} is not an ESP-IDF application image: {err}",
                source.display()
            ),
        )
    })?;
    target.check_board(info.board.as_deref())?;

    let sha256 = hex::encode(Sha256::digest(&bytes));
    let staging = |source| PushError::Staging {
        path: dir.to_owned(),
        source,
    };
    files::create_private_dir(dir).map_err(staging)?;
    let file = dir.join(format!("{}-{sha256}.bin", target.device_id));
    files::write_private(&file, &bytes).map_err(staging)?;
    Ok(Staged {
        image: OtaImage {
            file,
            sha256,
            size,
            version: info.version,
        },
        board: info.board,
    })
}

/// Remove a staged image unless the device's running update streams from it (a push of
/// the same image while that update runs stages the very same file).
pub(super) async fn discard_staged(store: &StoreHandle, device_id: &str, file: &Path) {
    let id = device_id.to_owned();
    let in_use = match store.run(move |store| store.ota_update(&id)).await {
        Ok(Some(update)) => update.progress.status.is_active() && update.image.file == file,
        Ok(None) => false,
        // Keeping a file is the safe mistake.
        Err(_) => true,
    };
    if !in_use {
        remove_staged(file).await;
    }
}

/// Remove the staged images of a forgotten device; its update record went with it.
pub(crate) async fn forget_staged(data_dir: &Path, device_id: &str) {
    if !proto::is_valid_device_id(device_id) {
        return;
    }
    let prefix = format!("{device_id}-");
    let Ok(mut dir) = tokio::fs::read_dir(data_dir.join(STAGING_DIR)).await else {
        return;
    };
    while let Ok(Some(entry)) = dir.next_entry().await {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            remove_staged(&entry.path()).await;
        }
    }
}

/// At start-up, remove the staged images no running update (`unfinished`, from
/// [`unfinished_updates`]) streams from: a crash between staging a copy and recording
/// it, or between an update's end and the copy's removal, leaves one behind. Returns
/// how many went.
pub(crate) fn sweep_unused_staged(dir: &Path, unfinished: &[OtaUpdate]) -> std::io::Result<usize> {
    files::remove_files(dir, |path| !unfinished.iter().any(|u| u.image.file == path))
}

/// The updates sending or retrying, as the server starts.
pub(crate) fn unfinished_updates(store: &dyn Store) -> Result<Vec<OtaUpdate>, StoreError> {
    let updates = store.ota_updates()?.into_iter();
    Ok(updates.filter(|u| u.progress.status.is_active()).collect())
}

/// The devices whose update may still be running. A device that connects is looked up
/// in the store only if it is here, so a handshake costs no store read for an update
/// that is rare. The set cannot miss one: an update is running at start-up or starts in
/// its device's session, which adds it, and only that session takes it out again.
#[derive(Default)]
pub(crate) struct Unfinished(Mutex<HashSet<String>>);

impl Unfinished {
    pub(crate) fn new(unfinished: &[OtaUpdate]) -> Unfinished {
        let ids = unfinished.iter().map(|u| u.device_id.clone()).collect();
        Unfinished(Mutex::new(ids))
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn may_have(&self, device_id: &str) -> bool {
        self.ids().contains(device_id)
    }

    pub(crate) fn started(&self, device_id: &str) {
        self.ids().insert(device_id.to_owned());
    }

    pub(crate) fn settled(&self, device_id: &str) {
        self.ids().remove(device_id);
    }
}

pub(super) async fn remove_staged(file: &Path) {
    match tokio::fs::remove_file(file).await {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => warn!(%err, file = %file.display(), "could not remove a staged image"),
    }
}

#[cfg(test)]
mod tests {
    use herald_gadget_proto::OtaRefusal;
    use herald_test_support::firmware;

    use super::*;

    const ID: &str = "hg-0123456789abcdef";

    fn target(board: Option<&str>, max_size: u64) -> Target {
        Target {
            device_id: ID.into(),
            board: board.map(Into::into),
            max_size,
        }
    }

    #[test]
    fn staging_copies_a_checked_image_privately() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = firmware::firmware_image_tagged_at("s3-box", "0.3.1", vec![0; 400], 300);
        let source = dir.path().join("app.bin");
        std::fs::write(&source, &bytes).unwrap();
        let staging = dir.path().join("ota");

        let staged = stage(&source, &staging, &target(Some("s3-box"), 400)).unwrap();
        assert_eq!(staged.image.version, "0.3.1");
        assert_eq!(staged.image.size, 400);
        assert_eq!(staged.image.sha256, hex::encode(Sha256::digest(&bytes)));
        assert_eq!(std::fs::read(&staged.image.file).unwrap(), bytes);
        assert!(staged.image.file.starts_with(&staging));

        let refused = |t: Target| match stage(&source, &staging, &t) {
            Err(PushError::Refused { refusal, .. }) => refusal,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(refused(target(Some("s3-box"), 399)), OtaRefusal::TooLarge);
        assert_eq!(refused(target(Some("other"), 400)), OtaRefusal::WrongBoard);
        std::fs::write(&source, &bytes[..287]).unwrap();
        assert_eq!(refused(target(Some("s3-box"), 400)), OtaRefusal::NotAnImage);
        assert!(matches!(
            stage(&dir.path().join("missing"), &staging, &target(None, 400)),
            Err(PushError::Unreadable { .. })
        ));
    }
}
