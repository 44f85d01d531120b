//! Firmware updates over the gadget connection.
//!
//! Three layers, each testable on its own:
//! - **checking and staging** ([`GadgetHub::push_ota`]): before anything is sent, the
//!   image is read once and checked against the connected device (ESP-IDF header, the
//!   `HGBOARD=` tag against `hello.board`, the size against `caps.ota.max_size`), then
//!   copied atomically to `<data_dir>/ota/<device>-<sha256>.bin`. The update streams
//!   from that copy, so it survives a restart and the owner's file may change meanwhile.
//! - **[`Transfer`]**: one attempt as a sans-IO state machine, in the quinn style. It
//!   takes device messages (`handle`) and the clock (`handle_timeout`), and hands back
//!   text messages (`poll_message`), the next firmware frame the 64 KB window allows
//!   (`poll_chunk`) and its deadline (`next_deadline`). It never reads a file or a socket.
//! - **[`Updates`]**: the shell the device's session owns. It opens the staged copy,
//!   reads one 4 KB chunk per frame, records progress in the store at every ack, and
//!   starts another attempt (up to `OTA_MAX_ATTEMPTS` in all, each from the beginning
//!   with a fresh offer: the protocol has no resume) when one fails by timeout at once,
//!   and when one fails by disconnect as soon as the device is back.
//!
//! Sending never blocks the conversation: the session asks for a frame only when the
//! window is open and the outbox has room for it, one frame per turn of its event loop,
//! so device messages and agent replies interleave with the image, and a slow device
//! holds the update back instead of making a buffer grow.

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herald_gadget_proto::{
    self as proto, auth, encode_frame, limits, ota_image, Channel, DeviceMessage, FrameHeader,
    OtaErrorCode, OtaRefusal, ServerMessage,
};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::peer::Peer;
use super::session::Command;
use super::GadgetHub;
use crate::clock::now_ms;
use crate::config::GadgetConfig;
use crate::files;
use crate::socket::{Outgoing, Room, SendQueue};
use crate::store::{OtaImage, OtaProgress, OtaStatus, OtaUpdate, Store, StoreError, StoreHandle};

/// Where staged images live, inside the data directory.
pub(crate) const STAGING_DIR: &str = "ota";

// ---- checking and staging ----

/// Why an update was not started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PushError {
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
    Store(#[from] StoreError),
}

fn refused(refusal: OtaRefusal, reason: String) -> PushError {
    PushError::Refused { refusal, reason }
}

/// What an image must fit: the connected device, as its `hello` described it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    device_id: String,
    board: Option<String>,
    max_size: u64,
}

impl Target {
    /// The device's limits, or `unsupported` when it does not take updates.
    fn of(device_id: &str, peer: &Peer) -> Result<Target, PushError> {
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

    fn check_size(&self, size: u64) -> Result<(), PushError> {
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

    fn check_board(&self, image_board: Option<&str>) -> Result<(), PushError> {
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
pub(crate) struct Staged {
    image: OtaImage,
    board: Option<String>,
}

/// Read `source` (never more than the device takes), check it, and copy it to `dir`.
fn stage(source: &Path, dir: &Path, target: &Target) -> Result<Staged, PushError> {
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
async fn discard_staged(store: &StoreHandle, device_id: &str, file: &Path) {
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

/// At start-up, remove the staged images no running update streams from: a crash
/// between staging a copy and recording it, or between an update's end and the copy's
/// removal, leaves one behind. Returns how many went.
pub(crate) fn sweep_unused_staged(dir: &Path, store: &dyn Store) -> std::io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err),
    };
    let in_use: Vec<PathBuf> = store
        .ota_updates()
        .map_err(std::io::Error::other)?
        .into_iter()
        .filter(|u| u.progress.status.is_active())
        .map(|u| u.image.file)
        .collect();
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() && !in_use.contains(&entry.path()) {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

async fn remove_staged(file: &Path) {
    match tokio::fs::remove_file(file).await {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => warn!(%err, file = %file.display(), "could not remove a staged image"),
    }
}

impl GadgetHub {
    /// Check `source` against the connected device, stage it under `data_dir` and start
    /// sending it. Every refusal comes back before a byte is sent.
    pub(crate) async fn push_ota(
        &self,
        device_id: &str,
        source: PathBuf,
        data_dir: &Path,
    ) -> Result<OtaUpdate, PushError> {
        let offline = |_| PushError::Offline(device_id.to_owned());
        let target = self
            .call(device_id, |reply| Command::Ota(Request::Target { reply }))
            .await
            .map_err(offline)??;
        let dir = data_dir.join(STAGING_DIR);
        let staged = tokio::task::spawn_blocking(move || stage(&source, &dir, &target))
            .await
            .map_err(|_| StoreError::Interrupted)??;
        let file = staged.image.file.clone();
        let started = self
            .call(device_id, |reply| {
                Command::Ota(Request::Start { staged, reply })
            })
            .await;
        match started {
            Ok(result) => result,
            Err(err) => {
                discard_staged(&self.store, device_id, &file).await;
                Err(offline(err))
            }
        }
    }
}

/// What the admin API asks of a device's session.
pub(crate) enum Request {
    /// The device's limits, before the image is read.
    Target {
        reply: oneshot::Sender<Result<Target, PushError>>,
    },
    /// Record a staged image and start sending it.
    Start {
        staged: Staged,
        reply: oneshot::Sender<Result<OtaUpdate, PushError>>,
    },
}

// ---- one attempt, sans IO ----

/// How long an attempt waits for each answer: the spec's values unless configured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub ready: Duration,
    pub ack: Duration,
    pub done: Duration,
}

impl Timeouts {
    pub(crate) fn from_config(config: &GadgetConfig) -> Self {
        Timeouts {
            ready: Duration::from_secs(config.ota_ready_timeout_s),
            ack: Duration::from_secs(config.ota_ack_timeout_s),
            done: Duration::from_secs(config.ota_done_timeout_s),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `ota.offer` sent; waiting for `ota.ready`.
    Offered,
    /// `ota.begin` sent; waiting for `ota.ack` 0.
    Authorized,
    /// Frames go out as acks open the window.
    Streaming,
    /// `ota.end` sent; waiting for `ota.done`.
    Ending,
    Finished,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Ending {
    #[error("installed {version}")]
    Installed { version: String },
    /// The device abandoned the update (`ota.error`).
    #[error("the device reported {code}{}", .message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Abandoned {
        code: OtaErrorCode,
        message: Option<String>,
    },
    /// No answer in time; `ota.abort` has been queued.
    #[error("timed out waiting for {0}")]
    TimedOut(&'static str),
}

impl Ending {
    /// Timeouts are worth another attempt, the device's own included; its other
    /// verdicts (a wrong MAC, a bad checksum, a full flash) would only repeat.
    fn is_retryable(&self) -> bool {
        matches!(
            self,
            Ending::TimedOut(_)
                | Ending::Abandoned {
                    code: OtaErrorCode::Timeout,
                    ..
                }
        )
    }
}

/// The next firmware frame: its header and how many image bytes follow. Chunks are
/// consecutive from offset 0, so the caller reads the image front to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub header: FrameHeader,
    pub len: usize,
}

/// One attempt at sending an image: offer, ready, begin, ack 0, frames, end, done.
pub(crate) struct Transfer {
    device_id: String,
    key: [u8; limits::KEY_LEN],
    stream: u8,
    size: u64,
    sha256: String,
    timeouts: Timeouts,
    phase: Phase,
    /// Image bytes handed out as chunks.
    sent: u64,
    /// Image bytes the device confirmed.
    acked: u64,
    seq: u16,
    deadline: Option<Instant>,
    outgoing: VecDeque<ServerMessage>,
    ending: Option<Ending>,
}

impl Transfer {
    /// Offer `image` to the device (the offer is the first message to poll).
    pub(crate) fn start(
        device_id: &str,
        key: [u8; limits::KEY_LEN],
        stream: u8,
        image: &OtaImage,
        timeouts: Timeouts,
        now: Instant,
    ) -> Transfer {
        let offer = ServerMessage::OtaOffer(proto::OtaOffer {
            stream,
            size: image.size,
            sha256: image.sha256.clone(),
            version: image.version.clone(),
        });
        Transfer {
            device_id: device_id.to_owned(),
            key,
            stream,
            size: image.size,
            sha256: image.sha256.clone(),
            timeouts,
            phase: Phase::Offered,
            sent: 0,
            acked: 0,
            seq: 0,
            deadline: Some(now + timeouts.ready),
            outgoing: VecDeque::from([offer]),
            ending: None,
        }
    }

    /// A message from the device. Out-of-place, stale or repeated ones change nothing:
    /// the deadline decides what a device that stopped making sense gets.
    pub(crate) fn handle(&mut self, msg: &DeviceMessage, now: Instant) {
        match (self.phase, msg) {
            (Phase::Finished, _) => {}
            (_, DeviceMessage::OtaError(error)) => self.finish(Ending::Abandoned {
                code: error.code.clone(),
                message: error.message.clone(),
            }),
            (Phase::Offered, DeviceMessage::OtaReady(ready)) => {
                let mac = auth::ota_mac(
                    &self.key,
                    &self.device_id,
                    &ready.nonce,
                    &self.sha256,
                    self.size,
                );
                self.outgoing
                    .push_back(ServerMessage::OtaBegin(proto::OtaBegin {
                        mac: auth::b64(&mac),
                    }));
                self.phase = Phase::Authorized;
                self.deadline = Some(now + self.timeouts.ack);
            }
            (Phase::Authorized, DeviceMessage::OtaAck(ack)) if ack.offset == 0 => {
                self.phase = Phase::Streaming;
                self.deadline = Some(now + self.timeouts.ack);
            }
            (Phase::Streaming, DeviceMessage::OtaAck(ack))
                if ack.offset > self.acked && ack.offset <= self.sent =>
            {
                self.acked = ack.offset;
                if self.acked == self.size {
                    self.outgoing
                        .push_back(ServerMessage::OtaEnd(proto::OtaEnd {}));
                    self.phase = Phase::Ending;
                    self.deadline = Some(now + self.timeouts.done);
                } else {
                    self.deadline = Some(now + self.timeouts.ack);
                }
            }
            (Phase::Ending, DeviceMessage::OtaDone(done)) => self.finish(Ending::Installed {
                version: done.version.clone(),
            }),
            _ => {}
        }
    }

    /// The clock moved: a wait that ran out abandons the attempt with `ota.abort`.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_none_or(|deadline| now < deadline) {
            return;
        }
        let waiting_for = match self.phase {
            Phase::Offered => "ota.ready",
            Phase::Authorized | Phase::Streaming => "ota.ack",
            Phase::Ending => "ota.done",
            Phase::Finished => return,
        };
        self.outgoing
            .push_back(ServerMessage::OtaAbort(proto::OtaAbort {}));
        self.finish(Ending::TimedOut(waiting_for));
    }

    fn finish(&mut self, ending: Ending) {
        self.phase = Phase::Finished;
        self.deadline = None;
        self.ending = Some(ending);
    }

    pub(crate) fn poll_message(&mut self) -> Option<ServerMessage> {
        self.outgoing.pop_front()
    }

    /// Bytes of the next chunk, when the window has room for all of them.
    fn next_len(&self) -> Option<u64> {
        if self.phase != Phase::Streaming || self.sent >= self.size {
            return None;
        }
        let len = (self.size - self.sent).min(limits::OTA_FRAME as u64);
        (self.sent + len - self.acked <= limits::OTA_MAX_UNACKED).then_some(len)
    }

    pub(crate) fn wants_chunk(&self) -> bool {
        self.next_len().is_some()
    }

    /// The next frame to send, if the window allows one; it counts as sent.
    pub(crate) fn poll_chunk(&mut self) -> Option<Chunk> {
        let len = self.next_len()?;
        let chunk = Chunk {
            header: FrameHeader {
                channel: Channel::Firmware,
                stream: self.stream,
                seq: self.seq,
            },
            len: usize::try_from(len).ok()?,
        };
        self.sent += len;
        self.seq = self.seq.wrapping_add(1);
        Some(chunk)
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub(crate) fn acked(&self) -> u64 {
        self.acked
    }

    pub(crate) fn take_ending(&mut self) -> Option<Ending> {
        self.ending.take()
    }
}

// ---- the session's shell ----

/// What an update needs of the device's live connection.
#[derive(Clone, Copy)]
pub(crate) struct Link<'a> {
    pub peer: &'a Peer,
    pub outbox: &'a SendQueue,
}

/// The attempt in progress.
struct Active {
    update: OtaUpdate,
    transfer: Transfer,
    image: tokio::fs::File,
}

/// A device's firmware updates, as its session drives them.
pub(crate) struct Updates {
    device_id: String,
    hub: Arc<GadgetHub>,
    timeouts: Timeouts,
    /// Boxed: an update rarely runs, and every idle device carries this field.
    active: Option<Box<Active>>,
}

impl Updates {
    pub(crate) fn new(device_id: String, hub: Arc<GadgetHub>) -> Self {
        let timeouts = Timeouts::from_config(&hub.config);
        Updates {
            device_id,
            hub,
            timeouts,
            active: None,
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.active
            .as_ref()
            .and_then(|a| a.transfer.next_deadline())
    }

    /// Whether a firmware frame may go out as soon as the outbox has room.
    pub(crate) fn wants_frame(&self) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.transfer.wants_chunk())
    }

    /// Send the next frame into the outbox room reserved for it.
    pub(crate) async fn send_frame(&mut self, room: Room) {
        let Some(active) = &mut self.active else {
            return;
        };
        let Some(chunk) = active.transfer.poll_chunk() else {
            return;
        };
        let mut payload = vec![0; chunk.len];
        if let Err(err) = active.image.read_exact(&mut payload).await {
            // The staged copy is gone or shorter than recorded: no attempt can succeed.
            room.send(abort());
            if let Some(active) = self.active.take() {
                let error = format!("cannot read the staged image: {err}");
                fail(&self.hub.store, active.update, error).await;
            }
            return;
        }
        room.send(Outgoing::Binary(encode_frame(chunk.header, &payload)));
    }

    pub(crate) async fn on_message(&mut self, msg: &DeviceMessage, link: Link<'_>) {
        let Some(active) = &mut self.active else {
            debug!(device = %self.device_id, msg = msg.type_name(), "no update running");
            return;
        };
        let acked = active.transfer.acked();
        active.transfer.handle(msg, Instant::now());
        if active.transfer.acked() > acked {
            active.update.progress.bytes_sent = active.transfer.acked();
            save(&self.hub.store, &active.update).await;
        }
        self.settle(link).await;
    }

    pub(crate) async fn on_timer(&mut self, now: Instant, link: Link<'_>) {
        if let Some(active) = &mut self.active {
            active.transfer.handle_timeout(now);
            self.settle(link).await;
        }
    }

    pub(crate) async fn on_request(&mut self, request: Request, link: Option<Link<'_>>) {
        match request {
            Request::Target { reply } => {
                let _ = reply.send(self.target(link));
            }
            Request::Start { staged, reply } => {
                let _ = reply.send(self.begin(staged, link).await);
            }
        }
    }

    /// The device is (back) online: resume an update a disconnect or a restart cut off.
    pub(crate) async fn attached(&mut self, link: Link<'_>) {
        if self.active.is_some() {
            return;
        }
        let id = self.device_id.clone();
        let mut update = match self.hub.store.run(move |store| store.ota_update(&id)).await {
            Ok(Some(update)) if update.progress.status.is_active() => update,
            Ok(_) => return,
            Err(err) => {
                warn!(%err, device = %self.device_id, "could not look up firmware updates");
                return;
            }
        };
        let interrupted = "interrupted by a server restart";
        if update.progress.status == OtaStatus::Sending {
            update.progress.error = Some(interrupted.to_owned());
        }
        if update.progress.attempts >= limits::OTA_MAX_ATTEMPTS {
            let error = exhausted(update.progress.error.as_deref().unwrap_or(interrupted));
            fail(&self.hub.store, update, error).await;
        } else {
            self.start(update, link).await;
        }
    }

    /// The connection is gone, and with it the running attempt.
    pub(crate) async fn detached(&mut self) {
        let Some(active) = self.active.take() else {
            return;
        };
        let Active {
            mut update,
            transfer,
            ..
        } = *active;
        update.progress.bytes_sent = transfer.acked();
        let error = "the connection dropped";
        if update.progress.attempts < limits::OTA_MAX_ATTEMPTS {
            info!(device = %self.device_id, "firmware update interrupted; retrying on reconnect");
            update.progress.status = OtaStatus::Retrying;
            update.progress.error = Some(error.to_owned());
            save(&self.hub.store, &update).await;
        } else {
            fail(&self.hub.store, update, exhausted(error)).await;
        }
    }

    fn target(&self, link: Option<Link<'_>>) -> Result<Target, PushError> {
        let link = link.ok_or_else(|| PushError::Offline(self.device_id.clone()))?;
        if self.active.is_some() {
            return Err(refused(
                OtaRefusal::Busy,
                format!(
                    "an update of {0} is already running (see `herald ota status {0}`)",
                    self.device_id
                ),
            ));
        }
        Target::of(&self.device_id, link.peer)
    }

    /// Record a staged image and make the first attempt.
    async fn begin(
        &mut self,
        staged: Staged,
        link: Option<Link<'_>>,
    ) -> Result<OtaUpdate, PushError> {
        let checked = self.target(link).and_then(|target| {
            target.check_size(staged.image.size)?;
            target.check_board(staged.board.as_deref())
        });
        let stored = match (checked, link) {
            (Ok(()), Some(link)) => {
                let id = self.device_id.clone();
                let image = staged.image.clone();
                self.hub
                    .store
                    .run(move |store| store.stage_ota(&id, &image, now_ms()))
                    .await
                    .map_err(PushError::from)
                    .map(|stored| (stored, link))
            }
            (Err(err), _) => Err(err),
            (Ok(()), None) => Err(PushError::Offline(self.device_id.clone())),
        };
        match stored {
            Ok((Some(update), link)) => Ok(self.start(update, link).await),
            Ok((None, _)) => {
                discard_staged(&self.hub.store, &self.device_id, &staged.image.file).await;
                Err(refused(
                    OtaRefusal::Busy,
                    format!("an update of {} is already running", self.device_id),
                ))
            }
            Err(err) => {
                discard_staged(&self.hub.store, &self.device_id, &staged.image.file).await;
                Err(err)
            }
        }
    }

    /// Start the next attempt from the beginning; returns the update as it now stands.
    async fn start(&mut self, mut update: OtaUpdate, link: Link<'_>) -> OtaUpdate {
        let ready = match Target::of(&self.device_id, link.peer) {
            Ok(target) => target.check_size(update.image.size),
            Err(err) => Err(err),
        };
        if let Err(err) = ready {
            return fail(&self.hub.store, update, err.to_string()).await;
        }
        let id = self.device_id.clone();
        let key = match self.hub.store.run(move |store| store.device(&id)).await {
            Ok(Some(device)) => device.key,
            Ok(None) => {
                return fail(&self.hub.store, update, "the device was forgotten".into()).await
            }
            Err(err) => return fail(&self.hub.store, update, err.to_string()).await,
        };
        let image = match tokio::fs::File::open(&update.image.file).await {
            Ok(image) => image,
            Err(err) => {
                let error = format!("cannot read the staged image: {err}");
                return fail(&self.hub.store, update, error).await;
            }
        };
        update.progress.attempts += 1;
        update.progress.status = OtaStatus::Sending;
        update.progress.bytes_sent = 0;
        save(&self.hub.store, &update).await;
        info!(
            device = %self.device_id,
            version = %update.image.version,
            attempt = update.progress.attempts,
            "offering firmware"
        );
        let stream = u8::try_from(update.progress.attempts).unwrap_or(u8::MAX);
        let mut transfer = Transfer::start(
            &self.device_id,
            key,
            stream,
            &update.image,
            self.timeouts,
            Instant::now(),
        );
        flush(&mut transfer, link).await;
        let snapshot = update.clone();
        self.active = Some(Box::new(Active {
            update,
            transfer,
            image,
        }));
        snapshot
    }

    /// Send what the attempt queued and act on its ending, if it has one.
    async fn settle(&mut self, link: Link<'_>) {
        let Some(active) = &mut self.active else {
            return;
        };
        flush(&mut active.transfer, link).await;
        let Some(ending) = active.transfer.take_ending() else {
            return;
        };
        let Some(active) = self.active.take() else {
            return;
        };
        let Active { mut update, .. } = *active;
        match ending {
            Ending::Installed { version } => {
                info!(device = %self.device_id, %version, "firmware installed");
                if version != update.image.version {
                    warn!(
                        device = %self.device_id,
                        offered = %update.image.version,
                        %version,
                        "the device reports another version than offered"
                    );
                }
                update.progress = OtaProgress {
                    status: OtaStatus::Done,
                    attempts: update.progress.attempts,
                    bytes_sent: update.image.size,
                    error: None,
                };
                save(&self.hub.store, &update).await;
                remove_staged(&update.image.file).await;
            }
            ending
                if ending.is_retryable() && update.progress.attempts < limits::OTA_MAX_ATTEMPTS =>
            {
                info!(device = %self.device_id, %ending, "firmware update failed; trying again");
                update.progress.error = Some(ending.to_string());
                self.start(update, link).await;
            }
            ending if ending.is_retryable() => {
                fail(&self.hub.store, update, exhausted(&ending.to_string())).await;
            }
            ending => {
                fail(&self.hub.store, update, ending.to_string()).await;
            }
        }
    }
}

/// The update is over without success: record why and drop the staged copy.
async fn fail(store: &StoreHandle, mut update: OtaUpdate, error: String) -> OtaUpdate {
    warn!(device = %update.device_id, %error, "firmware update failed");
    update.progress.status = OtaStatus::Failed;
    update.progress.error = Some(error);
    save(store, &update).await;
    remove_staged(&update.image.file).await;
    update
}

async fn save(store: &StoreHandle, update: &OtaUpdate) {
    let (id, progress) = (update.id, update.progress.clone());
    if let Err(err) = store
        .run(move |store| store.save_ota_progress(id, &progress, now_ms()))
        .await
    {
        warn!(%err, device = %update.device_id, "could not record firmware update progress");
    }
}

fn exhausted(error: &str) -> String {
    format!("{error} ({} attempts, giving up)", limits::OTA_MAX_ATTEMPTS)
}

fn abort() -> Outgoing {
    Outgoing::Text(ServerMessage::OtaAbort(proto::OtaAbort {}).encode())
}

async fn flush(transfer: &mut Transfer, link: Link<'_>) {
    while let Some(msg) = transfer.poll_message() {
        // A full outbox makes the session wait: backpressure, not a growing buffer.
        let _ = link.outbox.send(Outgoing::Text(msg.encode())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_gadget_proto::{OtaAck, OtaDone, OtaError, OtaReady};

    const KEY: [u8; 32] = [7; 32];
    const ID: &str = "hg-0123456789abcdef";
    const NONCE: &str = "AAECAwQFBgcICQoLDA0ODw==";

    fn timeouts() -> Timeouts {
        Timeouts {
            ready: Duration::from_secs(30),
            ack: Duration::from_secs(30),
            done: Duration::from_secs(60),
        }
    }

    fn image(size: u64) -> OtaImage {
        OtaImage {
            file: "/unused".into(),
            sha256: "ab".repeat(32),
            size,
            version: "0.2.0".into(),
        }
    }

    fn ack(offset: u64) -> DeviceMessage {
        DeviceMessage::OtaAck(OtaAck { offset })
    }

    /// A transfer that got `ota.ready` and `ota.ack` 0.
    fn streaming(size: u64, now: Instant) -> Transfer {
        let mut t = Transfer::start(ID, KEY, 1, &image(size), timeouts(), now);
        t.poll_message();
        let ready = OtaReady {
            nonce: NONCE.into(),
        };
        t.handle(&DeviceMessage::OtaReady(ready), now);
        t.poll_message();
        t.handle(&ack(0), now);
        t
    }

    fn drain(t: &mut Transfer) -> Vec<Chunk> {
        std::iter::from_fn(|| t.poll_chunk()).collect()
    }

    #[test]
    fn offer_then_an_authorized_begin() {
        let now = Instant::now();
        let mut t = Transfer::start(ID, KEY, 3, &image(1234), timeouts(), now);
        let Some(ServerMessage::OtaOffer(offer)) = t.poll_message() else {
            panic!("no offer")
        };
        assert_eq!((offer.stream, offer.size), (3, 1234));
        assert_eq!(offer.version, "0.2.0");
        assert!(
            t.poll_chunk().is_none(),
            "no data before the device is ready"
        );
        let ready = OtaReady {
            nonce: NONCE.into(),
        };
        t.handle(&DeviceMessage::OtaReady(ready), now);
        let Some(ServerMessage::OtaBegin(begin)) = t.poll_message() else {
            panic!("no begin")
        };
        let sha = "ab".repeat(32);
        assert!(auth::verify_ota_mac(
            &KEY, ID, NONCE, &sha, 1234, &begin.mac
        ));
        assert!(t.poll_chunk().is_none(), "no data before ack 0");
        t.handle(&ack(0), now);
        assert!(t.wants_chunk());
    }

    #[test]
    fn frames_stay_within_the_window_and_end_follows_the_last_ack() {
        let now = Instant::now();
        let size = 100_000;
        let mut t = streaming(size, now);
        let first = drain(&mut t);
        assert_eq!(first.len(), 16, "64 KB of 4 KB frames");
        let seqs: Vec<u16> = first.iter().map(|c| c.header.seq).collect();
        assert_eq!(seqs, (0..16).collect::<Vec<_>>());
        assert!(first
            .iter()
            .all(|c| c.len == limits::OTA_FRAME && c.header.channel == Channel::Firmware));

        t.handle(&ack(16_384), now);
        assert_eq!(drain(&mut t).len(), 4);
        let mut sent = 20 * 4096u64;
        let mut acked = 16_384;
        let mut last = None;
        while acked < size {
            acked = (acked + 16_384).min(sent);
            t.handle(&ack(acked), now);
            for chunk in drain(&mut t) {
                sent += chunk.len as u64;
                assert!(sent - acked <= limits::OTA_MAX_UNACKED);
                last = Some(chunk);
            }
            if acked < size {
                assert!(t.poll_message().is_none(), "no end before the last ack");
            }
        }
        assert_eq!(sent, size);
        let last = last.unwrap();
        assert_eq!(last.header.seq, 24);
        assert_eq!(last.len, (size % 4096) as usize);
        assert!(matches!(t.poll_message(), Some(ServerMessage::OtaEnd(_))));
        t.handle(
            &DeviceMessage::OtaDone(OtaDone {
                version: "0.2.0".into(),
            }),
            now,
        );
        assert_eq!(
            t.take_ending(),
            Some(Ending::Installed {
                version: "0.2.0".into()
            })
        );
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn stale_and_impossible_acks_change_nothing() {
        let now = Instant::now();
        let mut t = streaming(100_000, now);
        drain(&mut t);
        let deadline = t.next_deadline();
        let later = now + Duration::from_secs(5);
        t.handle(&ack(70_000), later);
        t.handle(&ack(0), later);
        assert_eq!(t.acked(), 0);
        assert_eq!(t.next_deadline(), deadline);
        assert!(!t.wants_chunk());
        t.handle(&ack(16_384), later);
        assert_eq!(t.next_deadline(), Some(later + Duration::from_secs(30)));
    }

    #[test]
    fn each_wait_times_out_with_an_abort() {
        let now = Instant::now();
        let abort_after = |t: &mut Transfer, wait: Duration| {
            let deadline = t.next_deadline().unwrap();
            t.handle_timeout(deadline - Duration::from_millis(1));
            assert!(t.take_ending().is_none());
            assert_eq!(deadline, now + wait);
            t.handle_timeout(deadline);
            assert!(matches!(t.poll_message(), Some(ServerMessage::OtaAbort(_))));
            t.take_ending().unwrap()
        };
        let mut t = Transfer::start(ID, KEY, 1, &image(5000), timeouts(), now);
        t.poll_message();
        assert_eq!(
            abort_after(&mut t, Duration::from_secs(30)),
            Ending::TimedOut("ota.ready")
        );

        let mut t = streaming(5000, now);
        drain(&mut t);
        let ending = abort_after(&mut t, Duration::from_secs(30));
        assert_eq!(ending, Ending::TimedOut("ota.ack"));
        assert!(ending.is_retryable());

        let mut t = streaming(5000, now);
        drain(&mut t);
        t.handle(&ack(5000), now);
        assert!(matches!(t.poll_message(), Some(ServerMessage::OtaEnd(_))));
        assert_eq!(
            abort_after(&mut t, Duration::from_secs(60)),
            Ending::TimedOut("ota.done")
        );
    }

    #[test]
    fn a_device_error_ends_the_attempt_without_an_abort() {
        let now = Instant::now();
        let mut t = streaming(5000, now);
        let error = |code| {
            DeviceMessage::OtaError(OtaError {
                code,
                message: Some("bad".into()),
            })
        };
        t.handle(&error(OtaErrorCode::Checksum), now);
        assert!(t.poll_message().is_none());
        assert!(!t.wants_chunk());
        let ending = t.take_ending().unwrap();
        assert_eq!(ending.to_string(), "the device reported checksum: bad");
        assert!(!ending.is_retryable());

        let mut t = streaming(5000, now);
        t.handle(&error(OtaErrorCode::Timeout), now);
        assert!(t.take_ending().unwrap().is_retryable());
    }

    fn target(board: Option<&str>, max_size: u64) -> Target {
        Target {
            device_id: ID.into(),
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

    #[test]
    fn staging_copies_a_checked_image_privately() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = vec![0u8; 400];
        bytes[0] = ota_image::IMAGE_MAGIC;
        bytes[32..36].copy_from_slice(&ota_image::APP_DESC_MAGIC.to_le_bytes());
        bytes[48..53].copy_from_slice(b"0.3.1");
        bytes[300..314].copy_from_slice(b"HGBOARD=s3-box");
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
