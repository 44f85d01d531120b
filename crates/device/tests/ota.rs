//! Firmware updates: the whole exchange against a scripted server, and every `ota.error`
//! code the receiver reports.

mod common;

use std::collections::BTreeSet;

use common::{Rig, ID, KEY};
use herald_device::{Action, DeviceConfig, FlashError, Screen};
use herald_gadget_proto::auth::{b64, ota_mac};
use herald_gadget_proto::{DeviceMessage, OtaAck, OtaErrorCode};
use herald_test_support::firmware::firmware_image_tagged_at;
use sha2::{Digest, Sha256};

const STREAM: u8 = 12;

/// An ESP-IDF-shaped image of `size` bytes whose board tag straddles the first frame
/// boundary.
fn firmware(size: usize, board: &str) -> Vec<u8> {
    let filler = (0..size).map(|i| (i % 251) as u8).collect();
    firmware_image_tagged_at(board, "0.2.0", filler, 4090)
}

fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The server side of one update.
struct Update {
    image: Vec<u8>,
    sha: String,
    size: u64,
}

impl Update {
    fn new(image: Vec<u8>) -> Update {
        Update {
            sha: sha_hex(&image),
            size: image.len() as u64,
            image,
        }
    }

    /// Sends `ota.offer` and returns the device's answer.
    fn offer(&self, rig: &mut Rig) -> Vec<DeviceMessage> {
        rig.server_json(&format!(
            r#"{{"type":"ota.offer","stream":{STREAM},"size":{},"sha256":"{}","version":"0.2.0"}}"#,
            self.size, self.sha
        ));
        rig.sent()
    }

    /// Offers, authorizes with `key` and returns the answer to `ota.begin`.
    fn begin_with(&self, rig: &mut Rig, key: &[u8; 32]) -> Vec<DeviceMessage> {
        let sent = self.offer(rig);
        let [DeviceMessage::OtaReady(ready)] = sent.as_slice() else {
            panic!("expected ota.ready: {sent:?}");
        };
        let mac = b64(&ota_mac(key, ID, &ready.nonce, &self.sha, self.size));
        rig.server_json(&format!(r#"{{"type":"ota.begin","mac":"{mac}"}}"#));
        rig.sent()
    }

    fn begin(&self, rig: &mut Rig) {
        let sent = self.begin_with(rig, &KEY);
        assert_eq!(sent, [DeviceMessage::OtaAck(OtaAck { offset: 0 })]);
    }

    /// Streams frames `seqs` of the image and returns what the device sent meanwhile.
    fn frames(&self, rig: &mut Rig, seqs: impl IntoIterator<Item = usize>) -> Vec<DeviceMessage> {
        let mut sent = Vec::new();
        for seq in seqs {
            let start = seq * 4096;
            let end = (start + 4096).min(self.image.len());
            rig.binary(&frame(seq as u16, &self.image[start..end]));
            sent.extend(rig.sent());
        }
        sent
    }

    fn frame_count(&self) -> usize {
        self.image.len().div_ceil(4096)
    }
}

fn frame(seq: u16, payload: &[u8]) -> Vec<u8> {
    let [lo, hi] = seq.to_le_bytes();
    let mut f = vec![3, STREAM, lo, hi];
    f.extend_from_slice(payload);
    f
}

fn end(rig: &mut Rig) -> Vec<DeviceMessage> {
    rig.server_json(r#"{"type":"ota.end"}"#);
    rig.sent()
}

/// The code of the single `ota.error` in `sent`.
fn error_code(sent: &[DeviceMessage]) -> OtaErrorCode {
    match sent {
        [DeviceMessage::OtaError(e)] => {
            assert!(e.message.as_deref().is_some_and(|m| !m.is_empty()));
            e.code.clone()
        }
        other => panic!("expected one ota.error: {other:?}"),
    }
}

#[test]
fn an_update_is_verified_acknowledged_installed_and_restarted() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(40_000, "esp32s3-breadboard"));
    let sent = update.offer(&mut rig);
    let [DeviceMessage::OtaReady(ready)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    // A fresh 16-byte nonce in standard base64.
    assert_eq!(ready.nonce.len(), 24);
    assert_eq!(rig.screen(), Screen::Updating);
    let mac = b64(&ota_mac(&KEY, ID, &ready.nonce, &update.sha, update.size));
    rig.server_json(&format!(r#"{{"type":"ota.begin","mac":"{mac}"}}"#));
    assert_eq!(rig.sent(), [DeviceMessage::OtaAck(OtaAck { offset: 0 })]);

    let acks = update.frames(&mut rig, 0..update.frame_count());
    let offsets: Vec<u64> = acks
        .iter()
        .map(|m| match m {
            DeviceMessage::OtaAck(a) => a.offset,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(offsets, [16_384, 32_768, 40_000]);
    assert_eq!(rig.dev.view().status, "Updating 100%");

    let sent = end(&mut rig);
    assert_eq!(sent[0].encode(), r#"{"type":"ota.done","version":"0.2.0"}"#);
    assert!(rig.dev.host().installed);
    assert_eq!(rig.dev.host().flash, update.image);
    assert_eq!(rig.screen(), Screen::Updating);
    rig.take();
    rig.advance(999);
    assert!(!rig.take().contains(&Action::Restart));
    rig.advance(1);
    assert!(rig.take().contains(&Action::Restart));
}

#[test]
fn an_image_of_whole_16_kb_blocks_is_acked_once_at_the_end() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(32_768, "esp32s3-breadboard"));
    update.begin(&mut rig);
    let acks = update.frames(&mut rig, 0..update.frame_count());
    assert_eq!(
        acks,
        [
            DeviceMessage::OtaAck(OtaAck { offset: 16_384 }),
            DeviceMessage::OtaAck(OtaAck { offset: 32_768 })
        ]
    );
    assert_eq!(end(&mut rig)[0].type_name(), "ota.done");
}

#[test]
fn progress_is_reported_for_the_screen() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(40_000, "esp32s3-breadboard"));
    update.begin(&mut rig);
    update.frames(&mut rig, 0..5);
    let p = rig.dev.ota_progress().unwrap();
    assert_eq!((p.version, p.written, p.size), ("0.2.0", 20_480, 40_000));
    assert_eq!(rig.dev.view().status, "Updating 51%");
}

/// Runs one failure scenario on a fresh online device and returns the code reported.
fn scenario(name: &str) -> OtaErrorCode {
    let image = firmware(40_000, "esp32s3-breadboard");
    let update = Update::new(image.clone());
    let mut rig = Rig::online();
    let sent = match name {
        "unsupported" => {
            let config = DeviceConfig {
                ota_max_size: None,
                ..DeviceConfig::reference("x")
            };
            rig = Rig::with_config(config);
            rig.connect_and_welcome(true, 300);
            rig.take();
            update.offer(&mut rig)
        }
        "bad_offer: sha256" => {
            rig.server_json(
                r#"{"type":"ota.offer","stream":1,"size":10,"sha256":"xyz","version":"1"}"#,
            );
            rig.sent()
        }
        "bad_offer: fields" => {
            rig.server_json(r#"{"type":"ota.offer","stream":1,"size":"big"}"#);
            rig.sent()
        }
        "too_large" => Update::new(firmware(2_031_617, "esp32s3-breadboard")).offer(&mut rig),
        "no_offer: begin" => {
            rig.server_json(r#"{"type":"ota.begin","mac":"AAAA"}"#);
            rig.sent()
        }
        "no_offer: data" => update.frames(&mut rig, [0]),
        "unauthorized: other key" => update.begin_with(&mut rig, &[7u8; 32]),
        "unauthorized: other size" => {
            let other = Update {
                size: update.size + 1,
                ..Update::new(image.clone())
            };
            let sent = update.offer(&mut rig);
            let [DeviceMessage::OtaReady(ready)] = sent.as_slice() else {
                panic!("{sent:?}");
            };
            let mac = b64(&ota_mac(&KEY, ID, &ready.nonce, &other.sha, other.size));
            rig.server_json(&format!(r#"{{"type":"ota.begin","mac":"{mac}"}}"#));
            rig.sent()
        }
        "flash: begin" => {
            rig.dev.host_mut().fail_begin = true;
            update.begin_with(&mut rig, &KEY)
        }
        "flash: write" => {
            update.begin(&mut rig);
            rig.dev.host_mut().fail_write = true;
            update.frames(&mut rig, [0])
        }
        "flash: finish" => {
            rig.dev.host_mut().finish_error = Some(FlashError::Io);
            update.begin(&mut rig);
            update.frames(&mut rig, 0..update.frame_count());
            end(&mut rig)
        }
        "sequence: gap" => {
            update.begin(&mut rig);
            assert!(update.frames(&mut rig, [0, 1]).is_empty());
            update.frames(&mut rig, [3])
        }
        "sequence: oversized frame" => {
            update.begin(&mut rig);
            rig.binary(&frame(0, &[0u8; 4097]));
            rig.sent()
        }
        "size: short" => {
            update.begin(&mut rig);
            update.frames(&mut rig, 0..3);
            end(&mut rig)
        }
        "size: long" => {
            let short = Update::new(image[..10_000].to_vec());
            short.begin(&mut rig);
            short.frames(&mut rig, [0, 1]);
            // Frame 2 of the longer image carries bytes past the offered size.
            update.frames(&mut rig, [2])
        }
        "checksum" => {
            // The server authorizes the offered hash, but other bytes arrive.
            let lying = Update {
                sha: sha_hex(b"something else"),
                ..Update::new(image.clone())
            };
            lying.begin(&mut rig);
            lying.frames(&mut rig, 0..lying.frame_count());
            end(&mut rig)
        }
        "invalid: board" => {
            let other = Update::new(firmware(40_000, "m5-core-s3"));
            other.begin(&mut rig);
            other.frames(&mut rig, 0..other.frame_count());
            end(&mut rig)
        }
        "invalid: no board" => {
            let mut bytes = image.clone();
            bytes[4090..4098].fill(0);
            let other = Update::new(bytes);
            other.begin(&mut rig);
            other.frames(&mut rig, 0..other.frame_count());
            end(&mut rig)
        }
        "invalid: header" => {
            let mut bytes = image.clone();
            bytes[0] = 0x7f;
            let other = Update::new(bytes);
            other.begin(&mut rig);
            other.frames(&mut rig, 0..other.frame_count());
            end(&mut rig)
        }
        "invalid: bootloader" => {
            rig.dev.host_mut().finish_error = Some(FlashError::InvalidImage);
            update.begin(&mut rig);
            update.frames(&mut rig, 0..update.frame_count());
            end(&mut rig)
        }
        "timeout: no data" => {
            update.begin(&mut rig);
            update.frames(&mut rig, [0]);
            rig.advance(29_999);
            assert!(rig.sent().iter().all(|m| m.type_name() == "ping"));
            rig.advance(1);
            rig.sent()
        }
        "timeout: no begin" => {
            update.offer(&mut rig);
            rig.advance(30_000);
            rig.sent()
        }
        "no_update" => end(&mut rig),
        other => panic!("no scenario {other}"),
    };
    let code = error_code(&sent);
    // Whatever failed, the partition is released and the device is back to normal.
    assert_eq!(rig.dev.host().begun, None, "{name}");
    assert_eq!(rig.dev.ota_progress(), None, "{name}");
    assert_eq!(rig.screen(), Screen::Ready, "{name}");
    code
}

#[test]
fn every_ota_error_code_is_reported() {
    let cases = [
        ("unsupported", "unsupported"),
        ("bad_offer: sha256", "bad_offer"),
        ("bad_offer: fields", "bad_offer"),
        ("too_large", "too_large"),
        ("no_offer: begin", "no_offer"),
        ("no_offer: data", "no_offer"),
        ("unauthorized: other key", "unauthorized"),
        ("unauthorized: other size", "unauthorized"),
        ("flash: begin", "flash"),
        ("flash: write", "flash"),
        ("flash: finish", "flash"),
        ("sequence: gap", "sequence"),
        ("sequence: oversized frame", "sequence"),
        ("size: short", "size"),
        ("size: long", "size"),
        ("checksum", "checksum"),
        ("invalid: board", "invalid"),
        ("invalid: no board", "invalid"),
        ("invalid: header", "invalid"),
        ("invalid: bootloader", "invalid"),
        ("timeout: no data", "timeout"),
        ("timeout: no begin", "timeout"),
        ("no_update", "no_update"),
    ];
    let mut seen = BTreeSet::new();
    for (name, expected) in cases {
        let code = scenario(name);
        assert_eq!(code.as_str(), expected, "{name}");
        seen.insert(code.as_str().to_owned());
    }
    let all: BTreeSet<String> = OtaErrorCode::KNOWN
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(seen, all);
}

#[test]
fn frames_in_flight_after_a_failure_are_not_answered() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(40_000, "esp32s3-breadboard"));
    update.begin(&mut rig);
    update.frames(&mut rig, [0]);
    assert_eq!(
        error_code(&update.frames(&mut rig, [2])),
        OtaErrorCode::Sequence
    );
    assert_eq!(rig.dev.host().aborts, 1);
    assert!(update.frames(&mut rig, 3..6).is_empty());
}

#[test]
fn ota_abort_drops_the_update_quietly() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(40_000, "esp32s3-breadboard"));
    update.begin(&mut rig);
    update.frames(&mut rig, 0..3);
    rig.server_json(r#"{"type":"ota.abort"}"#);
    assert!(rig.sent().is_empty());
    assert_eq!(rig.dev.host().aborts, 1);
    assert_eq!(rig.screen(), Screen::Ready);
    assert!(update.frames(&mut rig, 3..5).is_empty());
    // A new offer starts over.
    update.begin(&mut rig);
    update.frames(&mut rig, 0..update.frame_count());
    assert_eq!(end(&mut rig)[0].type_name(), "ota.done");
}

#[test]
fn a_lost_connection_drops_the_update() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(40_000, "esp32s3-breadboard"));
    update.begin(&mut rig);
    update.frames(&mut rig, 0..2);
    rig.drop_connection();
    assert_eq!(rig.dev.host().aborts, 1);
    assert_eq!(rig.dev.host().begun, None);
    assert_eq!(rig.screen(), Screen::Offline);
}

#[test]
fn a_nonce_serves_one_update_only() {
    let mut rig = Rig::online();
    let update = Update::new(firmware(40_000, "esp32s3-breadboard"));
    let sent = update.offer(&mut rig);
    let [DeviceMessage::OtaReady(first)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    let sent = update.offer(&mut rig);
    let [DeviceMessage::OtaReady(second)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    assert_ne!(first.nonce, second.nonce);
    // A MAC over the first nonce no longer authorizes anything.
    let mac = b64(&ota_mac(&KEY, ID, &first.nonce, &update.sha, update.size));
    rig.server_json(&format!(r#"{{"type":"ota.begin","mac":"{mac}"}}"#));
    assert_eq!(error_code(&rig.sent()), OtaErrorCode::Unauthorized);
}
