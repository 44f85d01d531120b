//! Push-to-talk, the prompt guard and answers, CANCEL's short press and 2 s hold.

mod common;

use common::Rig;
use herald_device::{Action, Button, Event, Instant, Mode, Screen};
use herald_gadget_proto::device::{AudioEnd, AudioStart};
use herald_gadget_proto::{decode_frame, Answer, AudioCancel, Channel, DeviceMessage, PromptReply};

fn frames(actions: &[Action]) -> Vec<Vec<u8>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::SendBinary(b) => Some(b.clone()),
            _ => None,
        })
        .collect()
}

fn prompt(rig: &mut Rig, ttl: &str) {
    rig.server_json(&format!(
        r#"{{"type":"prompt","id":"q1","title":"Confirm /new","text":"Start over?"{ttl}}}"#
    ));
}

#[test]
fn push_to_talk_sends_40_ms_frames_between_start_and_end() {
    let mut rig = Rig::online();
    rig.down(Button::Talk);
    assert_eq!(rig.screen(), Screen::Listening);
    assert_eq!(rig.dev.mode(), Mode::Listening);
    let actions = rig.take();
    assert_eq!(
        actions[..2],
        [
            Action::Send(DeviceMessage::AudioStart(AudioStart {
                id: Some("a1".into()),
                stream: 1,
                rate: 16_000,
                format: "pcm16".into(),
                mode: Some("hold".into()),
            })),
            Action::StartMic,
        ]
    );
    // Samples in odd-sized blocks become 640-sample frames.
    for _ in 0..5 {
        rig.event(Event::MicSamples(&[5i16; 333]));
    }
    let sent = frames(&rig.take());
    assert_eq!(sent.len(), 2);
    for (i, frame) in sent.iter().enumerate() {
        let (header, payload) = decode_frame(frame).unwrap();
        assert_eq!(header.channel, Channel::Audio);
        assert_eq!((header.stream, header.seq), (1, i as u16));
        assert_eq!(payload.len(), 640 * 2);
    }
    rig.advance(500);
    rig.up(Button::Talk);
    let actions = rig.take();
    assert_eq!(actions[0], Action::StopMic);
    let last = frames(&actions);
    let (header, payload) = decode_frame(&last[0]).unwrap();
    assert_eq!((header.seq, payload.len()), (2, (5 * 333 - 1280) * 2));
    assert!(
        actions.contains(&Action::Send(DeviceMessage::AudioEnd(AudioEnd {
            id: Some("a1".into()),
            stream: 1,
            duration_ms: Some(5 * 333 * 1000 / 16_000),
        })))
    );
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    // Samples after the release go nowhere.
    rig.event(Event::MicSamples(&[1i16; 640]));
    assert!(frames(&rig.take()).is_empty());
}

#[test]
fn a_press_under_350_ms_is_cancelled_as_too_short() {
    let mut rig = Rig::online();
    rig.down(Button::Talk);
    rig.advance(349);
    rig.up(Button::Talk);
    assert!(rig
        .sent()
        .contains(&DeviceMessage::AudioCancel(AudioCancel {
            id: Some("a1".into()),
            stream: 1,
            reason: Some("too short".into()),
        })));
    assert_eq!(rig.dev.mode(), Mode::Idle);

    rig.down(Button::Talk);
    rig.advance(350);
    rig.up(Button::Talk);
    assert_eq!(rig.sent_types(), ["audio.start", "audio.end"]);
    assert_eq!(rig.dev.mode(), Mode::Thinking);
}

#[test]
fn recording_stops_at_30_s() {
    let mut rig = Rig::online();
    rig.down(Button::Talk);
    rig.take();
    rig.advance(29_999);
    assert_eq!(rig.dev.mode(), Mode::Listening);
    rig.advance(1);
    let actions = rig.take();
    assert!(actions.contains(&Action::StopMic));
    assert!(actions
        .iter()
        .any(|a| matches!(a, Action::Send(m) if m.type_name() == "audio.end")));
    assert_eq!(rig.dev.mode(), Mode::Thinking);
    rig.up(Button::Talk);
    assert!(rig.take().iter().all(|a| *a == Action::Redraw));
}

#[test]
fn a_prompt_ignores_presses_in_its_first_600_ms() {
    let mut rig = Rig::online();
    let shown = rig.now;
    prompt(&mut rig, "");
    assert_eq!(rig.screen(), Screen::Prompt);
    let view = rig.dev.view();
    assert_eq!(view.title, Some("Confirm /new"));
    assert_eq!(view.lines, ["Start over?", "TALK yes, CANCEL no"]);
    // What the view says of the guard is the rule the presses meet below.
    assert_eq!(view.answers_from, Some(Instant::from_millis(shown + 600)));
    rig.advance(599);
    rig.down(Button::Talk);
    rig.up(Button::Talk);
    rig.down(Button::Cancel);
    rig.advance(100);
    rig.up(Button::Cancel);
    assert!(rig.sent().is_empty());
    assert_eq!(rig.screen(), Screen::Prompt);
    rig.down(Button::Talk);
    assert_eq!(
        rig.sent(),
        [DeviceMessage::PromptReply(PromptReply {
            id: "q1".into(),
            answer: Answer::Yes
        })]
    );
    // The answering press does not record on its way up.
    rig.advance(1_000);
    rig.up(Button::Talk);
    assert!(rig.sent().is_empty());
    assert_eq!(rig.screen(), Screen::Ready);
}

#[test]
fn cancel_answers_no_on_release() {
    let mut rig = Rig::online();
    prompt(&mut rig, "");
    rig.advance(600);
    rig.down(Button::Cancel);
    assert!(rig.sent().is_empty());
    rig.advance(100);
    rig.up(Button::Cancel);
    assert_eq!(
        rig.sent(),
        [DeviceMessage::PromptReply(PromptReply {
            id: "q1".into(),
            answer: Answer::No
        })]
    );
}

#[test]
fn a_press_begun_before_the_prompt_does_not_answer_it() {
    let mut rig = Rig::online();
    rig.down(Button::Cancel);
    rig.advance(100);
    prompt(&mut rig, "");
    rig.advance(1_000);
    rig.up(Button::Cancel);
    assert!(rig.sent().is_empty());
    assert_eq!(rig.screen(), Screen::Prompt);
}

#[test]
fn a_prompt_expires_or_is_withdrawn_unanswered() {
    let mut rig = Rig::online();
    prompt(&mut rig, r#","ttl_s":5"#);
    rig.advance(4_999);
    assert_eq!(rig.screen(), Screen::Prompt);
    rig.advance(1);
    assert_eq!(rig.screen(), Screen::Ready);
    prompt(&mut rig, "");
    rig.server_json(r#"{"type":"prompt.close","id":"other"}"#);
    assert_eq!(rig.screen(), Screen::Prompt);
    rig.server_json(r#"{"type":"prompt.close","id":"q1"}"#);
    assert_eq!(rig.screen(), Screen::Ready);
    assert!(rig.sent().is_empty());
}

#[test]
fn holding_cancel_2_s_starts_a_new_session() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"reply","text":"old answer"}"#);
    rig.down(Button::Cancel);
    rig.advance(1_999);
    assert!(rig.sent().is_empty());
    rig.advance(1);
    assert_eq!(rig.sent_types(), ["session.new"]);
    assert!(rig.lines().is_empty());
    assert_eq!(rig.notice().as_deref(), Some("New conversation"));
    rig.advance(3_000);
    rig.up(Button::Cancel);
    assert!(rig.sent().is_empty());
}

#[test]
fn holding_cancel_counts_down_on_the_status_line() {
    let mut rig = Rig::online();
    let status = |rig: &Rig| rig.dev.view().status;
    assert_eq!(status(&rig), "Ready");
    rig.down(Button::Cancel);
    assert_eq!(status(&rig), "New chat in 2 s");
    assert!(rig.take().contains(&Action::Redraw));
    rig.advance(999);
    assert_eq!(status(&rig), "New chat in 2 s");
    rig.advance(1);
    assert_eq!(status(&rig), "New chat in 1 s");
    assert!(
        rig.take().contains(&Action::Redraw),
        "the countdown is drawn"
    );
    rig.advance(1_000);
    assert_eq!(rig.sent_types(), ["session.new"]);
    assert_eq!(status(&rig), "Ready");
    // A short press shows it only while held.
    rig.down(Button::Cancel);
    rig.advance(400);
    rig.up(Button::Cancel);
    assert_eq!(status(&rig), "Ready");
}

#[test]
fn a_message_typed_while_cancel_is_held_is_not_wiped_by_the_hold() {
    let mut rig = Rig::online();
    rig.down(Button::Cancel);
    rig.advance(1_500);
    rig.dev
        .send_text("still here?", Instant::from_millis(rig.now))
        .unwrap();
    rig.advance(5_000);
    rig.up(Button::Cancel);
    assert_eq!(rig.sent_types(), ["text"], "no session.new, no cancel");
    rig.server_json(r#"{"type":"turn.start","turn":"u1"}"#);
    rig.server_json(r#"{"type":"reply","turn":"u1","text":"yes"}"#);
    assert_eq!(rig.lines(), ["yes"]);
}

#[test]
fn every_board_shows_the_whole_prompt_hint() {
    use herald_device::DeviceConfig;
    let mut rig = Rig::online();
    prompt(&mut rig, "");
    let cols = DeviceConfig::reference("t").display.unwrap().text_cols;
    let view = rig.dev.view();
    assert_eq!(
        view.lines.last().map(String::as_str),
        Some("TALK yes, CANCEL no")
    );
    assert!(view
        .lines
        .iter()
        .all(|l| l.chars().count() <= usize::from(cols)));
    // The status line leaves room for the simulator's screen name beside it.
    assert!(view.status.chars().count() + "[prompt] ".len() <= usize::from(cols));
}

#[test]
fn a_short_cancel_stops_the_turn() {
    let mut rig = Rig::online();
    rig.dev
        .send_text("q", Instant::from_millis(rig.now))
        .unwrap();
    rig.take();
    rig.down(Button::Cancel);
    rig.advance(300);
    rig.up(Button::Cancel);
    assert_eq!(rig.sent_types(), ["cancel"]);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    assert_eq!(rig.notice().as_deref(), Some("Cancelled"));
    // The server's turn.end for it changes nothing more.
    rig.server_json(r#"{"type":"turn.end","turn":"T","outcome":"cancelled"}"#);
    assert_eq!(rig.dev.mode(), Mode::Idle);
    // With nothing else going on, a short cancel clears the notice.
    rig.down(Button::Cancel);
    rig.up(Button::Cancel);
    assert_eq!(rig.notice(), None);
    assert!(rig.sent().is_empty());
}

#[test]
fn a_short_cancel_discards_the_recording() {
    let mut rig = Rig::online();
    rig.down(Button::Talk);
    rig.advance(1_000);
    rig.take();
    rig.down(Button::Cancel);
    rig.up(Button::Cancel);
    let actions = rig.take();
    assert!(actions.contains(&Action::StopMic));
    assert!(
        actions.contains(&Action::Send(DeviceMessage::AudioCancel(AudioCancel {
            id: Some("a1".into()),
            stream: 1,
            reason: Some("cancelled".into()),
        })))
    );
    rig.up(Button::Talk);
    assert!(rig.sent().is_empty());
}

#[test]
fn presses_offline_are_ignored() {
    let mut rig = common::Rig::new();
    rig.down(Button::Talk);
    rig.advance(1_000);
    rig.up(Button::Talk);
    rig.down(Button::Cancel);
    rig.advance(5_000);
    rig.up(Button::Cancel);
    assert!(rig.sent().is_empty());
}

#[test]
fn talking_stops_playback() {
    let mut rig = Rig::online();
    rig.server_json(r#"{"type":"audio.start","stream":7,"rate":16000,"format":"pcm16"}"#);
    assert_eq!(rig.dev.mode(), Mode::Responding);
    rig.take();
    rig.down(Button::Talk);
    let actions = rig.take();
    assert_eq!(actions[0], Action::StopPlayback);
    assert_eq!(rig.dev.mode(), Mode::Listening);
}
