use std::time::{Duration, Instant};

use herald_gadget_proto::{auth, DeviceMessage, ErrorCode, ServerMessage};
use serde_json::json;

use super::*;

const TOKEN: &str = "letmein";

/// A device as the tests play it: its key, and the id derived from it.
struct Device {
    key: [u8; KEY_LEN],
    id: String,
}

impl Device {
    fn new(seed: u8) -> Device {
        let key = [seed; KEY_LEN];
        Device {
            id: auth::device_id(&key),
            key,
        }
    }

    fn hello(&self, extra: serde_json::Value) -> DeviceMessage {
        let mut hello = json!({
            "type": "hello", "proto": 1, "device_id": self.id, "name": "Desk", "token": TOKEN,
        });
        if let (Some(hello), Some(extra)) = (hello.as_object_mut(), extra.as_object()) {
            hello.extend(extra.clone());
        }
        DeviceMessage::decode(&hello.to_string()).unwrap()
    }

    fn known(&self, name: &str) -> Known {
        Known {
            key: self.key,
            profile: fingerprint(&Some(name.into()), &None, &None),
        }
    }

    /// `auth` answering `challenge` with the MAC, or with the key on first contact.
    fn auth(&self, challenge: &Frame) -> DeviceMessage {
        let Frame::Text(text) = challenge else {
            panic!("expected a challenge, got {challenge:?}");
        };
        let Ok(ServerMessage::Challenge(challenge)) = ServerMessage::decode(text) else {
            panic!("expected a challenge, got {text}");
        };
        let proof = if challenge.enrolled {
            json!({"type": "auth", "mac": auth::b64(&auth::auth_mac(&self.key, &self.id, &challenge.nonce))})
        } else {
            json!({"type": "auth", "key": auth::b64(&self.key)})
        };
        DeviceMessage::decode(&proof.to_string()).unwrap()
    }
}

fn start(now: Instant) -> Handshake<'static> {
    Handshake::new(Some(TOKEN), Ids::seeded(1), now)
}

fn effects(hs: &mut Handshake) -> Vec<Effect> {
    std::iter::from_fn(|| hs.poll_effect()).collect()
}

fn frames(hs: &mut Handshake) -> Vec<Frame> {
    std::iter::from_fn(|| hs.poll_frame()).collect()
}

fn admitted(hs: &mut Handshake) -> Admitted {
    match hs.outcome() {
        Some(Outcome::Admitted(admitted)) => *admitted,
        other => panic!("expected the device admitted, got {other:?}"),
    }
}

/// The refusal, after checking that the device heard it as an error frame and a 1008
/// close naming its code.
fn refused(hs: &mut Handshake) -> Refusal {
    let Some(Outcome::Refused(refusal)) = hs.outcome() else {
        panic!("expected a refusal");
    };
    let heard = frames(hs);
    let error = ServerMessage::Error(herald_gadget_proto::Error {
        code: refusal.code,
        message: refusal.message.clone(),
    });
    assert_eq!(
        heard,
        [
            Frame::Text(error.encode()),
            Frame::Close(Close::Policy, refusal.code.as_str().into())
        ]
    );
    assert_eq!(hs.poll_timeout(), None, "nothing is due after the end");
    refusal
}

/// Up to the challenge: hello, then the hub's answers.
fn challenged(hs: &mut Handshake, device: &Device, known: Option<Known>, now: Instant) -> Frame {
    hs.handle_message(device.hello(json!({})));
    assert_eq!(effects(hs), [Effect::Check]);
    let first_contact = known.is_none();
    hs.handle_checked(false, known, now);
    if first_contact {
        assert_eq!(effects(hs), [Effect::Reserve]);
        hs.handle_reserved(true, now);
    }
    let mut heard = frames(hs);
    assert_eq!(heard.len(), 1, "{heard:?}");
    heard.remove(0)
}

#[test]
fn a_returning_device_that_says_what_the_store_holds_costs_one_last_seen() {
    let now = crate::testing::start();
    let device = Device::new(1);
    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, Some(device.known("Desk")), now);
    hs.handle_message(device.auth(&challenge));
    assert_eq!(effects(&mut hs), [Effect::Seen, Effect::Authorize]);
    assert!(hs.outcome().is_none(), "not before the authorizer answers");
    hs.handle_authorized(Ok(true));

    let admitted = admitted(&mut hs);
    assert!(admitted.paired);
    assert_eq!(admitted.hello.device_id, device.id);
    assert_eq!(
        admitted.hello.token, None,
        "the session never sees the token"
    );
    assert_eq!(admitted.session_id.len(), 12);
    assert!(frames(&mut hs).is_empty(), "welcome is the session's");
}

#[test]
fn a_changed_name_or_new_readings_are_stored_before_the_device_is_admitted() {
    let now = crate::testing::start();
    let device = Device::new(2);
    for (known_as, extra) in [
        ("Hall", json!({})),
        ("Desk", json!({"sensors": {"temp": 21}})),
    ] {
        let mut hs = start(now);
        hs.handle_message(device.hello(extra));
        effects(&mut hs);
        hs.handle_checked(false, Some(device.known(known_as)), now);
        let challenge = frames(&mut hs).remove(0);
        hs.handle_message(device.auth(&challenge));
        assert_eq!(effects(&mut hs), [Effect::Touch { key: device.key }]);
        hs.handle_touched(Ok(()));
        assert_eq!(effects(&mut hs), [Effect::Authorize]);
        hs.handle_authorized(Ok(false));
        let admitted = admitted(&mut hs);
        assert!(!admitted.paired);
        assert!(
            admitted.hello.sensors.is_empty(),
            "readings went to the store"
        );
    }
}

#[test]
fn a_first_contact_holds_a_place_and_is_enrolled_by_the_key_its_id_comes_from() {
    let now = crate::testing::start();
    let device = Device::new(3);
    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, None, now);
    hs.handle_message(device.auth(&challenge));
    assert_eq!(effects(&mut hs), [Effect::Enroll { key: device.key }]);
    hs.handle_enrolled(Ok(Enrollment::Enrolled));
    assert_eq!(
        effects(&mut hs),
        [Effect::Authorize],
        "enrolling wrote the profile"
    );
    hs.handle_authorized(Ok(false));
    assert!(!admitted(&mut hs).paired);

    // A retried first contact may bring a new name: the profile is written again.
    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, None, now);
    hs.handle_message(device.auth(&challenge));
    effects(&mut hs);
    hs.handle_enrolled(Ok(Enrollment::AlreadyEnrolled));
    assert_eq!(effects(&mut hs), [Effect::Touch { key: device.key }]);

    // Another key holds the id.
    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, None, now);
    hs.handle_message(device.auth(&challenge));
    effects(&mut hs);
    hs.handle_enrolled(Ok(Enrollment::Conflict));
    let refusal = refused(&mut hs);
    assert_eq!(refusal.code, ErrorCode::AuthFailed);
    assert!(refusal.counts_as_failed_attempt());
}

#[test]
fn a_proof_that_fails_is_refused_without_touching_the_store() {
    let now = crate::testing::start();
    let device = Device::new(4);
    let impostor = Device::new(5);

    // A MAC made with another key.
    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, Some(device.known("Desk")), now);
    let forged = Device {
        key: impostor.key,
        id: device.id.clone(),
    };
    hs.handle_message(forged.auth(&challenge));
    assert!(effects(&mut hs).is_empty());
    assert_eq!(refused(&mut hs).code, ErrorCode::AuthFailed);

    // A first contact whose key is not the one its id comes from.
    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, None, now);
    hs.handle_message(forged.auth(&challenge));
    assert!(effects(&mut hs).is_empty());
    assert_eq!(refused(&mut hs).code, ErrorCode::AuthFailed);
}

#[test]
fn the_hub_can_refuse_before_any_challenge() {
    let now = crate::testing::start();
    let device = Device::new(6);

    let mut hs = start(now);
    hs.handle_message(device.hello(json!({"token": "guess"})));
    effects(&mut hs);
    // A locked-out address hears so even with a right token; the lock comes first.
    hs.handle_checked(true, None, now);
    let refusal = refused(&mut hs);
    assert_eq!(refusal.code, ErrorCode::Busy);
    assert!(!refusal.counts_as_failed_attempt());

    let mut hs = start(now);
    hs.handle_message(device.hello(json!({"token": "guess"})));
    effects(&mut hs);
    hs.handle_checked(false, Some(device.known("Desk")), now);
    let refusal = refused(&mut hs);
    assert_eq!(refusal.code, ErrorCode::BadToken);
    assert!(refusal.counts_as_failed_attempt());

    let mut hs = start(now);
    hs.handle_message(device.hello(json!({})));
    effects(&mut hs);
    hs.handle_checked(false, None, now);
    effects(&mut hs);
    hs.handle_reserved(false, now);
    let refusal = refused(&mut hs);
    assert_eq!(refusal.code, ErrorCode::Busy);
    assert!(refusal.message.contains("waiting for pairing"));
}

#[test]
fn without_a_host_token_any_token_or_none_is_let_through() {
    let now = crate::testing::start();
    let device = Device::new(7);
    let mut hs = Handshake::new(None, Ids::seeded(1), now);
    hs.handle_message(device.hello(json!({"token": null})));
    effects(&mut hs);
    hs.handle_checked(false, Some(device.known("Desk")), now);
    assert!(matches!(frames(&mut hs).as_slice(), [Frame::Text(_)]));
    assert!(hs.outcome().is_none());
}

#[test]
fn each_step_the_device_takes_has_its_own_deadline() {
    let opened = crate::testing::start();
    let device = Device::new(8);

    let mut hs = start(opened);
    assert_eq!(hs.poll_timeout(), Some(opened + STEP_TIMEOUT));
    hs.handle_timeout(opened + STEP_TIMEOUT - Duration::from_millis(1));
    assert!(hs.outcome().is_none(), "not early");
    hs.handle_timeout(opened + STEP_TIMEOUT);
    let refusal = refused(&mut hs);
    assert_eq!(refusal.code, ErrorCode::Timeout);
    assert_eq!(refusal.message, "no hello in time");

    // The auth's ten seconds start at the challenge, and nothing is due while the hub
    // works on an answer.
    let mut hs = start(opened);
    hs.handle_message(device.hello(json!({})));
    assert_eq!(hs.poll_timeout(), None);
    let later = opened + Duration::from_secs(9);
    effects(&mut hs);
    hs.handle_checked(false, Some(device.known("Desk")), later);
    assert_eq!(frames(&mut hs).len(), 1, "the challenge");
    assert_eq!(hs.poll_timeout(), Some(later + STEP_TIMEOUT));
    hs.handle_timeout(opened + STEP_TIMEOUT);
    assert!(hs.outcome().is_none());
    hs.handle_timeout(later + STEP_TIMEOUT);
    assert_eq!(refused(&mut hs).message, "no auth in time");
}

#[test]
fn the_handshake_speaks_text_and_in_order() {
    let now = crate::testing::start();
    let device = Device::new(9);

    let mut hs = start(now);
    hs.handle_binary();
    assert_eq!(
        refused(&mut hs).message,
        "expected hello, got a binary frame"
    );

    let mut hs = start(now);
    hs.handle_message(
        device.auth(&Frame::Text(
            ServerMessage::Challenge(Challenge {
                nonce: "AAAA".into(),
                enrolled: false,
            })
            .encode(),
        )),
    );
    assert_eq!(refused(&mut hs).message, "the first message must be hello");

    let mut hs = start(now);
    challenged(&mut hs, &device, Some(device.known("Desk")), now);
    hs.handle_message(device.hello(json!({})));
    assert_eq!(refused(&mut hs).message, "expected auth");

    let mut hs = start(now);
    hs.handle_bad_frame("not JSON".into());
    let refusal = refused(&mut hs);
    assert_eq!(
        (refusal.code, refusal.message.as_str()),
        (ErrorCode::Protocol, "not JSON")
    );

    let mut hs = start(now);
    hs.handle_message(device.hello(json!({"proto": 2})));
    assert_eq!(refused(&mut hs).code, ErrorCode::Protocol);
}

#[test]
fn a_store_or_authorizer_that_fails_sends_the_device_away_to_retry() {
    let now = crate::testing::start();
    let device = Device::new(10);

    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, None, now);
    hs.handle_message(device.auth(&challenge));
    effects(&mut hs);
    hs.handle_enrolled(Err(Unchecked));
    assert_eq!(refused(&mut hs).code, ErrorCode::Busy);

    let mut hs = start(now);
    let challenge = challenged(&mut hs, &device, Some(device.known("Desk")), now);
    hs.handle_message(device.auth(&challenge));
    effects(&mut hs);
    hs.handle_authorized(Err(Unchecked));
    let refusal = refused(&mut hs);
    assert_eq!(refusal.message, "the server could not check this device");
    assert!(!refusal.counts_as_failed_attempt());
}

#[test]
fn what_a_device_calls_itself_is_cleaned_before_anyone_sees_it() {
    let now = crate::testing::start();
    let device = Device::new(11);
    let mut hs = start(now);
    hs.handle_message(device.hello(json!({"name": "Desk\u{1b}[2J", "board": "  "})));
    let hello = hs.hello().unwrap();
    assert_eq!(hello.name.as_deref(), Some("Desk[2J"));
    assert_eq!(hello.board, None, "a name left empty is none");
}

#[test]
fn nonces_differ_between_handshakes() {
    let now = crate::testing::start();
    let device = Device::new(12);
    let mut ids = 0;
    let mut nonce = || {
        ids += 1;
        let mut hs = Handshake::new(Some(TOKEN), Ids::seeded(ids), now);
        let Frame::Text(text) = challenged(&mut hs, &device, None, now) else {
            unreachable!()
        };
        text
    };
    assert_ne!(nonce(), nonce());
}
