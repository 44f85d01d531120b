//! A device's firmware updates as a sub-machine of its session core, with no I/O.
//!
//! [`Updates`] runs one [`Transfer`] at a time and decides what happens around it: an
//! update left unfinished resumes when the device is back, each attempt is recorded in
//! the store, a failed one is retried from the beginning (up to `OTA_MAX_ATTEMPTS` in
//! all, with a fresh offer: the protocol has no resume) when it failed by timeout at
//! once and when it failed by disconnect as soon as the device is back, and a finished
//! one drops its staged copy. What needs the store or a file is an [`OtaEffect`]; the
//! shell carries it out and hands the result back (`found`, `prepared`, `staged`).

use std::path::PathBuf;
use std::time::Instant;

use herald_gadget_proto::{self as proto, limits, DeviceMessage, OtaRefusal, ServerMessage};
use tracing::{debug, info, warn};

use super::transfer::{Chunk, Ending, Timeouts, Transfer};
use super::{
    refused, NotPrepared, OtaImage, OtaProgress, OtaStatus, OtaUpdate, PushError, Request, Staged,
    StoreFailed, Target,
};
use crate::gadget::Peer;
use crate::CallId;

/// What the updates need of the store and the disk.
#[derive(Debug)]
pub enum OtaEffect {
    /// Look up the device's update, for [`Updates::found`].
    Lookup,
    /// Find the device's key and open the staged image for reading, for
    /// [`Updates::prepared`].
    Prepare { file: PathBuf },
    /// Record an update's progress.
    Save { id: i64, progress: OtaProgress },
    /// Remove a staged image.
    Remove(PathBuf),
    /// Record a staged image as the device's update, for [`Updates::staged`].
    Stage {
        /// The staged image.
        image: OtaImage,
        /// The admin request that answers with the update.
        call: CallId,
    },
    /// Remove a staged image no update took, unless the running one streams from it.
    Discard(PathBuf),
    /// Answer an admin request for the device's limits.
    Target {
        /// The request.
        call: CallId,
        /// The limits, or why no update can start.
        answer: Result<Target, PushError>,
    },
    /// Answer an admin request to start an update: the update as offered, or why not.
    Started {
        /// The request.
        call: CallId,
        /// The update, or why it did not start.
        answer: Result<OtaUpdate, PushError>,
    },
}

/// What the updates hand back: messages for the device and effects.
pub enum OtaOutput {
    /// A message for the device.
    Send(ServerMessage),
    /// Work for the shell.
    Effect(OtaEffect),
}

/// The update being sent.
struct Attempt {
    update: OtaUpdate,
    /// `None` while the shell finds the device's key and opens the image.
    transfer: Option<Transfer>,
    /// An admin request waiting for the update as it stands once offered.
    call: Option<CallId>,
}

#[derive(Default)]
pub struct Updates {
    /// Boxed: an update rarely runs, and every idle device carries this field.
    attempt: Option<Box<Attempt>>,
    out: Vec<OtaOutput>,
}

impl Updates {
    /// What the updates handed back since the last call, in order. Taken whole, so an
    /// idle device keeps no buffer.
    pub fn take_output(&mut self) -> Vec<OtaOutput> {
        std::mem::take(&mut self.out)
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.transfer().and_then(Transfer::next_deadline)
    }

    /// Whether an image is being sent (its staged copy is open).
    pub fn is_running(&self) -> bool {
        self.attempt.is_some()
    }

    /// Whether a firmware frame may go out as soon as the outbox has room.
    pub fn wants_chunk(&self) -> bool {
        self.transfer().is_some_and(Transfer::wants_chunk)
    }

    /// The next frame to send, which counts as sent: the shell reads its bytes from the
    /// staged copy, front to back.
    pub fn poll_chunk(&mut self) -> Option<Chunk> {
        self.attempt.as_mut()?.transfer.as_mut()?.poll_chunk()
    }

    fn transfer(&self) -> Option<&Transfer> {
        self.attempt.as_ref()?.transfer.as_ref()
    }

    fn effect(&mut self, effect: OtaEffect) {
        self.out.push(OtaOutput::Effect(effect));
    }

    // ---- the device comes and goes ----

    /// The device is (back) online: look for an update a disconnect or a restart cut off.
    pub fn attached(&mut self) {
        if self.attempt.is_none() {
            self.effect(OtaEffect::Lookup);
        }
    }

    /// The device's update in the store, when it came online.
    pub fn found(
        &mut self,
        device_id: &str,
        peer: &Peer,
        found: Result<Option<OtaUpdate>, StoreFailed>,
    ) {
        if self.attempt.is_some() {
            return;
        }
        let mut update = match found {
            Ok(Some(update)) if update.progress.status.is_active() => update,
            Ok(_) => return,
            Err(err) => {
                warn!(%err, device = %device_id, "could not look up firmware updates");
                return;
            }
        };
        let interrupted = "interrupted by a server restart";
        if update.progress.status == OtaStatus::Sending {
            update.progress.error = Some(interrupted.to_owned());
        }
        if update.progress.attempts >= limits::OTA_MAX_ATTEMPTS {
            let error = exhausted(update.progress.error.as_deref().unwrap_or(interrupted));
            self.fail(update, error);
        } else {
            self.start(device_id, peer, update, None);
        }
    }

    /// The connection is gone, and with it the running attempt.
    pub fn detached(&mut self) {
        let Some(attempt) = self.attempt.take() else {
            return;
        };
        let Attempt {
            mut update,
            transfer,
            ..
        } = *attempt;
        update.progress.bytes_sent = transfer.map_or(0, |t| t.acked());
        let error = "the connection dropped";
        if update.progress.attempts < limits::OTA_MAX_ATTEMPTS {
            info!(device = %update.device_id, "firmware update interrupted; retrying on reconnect");
            update.progress.status = OtaStatus::Retrying;
            update.progress.error = Some(error.to_owned());
            self.save(&update);
        } else {
            self.fail(update, exhausted(error));
        }
    }

    // ---- the admin API ----

    /// A request from the admin API; `peer` is the connected device, if any.
    pub fn request(&mut self, device_id: &str, peer: Option<&Peer>, request: Request) {
        match request {
            Request::Target { call } => {
                let answer = self.target(device_id, peer);
                self.effect(OtaEffect::Target { call, answer });
            }
            Request::Start { staged, call } => self.begin(device_id, peer, staged, call),
        }
    }

    fn target(&self, device_id: &str, peer: Option<&Peer>) -> Result<Target, PushError> {
        let peer = peer.ok_or_else(|| PushError::Offline(device_id.to_owned()))?;
        if self.attempt.is_some() {
            return Err(refused(
                OtaRefusal::Busy,
                format!(
                    "an update of {device_id} is already running (see `herald ota status {device_id}`)"
                ),
            ));
        }
        Target::of(device_id, peer)
    }

    /// Check a staged image against the device, then have it recorded.
    fn begin(&mut self, device_id: &str, peer: Option<&Peer>, staged: Staged, call: CallId) {
        let checked = self.target(device_id, peer).and_then(|target| {
            target.check_size(staged.image.size)?;
            target.check_board(staged.board.as_deref())
        });
        match checked {
            Ok(()) => self.effect(OtaEffect::Stage {
                image: staged.image,
                call,
            }),
            Err(err) => {
                self.effect(OtaEffect::Discard(staged.image.file));
                self.effect(OtaEffect::Started {
                    call,
                    answer: Err(err),
                });
            }
        }
    }

    /// The store's answer to [`OtaEffect::Stage`]: the recorded update, or `None` when
    /// another one already runs.
    pub fn staged(
        &mut self,
        device_id: &str,
        peer: Option<&Peer>,
        file: PathBuf,
        stored: Result<Option<OtaUpdate>, StoreFailed>,
        call: CallId,
    ) {
        let refusal = match (stored, peer) {
            (Ok(Some(update)), Some(peer)) => {
                return self.start(device_id, peer, update, Some(call));
            }
            (Ok(None), _) => refused(
                OtaRefusal::Busy,
                format!("an update of {device_id} is already running"),
            ),
            (Ok(Some(_)), None) => PushError::Offline(device_id.to_owned()),
            (Err(failed), _) => PushError::Store(failed),
        };
        self.effect(OtaEffect::Discard(file));
        self.effect(OtaEffect::Started {
            call,
            answer: Err(refusal),
        });
    }

    /// Answer the admin request waiting for this update, if one is.
    fn answer_start(&mut self, call: Option<CallId>, update: OtaUpdate) {
        if let Some(call) = call {
            self.effect(OtaEffect::Started {
                call,
                answer: Ok(update),
            });
        }
    }

    // ---- attempts ----

    /// Start the next attempt from the beginning, once the shell has the key and the
    /// image open.
    fn start(&mut self, device_id: &str, peer: &Peer, update: OtaUpdate, call: Option<CallId>) {
        let ready = Target::of(device_id, peer).and_then(|t| t.check_size(update.image.size));
        if let Err(err) = ready {
            let failed = self.fail(update, err.to_string());
            self.answer_start(call, failed);
            return;
        }
        let file = update.image.file.clone();
        self.attempt = Some(Box::new(Attempt {
            update,
            transfer: None,
            call,
        }));
        self.effect(OtaEffect::Prepare { file });
    }

    /// The shell's answer to [`OtaEffect::Prepare`]: the device's key (the image is
    /// open), or why the attempt cannot be made. The transfer waits on the device
    /// as long as `timeouts` say.
    pub fn prepared(
        &mut self,
        device_id: &str,
        key: Result<[u8; limits::KEY_LEN], NotPrepared>,
        timeouts: Timeouts,
        now: Instant,
    ) {
        let Some(mut attempt) = self.attempt.take_if(|a| a.transfer.is_none()) else {
            return;
        };
        let key = match key {
            Ok(key) => key,
            Err(error) => {
                let failed = self.fail(attempt.update, error.to_string());
                self.answer_start(attempt.call, failed);
                return;
            }
        };
        let update = &mut attempt.update;
        update.progress.attempts += 1;
        update.progress.status = OtaStatus::Sending;
        update.progress.bytes_sent = 0;
        info!(
            device = %device_id,
            version = %update.image.version,
            attempt = update.progress.attempts,
            "offering firmware"
        );
        let stream = u8::try_from(update.progress.attempts).unwrap_or(u8::MAX);
        let mut transfer = Transfer::start(device_id, key, stream, &update.image, timeouts, now);
        let snapshot = update.clone();
        self.save(&snapshot);
        self.flush(&mut transfer);
        self.answer_start(attempt.call.take(), snapshot);
        attempt.transfer = Some(transfer);
        self.attempt = Some(attempt);
    }

    /// A firmware-update message of the device.
    pub fn message(&mut self, device_id: &str, peer: &Peer, msg: &DeviceMessage, now: Instant) {
        let Some(Attempt {
            update,
            transfer: Some(transfer),
            ..
        }) = self.attempt.as_deref_mut()
        else {
            debug!(device = %device_id, msg = msg.type_name(), "no update running");
            return;
        };
        let acked = transfer.acked();
        transfer.handle(msg, now);
        if transfer.acked() > acked {
            update.progress.bytes_sent = transfer.acked();
            let (id, progress) = (update.id, update.progress.clone());
            self.effect(OtaEffect::Save { id, progress });
        }
        self.settle(device_id, peer);
    }

    pub fn timeout(&mut self, device_id: &str, peer: &Peer, now: Instant) {
        if let Some(transfer) = self.attempt.as_mut().and_then(|a| a.transfer.as_mut()) {
            transfer.handle_timeout(now);
            self.settle(device_id, peer);
        }
    }

    /// The staged copy could not be read: no attempt can succeed.
    pub fn unreadable(&mut self, err: String) {
        let Some(attempt) = self.attempt.take() else {
            return;
        };
        self.out
            .push(OtaOutput::Send(ServerMessage::OtaAbort(proto::OtaAbort {})));
        self.fail(
            attempt.update,
            format!("cannot read the staged image: {err}"),
        );
    }

    /// Hand on what the attempt queued and act on its ending, if it has one.
    fn settle(&mut self, device_id: &str, peer: &Peer) {
        let Some(mut attempt) = self.attempt.take() else {
            return;
        };
        let Some(transfer) = attempt.transfer.as_mut() else {
            self.attempt = Some(attempt);
            return;
        };
        self.flush(transfer);
        let Some(ending) = transfer.take_ending() else {
            self.attempt = Some(attempt);
            return;
        };
        let mut update = attempt.update;
        match ending {
            Ending::Installed { version } => {
                info!(device = %device_id, %version, "firmware installed");
                if version != update.image.version {
                    warn!(
                        device = %device_id,
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
                self.save(&update);
                self.effect(OtaEffect::Remove(update.image.file));
            }
            ending
                if ending.is_retryable() && update.progress.attempts < limits::OTA_MAX_ATTEMPTS =>
            {
                info!(device = %device_id, %ending, "firmware update failed; trying again");
                update.progress.error = Some(ending.to_string());
                self.start(device_id, peer, update, None);
            }
            ending if ending.is_retryable() => {
                self.fail(update, exhausted(&ending.to_string()));
            }
            ending => {
                self.fail(update, ending.to_string());
            }
        }
    }

    fn flush(&mut self, transfer: &mut Transfer) {
        while let Some(msg) = transfer.poll_message() {
            self.out.push(OtaOutput::Send(msg));
        }
    }

    fn save(&mut self, update: &OtaUpdate) {
        let (id, progress) = (update.id, update.progress.clone());
        self.effect(OtaEffect::Save { id, progress });
    }

    /// The update is over without success: record why and drop the staged copy.
    fn fail(&mut self, mut update: OtaUpdate, error: String) -> OtaUpdate {
        warn!(device = %update.device_id, %error, "firmware update failed");
        update.progress.status = OtaStatus::Failed;
        update.progress.error = Some(error);
        self.save(&update);
        self.effect(OtaEffect::Remove(update.image.file.clone()));
        update
    }
}

fn exhausted(error: &str) -> String {
    format!("{error} ({} attempts, giving up)", limits::OTA_MAX_ATTEMPTS)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const ID: &str = "hg-0123456789abcdef";

    fn peer() -> Peer {
        let hello = serde_json::json!({"proto": 1, "device_id": ID, "board": "s3-box",
            "caps": {"ota": {"max_size": 1_000_000}}});
        Peer::from(serde_json::from_value::<proto::Hello>(hello).unwrap())
    }

    fn update(status: OtaStatus, attempts: u32) -> OtaUpdate {
        OtaUpdate {
            id: 7,
            device_id: ID.into(),
            image: OtaImage {
                file: "/staged/hg-1.bin".into(),
                sha256: "ab".repeat(32),
                size: 10_000,
                version: "0.2.0".into(),
            },
            progress: OtaProgress {
                status,
                attempts,
                bytes_sent: 0,
                error: None,
            },
            created_at: 0,
            updated_at: 0,
        }
    }

    const TIMEOUTS: Timeouts = Timeouts {
        ready: Duration::from_secs(30),
        ack: Duration::from_secs(30),
        done: Duration::from_secs(60),
    };

    fn updates() -> Updates {
        Updates::default()
    }

    /// What came out, as words: `offer`, `abort`, `prepare`, `save:<status>`, `remove`.
    fn outputs(updates: &mut Updates) -> Vec<String> {
        updates
            .take_output()
            .into_iter()
            .map(|output| match output {
                OtaOutput::Send(msg) => msg.type_name().trim_start_matches("ota.").to_owned(),
                OtaOutput::Effect(OtaEffect::Lookup) => "lookup".into(),
                OtaOutput::Effect(OtaEffect::Prepare { .. }) => "prepare".into(),
                OtaOutput::Effect(OtaEffect::Save { progress, .. }) => {
                    format!("save:{}", progress.status.as_str())
                }
                OtaOutput::Effect(OtaEffect::Remove(_)) => "remove".into(),
                OtaOutput::Effect(OtaEffect::Stage { .. }) => "stage".into(),
                OtaOutput::Effect(OtaEffect::Discard(_)) => "discard".into(),
                OtaOutput::Effect(OtaEffect::Target { .. } | OtaEffect::Started { .. }) => {
                    "answer".into()
                }
            })
            .collect()
    }

    #[test]
    fn an_interrupted_update_resumes_and_each_silent_attempt_is_retried_until_the_last() {
        let (peer, start) = (peer(), crate::testing::start());
        let mut updates = updates();
        updates.attached();
        assert_eq!(outputs(&mut updates), ["lookup"]);
        updates.found(ID, &peer, Ok(Some(update(OtaStatus::Retrying, 1))));
        assert_eq!(outputs(&mut updates), ["prepare"]);
        updates.prepared(ID, Ok([7; 32]), TIMEOUTS, start);
        assert_eq!(outputs(&mut updates), ["save:sending", "offer"]);
        assert!(updates.is_running());

        // The device never answers: attempt 2 times out, attempt 3 starts at once.
        let mut now = updates.next_deadline().unwrap();
        assert_eq!(now, start + Duration::from_secs(30));
        updates.timeout(ID, &peer, now);
        assert_eq!(outputs(&mut updates), ["abort", "prepare"]);
        updates.prepared(ID, Ok([7; 32]), TIMEOUTS, now);
        assert_eq!(outputs(&mut updates), ["save:sending", "offer"]);

        // The last one gives up: recorded as failed, the staged copy removed.
        now = updates.next_deadline().unwrap();
        updates.timeout(ID, &peer, now);
        assert_eq!(outputs(&mut updates), ["abort", "save:failed", "remove"]);
        assert!(!updates.is_running());
        assert_eq!(updates.next_deadline(), None);
    }

    #[test]
    fn a_drop_mid_update_is_kept_for_the_return_and_a_missing_device_fails_it() {
        let (peer, now) = (peer(), crate::testing::start());
        let mut updates = updates();
        updates.found(ID, &peer, Ok(Some(update(OtaStatus::Sending, 1))));
        updates.prepared(ID, Ok([7; 32]), TIMEOUTS, now);
        outputs(&mut updates);
        updates.detached();
        assert_eq!(outputs(&mut updates), ["save:retrying"]);
        assert!(!updates.is_running());

        updates.found(ID, &peer, Ok(Some(update(OtaStatus::Retrying, 1))));
        updates.prepared(ID, Err(NotPrepared::Forgotten), TIMEOUTS, now);
        assert_eq!(outputs(&mut updates), ["prepare", "save:failed", "remove"]);

        // Attempts used up while the server was down: failed without another offer.
        updates.found(ID, &peer, Ok(Some(update(OtaStatus::Sending, 3))));
        assert_eq!(outputs(&mut updates), ["save:failed", "remove"]);
    }
}
