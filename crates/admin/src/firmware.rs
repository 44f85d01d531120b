//! Firmware through the browser: upload an image, see how it fares against the device,
//! push it, and the history of updates.
//!
//! `POST /v1/ota` takes a path on this machine, which suits the CLI but not a browser
//! on another one (through an SSH tunnel, say). So the console uploads the bytes
//! (`POST /v1/ota/uploads?device=ID`, at most [`MAX_UPLOAD`]); they are checked at once
//! (an ESP-IDF application image? built for this device's board? the device online and
//! not updating already?) and kept in a private file under the data directory
//! ([`UPLOAD_DIR`], the latest [`MAX_UPLOADS`] only, emptied at start-up). Pushing one
//! (`POST /v1/ota/uploads/{id}/push`) hands that file to the same push as the CLI's,
//! which checks again against the connected device (its size limit too) and stages its
//! own copy.
//!
//! The store keeps only the latest update of each device, so when a push replaces a
//! finished one, the finished one is appended to [`HISTORY_FILE`] (the latest
//! [`MAX_HISTORY`]), whichever way the push came.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::Json;
use herald_admin_api::{OtaRequest, OtaView};
use herald_gadget_proto::{is_valid_device_id, ota_image};
use herald_port::Platform;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::api::ota_view;
use super::{AdminState, ApiError, Console};

use herald_store::OtaUpdate;

/// The largest image the console takes; ESP32 application partitions are smaller.
pub const MAX_UPLOAD: usize = 16 * 1024 * 1024;
/// Where uploaded images wait to be pushed, inside the data directory.
pub(crate) const UPLOAD_DIR: &str = "console-uploads";
/// Uploads kept; an older one is removed.
pub(crate) const MAX_UPLOADS: usize = 4;
/// Finished updates that newer ones replaced, inside the data directory.
pub(crate) const HISTORY_FILE: &str = "ota-history.json";
pub(crate) const MAX_HISTORY: usize = 100;

struct Upload {
    id: String,
    device_id: String,
    file: PathBuf,
}

pub(crate) struct Firmware {
    data_dir: PathBuf,
    uploads: Mutex<VecDeque<Upload>>,
    /// One history rewrite at a time.
    history: tokio::sync::Mutex<()>,
}

impl Firmware {
    pub(crate) fn new(data_dir: &Path) -> Firmware {
        // Uploads of an earlier run have no entry to push them by.
        let dir = data_dir.join(UPLOAD_DIR);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Firmware {
            data_dir: data_dir.to_owned(),
            uploads: Mutex::default(),
            history: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Upload>> {
        self.uploads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep an upload; returns the files of the ones it pushed out.
    fn keep(&self, upload: Upload) -> Vec<PathBuf> {
        let mut uploads = self.lock();
        uploads.push_back(upload);
        let mut dropped = Vec::new();
        while uploads.len() > MAX_UPLOADS {
            if let Some(old) = uploads.pop_front() {
                dropped.push(old.file);
            }
        }
        dropped
    }

    fn find(&self, id: &str) -> Option<(String, PathBuf)> {
        self.lock()
            .iter()
            .find(|u| u.id == id)
            .map(|u| (u.device_id.clone(), u.file.clone()))
    }

    fn take(&self, id: &str) -> Option<PathBuf> {
        let mut uploads = self.lock();
        let at = uploads.iter().position(|u| u.id == id)?;
        uploads.remove(at).map(|u| u.file)
    }

    fn history_file(&self) -> PathBuf {
        self.data_dir.join(HISTORY_FILE)
    }

    async fn past(&self) -> Vec<OtaUpdate> {
        let file = self.history_file();
        match tokio::fs::read(&file).await {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(%err, file = %file.display(), "the firmware history is unreadable; starting it anew");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        }
    }

    /// Append a finished update to the history.
    async fn remember(&self, update: OtaUpdate) {
        let _one = self.history.lock().await;
        let mut past = self.past().await;
        past.push(update);
        let excess = past.len().saturating_sub(MAX_HISTORY);
        past.drain(..excess);
        let file = self.history_file();
        let written = match serde_json::to_vec(&past) {
            Ok(json) => {
                tokio::task::spawn_blocking(move || herald_files::write_private(&file, &json))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            }
            Err(err) => Err(std::io::Error::other(err)),
        };
        if let Err(err) = written {
            tracing::warn!(%err, "could not write the firmware history");
        }
    }
}

/// A check of an uploaded image against its device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    /// `ok`, `fail`, or `later` (checked by the push itself).
    pub outcome: String,
    pub detail: String,
}

fn check(name: &str, outcome: &str, detail: String) -> Check {
    Check {
        name: name.to_owned(),
        outcome: outcome.to_owned(),
        detail,
    }
}

/// What `POST /v1/ota/uploads` answers.
#[derive(Debug, Serialize, Deserialize)]
pub struct UploadView {
    pub upload: String,
    pub device_id: String,
    pub size: u64,
    pub sha256: String,
    pub version: String,
    pub project: String,
    pub board: Option<String>,
    pub checks: Vec<Check>,
    /// No check failed: the push may go ahead.
    pub ready: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct UploadQuery {
    device: String,
}

fn size_text(bytes: u64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

/// `POST /v1/ota/uploads?device=ID` with the image as the body.
pub(crate) async fn upload(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    Query(query): Query<UploadQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<UploadView>, ApiError> {
    let device_id = query.device;
    if !is_valid_device_id(&device_id) {
        return Err(ApiError::bad_request(format!(
            "{device_id:?} is not a gadget id (hg-...)"
        )));
    }
    let bytes = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the file is larger than {}; no gadget takes that much",
                size_text(MAX_UPLOAD as u64)
            ),
        ),
        status => ApiError(status, format!("the upload did not arrive: {rejection}")),
    })?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request("the file is empty"));
    }
    let info = ota_image::inspect_image(&bytes).map_err(|err| {
        ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("this file is not an ESP-IDF application image ({err}): choose the app .bin the firmware build made"),
        )
    })?;
    let id = device_id.clone();
    let record = state
        .store
        .run(move |store| store.device(&id))
        .await?
        .ok_or_else(|| {
            ApiError(
                StatusCode::NOT_FOUND,
                format!("no device {device_id}: it was forgotten meanwhile"),
            )
        })?;
    let id = device_id.clone();
    let current = state.store.run(move |store| store.ota_update(&id)).await?;

    let size = bytes.len() as u64;
    let mut checks = vec![check(
        "image",
        "ok",
        format!(
            "an ESP-IDF application image: {} {}, {}",
            info.project,
            info.version,
            size_text(size)
        ),
    )];
    checks.push(match (info.board.as_deref(), record.board.as_deref()) {
        (Some(image), Some(device)) if image == device => check(
            "board",
            "ok",
            format!("built for {image}, as the device is"),
        ),
        (Some(image), Some(device)) => check(
            "board",
            "fail",
            format!("built for {image}; the device is a {device}"),
        ),
        (None, _) => check(
            "board",
            "fail",
            "the image has no HGBOARD= tag naming its board".into(),
        ),
        (Some(image), None) => check(
            "board",
            "fail",
            format!("built for {image}; the device never named its board"),
        ),
    });
    checks.push(match state.fleet.is_online(Platform::Gadget, &device_id) {
        true => check("online", "ok", "the device is connected".into()),
        false => check(
            "online",
            "fail",
            "the device is not connected; firmware goes to an online device".into(),
        ),
    });
    checks.push(match current {
        Some(update) if update.progress.status.is_active() => check(
            "idle",
            "fail",
            format!(
                "an update to {} is still {}",
                update.image.version,
                update.progress.status.as_str()
            ),
        ),
        _ => check("idle", "ok", "no other update is running".into()),
    });
    checks.push(check(
        "size",
        "later",
        "the device's size limit is checked when the push starts".into(),
    ));
    let ready = checks.iter().all(|c| c.outcome != "fail");

    let upload = format!("u-{}", herald_files::secret::random_hex(16));
    let dir = console.firmware.data_dir.join(UPLOAD_DIR);
    let file = dir.join(format!("{upload}.bin"));
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let kept = Upload {
        id: upload.clone(),
        device_id: device_id.clone(),
        file,
    };
    // Written and registered in one task, which runs to its end even when the client
    // goes away meanwhile: no file is left that nothing knows of.
    let firmware = console.clone();
    let staged = tokio::task::spawn_blocking(move || {
        herald_files::create_private_dir(&dir)?;
        herald_files::write_private(&kept.file, &bytes)?;
        for old in firmware.firmware.keep(kept) {
            let _ = std::fs::remove_file(old);
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    if let Err(err) = staged {
        tracing::error!(%err, "could not keep an uploaded image");
        return Err(ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not keep the image in the data directory: {err}"),
        ));
    }
    Ok(Json(UploadView {
        upload,
        device_id,
        size,
        sha256,
        version: info.version,
        project: info.project,
        board: info.board,
        checks,
        ready,
    }))
}

/// `POST /v1/ota/uploads/{id}/push`: send an uploaded image to its device.
pub(crate) async fn push(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    UrlPath(upload): UrlPath<String>,
) -> Result<Json<OtaView>, ApiError> {
    let (device_id, file) = console.firmware.find(&upload).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "that upload is gone (the server keeps the latest few until it restarts): upload the image again".into(),
        )
    })?;
    let update = push_recorded(&state, &console, &device_id, file).await?;
    // The push staged its own copy.
    if let Some(file) = console.firmware.take(&upload) {
        let _ = tokio::fs::remove_file(file).await;
    }
    Ok(Json(ota_view(&state, update)))
}

pub(super) async fn ota_push(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    Json(request): Json<OtaRequest>,
) -> Result<Json<OtaView>, ApiError> {
    if !is_valid_device_id(&request.device_id) {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            format!("{:?} is not a gadget id (hg-...)", request.device_id),
        ));
    }
    if !request.image.is_absolute() {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "give the image as an absolute path".into(),
        ));
    }
    let update = push_recorded(&state, &console, &request.device_id, request.image).await?;
    Ok(Json(ota_view(&state, update)))
}

/// Push `image` to a device, keeping the update it replaces in the history.
pub(crate) async fn push_recorded(
    state: &AdminState,
    console: &Console,
    device_id: &str,
    image: PathBuf,
) -> Result<OtaUpdate, ApiError> {
    let id = device_id.to_owned();
    let previous = state.store.run(move |store| store.ota_update(&id)).await?;
    let update = state.fleet.push_firmware(device_id, image).await?;
    if let Some(previous) = previous.filter(|p| p.id != update.id) {
        console.firmware.remember(previous).await;
    }
    state.metrics.activity.changed();
    Ok(update)
}

/// One entry of `GET /v1/ota/history`, newest first.
#[derive(Debug, Serialize)]
pub(crate) struct HistoryEntry {
    #[serde(flatten)]
    update: OtaView,
    /// The device's latest update (the store's), rather than one it replaced.
    current: bool,
}

pub(crate) async fn history(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
) -> Result<Json<Vec<HistoryEntry>>, ApiError> {
    let current = state.store.run(move |store| store.ota_updates()).await?;
    let past = console.firmware.past().await;
    let mut entries: Vec<HistoryEntry> = current
        .into_iter()
        .map(|u| (u, true))
        .chain(past.into_iter().map(|u| (u, false)))
        .map(|(u, current)| HistoryEntry {
            update: ota_view(&state, u),
            current,
        })
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.update.update.created_at));
    Ok(Json(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_store::{OtaImage, OtaProgress, OtaStatus};

    fn update(id: i64) -> OtaUpdate {
        OtaUpdate {
            id,
            device_id: "hg-0123456789abcdef".into(),
            image: OtaImage {
                file: PathBuf::from("/x.bin"),
                sha256: "00".repeat(32),
                size: 10,
                version: format!("0.{id}.0"),
            },
            progress: OtaProgress {
                status: OtaStatus::Done,
                attempts: 1,
                bytes_sent: 10,
                error: None,
            },
            created_at: id,
            updated_at: id,
        }
    }

    #[tokio::test]
    async fn the_history_keeps_the_latest_replaced_updates_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let firmware = Firmware::new(dir.path());
        for id in 0..(MAX_HISTORY as i64 + 3) {
            firmware.remember(update(id)).await;
        }
        // A new server on the same directory reads what the last one wrote.
        let again = Firmware::new(dir.path());
        let past = again.past().await;
        assert_eq!(past.len(), MAX_HISTORY);
        assert_eq!(past[0].id, 3);
        assert_eq!(past.last().map(|u| u.id), Some(MAX_HISTORY as i64 + 2));
    }

    #[test]
    fn uploads_are_bounded_and_left_overs_are_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let uploads = dir.path().join(UPLOAD_DIR);
        std::fs::create_dir_all(&uploads).unwrap();
        std::fs::write(uploads.join("u-old.bin"), b"x").unwrap();
        let firmware = Firmware::new(dir.path());
        assert_eq!(std::fs::read_dir(&uploads).unwrap().count(), 0);
        let mut dropped = Vec::new();
        for i in 0..MAX_UPLOADS + 2 {
            dropped.extend(firmware.keep(Upload {
                id: format!("u-{i}"),
                device_id: "hg-0123456789abcdef".into(),
                file: uploads.join(format!("u-{i}.bin")),
            }));
        }
        assert_eq!(dropped, [uploads.join("u-0.bin"), uploads.join("u-1.bin")]);
        assert!(firmware.find("u-0").is_none());
        assert!(firmware.find("u-2").is_some());
        assert_eq!(firmware.take("u-2"), Some(uploads.join("u-2.bin")));
        assert!(firmware.find("u-2").is_none());
    }
}
