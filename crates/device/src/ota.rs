//! The firmware-update receiver.
//!
//! ```text
//! Idle --ota.offer--> Offered --ota.begin (MAC ok)--> Receiving --ota.end (checks ok)--> Installed
//!   ^                    |                                |
//!   +--- ota.error / ota.abort / disconnect / 30 s without data ---+
//! ```
//!
//! The receiver never holds the image: bytes go to the host's update partition as they
//! arrive ([`Host::ota_write`]) while a running SHA-256, the first bytes (for the image
//! header) and a streaming search for the `HGBOARD=` tag are updated on the way. Only
//! the server holding this device's key can start an update, because `ota.begin` must
//! carry a MAC over the fresh nonce of `ota.ready`, the image's SHA-256 and its size.
//!
//! Every way an update can fail answers with the matching `ota.error` code, drops the
//! partial image and returns to `Idle`. Firmware frames still in flight for an update
//! just abandoned are ignored rather than answered, so one failure is one error.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use herald_gadget_proto::auth::b64;
use herald_gadget_proto::limits::{
    MAX_BOARD, MAX_FIRMWARE, NONCE_LEN, OTA_ACK_INTERVAL, OTA_FRAME, OTA_IDLE_TIMEOUT_SECS,
    OTA_MIN_IMAGE,
};
use herald_gadget_proto::ota_image::{inspect_image, is_board_char, BOARD_TAG};
use herald_gadget_proto::{
    DeviceMessage, OtaAck, OtaBegin, OtaDone, OtaError, OtaErrorCode, OtaOffer, OtaReady,
};
use sha2::{Digest, Sha256};

use crate::host::{FlashError, Host};
use crate::identity::Identity;
use crate::time::{secs, Instant};

/// An accepted offer.
#[derive(Debug, Clone)]
struct Offer {
    stream: u8,
    size: u64,
    sha256_hex: String,
    sha256: [u8; 32],
    version: String,
    nonce: String,
}

/// An authorized update being written.
#[derive(Debug, Clone)]
struct Transfer {
    offer: Offer,
    hasher: Sha256,
    written: u64,
    acked: u64,
    next_seq: u16,
    head: Vec<u8>,
    board: BoardScan,
}

#[derive(Debug, Clone)]
enum State {
    Idle,
    Offered(Offer),
    Receiving(Box<Transfer>),
    /// `ota.done` was sent; the device restarts into the new image.
    Installed(String),
}

/// How far an update has come, for the `updating` screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtaProgress<'a> {
    /// Version being installed.
    pub version: &'a str,
    /// Bytes written.
    pub written: u64,
    /// Bytes in all.
    pub size: u64,
}

/// The receiver.
#[derive(Debug, Clone)]
pub(crate) struct OtaReceiver {
    state: State,
    deadline: Option<Instant>,
    /// Stream of the update last abandoned, whose in-flight frames are ignored.
    abandoned: Option<u8>,
}

impl Default for OtaReceiver {
    fn default() -> Self {
        OtaReceiver {
            state: State::Idle,
            deadline: None,
            abandoned: None,
        }
    }
}

fn error(code: OtaErrorCode, message: impl Into<String>) -> DeviceMessage {
    DeviceMessage::OtaError(OtaError {
        code,
        message: Some(message.into()),
    })
}

impl OtaReceiver {
    /// Whether an update is offered, being written or installed.
    pub(crate) fn is_active(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    pub(crate) fn progress(&self) -> Option<OtaProgress<'_>> {
        let (offer, written) = match &self.state {
            State::Idle => return None,
            State::Installed(version) => {
                return Some(OtaProgress {
                    version,
                    written: 1,
                    size: 1,
                })
            }
            State::Offered(offer) => (offer, 0),
            State::Receiving(t) => (&t.offer, t.written),
        };
        Some(OtaProgress {
            version: &offer.version,
            written,
            size: offer.size,
        })
    }

    /// When the update is abandoned for lack of data.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// `ota.offer`: answered with a fresh nonce, or refused.
    pub(crate) fn offer(
        &mut self,
        offer: &OtaOffer,
        max_size: Option<u64>,
        host: &mut impl Host,
        now: Instant,
    ) -> DeviceMessage {
        if matches!(self.state, State::Installed(_)) {
            return error(OtaErrorCode::BadOffer, "an update was just installed");
        }
        // A new offer replaces an update in progress: the server started over.
        self.abandon(host);
        let Some(max_size) = max_size else {
            return error(OtaErrorCode::Unsupported, "this device takes no updates");
        };
        let mut sha256 = [0u8; 32];
        if hex::decode_to_slice(&offer.sha256, &mut sha256).is_err() {
            return error(OtaErrorCode::BadOffer, "sha256 is not 64 hex characters");
        }
        if offer.size == 0 || offer.version.chars().count() > MAX_FIRMWARE {
            return error(OtaErrorCode::BadOffer, "bad size or version");
        }
        if offer.size > max_size {
            return error(
                OtaErrorCode::TooLarge,
                format!("{} bytes exceed the {max_size}-byte partition", offer.size),
            );
        }
        let mut nonce = [0u8; NONCE_LEN];
        host.fill_random(&mut nonce);
        let nonce = b64(&nonce);
        self.state = State::Offered(Offer {
            stream: offer.stream,
            size: offer.size,
            sha256_hex: offer.sha256.clone(),
            sha256,
            version: offer.version.clone(),
            nonce: nonce.clone(),
        });
        self.deadline = Some(now + secs(OTA_IDLE_TIMEOUT_SECS));
        DeviceMessage::OtaReady(OtaReady { nonce })
    }

    /// An `ota.offer` whose fields did not decode.
    pub(crate) fn bad_offer(&mut self, host: &mut impl Host) -> DeviceMessage {
        self.fail(host, OtaErrorCode::BadOffer, "malformed ota.offer")
    }

    /// `ota.begin`: checks the MAC with this device's own key, then opens the partition.
    pub(crate) fn begin(
        &mut self,
        begin: &OtaBegin,
        identity: &Identity,
        host: &mut impl Host,
        now: Instant,
    ) -> DeviceMessage {
        let State::Offered(offer) = &self.state else {
            return self.fail(host, OtaErrorCode::NoOffer, "ota.begin without an offer");
        };
        let offer = offer.clone();
        if !identity.verify_ota(&offer.nonce, &offer.sha256_hex, offer.size, &begin.mac) {
            return self.fail(host, OtaErrorCode::Unauthorized, "MAC does not verify");
        }
        if host.ota_begin(offer.size).is_err() {
            return self.fail(host, OtaErrorCode::Flash, "could not open the partition");
        }
        self.state = State::Receiving(Box::new(Transfer {
            offer,
            hasher: Sha256::new(),
            written: 0,
            acked: 0,
            next_seq: 0,
            head: Vec::with_capacity(OTA_MIN_IMAGE),
            board: BoardScan::default(),
        }));
        self.deadline = Some(now + secs(OTA_IDLE_TIMEOUT_SECS));
        DeviceMessage::OtaAck(OtaAck { offset: 0 })
    }

    /// A channel-3 frame: written, hashed and acknowledged every 16 KB and at the end.
    pub(crate) fn data(
        &mut self,
        stream: u8,
        seq: u16,
        payload: &[u8],
        host: &mut impl Host,
        now: Instant,
    ) -> Option<DeviceMessage> {
        let t = match &mut self.state {
            State::Receiving(t) if t.offer.stream == stream => t,
            State::Receiving(_) | State::Installed(_) => return None,
            State::Idle if self.abandoned == Some(stream) => return None,
            State::Idle | State::Offered(_) => {
                return Some(self.fail(
                    host,
                    OtaErrorCode::NoOffer,
                    "firmware data without an offer",
                ))
            }
        };
        if seq != t.next_seq {
            let message = format!("expected frame {}, got {seq}", t.next_seq);
            return Some(self.fail(host, OtaErrorCode::Sequence, message));
        }
        // Frames are at most 4096 bytes; a larger one breaks the sender's 64 KB window.
        if payload.len() > OTA_FRAME {
            let message = format!("frame of {} bytes exceeds {OTA_FRAME}", payload.len());
            return Some(self.fail(host, OtaErrorCode::Sequence, message));
        }
        let len = payload.len() as u64;
        if t.written + len > t.offer.size {
            let message = format!("more than the offered {} bytes", t.offer.size);
            return Some(self.fail(host, OtaErrorCode::Size, message));
        }
        if host.ota_write(payload).is_err() {
            return Some(self.fail(host, OtaErrorCode::Flash, "flash write failed"));
        }
        t.next_seq = t.next_seq.wrapping_add(1);
        t.hasher.update(payload);
        let head_room = OTA_MIN_IMAGE - t.head.len();
        t.head
            .extend_from_slice(&payload[..payload.len().min(head_room)]);
        t.board.feed(payload);
        t.written += len;
        self.deadline = Some(now + secs(OTA_IDLE_TIMEOUT_SECS));
        let crossed = t.written / OTA_ACK_INTERVAL > t.acked / OTA_ACK_INTERVAL;
        if crossed || (t.written == t.offer.size && t.acked < t.written) {
            t.acked = t.written;
            return Some(DeviceMessage::OtaAck(OtaAck { offset: t.written }));
        }
        None
    }

    /// `ota.end`: size, SHA-256, image header and board tag, then the host installs.
    pub(crate) fn end(&mut self, board: &str, host: &mut impl Host) -> DeviceMessage {
        let State::Receiving(t) = &self.state else {
            return self.fail(host, OtaErrorCode::NoUpdate, "no update in progress");
        };
        let t = t.clone();
        if t.written != t.offer.size {
            let message = format!("received {} of {} bytes", t.written, t.offer.size);
            return self.fail(host, OtaErrorCode::Size, message);
        }
        if t.hasher.finalize().as_slice() != t.offer.sha256 {
            return self.fail(host, OtaErrorCode::Checksum, "SHA-256 does not match");
        }
        if let Err(e) = inspect_image(&t.head) {
            return self.fail(host, OtaErrorCode::Invalid, e.to_string());
        }
        match t.board.finish() {
            Some(named) if named == board => {}
            Some(named) => {
                let message = format!("image is for board {named}");
                return self.fail(host, OtaErrorCode::Invalid, message);
            }
            None => return self.fail(host, OtaErrorCode::Invalid, "image names no board"),
        }
        match host.ota_finish() {
            Ok(()) => {
                self.state = State::Installed(t.offer.version.clone());
                self.deadline = None;
                DeviceMessage::OtaDone(OtaDone {
                    version: t.offer.version,
                })
            }
            // ota_finish consumed the partition either way: nothing left to abort.
            Err(e) => {
                self.state = State::Idle;
                self.deadline = None;
                self.abandoned = Some(t.offer.stream);
                let code = match e {
                    FlashError::Io => OtaErrorCode::Flash,
                    FlashError::InvalidImage => OtaErrorCode::Invalid,
                };
                error(code, e.to_string())
            }
        }
    }

    /// The update got no data for 30 s.
    pub(crate) fn timeout(&mut self, host: &mut impl Host) -> DeviceMessage {
        self.fail(host, OtaErrorCode::Timeout, "no data for 30 s")
    }

    /// `ota.abort` or a lost connection: drop the update quietly.
    pub(crate) fn abandon(&mut self, host: &mut impl Host) {
        match core::mem::replace(&mut self.state, State::Idle) {
            State::Receiving(t) => {
                host.ota_abort();
                self.abandoned = Some(t.offer.stream);
            }
            State::Offered(offer) => self.abandoned = Some(offer.stream),
            // An installed image waits for its restart.
            installed @ State::Installed(_) => self.state = installed,
            State::Idle => {}
        }
        if !matches!(self.state, State::Installed(_)) {
            self.deadline = None;
        }
    }

    fn fail(
        &mut self,
        host: &mut impl Host,
        code: OtaErrorCode,
        message: impl Into<String>,
    ) -> DeviceMessage {
        self.abandon(host);
        error(code, message)
    }
}

/// Finds the board named by the first `HGBOARD=` tag followed by at least one board
/// character, across frame boundaries, with the same rule the server applies to the
/// whole image before offering it.
#[derive(Debug, Clone, Default)]
struct BoardScan {
    /// How many bytes of the tag matched so far.
    matched: usize,
    /// The board characters after a complete tag.
    collecting: Option<String>,
    found: Option<String>,
}

impl BoardScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if let Some(board) = &mut self.collecting {
            if is_board_char(b) {
                // One character past the longest board name is enough to refuse it.
                if board.len() <= MAX_BOARD {
                    board.push(char::from(b));
                }
                return;
            }
            let board = self.collecting.take().unwrap_or_default();
            if !board.is_empty() {
                self.found = Some(board);
                return;
            }
            // An empty tag (say `HGBOARD=%s`): keep looking from this byte.
        }
        if b == BOARD_TAG[self.matched] {
            self.matched += 1;
            if self.matched == BOARD_TAG.len() {
                self.matched = 0;
                self.collecting = Some(String::new());
            }
        } else {
            // The tag's first byte occurs nowhere else in it, so a mismatch restarts
            // the match at this byte.
            self.matched = usize::from(b == BOARD_TAG[0]);
        }
    }

    fn finish(self) -> Option<String> {
        self.found
            .or(self.collecting.filter(|board| !board.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&[u8]]) -> Option<String> {
        let mut s = BoardScan::default();
        for c in chunks {
            s.feed(c);
        }
        s.finish()
    }

    #[test]
    fn board_tag_is_found_across_chunks() {
        assert_eq!(
            scan(&[b"xxHGBO", b"ARD=esp32", b"s3-breadboard\0HGBOARD=other"]).as_deref(),
            Some("esp32s3-breadboard")
        );
        assert_eq!(scan(&[b"HGBOARD=abc"]).as_deref(), Some("abc"));
        assert_eq!(scan(&[b"HGBOARD=", b"abc"]).as_deref(), Some("abc"));
    }

    #[test]
    fn empty_tags_and_false_starts_are_skipped() {
        assert_eq!(
            scan(&[b"HGBOARD=%s\0HHGBOARD=real!"]).as_deref(),
            Some("real")
        );
        assert_eq!(scan(&[b"HGBOARD=HGBOARD=x"]).as_deref(), Some("HGBOARD"));
        assert_eq!(scan(&[b"HGBOARD="]), None);
        assert_eq!(scan(&[b"HGBOARX=abc"]), None);
        assert_eq!(scan(&[b""]), None);
    }

    #[test]
    fn overlong_boards_never_match_a_real_one() {
        let mut image = b"HGBOARD=".to_vec();
        image.extend(core::iter::repeat_n(b'a', 200));
        let board = scan(&[&image]).unwrap();
        assert_eq!(board.len(), MAX_BOARD + 1);
    }
}
