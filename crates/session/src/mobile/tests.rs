//! The phone core driven in virtual time: "nothing was sent" is a drained queue, not a
//! wait, and ids are seeded.

use std::time::{Duration, Instant};

use herald_mobile_proto::{ClientFrame, ErrorCode};
use herald_port::{
    DeliveryError, InboundBody, Notification, PairingCode, Prompt, Request, RequestError, Response,
    SendOptions, TurnId,
};
use serde_json::{json, Value};

use super::link::{Delivered, Delivers};
use super::{Core, Effect};
use crate::io::Close;
use crate::note::NoteKind;
use crate::{Ids, SessionCore, FAILED_NOTICE};

const USER: &str = "alice";

crate::testing::driven!(Core, Effect);

type Rig = crate::testing::Rig<Core>;

fn attached() -> Rig {
    let mut core = Rig::new(Core::new("tel-1".into(), 4000, Ids::seeded(2)));
    core.handle_attach(
        1,
        USER.into(),
        Some("Alice".into()),
        Delivers::Nowhere,
        crate::testing::start(),
    );
    core
}

/// A quiet phone is pinged on schedule, each sign of life keeps it, and one silent for
/// `DEAD_AFTER` is closed as gone: all by the core's own deadline.
#[test]
fn a_quiet_phone_is_pinged_and_a_silent_one_is_let_go() {
    use super::link::{DEAD_AFTER, KEEPALIVE};
    let start = crate::testing::start();
    let mut core = Rig::new(Core::new("tel-1".into(), 4000, Ids::seeded(2)));
    core.handle_attach(1, USER.into(), None, Delivers::Nowhere, start);
    core.sent();
    effects(&mut core);

    let first = core.poll_timeout().unwrap();
    assert_eq!(first, start + KEEPALIVE);
    core.handle_timeout(first);
    assert_eq!(core.sent(), [json!({"ping": 1})]);

    // A pong just before the connection would have gone keeps it past that point.
    core.heard(start + DEAD_AFTER - KEEPALIVE / 2);
    let mut now = first;
    while now < start + DEAD_AFTER + KEEPALIVE {
        now = core.poll_timeout().unwrap();
        core.handle_timeout(now);
    }
    let pings = core.sent();
    assert!(pings.iter().all(|f| f.get("ping").is_some()), "{pings:?}");

    // Then silence: gone, with a close, and nothing more to wake for.
    while core.current_conn().is_some() {
        now = core.poll_timeout().unwrap();
        core.handle_timeout(now);
    }
    let frames = core.sent();
    let close = frames.last().unwrap();
    assert_eq!(close["close"], "keepalive timeout", "{frames:?}");
    assert!(now - (start + DEAD_AFTER - KEEPALIVE / 2) >= DEAD_AFTER);
    assert!(core.poll_timeout().is_none());
}

/// What was sent, pings left out (the keepalive has a test of its own).
fn sent(rig: &mut Rig) -> Vec<Value> {
    let mut frames = rig.sent();
    frames.retain(|frame| frame.get("ping").is_none());
    frames
}

/// Nothing left to wake for at `now` but the keepalive's next ping.
fn only_the_keepalive_is_due(rig: &Rig, now: Instant) {
    let next = rig.poll_timeout().expect("a connected phone is pinged");
    assert!(
        next > now && next <= now + super::link::KEEPALIVE,
        "{next:?}"
    );
}

fn effects(rig: &mut Rig) -> Vec<Effect> {
    rig.effects()
}

/// Hand `request` to the core and take the answer it gave at once.
fn call(rig: &mut Rig, now: Instant, request: Request) -> Result<Response, RequestError> {
    rig.ask(request, now)
}

fn kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match (f["t"].as_str(), f["state"].as_str()) {
            (Some("avatar"), Some(state)) => format!("avatar:{state}"),
            (Some(t), _) => t.to_owned(),
            _ => "close".to_owned(),
        })
        .collect()
}

fn text(id: &str, text: &str) -> ClientFrame {
    ClientFrame::decode(&json!({"t": "text", "id": id, "text": text}).to_string()).unwrap()
}

/// The texts handed to the agent, in order.
fn to_agent(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::ToAgent(inbound) => match &inbound.body {
                InboundBody::Text { text, .. } => Some(text.clone()),
                _ => Some("(other)".into()),
            },
            _ => None,
        })
        .collect()
}

fn asked(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|e| matches!(e, Effect::Authorize { user_id } if user_id == USER))
        .count()
}

#[test]
fn work_waits_in_order_for_one_answer_and_goes_on_when_the_user_is_allowed() {
    let now = crate::testing::start();
    let mut core = attached();
    effects(&mut core);
    core.handle_frame(text("m1", "one"), now);
    core.handle_frame(text("m2", "two"), now);
    core.handle_frame(text("m1", "one again"), now);
    let waiting = effects(&mut core);
    assert_eq!(asked(&waiting), 1, "one question for both");
    assert!(to_agent(&waiting).is_empty());
    assert!(
        !core.is_idle(),
        "a session with an answer out does not retire"
    );

    core.handle_authorization(Ok(true), now);
    assert_eq!(to_agent(&effects(&mut core)), ["one", "two"]);
}

#[test]
fn a_refused_user_is_told_how_to_pair_and_nothing_of_theirs_is_saved() {
    let now = crate::testing::start();
    let mut core = attached();
    effects(&mut core);
    core.handle_frame(text("m1", "hi"), now);
    core.handle_authorization(Ok(false), now);
    let refused = effects(&mut core);
    assert!(to_agent(&refused).is_empty());
    assert!(matches!(
        &refused[..],
        [Effect::Authorize { .. }, Effect::AskPairingCode { user_id, user_name }] if user_id == USER && user_name.as_deref() == Some("Alice")
    ));
    core.handle_pairing_code(Ok(PairingCode {
        code: "ABCD2345".into(),
        command: "hermes pairing approve mobile ABCD2345".into(),
    }));
    let frames = sent(&mut core);
    assert!(frames[0]["text"].as_str().unwrap().contains("ABCD2345"));

    // A voice message of a refused user is not saved anywhere.
    let voice = json!({"t": "audio", "id": "v1", "format": "wav", "data": "UklGRg=="});
    core.handle_frame(ClientFrame::decode(&voice.to_string()).unwrap(), now);
    core.handle_authorization(Ok(false), now);
    assert!(!effects(&mut core)
        .iter()
        .any(|e| matches!(e, Effect::SaveFile(_))));

    // Paired since: the next message asks again, and goes through behind the text
    // that got the code (the voice message is not kept: the pairing reply said so).
    core.handle_frame(text("m2", "paired now"), now);
    assert_eq!(asked(&effects(&mut core)), 1);
    core.handle_authorization(Ok(true), now);
    assert_eq!(to_agent(&effects(&mut core)), ["hi", "paired now"]);
    assert_eq!(
        sent(&mut core)[0]["text"],
        "This app is now paired with the agent."
    );
}

#[test]
fn an_approval_is_told_at_once_and_sends_on_what_waited_for_it() {
    let now = crate::testing::start();
    let mut core = attached();
    core.handle_frame(text("m1", "first"), now);
    core.handle_authorization(Ok(false), now);
    core.handle_frame(text("m2", "second"), now);
    core.handle_authorization(Ok(false), now);
    effects(&mut core);
    sent(&mut core);
    core.handle_closed();
    effects(&mut core);
    assert!(
        !core.is_idle(),
        "what waits for the owner keeps the session"
    );
    core.handle_attach(
        2,
        USER.into(),
        None,
        Delivers::Nowhere,
        crate::testing::start(),
    );
    effects(&mut core);

    core.handle_approved("someone-else", now);
    assert!(effects(&mut core).is_empty());
    assert!(sent(&mut core).is_empty());

    core.handle_approved(USER, now + Duration::from_secs(60));
    assert_eq!(
        sent(&mut core)[0]["text"],
        "This app is now paired with the agent."
    );
    assert_eq!(to_agent(&effects(&mut core)), ["first", "second"]);
    // Once only: a second push of the same approval changes nothing.
    core.handle_approved(USER, now + Duration::from_secs(61));
    assert!(sent(&mut core).is_empty());
    assert!(effects(&mut core).is_empty());
}

#[test]
fn what_waits_for_pairing_lapses_with_the_code_and_the_phone_is_told() {
    let now = crate::testing::start();
    let mut core = attached();
    core.handle_frame(text("m1", "hello"), now);
    core.handle_authorization(Ok(false), now);
    effects(&mut core);
    sent(&mut core);
    let lapse = now + super::core::KEEP_UNTIL_PAIRED;
    // The phone answers its pings meanwhile.
    let mut at = core.poll_timeout().unwrap();
    while at < lapse {
        core.heard(at);
        core.handle_timeout(at);
        at = core.poll_timeout().unwrap();
    }
    assert_eq!(at, lapse);
    core.heard(lapse);
    core.handle_timeout(lapse);
    assert!(sent(&mut core)[0]["text"]
        .as_str()
        .unwrap()
        .contains("expired and what you sent was not delivered"));
    only_the_keepalive_is_due(&core, lapse);
    core.handle_approved(USER, lapse);
    assert!(to_agent(&effects(&mut core)).is_empty());
    assert!(sent(&mut core).is_empty());
}

#[test]
fn an_authorizer_that_fails_drops_the_waiting_work_and_says_so() {
    let now = crate::testing::start();
    let mut core = attached();
    sent(&mut core);
    core.handle_frame(text("m1", "hi"), now);
    core.handle_authorization(
        Err(herald_port::AccessError("the bridge is gone".into())),
        now,
    );
    assert!(to_agent(&effects(&mut core)).is_empty());
    let frames = sent(&mut core);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["code"], "internal");
    core.handle_frame(text("m2", "again"), now);
    assert_eq!(asked(&effects(&mut core)), 1, "the next message asks again");
}

#[test]
fn a_phone_sending_on_while_the_answer_is_out_is_held_to_a_bound() {
    let now = crate::testing::start();
    let mut core = attached();
    sent(&mut core);
    for i in 0..40 {
        core.handle_frame(text(&format!("m{i}"), "x"), now);
    }
    let frames = sent(&mut core);
    assert_eq!(frames.len(), 8, "{frames:?}");
    assert!(frames.iter().all(|f| f["code"] == "rate_limited"));
    core.handle_authorization(Ok(true), now);
    assert_eq!(to_agent(&effects(&mut core)).len(), 32);
}

/// The agent asks "Sure? Delete it", open for `ttl_s`.
fn sure(ttl_s: u32) -> Request {
    Request::Ask {
        prompt: Prompt::Confirm {
            title: "Sure?".into(),
            text: "Delete it".into(),
        },
        ttl_s: Some(ttl_s),
    }
}

#[test]
fn a_card_lapses_on_time_and_is_nobody_s_after() {
    let now = crate::testing::start();
    let mut core = attached();
    effects(&mut core);
    let ask = sure(30);
    let Ok(Response::PromptId { prompt_id: id }) = call(&mut core, now, ask) else {
        panic!("no card")
    };
    assert_eq!(kinds(&sent(&mut core)), ["prompt"]);
    assert!(
        matches!(&effects(&mut core)[..], [Effect::CardShown { prompt_id }] if *prompt_id == id)
    );
    assert_eq!(core.poll_timeout(), Some(now + Duration::from_secs(30)));
    core.handle_timeout(now + Duration::from_secs(29));
    assert!(sent(&mut core).is_empty(), "still open");
    core.handle_timeout(now + Duration::from_secs(30));
    let frames = sent(&mut core);
    assert_eq!(
        (
            frames[0]["prompt_id"].as_str(),
            frames[0]["expired"].as_bool()
        ),
        (Some(id.as_str()), Some(true))
    );
    assert!(
        matches!(&effects(&mut core)[..], [Effect::CardClosed { prompt_id }] if *prompt_id == id)
    );
    only_the_keepalive_is_due(&core, now + Duration::from_secs(30));

    // Its answer, late, is the hub's to place: shown here, it lapsed.
    let answer = json!({"t": "prompt", "prompt_id": id, "option_id": "yes"});
    core.handle_frame(ClientFrame::decode(&answer.to_string()).unwrap(), now);
    assert!(
        matches!(&effects(&mut core)[..], [Effect::WhoseCard { prompt_id }] if *prompt_id == id)
    );
    core.handle_card_owner(id.clone(), Some("tel-2".into()));
    assert_eq!(sent(&mut core)[0]["code"], "forbidden");
    core.handle_card_owner(id, None);
    assert_eq!(sent(&mut core)[0]["expired"], true);
}

#[test]
fn an_approval_card_offers_only_what_the_agent_allows() {
    let now = crate::testing::start();
    let mut core = attached();
    let options = |core: &mut Rig, allow_session, allow_permanent| {
        let prompt = Prompt::ExecApproval {
            command: "rm -rf /tmp/x".into(),
            description: String::new(),
            allow_permanent,
            allow_session,
        };
        let ask = Request::Ask {
            prompt,
            ttl_s: None,
        };
        assert!(call(core, now, ask).is_ok());
        let card = sent(core).remove(0);
        card["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        options(&mut core, true, true),
        ["once", "session", "always", "deny"]
    );
    assert_eq!(options(&mut core, true, false), ["once", "session", "deny"]);
    // "Always" is wider than the session: without the session it is not offered either.
    assert_eq!(options(&mut core, false, true), ["once", "deny"]);
}

#[test]
fn a_multi_select_card_says_several_may_be_typed() {
    let now = crate::testing::start();
    let mut core = attached();
    let prompt = Prompt::Clarify {
        question: "Which rooms?".into(),
        choices: vec!["hall".into(), "den".into()],
        multi_select: true,
    };
    let ask = Request::Ask {
        prompt,
        ttl_s: None,
    };
    assert!(call(&mut core, now, ask).is_ok());
    let card = sent(&mut core).remove(0);
    assert_eq!(
        card["text"],
        "Which rooms?\n(Tap one, or type several with commas between.)"
    );
    assert_eq!(card["options"].as_array().map(Vec::len), Some(3));
}

fn start_turn(core: &mut Rig, now: Instant) -> TurnId {
    let turn_id = TurnId::next();
    let started = Notification::TurnStarted {
        turn_id: turn_id.clone(),
    };
    core.handle_notification(started, now);
    turn_id
}

fn say(text: &str) -> Request {
    Request::SendText {
        text: text.into(),
        options: SendOptions::default(),
    }
}

fn end(turn_id: TurnId) -> Notification {
    ended(turn_id, herald_port::Outcome::Success)
}

fn ended(turn_id: TurnId, outcome: herald_port::Outcome) -> Notification {
    Notification::TurnEnded { turn_id, outcome }
}

/// A phone whose turns time out after `timeout` of the agent's quiet, connected at `start`.
fn timing_out(timeout: Duration, start: Instant) -> Rig {
    let core = Core::new("tel-1".into(), 4000, Ids::seeded(2)).turn_timeout(timeout);
    let mut core = Rig::new(core);
    core.handle_attach(1, USER.into(), None, Delivers::Nowhere, start);
    core
}

/// Run the core on its own deadlines from `from` to the first at or past `until`, the
/// phone answering every ping; `each` sees what was sent at those before `until`.
/// Returns the deadline reached.
fn run_until(
    core: &mut Rig,
    from: Instant,
    until: Instant,
    mut each: impl FnMut(Vec<Value>),
) -> Instant {
    let mut now = from;
    while now < until {
        now = core.poll_timeout().unwrap();
        core.heard(now);
        core.handle_timeout(now);
        if now < until {
            each(sent(core));
        }
    }
    now
}

fn not_ended(frames: Vec<Value>) {
    assert!(frames.iter().all(|f| f["t"] != "typing"), "{frames:?}");
}

#[test]
fn the_avatar_thinks_speaks_and_rests_before_it_goes_idle() {
    let now = crate::testing::start();
    let mut core = attached();
    let turn = start_turn(&mut core, now);
    call(&mut core, now, say("Hello")).unwrap();
    core.handle_notification(end(turn), now);
    assert_eq!(
        kinds(&sent(&mut core)),
        [
            "typing",
            "avatar:thinking",
            "avatar:speaking",
            "message",
            "typing"
        ]
    );
    let rest = now + Duration::from_millis(1500);
    assert_eq!(core.poll_timeout(), Some(rest));
    core.handle_timeout(rest);
    assert_eq!(kinds(&sent(&mut core)), ["avatar:idle"]);
}

/// Never silent: a turn that fails before it showed anything is said to have failed (a
/// message the avatar speaks); one that already replied keeps the agent's own words.
#[test]
fn a_failed_turn_that_showed_nothing_is_said_to_have_failed() {
    let now = crate::testing::start();
    let mut core = attached();
    let turn = start_turn(&mut core, now);
    sent(&mut core);
    core.handle_notification(ended(turn, herald_port::Outcome::Failure), now);
    let frames = sent(&mut core);
    assert_eq!(kinds(&frames), ["avatar:speaking", "message", "typing"]);
    assert_eq!(frames[1]["text"], FAILED_NOTICE);

    let turn = start_turn(&mut core, now);
    call(&mut core, now, say("The model answered: error 500.")).unwrap();
    sent(&mut core);
    core.handle_notification(ended(turn, herald_port::Outcome::Failure), now);
    assert_eq!(kinds(&sent(&mut core)), ["typing"]);
}

/// A turn the agent leaves quiet for the turn timeout is ended as failed by the core,
/// each call from the agent starting the quiet over; the agent's late end changes nothing.
#[test]
fn a_turn_the_agent_leaves_quiet_ends_as_failed_after_the_turn_timeout() {
    let start = crate::testing::start();
    let timeout = Duration::from_secs(45);
    let mut core = timing_out(timeout, start);
    let turn = start_turn(&mut core, start);
    let working = start + Duration::from_secs(40);
    call(&mut core, working, say("Let me look that up.")).unwrap();
    sent(&mut core);

    let now = run_until(&mut core, start, working + timeout, not_ended);
    assert_eq!(now, working + timeout);
    let frames = sent(&mut core);
    assert_eq!(kinds(&frames), ["message", "typing"], "{frames:?}");
    assert_eq!(frames[0]["text"], FAILED_NOTICE);
    // The agent is told which turn was given up, so it can stop working on it.
    let told: Vec<_> = effects(&mut core)
        .into_iter()
        .filter_map(|e| match e {
            Effect::ToAgent(inbound) => Some(inbound.body),
            _ => None,
        })
        .collect();
    assert_eq!(
        told,
        [InboundBody::TurnTimedOut {
            turn_id: turn.clone()
        }]
    );

    core.handle_notification(end(turn), now);
    assert!(sent(&mut core).is_empty());
    let rest = now + Duration::from_millis(1500);
    core.handle_timeout(rest);
    assert_eq!(kinds(&sent(&mut core)), ["avatar:idle"]);
}

/// The person's time to answer is not the agent's silence: no timeout while a card is
/// open, and the quiet counts again from the answer.
#[test]
fn a_question_waiting_for_its_answer_does_not_time_the_turn_out() {
    let start = crate::testing::start();
    let timeout = Duration::from_secs(45);
    let mut core = timing_out(timeout, start);
    start_turn(&mut core, start);
    let ask = sure(600);
    let Ok(Response::PromptId { prompt_id: id }) = call(&mut core, start, ask) else {
        panic!("no card")
    };
    sent(&mut core);
    // Ten keepalive rounds with the card open, then the answer.
    let answered = run_until(
        &mut core,
        start,
        start + Duration::from_secs(300),
        not_ended,
    );
    not_ended(sent(&mut core));
    let answer = json!({"t": "prompt", "prompt_id": id, "option_id": "yes"});
    core.handle_frame(ClientFrame::decode(&answer.to_string()).unwrap(), answered);
    sent(&mut core);
    let now = run_until(&mut core, answered, answered + timeout, not_ended);
    assert_eq!(now, answered + timeout);
    let frames = sent(&mut core);
    assert_eq!(
        kinds(&frames),
        ["avatar:speaking", "message", "typing"],
        "{frames:?}"
    );
}

#[test]
fn replies_for_a_phone_away_are_kept_during_a_turn_and_refused_outside_one() {
    let now = crate::testing::start();
    let mut core = attached();
    let turn = start_turn(&mut core, now);
    core.handle_closed();
    sent(&mut core);
    effects(&mut core);
    call(&mut core, now, say("while you were away")).unwrap();
    let kept: Vec<Value> = effects(&mut core)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Keep(frame) => serde_json::from_str(&frame).ok(),
            _ => None,
        })
        .collect();
    assert_eq!(kinds(&kept), ["avatar:speaking", "message"]);
    core.handle_notification(end(turn), now);
    effects(&mut core);
    let after = call(&mut core, now, say("after the turn"));
    assert!(matches!(
        after,
        Err(RequestError::Delivery(DeliveryError::Offline(_)))
    ));
    let effects = effects(&mut core);
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Keep(_))),
        "nothing kept outside a turn"
    );
    // Only the notification says it, to a user who has them on.
    assert!(
        matches!(&effects[..], [Effect::Notify(note)] if note.body == "after the turn"),
        "{effects:?}"
    );
}

#[test]
fn a_new_connection_closes_the_one_it_replaces_and_gets_what_was_missed() {
    let mut core = attached();
    effects(&mut core);
    core.handle_attach(
        2,
        USER.into(),
        None,
        Delivers::Nowhere,
        crate::testing::start(),
    );
    assert_eq!(
        sent(&mut core),
        [json!({"close": "replaced by a new connection", "conn": 1})]
    );
    assert!(matches!(
        effects(&mut core)[..],
        [Effect::Offline, Effect::Online { conn: 2 }, Effect::Replay]
    ));
    assert!(core.is_current(2) && !core.is_current(1));
}

/// What the connection itself asks: `ping` is answered, a second `hello` refused, and a
/// `deliver` pushed only where the connection may (the shell checks ownership); how a
/// push ended, and a frame over the limit, are told to the phone.
#[test]
fn the_phone_hears_pong_refusals_and_how_its_pushes_ended() {
    let now = crate::testing::start();
    let frame = |v: Value| ClientFrame::decode(&v.to_string()).unwrap();
    let deliver = json!({"t": "deliver", "to": "tel-2", "text": "the cron says hi"});
    let mut core = attached();
    effects(&mut core);
    sent(&mut core);
    core.handle_frame(frame(json!({"t": "ping"})), now);
    core.handle_frame(frame(json!({"t": "hello", "device": {"id": "tel-1"}})), now);
    core.handle_frame(frame(deliver.clone()), now);
    let frames = sent(&mut core);
    assert_eq!(kinds(&frames), ["pong", "error", "error"]);
    assert_eq!(frames[1]["code"], "bad_frame");
    assert_eq!(frames[2]["code"], "forbidden");
    let pushed = |effects: &[Effect]| {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Deliver { deliver, owner, .. } => Some((deliver.to.clone(), owner.clone())),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert!(
        pushed(&effects(&mut core)).is_empty(),
        "a phone may not push"
    );

    // An app on the agent's machine pushes to its user's own devices.
    core.handle_attach(
        2,
        USER.into(),
        None,
        Delivers::ToDevicesOf(USER.into()),
        crate::testing::start(),
    );
    effects(&mut core);
    sent(&mut core);
    core.handle_frame(frame(deliver), now);
    assert_eq!(
        pushed(&effects(&mut core)),
        [("tel-2".to_owned(), Some(USER.to_owned()))]
    );
    core.handle_delivered(2, "tel-2", Delivered::Sent);
    core.handle_delivered(2, "tel-2", Delivered::NotYours);
    let offline = DeliveryError::Offline(herald_port::Chat::mobile("tel-2"));
    core.handle_delivered(2, "tel-2", Delivered::Failed(offline));
    let frames = sent(&mut core);
    let codes: Vec<_> = frames.iter().map(|f| f["code"].clone()).collect();
    assert_eq!(codes, [json!("forbidden"), json!("device_offline")]);

    // One push at a time: the shell reads no frame while it is out (so its answer
    // comes before the answers to later frames), and one that comes anyway is refused.
    let to_tel_3 = || frame(json!({"t": "deliver", "to": "tel-3", "text": "hi"}));
    core.handle_frame(to_tel_3(), now);
    assert_eq!(pushed(&effects(&mut core)).len(), 1);
    assert!(!core.reads_frames());
    core.handle_frame(to_tel_3(), now);
    assert!(pushed(&effects(&mut core)).is_empty());
    assert_eq!(sent(&mut core)[0]["code"], "rate_limited");
    core.handle_delivered(2, "tel-3", Delivered::Sent);
    assert!(core.reads_frames());
    core.handle_frame(to_tel_3(), now);
    assert_eq!(pushed(&effects(&mut core)).len(), 1);

    // How a push ended is for the connection that sent it: not kept for the next one.
    core.handle_attach(
        3,
        USER.into(),
        None,
        Delivers::ToDevicesOf(USER.into()),
        crate::testing::start(),
    );
    sent(&mut core);
    core.handle_delivered(2, "tel-9", Delivered::NotYours);
    assert!(sent(&mut core).is_empty());

    let limit = "frames are limited to 16 MiB".to_owned();
    core.handle_bad_frame(ErrorCode::TooBig, limit, Some(Close::TooBig));
    let frames = sent(&mut core);
    assert_eq!(frames[0]["code"], "too_big");
    assert_eq!(frames[1], json!({"close": "too_big", "conn": 3}));
    assert!(!core.is_current(3), "the connection is let go");
}

fn subscribe(endpoint: &str) -> ClientFrame {
    // The generator of P-256: a point on the curve.
    let key =
        "BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU";
    let frame = json!({"t": "push_subscribe", "endpoint": endpoint,
        "keys": {"p256dh": key, "auth": "AAAAAAAAAAAAAAAAAAAAAA"}});
    ClientFrame::decode(&frame.to_string()).unwrap()
}

/// A subscription waits behind the same gate as a message: kept only for an allowed
/// user, refused (and never stored) for anyone else or with a bad endpoint.
#[test]
fn a_push_subscription_is_kept_only_for_an_allowed_user() {
    let now = crate::testing::start();
    let mut core = attached();
    effects(&mut core);
    core.handle_frame(subscribe("http://push.example.net/1"), now);
    assert_eq!(sent(&mut core)[0]["code"], "bad_frame", "not https");
    assert!(effects(&mut core).is_empty());

    core.handle_frame(subscribe("https://push.example.net/1"), now);
    assert!(matches!(
        &effects(&mut core)[..],
        [Effect::Authorize { .. }]
    ));
    core.handle_authorization(Ok(false), now);
    let refused = sent(&mut core);
    assert_eq!(refused[0]["code"], "forbidden", "{refused:?}");
    assert!(!effects(&mut core)
        .iter()
        .any(|e| matches!(e, Effect::SavePush(_))));

    core.handle_frame(subscribe("https://push.example.net/1"), now);
    effects(&mut core);
    core.handle_authorization(Ok(true), now);
    let saved = effects(&mut core);
    let Some(Effect::SavePush(sub)) = saved.iter().find(|e| matches!(e, Effect::SavePush(_)))
    else {
        panic!("not kept: {saved:?}")
    };
    assert_eq!((sub.p256dh.len(), sub.auth.len()), (65, 16));
    core.handle_push_stored(true, Ok(()));
    assert_eq!(kinds(&sent(&mut core)), ["push_subscribed"]);

    let unsubscribe = ClientFrame::decode(r#"{"t":"push_unsubscribe"}"#).unwrap();
    core.handle_frame(unsubscribe, now);
    assert!(matches!(&effects(&mut core)[..], [Effect::RemovePush]));
}

/// What is worth a notification is handed back only while the app is away: out of
/// sight, or not connected.
#[test]
fn notes_come_only_while_the_app_is_away() {
    let now = crate::testing::start();
    let mut core = attached();
    let turn = start_turn(&mut core, now);
    effects(&mut core);
    call(&mut core, now, say("in sight")).unwrap();
    assert!(!effects(&mut core)
        .iter()
        .any(|e| matches!(e, Effect::Notify(_))));

    let hidden = ClientFrame::decode(r#"{"t":"visibility","visible":false}"#).unwrap();
    core.handle_frame(hidden, now);
    assert!(matches!(&effects(&mut core)[..], [Effect::Visible(false)]));
    call(&mut core, now, say("out of sight")).unwrap();
    let notes: Vec<_> = effects(&mut core)
        .into_iter()
        .filter_map(|e| match e {
            Effect::Notify(note) => Some(*note),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1);
    assert_eq!(
        (notes[0].kind, notes[0].body.as_str()),
        (NoteKind::Reply, "out of sight")
    );

    let ask = Request::Ask {
        prompt: Prompt::Confirm {
            title: String::new(),
            text: "Lights off?".into(),
        },
        ttl_s: None,
    };
    call(&mut core, now, ask).unwrap();
    let question = effects(&mut core)
        .into_iter()
        .find_map(|e| match e {
            Effect::Notify(note) => Some(*note),
            _ => None,
        })
        .unwrap();
    assert_eq!(question.kind, NoteKind::Question);
    assert_eq!(question.body, "Lights off?");
    let ids: Vec<&str> = question.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["once", "always", "cancel"]);
    core.handle_notification(end(turn), now);
}

/// A voice message is acknowledged as soon as it is taken: the avatar thinks before the
/// agent's turn begins (which waits for the transcription), and rests again if no turn
/// follows; a turn that does follow keeps it thinking.
#[test]
fn a_voice_message_has_the_avatar_think_at_once() {
    let now = crate::testing::start();
    for turn_follows in [false, true] {
        let mut core = attached();
        sent(&mut core);
        // A tenth of a second of silence at 16 kHz.
        let pcm = vec![0u8; 3200];
        let mut wav = herald_media::wav::wav_header(16_000, pcm.len())
            .unwrap()
            .to_vec();
        wav.extend_from_slice(&pcm);
        let data = base64_simd::STANDARD.encode_to_string(&wav);
        let voice = json!({"t": "audio", "id": "v1", "format": "wav", "data": data});
        core.handle_frame(ClientFrame::decode(&voice.to_string()).unwrap(), now);
        core.handle_authorization(Ok(true), now);
        let save = effects(&mut core)
            .into_iter()
            .find_map(|e| match e {
                Effect::SaveFile(save) => Some(save),
                _ => None,
            })
            .expect("the voice message is saved");
        assert!(sent(&mut core).is_empty(), "nothing before it is taken");
        let taken = "/inbox/v1.wav".into();
        core.handle_file_saved(save.message_id, save.saved, Ok(taken), now);
        assert_eq!(kinds(&sent(&mut core)), ["avatar:thinking"]);
        assert_eq!(to_agent(&effects(&mut core)), ["(other)"]);

        if turn_follows {
            start_turn(&mut core, now + Duration::from_secs(1));
            sent(&mut core);
        }
        core.handle_timeout(now + Duration::from_secs(10));
        let later = kinds(&sent(&mut core));
        match turn_follows {
            false => assert_eq!(later, ["avatar:idle"]),
            true => assert!(later.is_empty(), "{later:?}"),
        }
    }
}
