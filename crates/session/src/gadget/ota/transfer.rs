//! One attempt at sending an image, as a sans-IO state machine in the quinn style: it
//! takes device messages (`handle`) and the clock (`handle_timeout`), and hands back text
//! messages (`poll_message`), the next firmware frame the 64 KB window allows
//! (`poll_chunk`) and its deadline (`next_deadline`). It never reads a file or a socket.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use herald_gadget_proto::{
    self as proto, auth, limits, Channel, DeviceMessage, FrameHeader, OtaErrorCode, ServerMessage,
};

use super::OtaImage;

/// How long an attempt waits for each answer: the spec's values unless configured.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// For `ota.ready` after the offer.
    pub ready: Duration,
    /// For each `ota.ack`.
    pub ack: Duration,
    /// For `ota.done` after the last frame.
    pub done: Duration,
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
    pub(crate) fn is_retryable(&self) -> bool {
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
pub struct Chunk {
    /// The frame's header.
    pub header: FrameHeader,
    /// How many bytes of the image it carries.
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
        let now = crate::testing::start();
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
        let now = crate::testing::start();
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
        let now = crate::testing::start();
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
        let now = crate::testing::start();
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
        let now = crate::testing::start();
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
}
