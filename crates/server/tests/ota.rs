//! Firmware updates end to end, against a test device that checks everything a device
//! checks: the `ota.begin` MAC with its own key, consecutive sequence numbers, the 64 KB
//! window, the size and the SHA-256. It acks every 16 KB and at the end, as the reference
//! firmware does, and answers errors with the spec's codes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use herald_gadget_proto::limits::{OTA_ACK_INTERVAL, OTA_FRAME, OTA_MAX_UNACKED};
use herald_gadget_proto::{
    auth, decode_frame, Channel, DeviceMessage, OtaAck, OtaCaps, OtaDone, OtaError, OtaErrorCode,
    OtaOffer, OtaReady, Outcome, ServerMessage,
};
use herald_test_support::firmware::firmware_image;
use herald_test_support::{Conn, Gadget, Harness, Incoming, WAIT};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const BOARD: &str = "esp32s3-test";
const MAX_SIZE: u64 = 1_000_000;
const SIZE: usize = 200_000;

/// A fake firmware image whose filler makes every byte position distinct enough to
/// notice.
fn image(board: &str, version: &str, size: usize) -> Vec<u8> {
    firmware_image(board, version, (0..size).map(|i| (i % 251) as u8).collect())
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn ota_gadget() -> Gadget {
    let mut gadget = Gadget::new();
    gadget.hello.caps.ota = Some(OtaCaps { max_size: MAX_SIZE });
    gadget
}

/// Write `bytes` outside the data directory and ask the admin API to send them.
async fn push(h: &Harness, device: &str, bytes: &[u8]) -> (u16, Value) {
    let uploads = h.dir.path().join("uploads");
    std::fs::create_dir_all(&uploads).unwrap();
    let path = uploads.join(format!("{}.bin", sha256_hex(bytes)));
    std::fs::write(&path, bytes).unwrap();
    let body = json!({"device_id": device, "image": path});
    h.admin("POST", "/v1/ota", Some(body)).await
}

/// Connect an OTA gadget to `h` and push it a 200 KB image; returns the device side.
async fn update_underway(h: &Harness) -> (Gadget, Conn, Flash, Vec<u8>) {
    let gadget = ota_gadget();
    let (conn, _) = gadget.connect(&h.url).await;
    let bytes = image(BOARD, "0.2.0", SIZE);
    let (code, body) = push(h, &gadget.id, &bytes).await;
    assert_eq!(code, 200, "{body}");
    let flash = Flash::new(&gadget);
    (gadget, conn, flash, bytes)
}

/// Poll the update's status until `done` says so; every reading must pass `check`.
async fn status_until(
    h: &Harness,
    device: &str,
    mut check: impl FnMut(&Value),
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (code, status) = h.admin("GET", &format!("/v1/ota/{device}"), None).await;
        assert_eq!(code, 200, "{status}");
        check(&status);
        if done(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "status never arrived: {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn status_is(h: &Harness, device: &str, wanted: &str) -> Value {
    status_until(h, device, |_| {}, |s| s["status"] == wanted).await
}

/// Wait for the staged copies to go: the server removes one right after recording the
/// update's end.
async fn staged_files_removed(h: &Harness) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !staged_files(h).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "staged copies left behind: {:?}",
            staged_files(h)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn staged_files(h: &Harness) -> Vec<PathBuf> {
    match std::fs::read_dir(h.dir.path().join("ota")) {
        Ok(dir) => dir.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The device's update partition and its checks.
struct Flash {
    /// The key `ota.begin` must be authorized with: normally the device's own.
    key: [u8; 32],
    id: String,
    max_size: u64,
    /// Ack every 16 KB and at the end without being told.
    auto_ack: bool,
    offer: Option<OtaOffer>,
    nonce: String,
    authorized: bool,
    next_seq: u16,
    data: Vec<u8>,
    acked: u64,
    offers: u32,
}

impl Flash {
    fn new(gadget: &Gadget) -> Flash {
        Flash {
            key: gadget.key,
            id: gadget.id.clone(),
            max_size: gadget.hello.caps.ota.as_ref().unwrap().max_size,
            auto_ack: true,
            offer: None,
            nonce: String::new(),
            authorized: false,
            next_seq: 0,
            data: Vec::new(),
            acked: 0,
            offers: 0,
        }
    }

    fn received(&self) -> u64 {
        self.data.len() as u64
    }

    fn reset(&mut self) {
        self.offer = None;
        self.authorized = false;
        self.next_seq = 0;
        self.data.clear();
        self.acked = 0;
    }

    fn error(&mut self, code: OtaErrorCode, message: &str) -> Vec<DeviceMessage> {
        self.reset();
        vec![DeviceMessage::OtaError(OtaError {
            code,
            message: Some(message.into()),
        })]
    }

    fn ack(&mut self) -> DeviceMessage {
        self.acked = self.received();
        DeviceMessage::OtaAck(OtaAck { offset: self.acked })
    }

    fn on_message(&mut self, msg: &ServerMessage) -> Vec<DeviceMessage> {
        match msg {
            ServerMessage::OtaOffer(offer) => {
                self.reset();
                self.offers += 1;
                let hex_ok = offer.sha256.len() == 64
                    && offer
                        .sha256
                        .bytes()
                        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
                if !hex_ok {
                    return self.error(OtaErrorCode::BadOffer, "sha256 is not 64 hex digits");
                }
                if offer.size > self.max_size {
                    return self.error(OtaErrorCode::TooLarge, "larger than the partition");
                }
                let mut nonce = [0u8; 16];
                getrandom::fill(&mut nonce).unwrap();
                self.nonce = auth::b64(&nonce);
                self.offer = Some(offer.clone());
                vec![DeviceMessage::OtaReady(OtaReady {
                    nonce: self.nonce.clone(),
                })]
            }
            ServerMessage::OtaBegin(begin) => {
                let Some(offer) = &self.offer else {
                    return self.error(OtaErrorCode::NoOffer, "begin without an offer");
                };
                let valid = auth::verify_ota_mac(
                    &self.key,
                    &self.id,
                    &self.nonce,
                    &offer.sha256,
                    offer.size,
                    &begin.mac,
                );
                if !valid {
                    return self.error(OtaErrorCode::Unauthorized, "the MAC does not verify");
                }
                self.authorized = true;
                vec![DeviceMessage::OtaAck(OtaAck { offset: 0 })]
            }
            ServerMessage::OtaEnd(_) => {
                let Some(offer) = self.offer.clone().filter(|_| self.authorized) else {
                    return self.error(OtaErrorCode::NoUpdate, "end without an update");
                };
                if self.received() != offer.size {
                    return self.error(OtaErrorCode::Size, "size mismatch");
                }
                if sha256_hex(&self.data) != offer.sha256 {
                    return self.error(OtaErrorCode::Checksum, "sha256 mismatch");
                }
                vec![DeviceMessage::OtaDone(OtaDone {
                    version: offer.version,
                })]
            }
            ServerMessage::OtaAbort(_) => {
                self.reset();
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn on_frame(&mut self, bytes: &[u8]) -> Vec<DeviceMessage> {
        let (header, payload) = decode_frame(bytes).unwrap();
        assert_eq!(header.channel, Channel::Firmware);
        let Some(offer) = self.offer.clone().filter(|_| self.authorized) else {
            return self.error(OtaErrorCode::NoOffer, "data without an update");
        };
        assert_eq!(header.stream, offer.stream, "frame of another stream");
        if header.seq != self.next_seq {
            return self.error(OtaErrorCode::Sequence, "sequence gap");
        }
        assert!(payload.len() <= OTA_FRAME);
        if self.received() + payload.len() as u64 > offer.size {
            return self.error(OtaErrorCode::Size, "more bytes than offered");
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        self.data.extend_from_slice(payload);
        let unacked = self.received() - self.acked;
        assert!(
            unacked <= OTA_MAX_UNACKED,
            "{unacked} bytes unacknowledged: the window is 64 KB"
        );
        let due = unacked >= OTA_ACK_INTERVAL || self.received() == offer.size;
        if self.auto_ack && due {
            vec![self.ack()]
        } else {
            Vec::new()
        }
    }
}

/// Take the next thing the server sends and answer it as the device would; returns it
/// with the answers.
async fn step(conn: &mut Conn, flash: &mut Flash) -> (Incoming, Vec<DeviceMessage>) {
    let incoming = conn.next().await;
    let answers = match &incoming {
        Incoming::Msg(msg) => flash.on_message(msg),
        Incoming::Frame(frame) => flash.on_frame(frame),
    };
    for answer in &answers {
        conn.send(answer).await;
    }
    (incoming, answers)
}

/// Answer until the device installs the image or gives up; returns its last word.
async fn install(conn: &mut Conn, flash: &mut Flash) -> DeviceMessage {
    loop {
        let (_, answers) = step(conn, flash).await;
        let last = answers
            .into_iter()
            .find(|a| matches!(a, DeviceMessage::OtaDone(_) | DeviceMessage::OtaError(_)));
        if let Some(last) = last {
            return last;
        }
    }
}

/// A device that held its acks: ack everything received, go back to acking on its own,
/// and install.
async fn resume_acks_and_install(conn: &mut Conn, flash: &mut Flash) {
    flash.auto_ack = true;
    let ack = flash.ack();
    conn.send(&ack).await;
    assert!(matches!(
        install(conn, flash).await,
        DeviceMessage::OtaDone(_)
    ));
}

/// Answer until at least `bytes` of the image arrived.
async fn receive_at_least(conn: &mut Conn, flash: &mut Flash, bytes: u64) {
    while flash.received() < bytes {
        step(conn, flash).await;
    }
}

#[tokio::test]
async fn a_full_install_reports_monotonic_progress() {
    let h = Harness::start().await;
    let gadget = ota_gadget();
    let (mut conn, _) = gadget.connect(&h.url).await;
    let bytes = image(BOARD, "0.2.0", SIZE);
    let (code, started) = push(&h, &gadget.id, &bytes).await;
    assert_eq!(code, 200, "{started}");
    assert_eq!(started["status"], "sending");
    assert_eq!(started["attempts"], 1);
    assert_eq!(started["size"], SIZE);
    assert_eq!(started["version"], "0.2.0");
    assert_eq!(started["sha256"], sha256_hex(&bytes));

    let mut flash = Flash::new(&gadget);
    let mut progress = Vec::new();
    let mut last_read = 0;
    let installed = loop {
        let (_, answers) = step(&mut conn, &mut flash).await;
        let mut installed = None;
        for answer in answers {
            match answer {
                DeviceMessage::OtaAck(ack) if ack.offset > 0 => {
                    // The store shows each ack; no reading ever goes backwards.
                    let monotonic = |s: &Value| {
                        let read = s["bytes_sent"].as_u64().unwrap();
                        assert!(
                            read >= last_read,
                            "progress went back: {last_read} -> {read}"
                        );
                        assert!(read <= ack.offset);
                        last_read = read;
                    };
                    status_until(&h, &gadget.id, monotonic, |s| s["bytes_sent"] == ack.offset)
                        .await;
                    progress.push(ack.offset);
                }
                DeviceMessage::OtaDone(done) => installed = Some(done),
                DeviceMessage::OtaError(error) => panic!("device gave up: {error:?}"),
                _ => {}
            }
        }
        if let Some(done) = installed {
            break done;
        }
    };
    assert_eq!(installed.version, "0.2.0");
    assert_eq!(flash.data, bytes, "the device got the image, byte for byte");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert_eq!(progress.last(), Some(&(SIZE as u64)));
    assert!(progress.len() >= SIZE / OTA_ACK_INTERVAL as usize);

    let done = status_is(&h, &gadget.id, "done").await;
    assert_eq!(done["bytes_sent"], SIZE);
    assert_eq!(done["attempts"], 1);
    assert_eq!(done["error"], Value::Null);
    let (_, all) = h.admin("GET", "/v1/ota", None).await;
    assert_eq!(all[0]["device_id"], gadget.id.as_str());
    assert_eq!(all[0]["max_attempts"], 3);
    staged_files_removed(&h).await;
}

#[tokio::test]
async fn a_device_with_another_key_refuses_and_is_not_asked_again() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, _) = update_underway(&h).await;
    getrandom::fill(&mut flash.key).unwrap();
    let DeviceMessage::OtaError(error) = install(&mut conn, &mut flash).await else {
        panic!("installed with the wrong key")
    };
    assert_eq!(error.code, OtaErrorCode::Unauthorized);

    let failed = status_is(&h, &gadget.id, "failed").await;
    assert!(
        failed["error"].as_str().unwrap().contains("unauthorized"),
        "{failed}"
    );
    assert_eq!(failed["attempts"], 1);
    // No retry: a wrong MAC would only be wrong again.
    conn.nothing_before_pong().await;
    staged_files_removed(&h).await;
}

#[tokio::test]
async fn images_that_do_not_fit_are_refused_before_anything_is_sent() {
    let h = Harness::start().await;
    let mut gadget = ota_gadget();
    gadget.hello.caps.ota = Some(OtaCaps { max_size: 100_000 });
    let (mut conn, _) = gadget.connect(&h.url).await;

    let refusal = |(code, body): (u16, Value), wanted: &str| {
        let error = body["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains(wanted), "{code} {body}");
        (code, error)
    };
    let (code, error) = refusal(
        push(&h, &gadget.id, &image("other-board", "0.2.0", 50_000)).await,
        "wrong_board",
    );
    assert_eq!(code, 422);
    assert!(
        error.contains("other-board") && error.contains(BOARD),
        "{error}"
    );
    let junk: Vec<u8> = (0..5000).map(|i| (i * 7) as u8).collect();
    assert_eq!(
        refusal(push(&h, &gadget.id, &junk).await, "not_an_image").0,
        422
    );
    let (code, error) = refusal(
        push(&h, &gadget.id, &image(BOARD, "0.2.0", 100_001)).await,
        "too_large",
    );
    assert_eq!(code, 422);
    assert!(error.contains("100000"), "{error}");

    let plain = Gadget::new();
    let (_plain_conn, _) = plain.connect(&h.url).await;
    refusal(
        push(&h, &plain.id, &image(BOARD, "0.2.0", 50_000)).await,
        "unsupported",
    );
    let (code, _) = refusal(
        push(&h, &Gadget::new().id, &image(BOARD, "0.2.0", 50_000)).await,
        "not connected",
    );
    assert_eq!(code, 409);
    let relative = json!({"device_id": gadget.id, "image": "app.bin"});
    let (code, _) = h.admin("POST", "/v1/ota", Some(relative)).await;
    assert_eq!(code, 400);

    conn.nothing_before_pong().await;
    let (code, _) = h
        .admin("GET", &format!("/v1/ota/{}", gadget.id), None)
        .await;
    assert_eq!(code, 404);
    assert!(staged_files(&h).is_empty());
}

#[tokio::test]
async fn a_second_push_while_one_runs_is_busy() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, bytes) = update_underway(&h).await;
    step(&mut conn, &mut flash).await;
    assert_eq!(flash.offers, 1);

    for other in [bytes.clone(), image(BOARD, "0.3.0", SIZE)] {
        let (code, body) = push(&h, &gadget.id, &other).await;
        assert_eq!(code, 409, "{body}");
        assert!(body["error"].as_str().unwrap().contains("busy"), "{body}");
    }
    // The refusals left the running update and its staged copy alone.
    assert!(matches!(
        install(&mut conn, &mut flash).await,
        DeviceMessage::OtaDone(_)
    ));
    let done = status_is(&h, &gadget.id, "done").await;
    assert_eq!(done["version"], "0.2.0");
    staged_files_removed(&h).await;
}

#[tokio::test]
async fn a_corrupted_image_is_reported_by_the_device_and_not_retried() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, _) = update_underway(&h).await;
    // Flip a byte of the staged copy in place, after the offer named its SHA-256.
    let Incoming::Msg(offer @ ServerMessage::OtaOffer(_)) = conn.next().await else {
        panic!("no offer")
    };
    let [staged] = staged_files(&h).try_into().unwrap();
    corrupt(&staged, 100_000);
    for answer in flash.on_message(&offer) {
        conn.send(&answer).await;
    }

    let DeviceMessage::OtaError(error) = install(&mut conn, &mut flash).await else {
        panic!("a corrupt image was installed")
    };
    assert_eq!(error.code, OtaErrorCode::Checksum);
    let failed = status_is(&h, &gadget.id, "failed").await;
    assert!(
        failed["error"].as_str().unwrap().contains("checksum"),
        "{failed}"
    );
    assert_eq!(failed["attempts"], 1);
    conn.nothing_before_pong().await;
}

fn corrupt(path: &Path, at: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(at)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(at)).unwrap();
    file.write_all(&[!byte[0]]).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_silent_device_gets_an_abort_after_the_ready_timeout() {
    let ready = Duration::from_secs(1);
    let tick = Duration::from_millis(1);
    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.gadget.ota_ready_timeout_s = 1;
    })
    .await;
    let (gadget, mut conn, _, _) = update_underway(&h).await;
    // Each attempt: an offer nobody answers, then an abort when the ready timeout is
    // up and not a tick before; three attempts in all.
    for attempt in 1..=3u8 {
        let Incoming::Msg(ServerMessage::OtaOffer(offer)) = conn.next().await else {
            panic!("no offer")
        };
        assert_eq!(offer.stream, attempt);
        conn.quiet_for(ready - tick).await;
        tokio::time::advance(tick).await;
        let Incoming::Msg(ServerMessage::OtaAbort(_)) = conn.next().await else {
            panic!("no abort after the ready timeout")
        };
    }
    let failed = status_is(&h, &gadget.id, "failed").await;
    assert_eq!(failed["attempts"], 3);
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("timed out waiting for ota.ready"), "{error}");
    conn.quiet_for(ready).await;
}

#[tokio::test]
async fn a_dropped_connection_is_retried_when_the_device_returns() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, bytes) = update_underway(&h).await;
    receive_at_least(&mut conn, &mut flash, 2 * OTA_ACK_INTERVAL).await;
    // The server has read an ack before the device goes: a drop can reset the
    // connection, and the kernel then discards what the server had not read yet.
    let acked = |s: &Value| s["bytes_sent"].as_u64() >= Some(OTA_ACK_INTERVAL);
    status_until(&h, &gadget.id, |_| {}, acked).await;
    drop(conn);

    let retrying = status_is(&h, &gadget.id, "retrying").await;
    assert_eq!(retrying["attempts"], 1);
    assert!(retrying["bytes_sent"].as_u64().unwrap() >= OTA_ACK_INTERVAL);
    assert_eq!(retrying["error"], "the connection dropped");

    let (mut conn, _) = gadget.connect(&h.url).await;
    let mut flash = Flash::new(&gadget);
    assert!(matches!(
        install(&mut conn, &mut flash).await,
        DeviceMessage::OtaDone(_)
    ));
    assert_eq!(flash.offers, 1, "a fresh offer on reconnect");
    assert_eq!(flash.data, bytes);
    let done = status_is(&h, &gadget.id, "done").await;
    assert_eq!(done["attempts"], 2);
}

#[tokio::test]
async fn the_window_never_holds_more_than_64_kb() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, _) = update_underway(&h).await;
    // A lazy device: no acks after the first.
    flash.auto_ack = false;
    receive_at_least(&mut conn, &mut flash, OTA_MAX_UNACKED).await;
    conn.nothing_before_pong().await;
    assert_eq!(flash.received(), OTA_MAX_UNACKED);

    // One ack for all of it opens the whole window again.
    let ack = flash.ack();
    conn.send(&ack).await;
    receive_at_least(&mut conn, &mut flash, 2 * OTA_MAX_UNACKED).await;
    conn.nothing_before_pong().await;
    assert_eq!(flash.received(), 2 * OTA_MAX_UNACKED);

    resume_acks_and_install(&mut conn, &mut flash).await;
    status_is(&h, &gadget.id, "done").await;
}

#[tokio::test]
async fn a_text_turn_completes_while_an_update_streams() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, _) = update_underway(&h).await;
    receive_at_least(&mut conn, &mut flash, OTA_ACK_INTERVAL).await;

    // Mid-update, the device talks; it holds its acks until the turn is over, so the
    // update cannot finish first.
    flash.auto_ack = false;
    conn.text("still listening?").await;
    let mut reply = None;
    let outcome = loop {
        match step(&mut conn, &mut flash).await.0 {
            Incoming::Msg(ServerMessage::Reply(r)) if !r.interim => reply = Some(r.text),
            Incoming::Msg(ServerMessage::TurnEnd(end)) => break end.outcome,
            _ => {}
        }
    };
    assert_eq!(outcome, Outcome::Success);
    assert_eq!(reply.as_deref(), Some("You said: still listening?"));
    assert!(flash.received() < SIZE as u64);
    let streaming = status_is(&h, &gadget.id, "sending").await;
    assert!(streaming["bytes_sent"].as_u64().unwrap() >= OTA_ACK_INTERVAL);

    resume_acks_and_install(&mut conn, &mut flash).await;
    status_is(&h, &gadget.id, "done").await;
}

#[tokio::test]
async fn a_staged_update_survives_a_server_restart() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, bytes) = update_underway(&h).await;
    receive_at_least(&mut conn, &mut flash, 2 * OTA_ACK_INTERVAL).await;

    let h = h.restart().await;
    drop(conn);
    let interrupted = status_until(
        &h,
        &gadget.id,
        |_| {},
        |s| s["status"] == "retrying" || s["status"] == "sending",
    )
    .await;
    assert_eq!(interrupted["attempts"], 1);
    assert_eq!(staged_files(&h).len(), 1, "the staged copy is kept");

    let (mut conn, _) = gadget.connect(&h.url).await;
    let mut flash = Flash::new(&gadget);
    assert!(matches!(
        install(&mut conn, &mut flash).await,
        DeviceMessage::OtaDone(_)
    ));
    assert_eq!(flash.data, bytes);
    let done = status_is(&h, &gadget.id, "done").await;
    assert_eq!(done["attempts"], 2);
    staged_files_removed(&h).await;
}

#[tokio::test]
async fn forgetting_a_device_drops_its_update_and_staged_image() {
    let h = Harness::start().await;
    let (gadget, mut conn, mut flash, _) = update_underway(&h).await;
    receive_at_least(&mut conn, &mut flash, OTA_ACK_INTERVAL).await;
    assert_eq!(staged_files(&h).len(), 1);
    let (code, _) = h
        .admin("DELETE", &format!("/v1/devices/{}", gadget.id), None)
        .await;
    assert_eq!(code, 200);
    assert!(staged_files(&h).is_empty());
    let (code, _) = h
        .admin("GET", &format!("/v1/ota/{}", gadget.id), None)
        .await;
    assert_eq!(code, 404);
}
