//! Conversations over a real socket: turns, shaping, pairing, heartbeat, questions,
//! actions, telemetry and cards, with the demo agent or a recording agent.

use std::time::{Duration, Instant};

use herald_gadget_proto::{
    limits, ActionResult, ActionSpec, Answer, DeviceMessage, DisplayCaps, ErrorCode, Outcome,
    PromptReply, ServerMessage,
};
use herald_port::{ActionError, Chat, Choice, Inbound, InboundBody, Prompt, PromptAnswer};
use herald_store::{SqliteStore, Store};
use herald_test_support::{
    admin_text, capture, promptly, test_config, Conn, Gadget, Harness, WAIT,
};
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn a_text_turn_streams_then_replies() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("hello there friend").await;
    let ServerMessage::TurnStart(start) = conn.recv().await else {
        panic!("no turn.start")
    };
    assert!(matches!(conn.recv().await, ServerMessage::Status(s) if s.text == "Thinking"));
    let mut deltas = Vec::new();
    let reply = loop {
        match conn.recv().await {
            ServerMessage::ReplyDelta(d) => {
                assert_eq!(d.turn, start.turn);
                deltas.push(d.text);
            }
            ServerMessage::Status(s) => assert_eq!(s.text, ""),
            ServerMessage::Reply(r) => break r,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(deltas.len() >= 3, "{deltas:?}");
    // Deltas are cumulative: each extends the one before.
    for pair in deltas.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "{deltas:?}");
    }
    assert_eq!(reply.text, "You said: hello there friend");
    assert_eq!(reply.turn.as_deref(), Some(start.turn.as_str()));
    let ServerMessage::TurnEnd(end) = conn.recv().await else {
        panic!("no turn.end")
    };
    assert_eq!(end.turn, start.turn);
    assert_eq!(end.outcome, Outcome::Success);
}

#[tokio::test]
async fn replies_are_shaped_for_the_device() {
    let h = Harness::start().await;
    let mut gadget = Gadget::new();
    gadget.hello.caps.display = Some(DisplayCaps {
        charset: Some("ascii".into()),
        ..Default::default()
    });
    let (mut conn, _) = gadget.connect(&h.url).await;
    conn.text("**Crème brûlée** costs €5 — “yum” 🍮").await;
    assert_eq!(
        conn.reply().await,
        "You said: Creme brulee costs EUR 5 - \"yum\""
    );

    let (mut utf8, _) = Gadget::new().connect(&h.url).await;
    utf8.text("**Crème** `x`").await;
    assert_eq!(utf8.reply().await, "You said: Crème x");
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_a_slow_turn() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("/slow").await;
    conn.until(|m| matches!(m, ServerMessage::ReplyDelta(_)).then_some(()))
        .await;
    conn.send(&DeviceMessage::Cancel(Default::default())).await;
    let outcome = conn
        .until(|m| match m {
            ServerMessage::TurnEnd(e) => Some(e.outcome),
            _ => None,
        })
        .await;
    assert_eq!(outcome, Outcome::Cancelled);
    // Nothing more of the cancelled turn arrives (it streamed every 500 ms).
    conn.quiet_for(Duration::from_millis(1200)).await;
}

#[tokio::test]
async fn session_new_starts_over() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.send(&DeviceMessage::SessionNew(Default::default()))
        .await;
    assert_eq!(conn.reply().await, "Started a new conversation.");
    conn.text("/new").await;
    assert_eq!(conn.reply().await, "Started a new conversation.");
}

#[tokio::test]
async fn cards_reach_the_screen() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("/card Timer | Pasta: 9 min").await;
    let card = conn
        .until(|m| match m {
            ServerMessage::Display(d) => Some(d),
            _ => None,
        })
        .await;
    assert_eq!(card.title, "Timer");
    assert_eq!(card.body, "Pasta: 9 min");
}

#[tokio::test]
async fn pairing_approval_and_revocation_while_connected() {
    let h = Harness::start_with(|_| {}).await;
    let gadget = Gadget::new();
    let (mut conn, welcome) = gadget.connect(&h.url).await;
    assert!(!welcome.paired);
    let ServerMessage::Pairing(pairing) = conn.recv().await else {
        panic!("no pairing")
    };
    assert_eq!(pairing.code.len(), 8);
    assert_eq!(
        pairing.command,
        format!("herald pairing approve gadget {}", pairing.code)
    );
    // Messages of an unpaired device never reach the agent: it is reminded instead.
    conn.text("let me in").await;
    assert!(matches!(conn.recv().await, ServerMessage::Pairing(p) if p.code == pairing.code));

    let (status, listed) = h.admin("GET", "/v1/pairing", None).await;
    assert_eq!(status, 200);
    assert_eq!(listed[0]["code"], pairing.code.as_str());

    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "gadget", "code": "WRONG234"})),
        )
        .await;
    assert_eq!(status, 404);
    let approved_at = Instant::now();
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "gadget", "code": pairing.code})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(matches!(conn.recv().await, ServerMessage::Paired(_)));
    assert!(approved_at.elapsed() < Duration::from_secs(2));
    conn.text("hi").await;
    assert_eq!(conn.reply().await, "You said: hi");

    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/revoke",
            Some(json!({"platform": "gadget", "user_id": gadget.id})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(matches!(
        conn.until(|m| match m {
            ServerMessage::Unpaired(_) => Some(m),
            ServerMessage::TurnEnd(_) => None,
            other => panic!("unexpected {other:?}"),
        })
        .await,
        ServerMessage::Unpaired(_)
    ));
    let ServerMessage::Pairing(again) = conn.recv().await else {
        panic!("no new pairing")
    };
    assert_eq!(again.code.len(), 8);

    // Approval survives a reconnect (it lives in the store).
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "gadget", "code": again.code.to_lowercase()})),
        )
        .await;
    assert_eq!(status, 200);
    drop(conn);
    let (_, welcome) = gadget.connect(&h.url).await;
    assert!(welcome.paired);
}

#[tokio::test]
async fn unpaired_devices_never_reach_the_agent() {
    let (factory, _port, mut inbox) = capture();
    let h = Harness::start_in(test_config(), tempfile::tempdir().unwrap(), factory).await;
    let (mut conn, welcome) = Gadget::new().connect(&h.url).await;
    assert!(!welcome.paired);
    conn.text("hello?").await;
    conn.send(&DeviceMessage::Cancel(Default::default())).await;
    conn.send_raw(r#"{"type":"event","name":"x","notify":true}"#)
        .await;
    // Frames are handled in order: once the pong is here, all of the above was taken
    // while the device was unpaired (the approval below could otherwise overtake it).
    conn.send_raw(r#"{"type":"ping","ts":1}"#).await;
    let (mut pairing, mut ponged) = (None, false);
    while pairing.is_none() || !ponged {
        let heard = conn
            .until(|m| match m {
                ServerMessage::Pairing(p) => Some(Some(p)),
                ServerMessage::Pong(_) => Some(None),
                _ => None,
            })
            .await;
        match heard {
            Some(code) => pairing = Some(code),
            None => ponged = true,
        }
    }
    let pairing = pairing.unwrap();
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "gadget", "code": pairing.code})),
        )
        .await;
    assert_eq!(status, 200);
    conn.until(|m| matches!(m, ServerMessage::Paired(_)).then_some(()))
        .await;
    // The agent's queue keeps each device's order: when the first thing it gets is
    // what came after pairing, nothing from before reached it.
    conn.text("now paired").await;
    let first = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&first.body, InboundBody::Text { text, .. } if text == "now paired"),
        "{first:?}"
    );
}

#[tokio::test]
async fn allowlisted_devices_need_no_pairing() {
    let gadget = Gadget::new();
    let id = gadget.id.clone();
    let h = Harness::start_with(move |c| c.gadget.allowed_users = vec![id]).await;
    let (_, welcome) = gadget.connect(&h.url).await;
    assert!(welcome.paired);
    let (_, welcome) = Gadget::new().connect(&h.url).await;
    assert!(!welcome.paired);
}

#[tokio::test(start_paused = true)]
async fn heartbeat_pings_and_answers() {
    let heartbeat = Duration::from_secs(5);
    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.gadget.heartbeat_s = 5;
    })
    .await;
    let (mut conn, welcome) = Gadget::new().connect(&h.url).await;
    assert_eq!(welcome.heartbeat_s, 5);
    conn.send_raw(r#"{"type":"ping","ts":1727950000000}"#).await;
    assert!(matches!(conn.recv().await, ServerMessage::Pong(p) if p.ts == Some(1727950000000)));

    // The server pings on its own one heartbeat after the welcome, not a tick before.
    let tick = Duration::from_millis(1);
    conn.quiet_for(heartbeat - tick).await;
    tokio::time::advance(tick).await;
    let next = ServerMessage::decode(&promptly(conn.ws_text()).await).unwrap();
    let ServerMessage::Ping(ping) = next else {
        panic!("no ping after a heartbeat: {next:?}")
    };
    assert!(ping.ts.unwrap() > 1_700_000_000_000);
    // When a silent device is closed is the session core's rule, tested in virtual
    // time (`herald_session::gadget`).
}

#[tokio::test]
async fn questions_queue_answer_and_come_back_after_a_reconnect() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    let (mut conn, _) = gadget.connect(&h.url).await;
    conn.text("/ask Water the plants?").await;
    let first = conn
        .until(|m| match m {
            ServerMessage::Prompt(p) => Some(p),
            _ => None,
        })
        .await;
    assert_eq!(first.id.len(), 8);
    assert_eq!(first.text, "Water the plants?");
    assert_eq!(first.ttl_s, Some(300));

    // A second question waits behind the first.
    conn.text("/approve rm -rf /tmp/cache").await;
    // Once the session has taken it (the console's record says so), nothing came of it
    // before the answer to a ping: it waits unseen.
    questions_taken(&h, &gadget.id, 2).await;
    conn.nothing_before_pong().await;

    // Away and back: the shown question is asked again.
    drop(conn);
    let (mut conn, _) = gadget.connect(&h.url).await;
    let again = conn
        .until(|m| match m {
            ServerMessage::Prompt(p) => Some(p),
            _ => None,
        })
        .await;
    assert_eq!(again.id, first.id);

    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: first.id.clone(),
        answer: Answer::Yes,
    }))
    .await;
    // The queued approval shows next, and the answer comes back.
    let mut approval = None;
    let mut answered = None;
    while approval.is_none() || answered.is_none() {
        match conn.recv().await {
            ServerMessage::Prompt(p) => approval = Some(p),
            ServerMessage::Reply(r) => answered = Some(r.text),
            _ => {}
        }
    }
    assert_eq!(answered.as_deref(), Some("You answered yes."));
    let approval = approval.unwrap();
    assert_eq!(approval.title, "Allow this command?");
    assert!(approval.text.contains("rm -rf /tmp/cache"));
    assert_eq!(approval.ttl_s, None);

    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: approval.id.clone(),
        answer: Answer::No,
    }))
    .await;
    assert_eq!(conn.reply().await, "Denied: rm -rf /tmp/cache");

    // Answering again (or an unknown id) gets a notice, not an error.
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: approval.id,
        answer: Answer::Yes,
    }))
    .await;
    let notice = conn
        .until(|m| match m {
            ServerMessage::Notice(n) => Some(n.text),
            ServerMessage::TurnEnd(_) => None,
            other => panic!("unexpected {other:?}"),
        })
        .await;
    assert_eq!(notice, "That question has expired");

    conn.text("/ask Again?").await;
    let q = conn
        .until(|m| match m {
            ServerMessage::Prompt(p) => Some(p),
            _ => None,
        })
        .await;
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: q.id,
        answer: Answer::No,
    }))
    .await;
    assert_eq!(conn.reply().await, "You answered no.");
}

#[tokio::test(start_paused = true)]
async fn questions_expire_and_can_be_withdrawn() {
    let (factory, port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();
    let gadget = Gadget::new();
    let chat = Chat::gadget(gadget.id.clone());
    let (mut conn, _) = gadget.connect(&h.url).await;

    let confirm = |text: &str| Prompt::Confirm {
        title: "Q".into(),
        text: text.into(),
    };
    // The agent's calls are held too: nothing may time out while the store answers.
    let short = promptly(port.ask(&chat, confirm("short"), Some(1)))
        .await
        .unwrap();
    let second = promptly(port.ask(&chat, confirm("second"), None))
        .await
        .unwrap();
    let third = promptly(port.ask(&chat, confirm("third"), None))
        .await
        .unwrap();
    assert!(
        matches!(conn.recv().await, ServerMessage::Prompt(p) if p.id == short && p.ttl_s == Some(1))
    );
    // After its ttl, and not a tick before, the next question shows by itself.
    let (ttl, tick) = (Duration::from_secs(1), Duration::from_millis(1));
    conn.quiet_for(ttl - tick).await;
    tokio::time::advance(tick).await;
    assert!(matches!(conn.recv().await, ServerMessage::Prompt(p) if p.id == second));
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: short,
        answer: Answer::Yes,
    }))
    .await;
    assert!(matches!(conn.recv().await, ServerMessage::Notice(_)));

    // Withdrawing the shown question closes it and shows the next.
    promptly(port.withdraw(&chat, &second)).await.unwrap();
    assert!(matches!(conn.recv().await, ServerMessage::PromptClose(c) if c.id == second));
    assert!(matches!(conn.recv().await, ServerMessage::Prompt(p) if p.id == third));
    conn.send(&DeviceMessage::PromptReply(PromptReply {
        id: third.clone(),
        answer: Answer::Yes,
    }))
    .await;
    let answer = prompt_answer(&mut inbox).await;
    assert_eq!(answer.prompt_id, third);
    assert!(answer.choice.is_affirmative());
    // A clarify's choices are asked one by one; a free-form question cannot be shown.
    let clarify = |choices: &[&str], multi_select| Prompt::Clarify {
        question: "Which rooms?".into(),
        choices: choices.iter().map(|c| (*c).to_owned()).collect(),
        multi_select,
    };
    assert!(promptly(port.ask(&chat, clarify(&[], false), None))
        .await
        .is_err());
    let asked = promptly(port.ask(&chat, clarify(&["hall", "den", "attic"], true), None))
        .await
        .unwrap();
    let mut shown = Vec::new();
    for (choice, answer) in [
        ("hall", Answer::Yes),
        ("den", Answer::No),
        ("attic", Answer::Yes),
    ] {
        let ServerMessage::Prompt(step) = conn.recv().await else {
            panic!("no step for {choice}")
        };
        assert_eq!(step.text, format!("Which rooms?\n{choice}?"));
        shown.push(step.id.clone());
        conn.send(&DeviceMessage::PromptReply(PromptReply {
            id: step.id,
            answer,
        }))
        .await;
    }
    // Each step under an id of its own, the first under the agent's.
    assert_eq!(shown[0], asked);
    assert!(shown[1] != shown[0] && shown[2] != shown[1]);
    let answer = prompt_answer(&mut inbox).await;
    assert_eq!(answer.prompt_id, asked);
    assert_eq!(answer.choice, Choice::Options(vec![0, 2]));
}

/// The next thing the agent hears, which must be an answer to a question.
/// Until the console's record of `device` holds `count` questions the session took.
async fn questions_taken(h: &Harness, device: &str, count: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, detail) = h.admin("GET", &format!("/v1/devices/{device}"), None).await;
        let events = detail["events"].as_array().cloned().unwrap_or_default();
        if events.iter().filter(|e| e["kind"] == "prompt").count() >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never {count} questions: {detail}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn prompt_answer(inbox: &mut tokio::sync::mpsc::UnboundedReceiver<Inbound>) -> PromptAnswer {
    let inbound = promptly(inbox.recv()).await.unwrap();
    match inbound.body {
        InboundBody::PromptAnswer(answer) => answer,
        other => panic!("{other:?}"),
    }
}

fn led_action() -> ActionSpec {
    ActionSpec {
        name: "led.set".into(),
        description: Some("Set the LED".into()),
        params: Some(json!({"type": "object", "properties": {"color": {"type": "string"}}})),
    }
}

#[tokio::test]
async fn device_actions_run_and_report() {
    let h = Harness::start().await;
    let mut gadget = Gadget::new();
    gadget.hello.actions = vec![led_action()];
    let (mut conn, _) = gadget.connect(&h.url).await;

    conn.text(r#"/action led.set {"color": "red"}"#).await;
    let action = conn
        .until(|m| match m {
            ServerMessage::Action(a) => Some(a),
            _ => None,
        })
        .await;
    assert_eq!(action.name, "led.set");
    assert_eq!(action.args, json!({"color": "red"}));
    assert_eq!(action.id.len(), 12);
    conn.send(&DeviceMessage::ActionResult(ActionResult {
        id: action.id,
        ok: true,
        result: Some(json!("red")),
        error: None,
    }))
    .await;
    // A non-object result is wrapped.
    assert_eq!(conn.reply().await, r#"Result: {"value":"red"}"#);

    conn.text(r#"/action led.set {}"#).await;
    let action = conn
        .until(|m| match m {
            ServerMessage::Action(a) => Some(a),
            _ => None,
        })
        .await;
    conn.send(&DeviceMessage::ActionResult(ActionResult {
        id: action.id,
        ok: false,
        result: None,
        error: Some("color is required".into()),
    }))
    .await;
    assert_eq!(conn.reply().await, "Action failed: color is required");

    // Names outside the manifest never reach the device.
    conn.text(r#"/action door.open {}"#).await;
    assert_eq!(
        conn.reply().await,
        "Action failed: the device has no action named door.open"
    );
}

#[tokio::test(start_paused = true)]
async fn actions_time_out_and_fail_on_disconnect() {
    let (factory, port, _inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();
    let mut gadget = Gadget::new();
    gadget.hello.actions = vec![led_action()];
    let chat = Chat::gadget(gadget.id.clone());
    let (mut conn, _) = gadget.connect(&h.url).await;

    // Unanswered, the call fails at its deadline: the clock runs from timer to timer.
    let deadline = Duration::from_secs(limits::ACTION_TIMEOUT_SECS);
    let started = tokio::time::Instant::now();
    let call = tokio::spawn({
        let port = port.clone();
        let chat = chat.clone();
        async move { port.invoke_action(&chat, "led.set", json!({})).await }
    });
    assert!(matches!(conn.recv().await, ServerMessage::Action(_)));
    let result = tokio::time::timeout(deadline + WAIT, call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result, Err(ActionError::Timeout));
    let waited = started.elapsed();
    assert!(
        waited >= deadline && waited < deadline + Duration::from_secs(1),
        "{waited:?}"
    );

    // A disconnect fails what is pending at once: the clock stands still meanwhile.
    let call = tokio::spawn({
        let port = port.clone();
        let chat = chat.clone();
        async move { port.invoke_action(&chat, "led.set", json!({})).await }
    });
    assert!(matches!(conn.recv().await, ServerMessage::Action(_)));
    drop(conn);
    let result = promptly(call).await.unwrap();
    assert_eq!(result, Err(ActionError::Disconnected));
}

#[tokio::test]
async fn telemetry_merges_and_events_notify() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let mut gadget = Gadget::new();
    gadget.hello.sensors = json!({"battery_pct": 87}).as_object().unwrap().clone();
    let (mut conn, _) = gadget.connect(&h.url).await;
    conn.send_raw(r#"{"type":"state","sensors":{"battery_pct":80,"temperature_c":21.5}}"#)
        .await;
    conn.send_raw(r#"{"type":"event","name":"button.long_press","data":{"n":2},"notify":false}"#)
        .await;
    conn.send_raw(r#"{"type":"event","name":"door.open","data":{"side":"front"},"notify":true}"#)
        .await;
    let inbound = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    match inbound.body {
        InboundBody::Text { text, .. } => {
            assert_eq!(text, r#"[Gadget event] door.open {"side":"front"}"#)
        }
        other => panic!("{other:?}"),
    }
    assert!(
        inbox.try_recv().is_err(),
        "events without notify stay on the device"
    );
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(
        devices[0]["sensors"],
        json!({"battery_pct": 80, "temperature_c": 21.5})
    );
}

#[tokio::test]
async fn bad_frames_after_the_handshake_get_an_error_not_a_close() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.send_raw("{not json").await;
    assert!(matches!(conn.recv().await, ServerMessage::Error(_)));
    conn.send_raw(r#"{"type":"something.new","x":1}"#).await;
    conn.text("still fine").await;
    assert_eq!(conn.reply().await, "You said: still fine");
}

#[tokio::test]
async fn oversized_frames_close_the_connection() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    let huge = format!(
        r#"{{"type":"text","text":"{}"}}"#,
        "a".repeat(1024 * 1024 + 10)
    );
    conn.send_raw(&huge).await;
    let (message, close) = protocol_error_then_close(&mut conn).await;
    assert!(message.contains("limited to"), "{message}");
    assert_eq!(close, CloseCode::Size, "1009: too big");
}

/// The `error{protocol}` a broken stream earns, then the close code that follows it.
async fn protocol_error_then_close(conn: &mut Conn) -> (String, CloseCode) {
    let error = conn
        .until(|m| match m {
            ServerMessage::Error(e) => Some(e),
            _ => None,
        })
        .await;
    assert_eq!(error.code, ErrorCode::Protocol);
    let close = conn.closed(WAIT).await.expect("a close frame");
    (error.message, close.code)
}

#[tokio::test]
async fn text_that_is_not_utf8_closes_with_1007() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    let bad = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    conn.ws.send(Message::Frame(bad)).await.unwrap();
    let (_, close) = protocol_error_then_close(&mut conn).await;
    assert_eq!(close, CloseCode::Invalid, "1007: invalid payload");
}

#[tokio::test]
async fn metrics_count_what_happened() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("count me").await;
    conn.reply().await;
    conn.send_raw("{broken").await;
    conn.until(|m| matches!(m, ServerMessage::Error(_)).then_some(()))
        .await;
    let (status, text) = admin_text(h.dir.path(), "GET", "/metrics", None).await;
    assert_eq!(status, 200);
    for line in [
        "herald_connections{platform=\"gadget\"} 1",
        "herald_handshakes_total{platform=\"gadget\",outcome=\"ok\"} 1",
        "herald_turns_total{platform=\"gadget\"} 1",
        "herald_errors_total{platform=\"gadget\",code=\"protocol\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
    let frames_in = text
        .lines()
        .find_map(|l| l.strip_prefix("herald_frames_total{platform=\"gadget\",direction=\"in\"} "))
        .unwrap();
    assert!(
        frames_in.parse::<u64>().unwrap() >= 4,
        "hello, auth, text, broken"
    );
    let (status, _) = admin_text(h.dir.path(), "GET", "/metrics", None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn text_is_limited_to_4000_characters() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    // Characters, not bytes: 4000 two-byte characters are still allowed.
    conn.text(&"é".repeat(4000)).await;
    let inbound = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(inbound.body, InboundBody::Text { ref text, .. } if text.chars().count() == 4000)
    );
    conn.text(&"é".repeat(4001)).await;
    assert!(matches!(conn.recv().await, ServerMessage::Notice(n) if n.text.contains("too long")));
    assert!(inbox.try_recv().is_err());
}

/// Readings wait for the next store window; a server that stops writes them before
/// `shutdown` returns, as the process ends right after.
#[tokio::test]
async fn a_stopping_server_writes_what_its_sessions_held_back() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    for temp_c in [20, 21] {
        let state = json!({"type": "state", "sensors": {"temp_c": temp_c}});
        conn.send_raw(&state.to_string()).await;
    }
    conn.send_raw(r#"{"type":"ping","ts":1}"#).await;
    conn.until(|m| matches!(m, ServerMessage::Pong(_)).then_some(()))
        .await;

    let Harness { server, dir, .. } = h;
    server.shutdown().await;
    let store = SqliteStore::open(&dir.path().join(herald_server::STORE_FILE)).unwrap();
    let devices = store.devices().unwrap();
    assert_eq!(devices[0].sensors["temp_c"], 21, "{:?}", devices[0].sensors);
    drop(conn);
}

#[tokio::test]
async fn sensor_readings_are_bounded() {
    let h = Harness::start().await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    for i in 0..40 {
        conn.send_raw(
            &json!({"type": "state", "sensors": {
                format!("key_{i}"): i,
                format!("blob_{i}"): "x".repeat(100_000),
                format!("nested_{i}"): {"a": [1, 2, 3]},
                "k".repeat(200): 1,
                "temp_c": 20 + i,
            }})
            .to_string(),
        )
        .await;
    }
    // Frames are handled in order: the pong comes after every reading was taken.
    conn.send_raw(r#"{"type":"ping","ts":1}"#).await;
    conn.until(|m| matches!(m, ServerMessage::Pong(_)).then_some(()))
        .await;
    // One store write per window: the first readings at once, the rest wait, merged.
    let sensors = |devices: serde_json::Value| devices[0]["sensors"].clone();
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(sensors(devices), json!({"key_0": 0, "temp_c": 20}));
    // The device leaves: what waited is written, nothing lost.
    drop(conn);
    let started = std::time::Instant::now();
    let sensors = loop {
        let (_, devices) = h.admin("GET", "/v1/devices", None).await;
        if devices[0]["online"] == false && sensors(devices.clone())["temp_c"] != 20 {
            break sensors(devices);
        }
        assert!(started.elapsed() < WAIT, "never written: {devices}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let sensors = sensors.as_object().unwrap();
    assert_eq!(sensors.len(), 32, "{sensors:?}");
    assert_eq!(
        sensors["temp_c"], 59,
        "a known key is still updated when full"
    );
    assert!(sensors.values().all(|v| v.is_number()), "{sensors:?}");
    assert!(sensors.keys().all(|k| k.len() <= 32));
}

#[tokio::test]
async fn a_gadgets_name_is_cleaned_before_anyone_sees_it() {
    let h = Harness::start_with(|_| {}).await;
    let mut gadget = Gadget::new();
    gadget.hello.name = Some("Kitchen\x1b]0;owned\x07\u{202E}lamp".into());
    gadget.hello.board = Some("esp32\x1b[2J".into());
    let (mut conn, _) = gadget.connect(&h.url).await;
    assert!(matches!(conn.recv().await, ServerMessage::Pairing(_)));
    let (_, pairings) = h.admin("GET", "/v1/pairing", None).await;
    assert_eq!(pairings[0]["user_name"], "Kitchen]0;ownedlamp");
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(devices[0]["name"], "Kitchen]0;ownedlamp");
    assert_eq!(devices[0]["board"], "esp32[2J");
}

#[tokio::test]
async fn what_a_device_sends_shows_on_its_console_page() {
    let h = Harness::start_with(|c| c.gadget.allow_all_users = true).await;
    let gadget = Gadget::new();
    let (mut conn, _) = gadget.connect(&h.url).await;
    conn.text("what time is it").await;
    assert_eq!(conn.reply().await, "You said: what time is it");
    let (status, device) = h
        .admin("GET", &format!("/v1/devices/{}", gadget.id), None)
        .await;
    assert_eq!(status, 200);
    let events = device["events"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("said", "what time is it")),
        "the user's words are listed beside the reply: {kinds:?}"
    );
}
