//! Boot, identity, handshake, reconnect backoff, setup-needed, timeouts, heartbeat and
//! firmware probation, on a fake clock.

mod common;

use common::{FakeHost, Rig, ID};
use herald_device::{Action, Boot, Device, DeviceConfig, Event, Identity, Instant, Phase, Screen};
use herald_gadget_proto::{DeviceMessage, ErrorCode};
use serde_json::json;

#[test]
fn first_boot_makes_and_stores_a_key_once() {
    let mut dev = Device::new(
        DeviceConfig::reference("x"),
        Boot::default(),
        FakeHost::default(),
        Instant::from_millis(0),
    );
    let Some(Action::StoreKey(key)) = dev.poll_action() else {
        panic!("first action stores the key");
    };
    // The fake host's random bytes are 1, 2, 3, ...
    assert_eq!(key[0], 1);
    assert_eq!(key[31], 32);
    assert_eq!(dev.identity(), &Identity::from_key(key));
    assert_eq!(dev.identity().device_id().len(), 19);

    let mut rig = Rig::new();
    assert_eq!(rig.dev.identity().device_id(), ID);
    assert!(!rig.take().iter().any(|a| matches!(a, Action::StoreKey(_))));
}

#[test]
fn boots_then_connects_and_says_hello() {
    let mut config = DeviceConfig::reference("Kitchen Gadget");
    config.token = Some("s3cret".into());
    let mut rig = Rig::with_config(config);
    assert_eq!(rig.screen(), Screen::Boot);
    assert_eq!(rig.dev.phase(), Phase::Boot);
    assert_eq!(rig.take(), [Action::Redraw]);
    rig.dev
        .set_sensor("battery_pct", json!(87), Instant::from_millis(0));
    rig.advance(0);
    assert_eq!(rig.take(), [Action::Connect, Action::Redraw]);
    assert_eq!(rig.screen(), Screen::Connecting);
    rig.event(Event::Connected);
    assert_eq!(rig.dev.phase(), Phase::Handshake);
    let sent = rig.sent();
    let [DeviceMessage::Hello(hello)] = sent.as_slice() else {
        panic!("hello first: {sent:?}");
    };
    assert_eq!(hello.proto, 1);
    assert_eq!(hello.device_id, ID);
    assert_eq!(hello.name.as_deref(), Some("Kitchen Gadget"));
    assert_eq!(hello.board.as_deref(), Some("esp32s3-breadboard"));
    assert_eq!(hello.firmware.as_deref(), Some("0.1.0"));
    assert_eq!(hello.token.as_deref(), Some("s3cret"));
    assert_eq!(hello.caps, DeviceConfig::reference("x").caps());
    let names: Vec<&str> = hello.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["speaker.volume", "screen.brightness"]);
    assert_eq!(hello.sensors["battery_pct"], json!(87));
    assert!(hello.validate().is_ok());
}

#[test]
fn enrolls_with_the_key_then_authenticates_with_the_mac() {
    let mut rig = Rig::new();
    rig.advance(0);
    rig.event(Event::Connected);
    rig.take();
    rig.server_json(r#"{"type":"challenge","nonce":"bm9uY2Utbm9uY2Utbm9uY2U=","enrolled":false}"#);
    let sent = rig.sent();
    let [DeviceMessage::Auth(auth)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    assert_eq!(
        auth.key.as_deref(),
        Some("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
    );
    assert_eq!(auth.mac, None);

    rig.drop_connection();
    rig.advance(1_000);
    rig.event(Event::Connected);
    rig.take();
    rig.server_json(r#"{"type":"challenge","nonce":"bm9uY2Utbm9uY2Utbm9uY2U=","enrolled":true}"#);
    let sent = rig.sent();
    let [DeviceMessage::Auth(auth)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    assert_eq!(auth.key, None);
    assert_eq!(
        auth.mac.as_deref(),
        Some("AMUEF53Phk8+1vHw7R8PgiDwlPd8rXUx+cgyYv1YJX0=")
    );
}

#[test]
fn welcome_goes_online() {
    let mut rig = Rig::new();
    rig.connect_and_welcome(true, 20);
    assert_eq!(rig.dev.phase(), Phase::Online);
    assert_eq!(rig.screen(), Screen::Ready);
    assert!(rig.dev.is_paired());
    assert!(rig.take().contains(&Action::Redraw));
}

#[test]
fn backoff_is_1_2_4_8_15_30_then_30() {
    let mut rig = Rig::new();
    rig.advance(0);
    rig.take();
    let mut waits = Vec::new();
    for _ in 0..8 {
        rig.drop_connection();
        let closed_at = rig.now;
        assert_eq!(rig.screen(), Screen::Offline);
        rig.take();
        let retry = rig.dev.next_deadline().unwrap().as_millis();
        // Nothing happens a millisecond before the retry.
        rig.advance_to(retry - 1);
        assert!(!rig.take().contains(&Action::Connect));
        rig.advance_to(retry);
        assert!(rig.take().contains(&Action::Connect));
        waits.push((retry - closed_at) / 1000);
    }
    assert_eq!(waits, [1, 2, 4, 8, 15, 30, 30, 30]);
}

#[test]
fn a_session_of_30_s_resets_the_backoff_and_a_shorter_one_does_not() {
    let mut rig = Rig::new();
    rig.advance(0);
    // Three failures: 1, 2, 4 s.
    for _ in 0..3 {
        rig.drop_connection();
        let retry = rig.dev.next_deadline().unwrap();
        rig.advance_to(retry.as_millis());
    }
    rig.take();
    // Online for 29.999 s: the sequence goes on with 8 s.
    rig.handshake(true, 20);
    rig.advance(29_999);
    rig.drop_connection();
    assert_eq!(rig.next_in(), 8_000);
    rig.advance(8_000);
    // Online for 30 s: back to 1 s.
    rig.handshake(true, 20);
    rig.advance(30_000);
    rig.drop_connection();
    assert_eq!(rig.next_in(), 1_000);
}

/// Boots, connects and has the server refuse with `code`, as the hub does: an `error`,
/// then a close with the code as reason.
fn refused(rig: &mut Rig, code: &str) {
    rig.advance(0);
    rig.event(Event::Connected);
    rig.server_json(&format!(
        r#"{{"type":"error","code":"{code}","message":"no"}}"#
    ));
    rig.event(Event::Closed {
        code: Some(1008),
        reason: code,
    });
}

#[test]
fn refusals_show_setup_and_wait_the_full_30_s() {
    for code in [
        ErrorCode::AuthFailed,
        ErrorCode::BadToken,
        ErrorCode::Protocol,
    ] {
        let mut rig = Rig::new();
        refused(&mut rig, code.as_str());
        assert_eq!(rig.screen(), Screen::Setup, "{code}");
        assert_eq!(rig.dev.setup_needed(), Some(code));
        assert_eq!(rig.dev.view().status, "Setup needed");
        assert_eq!(rig.next_in(), 30_000);
        // Setup stays on screen while retrying, until a welcome.
        rig.advance(30_000);
        assert_eq!(rig.screen(), Screen::Setup);
        rig.take();
        rig.handshake(true, 20);
        assert_eq!(rig.screen(), Screen::Ready);
        assert_eq!(rig.dev.setup_needed(), None);
    }
}

#[test]
fn a_close_reason_alone_also_means_setup() {
    let mut rig = Rig::new();
    rig.advance(0);
    rig.event(Event::Connected);
    rig.event(Event::Closed {
        code: Some(1008),
        reason: "bad_token",
    });
    assert_eq!(rig.dev.setup_needed(), Some(ErrorCode::BadToken));
    assert!(rig.lines().join(" ").contains("token"));
}

#[test]
fn busy_and_timeout_are_ordinary_failures() {
    for code in ["busy", "timeout"] {
        let mut rig = Rig::new();
        refused(&mut rig, code);
        assert_eq!(rig.screen(), Screen::Offline);
        assert_eq!(rig.next_in(), 1_000);
    }
}

#[test]
fn connecting_times_out_after_10_s() {
    let mut rig = Rig::new();
    rig.advance(0);
    rig.take();
    rig.advance(9_999);
    assert!(rig.take().is_empty());
    rig.advance(1);
    let actions = rig.take();
    assert_eq!(
        actions[0],
        Action::Close {
            code: 1000,
            reason: "connect timeout"
        }
    );
    assert_eq!(rig.dev.phase(), Phase::Offline);
    // A close the core asked for is not reported back; the retry follows the backoff.
    assert_eq!(rig.dev.next_deadline().unwrap().as_millis(), 11_000);
}

#[test]
fn the_handshake_times_out_after_10_s() {
    let mut rig = Rig::new();
    rig.advance(0);
    rig.advance(3_000);
    rig.event(Event::Connected);
    rig.server_json(r#"{"type":"challenge","nonce":"AAAAAAAAAAAAAAAAAAAAAA==","enrolled":true}"#);
    rig.take();
    rig.advance(9_999);
    assert!(rig.take().is_empty());
    rig.advance(1);
    assert_eq!(
        rig.take()[0],
        Action::Close {
            code: 1000,
            reason: "handshake timeout"
        }
    );
    assert_eq!(rig.screen(), Screen::Offline);
}

#[test]
fn heartbeat_is_clamped_pinged_and_dead_after_three_silent_beats() {
    // heartbeat_s 2 is clamped to 5 s.
    let mut rig = Rig::new();
    rig.connect_and_welcome(true, 2);
    rig.take();
    let start = rig.now;
    rig.advance(4_999);
    assert!(rig.sent().is_empty());
    rig.advance(1);
    let sent = rig.sent();
    assert_eq!(
        sent,
        [DeviceMessage::Ping(herald_gadget_proto::Ping {
            ts: Some(start + 5_000)
        })]
    );
    rig.advance(5_000);
    assert_eq!(rig.sent_types(), ["ping"]);
    // No inbound frame for 15 s: dead.
    rig.advance(4_999);
    assert_eq!(rig.dev.phase(), Phase::Online);
    rig.advance(1);
    assert_eq!(rig.dev.phase(), Phase::Offline);
    assert!(rig.take().contains(&Action::Close {
        code: 1000,
        reason: "heartbeat timeout"
    }));
}

#[test]
fn any_inbound_frame_keeps_the_connection_alive() {
    let mut rig = Rig::new();
    rig.connect_and_welcome(true, 5);
    for _ in 0..10 {
        rig.advance(14_000);
        rig.server_json(r#"{"type":"pong","ts":1}"#);
    }
    assert_eq!(rig.dev.phase(), Phase::Online);
    rig.advance(15_000);
    assert_eq!(rig.dev.phase(), Phase::Offline);
}

#[test]
fn long_heartbeats_are_clamped_to_300_s() {
    let mut rig = Rig::new();
    rig.connect_and_welcome(true, 100_000);
    rig.take();
    let start = rig.now;
    rig.advance(299_999);
    assert!(rig.sent().is_empty());
    rig.advance(1);
    assert_eq!(rig.sent_types(), ["ping"]);
    rig.advance_to(start + 899_999);
    assert_eq!(rig.dev.phase(), Phase::Online);
    rig.advance(1);
    assert_eq!(rig.dev.phase(), Phase::Offline);
}

#[test]
fn server_pings_are_answered_with_their_ts() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"ping","ts":1727950000000}"#);
    assert_eq!(
        rig.sent(),
        [DeviceMessage::Pong(herald_gadget_proto::Pong {
            ts: Some(1727950000000)
        })]
    );
}

#[test]
fn stray_events_are_ignored() {
    let mut rig = Rig::online();
    rig.event(Event::Connected);
    assert_eq!(rig.dev.phase(), Phase::Online);
    rig.server_json("not json");
    rig.server_json(r#"{"type":"challenge","nonce":"x","enrolled":true}"#);
    rig.server_json(r#"{"type":"from.the.future","x":1}"#);
    rig.binary(&[9, 1, 0, 0]);
    assert!(rig.sent().is_empty());
    assert_eq!(rig.dev.stats().bad_frames, 2);
    rig.drop_connection();
    rig.take();
    // Closed again while offline: nothing changes.
    let retry = rig.dev.next_deadline();
    rig.drop_connection();
    assert_eq!(rig.dev.next_deadline(), retry);
    assert!(rig.take().is_empty());
}

#[test]
fn probation_is_confirmed_by_welcome() {
    let mut rig = Rig::on_probation();
    rig.connect_and_welcome(true, 20);
    let actions = rig.take();
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == Action::ConfirmFirmware)
            .count(),
        1
    );
    rig.advance(600_000);
    assert!(!rig.take().contains(&Action::Rollback));
    rig.event(Event::Crashed);
    assert_eq!(rig.take(), [Action::Restart]);
}

#[test]
fn probation_rolls_back_after_5_minutes_without_welcome() {
    let mut rig = Rig::on_probation();
    rig.advance(299_999);
    assert!(!rig.take().contains(&Action::Rollback));
    rig.advance(1);
    assert!(rig.take().contains(&Action::Rollback));
    rig.advance(600_000);
    assert!(!rig.take().contains(&Action::Rollback));
}

#[test]
fn a_crash_on_probation_rolls_back() {
    let mut rig = Rig::on_probation();
    rig.advance(1_000);
    rig.take();
    rig.event(Event::Crashed);
    assert_eq!(rig.take(), [Action::Rollback]);
    rig.advance(600_000);
    assert!(!rig.take().contains(&Action::Rollback));
}
