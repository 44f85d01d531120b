//! The gadget core driven in virtual time: hours of protocol run in microseconds,
//! "nothing was sent" is a drained queue, not a wait, and ids are seeded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_gadget_proto::{self as proto, limits, DeviceMessage};
use herald_media::cue::Cue;
use herald_port::{
    ActionError, DeliveryError, InboundBody, Notification, Outcome, PairingCode, Prompt, Request,
    RequestError, Response, SendOptions, TurnId,
};
use serde_json::{json, Value};

use super::ota::{OtaEffect, Timeouts};
use super::{Core, CueTiming, Effect, Peer, PictureNotSent, Rules};
use crate::FAILED_NOTICE;
use crate::{Ids, SessionCore};

const HEARTBEAT: Duration = Duration::from_secs(20);
const TURN_TIMEOUT: Duration = Duration::from_secs(180);

crate::testing::driven!(Core, Effect);

type Rig = crate::testing::Rig<Core>;

fn core() -> Rig {
    core_with(None)
}

/// A session whose speaker cues play by `cues`.
fn core_with(cues: Option<CueTiming>) -> Rig {
    let ota = Timeouts {
        ready: Duration::from_secs(limits::OTA_READY_TIMEOUT_SECS),
        ack: Duration::from_secs(limits::OTA_ACK_TIMEOUT_SECS),
        done: Duration::from_secs(limits::OTA_DONE_TIMEOUT_SECS),
    };
    let rules = Rules {
        heartbeat: HEARTBEAT,
        max_utterance_s: 60,
        ota,
        cues,
        turn_timeout: TURN_TIMEOUT,
    };
    let core = Core::new(
        "hg-0123456789abcdef".into(),
        Arc::new(rules),
        Ids::seeded(1),
    );
    Rig::new(core)
}

fn peer(extra: Value) -> Peer {
    let mut hello = json!({"proto": 1, "device_id": "hg-0123456789abcdef", "name": "desk"});
    if let (Some(hello), Some(extra)) = (hello.as_object_mut(), extra.as_object()) {
        hello.extend(extra.clone());
    }
    Peer::from(serde_json::from_value::<proto::Hello>(hello).unwrap())
}

fn attached(paired: bool, extra: Value, now: Instant) -> Rig {
    let mut core = core();
    core.handle_attach(1, peer(extra), paired, "s-1".into(), 20, now);
    core
}

fn sent(rig: &mut Rig) -> Vec<Value> {
    rig.sent()
}

fn types(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .map(|f| f["type"].as_str().unwrap_or("close"))
        .collect()
}

fn effects(rig: &mut Rig) -> Vec<Effect> {
    rig.effects()
}

fn frame(json: Value) -> DeviceMessage {
    DeviceMessage::decode(&json.to_string()).unwrap()
}

fn call(rig: &mut Rig, now: Instant, request: Request) -> Result<Response, RequestError> {
    rig.ask(request, now)
}

/// Start a turn under an id of the test's making, as the agent names its turns.
fn start_turn(core: &mut Core, now: Instant) -> String {
    let turn_id = TurnId::next();
    core.handle_notification(
        Notification::TurnStarted {
            turn_id: turn_id.clone(),
        },
        now,
    );
    turn_id.into()
}

fn end_turn(core: &mut Core, turn: &str, outcome: Outcome, now: Instant) {
    let turn_id = TurnId::try_from(turn.to_owned()).unwrap();
    core.handle_notification(Notification::TurnEnded { turn_id, outcome }, now);
}

/// The id a request answered with.
fn id(answer: Result<Response, RequestError>) -> String {
    match answer {
        Ok(Response::MessageId { message_id: id }) | Ok(Response::PromptId { prompt_id: id }) => id,
        other => panic!("no id: {other:?}"),
    }
}

#[test]
fn a_device_that_answers_is_pinged_every_heartbeat_for_hours_and_never_dropped() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    assert_eq!(types(&sent(&mut core)), ["welcome"]);
    let mut pings = 0;
    while let Some(at) = core
        .poll_timeout()
        .filter(|at| *at <= start + Duration::from_secs(3 * 3600))
    {
        core.handle_timeout(at, 0);
        let frames = sent(&mut core);
        assert_eq!(types(&frames), ["ping"], "at {:?}", at - start);
        pings += 1;
        let answered = at + Duration::from_millis(150);
        core.touch(answered);
        core.handle_frame(frame(json!({"type": "pong"})), answered);
        assert!(sent(&mut core).is_empty());
    }
    assert_eq!(
        pings,
        3 * 3600 / 20,
        "one ping per heartbeat for three hours"
    );
    assert!(core.is_current(1));
}

#[test]
fn a_silent_device_is_closed_after_three_heartbeats_and_its_last_seen_recorded() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    sent(&mut core);
    effects(&mut core);
    let mut seen = Vec::new();
    while let Some(at) = core.poll_timeout() {
        core.handle_timeout(at, 0);
        seen.push(((at - start).as_secs(), types(&sent(&mut core)).join(",")));
    }
    assert_eq!(
        seen,
        [
            (20, "ping".to_owned()),
            (40, "ping".to_owned()),
            (60, "close".to_owned())
        ]
    );
    assert!(
        !core.is_current(1),
        "events of the dead connection no longer count"
    );
    let effects = effects(&mut core);
    assert!(matches!(effects[0], Effect::Offline { paired: true }));
    assert!(matches!(effects[1], Effect::RecordLastSeen));
    assert!(core.is_idle());
}

#[test]
fn questions_show_one_at_a_time_and_the_next_shows_when_the_first_lapses() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    sent(&mut core);
    let confirm = |text: &str| Prompt::Confirm {
        title: "Sure?".into(),
        text: text.into(),
    };
    let ask = |text, ttl_s| Request::Ask {
        prompt: confirm(text),
        ttl_s: Some(ttl_s),
    };
    let first = id(call(&mut core, start, ask("first", 30)));
    let frames = sent(&mut core);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0]["id"].as_str(), frames[0]["ttl_s"].as_u64()),
        (Some(first.as_str()), Some(30))
    );

    let second = id(call(&mut core, start, ask("second", 60)));
    assert!(
        sent(&mut core).is_empty(),
        "the second waits behind the first"
    );
    assert_eq!(core.poll_timeout(), Some(start + HEARTBEAT));

    core.handle_timeout(start + Duration::from_secs(30), 0);
    let frames = sent(&mut core);
    let prompt = frames.iter().find(|f| f["type"] == "prompt").unwrap();
    assert_eq!(prompt["id"].as_str(), Some(second.as_str()));
    assert_eq!(
        prompt["ttl_s"].as_u64(),
        Some(30),
        "what is left of its minute"
    );
}

#[test]
fn an_action_the_device_never_answers_fails_at_its_deadline_and_not_before() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({"actions": [{"name": "led"}]}), start);
    sent(&mut core);
    let request = Request::InvokeAction {
        name: "led".into(),
        args: json!({"on": true}),
    };
    let led = core.call(request, start);
    assert_eq!(types(&sent(&mut core)), ["action"]);
    let deadline = start + Duration::from_secs(limits::ACTION_TIMEOUT_SECS);
    core.handle_timeout(deadline - Duration::from_millis(1), 0);
    assert_eq!(core.answer(led), None, "still waiting");
    // The device kept answering pings meanwhile; only the action lapses.
    core.touch(deadline);
    core.handle_timeout(deadline, 0);
    assert_eq!(
        core.answer(led),
        Some(Err(RequestError::Action(ActionError::Timeout)))
    );
    assert!(core.is_current(1));

    let fan = Request::InvokeAction {
        name: "fan".into(),
        args: json!({}),
    };
    assert_eq!(
        call(&mut core, start, fan),
        Err(RequestError::Action(ActionError::UnknownAction(
            "fan".into()
        )))
    );
}

#[test]
fn an_unpaired_device_asks_for_one_pairing_code_at_a_time_and_reaches_no_agent() {
    let start = crate::testing::start();
    let mut core = attached(false, json!({}), start);
    assert_eq!(sent(&mut core)[0]["paired"], false);
    let asked = |effects: &[Effect]| {
        effects
            .iter()
            .filter(
                |e| matches!(e, Effect::AskPairingCode { name } if name.as_deref() == Some("desk")),
            )
            .count()
    };
    assert_eq!(asked(&effects(&mut core)), 1);
    for _ in 0..3 {
        core.handle_frame(frame(json!({"type": "text", "text": "hi"})), start);
    }
    let knocked = effects(&mut core);
    assert_eq!(asked(&knocked), 0, "the question is still out");
    assert!(!knocked.iter().any(|e| matches!(e, Effect::ToAgent(_))));

    core.handle_pairing_code(Some(PairingCode {
        code: "ABCD2345".into(),
        command: "hermes pairing approve gadget ABCD2345".into(),
    }));
    let frames = sent(&mut core);
    assert_eq!(types(&frames), ["pairing"]);
    assert_eq!(frames[0]["code"], "ABCD2345");
    core.handle_frame(frame(json!({"type": "text", "text": "hi"})), start);
    assert_eq!(asked(&effects(&mut core)), 1, "asked again once answered");

    core.handle_paired(true, start);
    assert_eq!(types(&sent(&mut core)), ["paired"]);
    core.handle_pairing_code(Some(PairingCode {
        code: "LATE0000".into(),
        command: String::new(),
    }));
    assert!(
        sent(&mut core).is_empty(),
        "a late code is not shown to a paired device"
    );
}

#[test]
fn the_turn_ends_after_its_speech_has_played_and_speaking_over_it_stops_it() {
    let start = crate::testing::start();
    let mut core = attached(
        true,
        json!({"caps": {"speaker": {"rate": 16000, "format": "pcm16"}}}),
        start,
    );
    sent(&mut core);
    effects(&mut core);
    let turn = start_turn(&mut core, start);
    let request = Request::SendVoice {
        path: "/tmp/speech.ogg".into(),
    };
    core.call(request, start);
    assert!(matches!(
        effects(&mut core)[..],
        [Effect::OpenSpeech { rate: 16000, .. }]
    ));
    let (stream, speech_turn) = core.start_speech().unwrap();
    assert_eq!(speech_turn.as_deref(), Some(turn.as_str()));
    end_turn(&mut core, &turn, Outcome::Success, start);
    assert_eq!(
        types(&sent(&mut core)),
        ["turn.start"],
        "no turn.end during speech"
    );
    core.handle_speech_done(stream);
    assert_eq!(types(&sent(&mut core)), ["turn.end"]);

    let (stream, _) = core.start_speech().unwrap();
    core.handle_frame(frame(json!({"type": "cancel"})), start);
    // The playback sends the abort once it has stopped (the shell's part).
    assert!(sent(&mut core).is_empty());
    assert!(matches!(
        effects(&mut core)[..],
        [Effect::StopSpeech { stream: s }, Effect::ToAgent(_)] if s == stream
    ));
}

fn speech(op: &str, args: Value) -> Request {
    serde_json::from_value(json!({"op": op, "args": args})).unwrap()
}

#[test]
fn a_streamed_reply_has_one_owner_and_its_interruption_reaches_the_agent() {
    let start = crate::testing::start();
    let speaker = json!({"caps": {"speaker": {"rate": 16000, "format": "pcm16"}}});
    let mut core = attached(true, speaker, start);
    sent(&mut core);
    effects(&mut core);
    let turn = start_turn(&mut core, start);
    let begin = json!({"speech_id": "s1", "sample_rate": 24000, "channels": 1});
    call(&mut core, start, speech("speech_begin", begin.clone())).unwrap();
    let [Effect::BeginSpeech {
        stream,
        rate: 16000,
        format,
        turn: Some(t),
    }] = &effects(&mut core)[..]
    else {
        panic!("no begin")
    };
    let stream = *stream;
    assert_eq!((format.sample_rate, t), (24_000, &turn));

    // A write for the stream goes to it; one for another id is dropped at once.
    let write = speech("speech_write", json!({"speech_id": "s1", "pcm": "AAA="}));
    core.call(write, start);
    assert!(
        matches!(effects(&mut core)[..], [Effect::FeedSpeech { stream: s, .. }] if s == stream)
    );
    let other = speech("speech_write", json!({"speech_id": "s0", "pcm": "AAA="}));
    assert_eq!(
        call(&mut core, start, other).unwrap(),
        Response::Dropped { dropped: true }
    );
    assert!(effects(&mut core).is_empty());

    // The turn ends after the speech; speaking over it stops it and tells the agent.
    end_turn(&mut core, &turn, Outcome::Success, start);
    let barge_in = json!({"type": "audio.start", "stream": 9, "rate": 16000, "format": "pcm16"});
    core.handle_frame(frame(barge_in), start);
    let done = effects(&mut core);
    let [Effect::StopSpeech { stream: s }, Effect::ToAgent(inbound)] = &done[..] else {
        panic!("not stopped")
    };
    assert_eq!(*s, stream);
    assert!(matches!(
        &inbound.body,
        herald_port::InboundBody::SpeechStopped { speech_id, .. } if speech_id.as_str() == "s1"
    ));
    assert_eq!(
        types(&sent(&mut core)),
        ["turn.start"],
        "turn.end after the abort"
    );
    core.handle_speech_stopped();
    assert_eq!(types(&sent(&mut core)), ["turn.end"]);
    let late = speech("speech_write", json!({"speech_id": "s1", "pcm": "AAA="}));
    assert_eq!(
        call(&mut core, start, late).unwrap(),
        Response::Dropped { dropped: true }
    );

    // The agent's own abort and a new begin stop it too, but are no interruption.
    call(&mut core, start, speech("speech_begin", begin.clone())).unwrap();
    effects(&mut core);
    call(&mut core, start, speech("speech_begin", begin)).unwrap();
    assert!(matches!(
        effects(&mut core)[..],
        [Effect::StopSpeech { .. }, Effect::BeginSpeech { .. }]
    ));
    let abort = speech("speech_abort", json!({"speech_id": "s1"}));
    call(&mut core, start, abort).unwrap();
    assert!(matches!(
        effects(&mut core)[..],
        [Effect::StopSpeech { .. }]
    ));
}

#[test]
fn streamed_speech_needs_a_speaker() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    let begin = json!({"speech_id": "s1", "sample_rate": 24000, "channels": 2});
    let refused = call(&mut core, start, speech("speech_begin", begin.clone()));
    assert!(
        matches!(
            refused,
            Err(RequestError::Delivery(
                herald_port::DeliveryError::Unsupported { .. }
            ))
        ),
        "{refused:?}"
    );
    assert!(effects(&mut core)
        .iter()
        .all(|e| !matches!(e, Effect::BeginSpeech { .. })));
    core.handle_closed();
    let offline = call(&mut core, start, speech("speech_begin", begin));
    assert!(matches!(
        offline,
        Err(RequestError::Delivery(herald_port::DeliveryError::Offline(
            _
        )))
    ));
}

#[test]
fn readings_reach_the_store_at_most_once_per_window_and_none_is_lost() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    effects(&mut core);
    let state = |t: f64| frame(json!({"type": "state", "sensors": {"temp": t}}));
    core.handle_frame(state(20.5), start);
    assert!(matches!(&effects(&mut core)[..], [Effect::SaveSensors(r)] if r["temp"] == 20.5));
    core.handle_frame(state(21.0), start + Duration::from_secs(1));
    core.handle_frame(state(21.5), start + Duration::from_secs(2));
    assert!(effects(&mut core).is_empty(), "within the window");
    let due = start + Duration::from_secs(10);
    assert_eq!(core.poll_timeout(), Some(due));
    core.handle_timeout(due, 0);
    assert!(matches!(&effects(&mut core)[..], [Effect::SaveSensors(r)] if r["temp"] == 21.5));
}

#[test]
fn a_new_connection_closes_the_one_it_replaces_and_streaming_starts_over() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    sent(&mut core);
    effects(&mut core);
    let streamed = Request::SendText {
        text: "Hel".into(),
        options: SendOptions {
            streaming: true,
            ..Default::default()
        },
    };
    let message_id = id(call(&mut core, start, streamed));
    sent(&mut core);
    core.handle_attach(2, peer(json!({})), true, "s-2".into(), 20, start);
    let frames = sent(&mut core);
    assert_eq!(
        frames[0],
        json!({"close": "replaced by a new connection", "conn": 1})
    );
    assert_eq!(frames[1]["type"], "welcome");
    assert!(matches!(
        effects(&mut core)[..],
        [
            Effect::Offline { .. },
            Effect::RecordLastSeen,
            Effect::Online { conn: 2 },
            // Whether an update waits for it.
            Effect::Ota(OtaEffect::Lookup)
        ]
    ));
    let edit = Request::EditText {
        message_id,
        text: "Hello".into(),
        finalize: true,
    };
    assert!(
        call(&mut core, start, edit).is_err(),
        "the old stream is gone"
    );
}

#[test]
fn only_short_printable_message_ids_are_kept() {
    let start = crate::testing::start();
    let mut core = attached(true, json!({}), start);
    effects(&mut core);
    let id_of = |core: &mut Rig, id: Value| {
        core.handle_frame(
            frame(json!({"type": "text", "text": "hi", "id": id})),
            start,
        );
        match effects(core).pop() {
            Some(Effect::ToAgent(inbound)) => inbound.message_id,
            _ => panic!("no inbound"),
        }
    };
    assert_eq!(id_of(&mut core, json!("m-1")), "m-1");
    for bad in [
        "x".repeat(limits::MAX_ID + 1),
        "a\u{1b}[2J".into(),
        String::new(),
    ] {
        let id = id_of(&mut core, json!(bad));
        assert_ne!(id, bad);
        assert_eq!(id.len(), 12);
    }
}

#[test]
fn a_pictures_caption_follows_it_through_the_core_and_answers_its_call() {
    let start = crate::testing::start();
    let display = json!({"caps": {"display": {"width": 320, "height": 240,
        "image": {"width": 320, "height": 200, "format": "rgb565"}}}});
    let mut core = attached(true, display, start);
    sent(&mut core);
    effects(&mut core);
    let turn = start_turn(&mut core, start);
    sent(&mut core);
    let show = Request::SendImage {
        path: "/tmp/cat.png".into(),
        caption: Some("A cat".into()),
    };
    let call = core.call(show, start);
    let [Effect::ShowImage(job)] = &effects(&mut core)[..] else {
        panic!("no picture to show")
    };
    assert_eq!((job.call, job.image_box), (call, (320, 200)));
    let (caption, job_turn) = (job.caption.clone(), job.turn.clone());
    assert_eq!(job_turn.as_deref(), Some(turn.as_str()));
    assert!(sent(&mut core).is_empty(), "nothing before the picture");
    assert_eq!(core.answer(call), None, "answered once it is out");

    core.handle_image_sent(call, caption, job_turn, Ok(()));
    let frames = sent(&mut core);
    assert_eq!(types(&frames), ["reply"]);
    assert_eq!(
        (frames[0]["text"].as_str(), frames[0]["turn"].as_str()),
        (Some("A cat"), Some(turn.as_str()))
    );
    assert_eq!(core.answer(call), Some(Ok(Response::Done {})));

    // A picture that could not be made says why, and no caption goes out alone.
    let show = Request::SendImage {
        path: "/tmp/not-a-picture".into(),
        caption: Some("lost".into()),
    };
    let call = core.call(show, start);
    effects(&mut core);
    let unusable = PictureNotSent::Unusable("not an image".into());
    core.handle_image_sent(call, Some("lost".into()), None, Err(unusable));
    assert!(sent(&mut core).is_empty());
    assert!(matches!(
        core.answer(call),
        Some(Err(RequestError::Delivery(DeliveryError::Unsupported { reason, .. }))) if reason == "not an image"
    ));

    // One the device went away during is the device's absence, not the picture's fault.
    let show = Request::SendImage {
        path: "/tmp/a-picture".into(),
        caption: None,
    };
    let call = core.call(show, start);
    effects(&mut core);
    core.handle_image_sent(call, None, None, Err(PictureNotSent::Gone));
    assert!(matches!(
        core.answer(call),
        Some(Err(RequestError::Delivery(DeliveryError::Offline(_))))
    ));
}

// ---- never silent: Herald's own cues on a speaker ----

const CUES: CueTiming = CueTiming {
    after: Duration::from_secs(4),
    every: Duration::from_secs(8),
};

fn cues(effects: &[Effect]) -> Vec<Cue> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::PlayCue { cue, rate } => {
                assert_eq!(*rate, 16_000, "at the speaker's rate");
                Some(*cue)
            }
            _ => None,
        })
        .collect()
}

/// The device is heard at `at`, as a live one is: the heartbeat does not end the test.
fn alive(core: &mut Core, at: Instant) {
    core.touch(at);
}

/// The frames sent but the heartbeat's.
fn said(core: &mut Rig) -> Vec<Value> {
    let frames = sent(core);
    frames
        .into_iter()
        .filter(|f| f["type"] != "ping" && f["type"] != "pong")
        .collect()
}

/// A paired speaker gadget, cues on, that has just said half a second.
fn spoken_turn_taken(now: Instant) -> Rig {
    let speaker = json!({"caps": {"speaker": {"rate": 16000, "format": "pcm16"}}});
    let mut core = core_with(Some(CUES));
    core.handle_attach(1, peer(speaker), true, "s-1".into(), 20, now);
    sent(&mut core);
    effects(&mut core);
    let start = json!({"type": "audio.start", "stream": 3, "rate": 16000, "format": "pcm16"});
    core.handle_frame(frame(start), now);
    for seq in 0..25u16 {
        let header = proto::FrameHeader {
            channel: proto::Channel::Audio,
            stream: 3,
            seq,
        };
        core.handle_binary(&proto::encode_frame(header, &[0u8; 640]));
    }
    core.handle_frame(frame(json!({"type": "audio.end", "stream": 3})), now);
    core
}

#[test]
fn a_voice_turn_is_acknowledged_at_once_and_a_quiet_agent_gets_gentle_cues_until_it_speaks() {
    let now = crate::testing::start();
    let mut core = spoken_turn_taken(now);
    let taken = effects(&mut core);
    assert!(taken
        .iter()
        .any(|e| matches!(e, Effect::SaveUtterance { .. })));
    assert_eq!(cues(&taken), [Cue::Heard]);
    let turn = start_turn(&mut core, now + Duration::from_millis(300));

    // Quiet: the first cue when `after` has passed since it was heard, then every `every`.
    assert_eq!(core.poll_timeout(), Some(now + CUES.after));
    core.handle_timeout(now + CUES.after, 0);
    assert_eq!(cues(&effects(&mut core)), [Cue::Working]);
    assert_eq!(core.poll_timeout(), Some(now + CUES.after + CUES.every));
    core.handle_timeout(now + CUES.after + CUES.every, 0);
    assert_eq!(cues(&effects(&mut core)), [Cue::Working]);

    // The agent answers: no more cues, and the turn ends as it should.
    let said = now + Duration::from_secs(13);
    call(
        &mut core,
        said,
        Request::SendText {
            text: "It is sunny.".into(),
            options: SendOptions::default(),
        },
    )
    .unwrap();
    core.handle_timeout(said + CUES.every * 3, 0);
    assert!(cues(&effects(&mut core)).is_empty());
    end_turn(&mut core, &turn, Outcome::Success, said + CUES.every * 3);
    assert!(cues(&effects(&mut core)).is_empty());
    assert_eq!(
        types(&self::said(&mut core)),
        ["turn.start", "reply", "turn.end"]
    );
}

#[test]
fn a_failed_turn_is_heard_and_seen() {
    let now = crate::testing::start();
    let mut core = spoken_turn_taken(now);
    let turn = start_turn(&mut core, now);
    effects(&mut core);
    sent(&mut core);
    end_turn(
        &mut core,
        &turn,
        Outcome::Failure,
        now + Duration::from_secs(2),
    );
    assert_eq!(cues(&effects(&mut core)), [Cue::Failed]);
    let frames = sent(&mut core);
    assert_eq!(types(&frames), ["notice", "turn.end"]);
    assert_eq!(frames[0]["text"], FAILED_NOTICE);
    assert_eq!(frames[1]["outcome"], "failure");
    // Over: nothing more to wait for.
    core.handle_timeout(now + TURN_TIMEOUT * 2, 0);
    assert!(cues(&effects(&mut core)).is_empty());
}

/// The person's time to answer is not the agent's silence: while a question is open
/// no "still working" cue plays and the turn does not time out; after the answer the
/// silence is timed anew.
#[test]
fn a_question_waiting_for_its_answer_neither_cues_nor_times_the_turn_out() {
    let now = crate::testing::start();
    let mut core = spoken_turn_taken(now);
    start_turn(&mut core, now);
    let ask = Request::Ask {
        prompt: Prompt::Confirm {
            title: "Sure?".into(),
            text: "Delete it".into(),
        },
        ttl_s: Some(600),
    };
    let question = id(call(&mut core, now, ask));
    sent(&mut core);
    effects(&mut core);
    let answered = now + TURN_TIMEOUT * 2;
    let mut at = now;
    while at < answered {
        at = core.poll_timeout().unwrap().min(answered);
        alive(&mut core, at);
        core.handle_timeout(at, 0);
    }
    assert!(said(&mut core).iter().all(|f| f["type"] != "turn.end"));
    assert!(cues(&effects(&mut core)).is_empty());

    let reply = json!({"type": "prompt.reply", "id": question, "answer": "yes"});
    core.handle_frame(frame(reply), answered);
    let deadline = answered + TURN_TIMEOUT;
    while at < deadline {
        at = core.poll_timeout().unwrap().min(deadline);
        alive(&mut core, at);
        core.handle_timeout(at, 0);
        if at < deadline {
            assert!(
                said(&mut core).iter().all(|f| f["type"] != "turn.end"),
                "ended early"
            );
        }
    }
    let frames = said(&mut core);
    assert!(
        frames
            .iter()
            .any(|f| f["type"] == "turn.end" && f["outcome"] == "failure"),
        "{frames:?}"
    );
}

#[test]
fn a_turn_the_agent_leaves_silent_is_ended_as_failed_after_the_turn_timeout() {
    let now = crate::testing::start();
    let mut core = spoken_turn_taken(now);
    let turn = start_turn(&mut core, now);
    sent(&mut core);
    // A status line is the agent at work: the silence is timed from it.
    core.handle_notification(
        Notification::Status {
            text: "Searching".into(),
        },
        now + Duration::from_secs(60),
    );
    let deadline = now + Duration::from_secs(60) + TURN_TIMEOUT;
    let mut at = now;
    while at < deadline {
        at = core.poll_timeout().unwrap().min(deadline);
        alive(&mut core, at);
        core.handle_timeout(at, 0);
    }
    let frames = said(&mut core);
    let end = frames
        .iter()
        .find(|f| f["type"] == "turn.end")
        .expect("the turn ended");
    assert_eq!(
        (end["turn"].as_str(), end["outcome"].as_str()),
        (Some(turn.as_str()), Some("failure"))
    );
    assert!(frames
        .iter()
        .any(|f| f["type"] == "notice" && f["text"] == FAILED_NOTICE));
    let done = effects(&mut core);
    let heard = cues(&done);
    assert_eq!(heard.last(), Some(&Cue::Failed));
    assert!(
        heard.iter().filter(|c| **c == Cue::Working).count() >= 20,
        "{heard:?}"
    );
    // The agent is told the turn was given up, so it can stop and say so.
    let given_up: Vec<_> = done
        .iter()
        .filter_map(|e| match e {
            Effect::ToAgent(inbound) => match &inbound.body {
                InboundBody::TurnTimedOut { turn_id } => Some(turn_id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(given_up, [turn.as_str()]);
}

#[test]
fn without_a_speaker_or_with_cues_off_nothing_plays_but_a_silent_turn_still_ends() {
    let now = crate::testing::start();
    for (cues_on, caps) in [
        (true, json!({})),
        (
            false,
            json!({"caps": {"speaker": {"rate": 16000, "format": "pcm16"}}}),
        ),
    ] {
        let mut core = core_with(cues_on.then_some(CUES));
        core.handle_attach(1, peer(caps), true, "s-1".into(), 20, now);
        sent(&mut core);
        let turn = start_turn(&mut core, now);
        for at in [now + CUES.after, now + TURN_TIMEOUT] {
            alive(&mut core, at);
            core.handle_timeout(at, 0);
        }
        assert!(cues(&effects(&mut core)).is_empty());
        let frames = said(&mut core);
        assert!(
            frames.iter().any(|f| f["type"] == "turn.end"
                && f["turn"] == turn.as_str()
                && f["outcome"] == "failure"),
            "{frames:?}"
        );
    }
}

#[test]
fn cancel_stops_the_cues() {
    let now = crate::testing::start();
    let mut core = spoken_turn_taken(now);
    start_turn(&mut core, now);
    effects(&mut core);
    core.handle_frame(
        frame(json!({"type": "cancel"})),
        now + Duration::from_secs(1),
    );
    core.handle_timeout(now + CUES.after, 0);
    assert!(cues(&effects(&mut core)).is_empty());
    assert_eq!(
        core.poll_timeout().map(|t| t > now + CUES.after * 4),
        Some(true)
    );
}
