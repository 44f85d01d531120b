//! Turns, the no-reply timeout, text paging, pairing, telemetry and device actions.

mod common;

use common::Rig;
use herald_device::{
    Action, Button, CommandError, DeviceConfig, Instant, Mode, Screen, ACTION_ANSWER_SECS,
};
use herald_gadget_proto::{ActionResult, ActionSpec, DeviceMessage, Text};
use serde_json::json;

fn t(rig: &Rig) -> Instant {
    Instant::from_millis(rig.now)
}

#[test]
fn a_typed_message_goes_through_thinking_and_responding() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("What's the weather?", now).unwrap();
    assert_eq!(
        rig.sent(),
        [DeviceMessage::Text(Text {
            id: Some("t1".into()),
            text: "What's the weather?".into()
        })]
    );
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    assert_eq!(rig.screen(), Screen::Thinking);
    assert_eq!(rig.lines(), ["What's the weather?"]);

    rig.server_json(r#"{"type":"turn.start","turn":"T1"}"#);
    rig.server_json(r#"{"type":"status","text":"Searching the web"}"#);
    assert_eq!(rig.dev.view().status, "Searching the web");
    rig.server_json(r#"{"type":"reply.delta","turn":"T1","text":"Sunny"}"#);
    assert_eq!(rig.screen(), Screen::Responding);
    assert_eq!(rig.lines(), ["Sunny"]);
    rig.server_json(r#"{"type":"reply.delta","turn":"T1","text":"Sunny and 21 C"}"#);
    assert_eq!(rig.lines(), ["Sunny and 21 C"]);
    rig.server_json(r#"{"type":"reply","turn":"T1","text":"Sunny and 21 C today."}"#);
    assert_eq!(rig.dev.mode(), Mode::Responding);
    rig.server_json(r#"{"type":"turn.end","turn":"T1","outcome":"success"}"#);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    assert_eq!(rig.screen(), Screen::Ready);
    assert_eq!(rig.dev.view().status, "Ready");
    assert_eq!(rig.lines(), ["Sunny and 21 C today."]);
    assert!(rig.take().contains(&Action::Redraw));
}

#[test]
fn typed_messages_are_checked() {
    let mut rig = Rig::new();
    let now = t(&rig);
    assert_eq!(rig.dev.send_text("hi", now), Err(CommandError::Offline));
    rig.connect_and_welcome(true, 20);
    let now = t(&rig);
    assert_eq!(rig.dev.send_text("  \n", now), Err(CommandError::Empty));
    let long = "x".repeat(4001);
    assert_eq!(rig.dev.send_text(&long, now), Err(CommandError::TooLong));
    assert!(rig.dev.send_text(&long[..4000], now).is_ok());
}

#[test]
fn no_reply_for_180_s_shows_no_reply() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("hello?", now).unwrap();
    rig.advance(179_999);
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    rig.advance(1);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    assert_eq!(rig.lines(), ["No reply"]);
}

#[test]
fn progress_pushes_the_no_reply_timeout_back() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("long job", now).unwrap();
    rig.advance(100_000);
    rig.server_json(r#"{"type":"status","text":"Working"}"#);
    rig.advance(179_999);
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    rig.advance(1);
    assert_eq!(rig.lines(), ["No reply"]);
}

#[test]
fn a_final_reply_ends_the_wait_for_no_reply() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("q", now).unwrap();
    rig.server_json(r#"{"type":"turn.start","turn":"T"}"#);
    rig.server_json(r#"{"type":"reply","turn":"T","text":"answer"}"#);
    rig.advance(200_000);
    assert_eq!(rig.lines(), ["answer"]);
}

#[test]
fn a_reply_outside_a_turn_ends_the_wait() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("q", now).unwrap();
    rig.server_json(r#"{"type":"reply","text":"done"}"#);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    assert_eq!(rig.lines(), ["done"]);
}

#[test]
fn interim_replies_show_but_keep_thinking() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("q", now).unwrap();
    rig.server_json(r#"{"type":"turn.start","turn":"T"}"#);
    rig.server_json(r#"{"type":"reply","turn":"T","text":"Looking...","interim":true}"#);
    assert_eq!(rig.lines(), ["Looking..."]);
    assert_eq!(rig.dev.mode(), Mode::Thinking);
}

#[test]
fn failed_and_cancelled_turns_leave_a_notice_and_stale_ends_are_ignored() {
    let mut rig = Rig::online();
    let now = t(&rig);
    rig.dev.send_text("q", now).unwrap();
    rig.server_json(r#"{"type":"turn.start","turn":"T2"}"#);
    rig.server_json(r#"{"type":"turn.end","turn":"T1","outcome":"success"}"#);
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    rig.server_json(r#"{"type":"turn.end","turn":"T2","outcome":"failure"}"#);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    assert_eq!(rig.notice().as_deref(), Some("Something went wrong"));
    rig.dev.send_text("q", t(&rig)).unwrap();
    rig.server_json(r#"{"type":"turn.start","turn":"T3"}"#);
    rig.server_json(r#"{"type":"turn.end","turn":"T3","outcome":"cancelled"}"#);
    assert_eq!(rig.notice().as_deref(), Some("Cancelled"));
}

#[test]
fn a_turn_the_server_starts_is_awaited_too() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"turn.start","turn":"E"}"#);
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    rig.server_json(r#"{"type":"turn.end","turn":"E","outcome":"success"}"#);
    assert_eq!(rig.dev.mode(), Mode::Idle);
}

#[test]
fn up_and_down_page_the_text_and_a_growing_reply_keeps_the_page() {
    let mut rig = Rig::online();
    // 25 columns × 8 rows: 30 words of 7 characters make 10 lines of 3 words.
    let words: Vec<String> = (0..30).map(|i| format!("word{i:03}")).collect();
    let reply = words.join(" ");
    rig.server_json(&format!(
        r#"{{"type":"reply.delta","turn":"","text":"{reply}"}}"#
    ));
    let view = rig.dev.view();
    assert_eq!((view.page, view.pages), (0, 2));
    assert_eq!(view.lines.len(), 8);
    assert_eq!(view.lines[0], "word000 word001 word002");
    rig.take();
    rig.down(Button::Down);
    rig.up(Button::Down);
    let view = rig.dev.view();
    assert_eq!(view.page, 1);
    assert_eq!(
        view.lines,
        ["word024 word025 word026", "word027 word028 word029"]
    );
    assert!(rig.take().contains(&Action::Redraw));
    // DOWN on the last page changes nothing.
    rig.down(Button::Down);
    assert!(!rig.take().contains(&Action::Redraw));
    let longer = format!("{reply} more words here");
    rig.server_json(&format!(
        r#"{{"type":"reply.delta","turn":"","text":"{longer}"}}"#
    ));
    assert_eq!(rig.dev.view().page, 1);
    rig.down(Button::Up);
    assert_eq!(rig.dev.view().page, 0);
}

#[test]
fn pairing_shows_the_code_until_paired() {
    let mut rig = Rig::new();
    rig.connect_and_welcome(false, 20);
    assert_eq!(rig.screen(), Screen::Pairing);
    assert_eq!(rig.lines(), ["Waiting for approval"]);
    rig.server_json(
        r#"{"type":"pairing","code":"ABCD2345","command":"hermes pairing approve gadget ABCD2345"}"#,
    );
    let lines = rig.lines().join("\n");
    assert!(lines.contains("Pairing code: ABCD2345"), "{lines}");
    assert!(lines.contains("gadget ABCD2345"), "{lines}");
    // Talking needs pairing first.
    rig.take();
    rig.down(Button::Talk);
    assert!(rig.sent().is_empty());
    assert_eq!(rig.notice().as_deref(), Some("Pair this device first"));
    rig.up(Button::Talk);
    rig.server_json(r#"{"type":"paired"}"#);
    assert_eq!(rig.screen(), Screen::Ready);
    assert_eq!(rig.notice().as_deref(), Some("Paired"));
    rig.server_json(r#"{"type":"unpaired"}"#);
    assert_eq!(rig.screen(), Screen::Pairing);
}

#[test]
fn state_is_rate_limited_and_merged() {
    let mut rig = Rig::online();
    rig.dev.set_sensor("battery_pct", json!(80), t(&rig));
    assert_eq!(rig.sent_types(), ["state"]);
    rig.advance(1_000);
    rig.dev.set_sensor("battery_pct", json!(79), t(&rig));
    rig.advance(1_000);
    rig.dev.set_sensor("temperature_c", json!(21.5), t(&rig));
    assert!(rig.sent().is_empty());
    rig.advance(7_999);
    assert!(rig.sent().is_empty());
    rig.advance(1);
    let sent = rig.sent();
    let [DeviceMessage::State(state)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    assert_eq!(state.sensors["battery_pct"], json!(79));
    assert_eq!(state.sensors["temperature_c"], json!(21.5));
    // A reading after a quiet spell goes out at once.
    rig.advance(60_000);
    rig.sent();
    rig.dev.set_sensor("battery_pct", json!(70), t(&rig));
    assert_eq!(rig.sent_types(), ["state"]);
}

#[test]
fn readings_taken_offline_go_in_the_next_hello() {
    let mut rig = Rig::new();
    rig.dev.set_sensor("battery_pct", json!(50), t(&rig));
    rig.advance(0);
    rig.event(herald_device::Event::Connected);
    let sent = rig.sent();
    let [DeviceMessage::Hello(hello)] = sent.as_slice() else {
        panic!("{sent:?}");
    };
    assert_eq!(hello.sensors["battery_pct"], json!(50));
    rig.server_json(r#"{"type":"challenge","nonce":"AAAAAAAAAAAAAAAAAAAAAA==","enrolled":true}"#);
    rig.server_json(
        r#"{"type":"welcome","session":"3f2a9c1b7d4e","paired":true,"heartbeat_s":20,"server":"herald","proto":1}"#,
    );
    // Already reported in hello: no state after welcome.
    assert_eq!(rig.sent_types(), ["auth"]);
}

#[test]
fn events_need_a_connection() {
    let mut rig = Rig::new();
    assert_eq!(
        rig.dev.emit_event("button.long_press", None, true),
        Err(CommandError::Offline)
    );
    rig.connect_and_welcome(true, 20);
    rig.take();
    rig.dev
        .emit_event("door.open", Some(json!({"door": "front"})), true)
        .unwrap();
    let sent = rig.sent();
    assert_eq!(
        sent[0].encode(),
        r#"{"type":"event","name":"door.open","data":{"door":"front"},"notify":true}"#
    );
}

fn result(rig: &mut Rig) -> ActionResult {
    let sent = rig.sent();
    match sent.as_slice() {
        [DeviceMessage::ActionResult(r)] => r.clone(),
        other => panic!("expected one action.result: {other:?}"),
    }
}

#[test]
fn built_in_actions_set_volume_and_brightness() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"action","id":"x1","name":"speaker.volume","args":{"percent":35}}"#);
    assert!(rig.take().contains(&Action::SetVolume(35)));
    assert_eq!(rig.dev.volume(), 35);
    rig.server_json(
        r#"{"type":"action","id":"x2","name":"screen.brightness","args":{"percent":100}}"#,
    );
    let r = result(&mut rig);
    assert_eq!((r.id.as_str(), r.ok), ("x2", true));
    assert_eq!(r.result, Some(json!({"percent": 100})));
    assert_eq!(rig.dev.brightness(), 100);
    for bad in [
        r#"{}"#,
        r#"{"percent":101}"#,
        r#"{"percent":-1}"#,
        r#"{"percent":"5"}"#,
    ] {
        rig.take();
        rig.server_json(&format!(
            r#"{{"type":"action","id":"x3","name":"speaker.volume","args":{bad}}}"#
        ));
        let r = result(&mut rig);
        assert!(!r.ok, "{bad}");
        assert!(r.error.unwrap().contains("percent"));
        assert!(!rig.take().iter().any(|a| matches!(a, Action::SetVolume(_))));
    }
    assert_eq!(rig.dev.volume(), 35);
}

#[test]
fn a_board_without_speaker_has_no_volume_action() {
    let config = DeviceConfig {
        speaker_rate: None,
        ..DeviceConfig::reference("x")
    };
    let mut rig = Rig::with_config(config);
    rig.connect_and_welcome(true, 20);
    assert_eq!(rig.dev.manifest().len(), 1);
    rig.take();
    rig.server_json(r#"{"type":"action","id":"x1","name":"speaker.volume","args":{"percent":3}}"#);
    let r = result(&mut rig);
    assert_eq!(r.error.as_deref(), Some("unknown action speaker.volume"));
}

#[test]
fn app_actions_are_invoked_and_answered_once() {
    let mut rig = Rig::new();
    let led = ActionSpec {
        name: "led.set".into(),
        description: Some("Set the status LED colour.".into()),
        params: Some(
            json!({"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}),
        ),
    };
    assert_eq!(
        rig.dev.register_action(ActionSpec {
            name: "speaker.volume".into(),
            ..led.clone()
        }),
        Err(CommandError::ReservedName)
    );
    rig.dev.register_action(led.clone()).unwrap();
    rig.dev.register_action(led.clone()).unwrap();
    assert_eq!(rig.dev.manifest().len(), 3);
    rig.connect_and_welcome(true, 20);
    rig.take();

    rig.server_json(r#"{"type":"action","id":"a1","name":"led.set","args":{"color":"red"}}"#);
    assert_eq!(
        rig.take(),
        [Action::Invoke {
            id: "a1".into(),
            name: "led.set".into(),
            args: json!({"color": "red"})
        }]
    );
    rig.dev
        .complete_action("a1", Ok(json!({"led": "red"})))
        .unwrap();
    let r = result(&mut rig);
    assert_eq!((r.ok, r.result), (true, Some(json!({"led": "red"}))));
    assert_eq!(
        rig.dev.complete_action("a1", Ok(json!(null))),
        Err(CommandError::UnknownAction)
    );

    rig.take();
    rig.server_json(r#"{"type":"action","id":"a2","name":"led.set","args":{}}"#);
    rig.dev
        .complete_action("a2", Err("color is required".into()))
        .unwrap();
    let r = result(&mut rig);
    assert_eq!(
        (r.ok, r.error.as_deref()),
        (false, Some("color is required"))
    );

    rig.server_json(r#"{"type":"action","id":"a3","name":"nope","args":{}}"#);
    assert_eq!(
        result(&mut rig).error.as_deref(),
        Some("unknown action nope")
    );
}

#[test]
fn an_unanswered_app_action_fails_after_15_s() {
    let mut rig = Rig::online();
    rig.dev
        .register_action(ActionSpec {
            name: "led.set".into(),
            description: None,
            params: None,
        })
        .unwrap();
    rig.server_json(r#"{"type":"action","id":"a1","name":"led.set","args":{}}"#);
    rig.take();
    rig.advance(ACTION_ANSWER_SECS * 1000 - 1);
    assert!(rig.sent().is_empty());
    rig.advance(1);
    let r = result(&mut rig);
    assert_eq!((r.id.as_str(), r.ok), ("a1", false));
    assert_eq!(
        rig.dev.complete_action("a1", Ok(json!(1))),
        Err(CommandError::UnknownAction)
    );
}
