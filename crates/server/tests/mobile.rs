//! The mobile adapter over a real socket: access, every error code, replies, cards,
//! media limits at and past their boundaries, voice, delivery, duplicates and the
//! outbox across a drop.

use std::time::Duration;

use futures_util::SinkExt;
use herald_config::Secret;
use herald_mobile_proto::{
    encode_base64, limits, AvatarState, ErrorCode, MediaKindDown, PromptKind, ServerFrame,
};
use herald_port::{Chat, InboundBody, Prompt, SendOptions};
use herald_test_support::{
    admin_text, capture, demo, promptly, test_config, Gadget, Harness, Phone, APP_TOKEN, WAIT,
};
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// A token in `MOBILE_DELIVER_TOKENS`, for the tests that set it.
const DELIVER_TOKEN: &str = "cron-secret-0123456789abcdef0123456789";

async fn open_mobile() -> Harness {
    Harness::start_with(|c| c.mobile.allow_all_users = true).await
}

async fn expect_error(phone: &mut Phone, code: ErrorCode) -> String {
    phone
        .until(|f| match f {
            ServerFrame::Error { code: c, message } if c == code => Some(message),
            ServerFrame::Error { code: c, message } => {
                panic!("expected {code:?}, got {c:?}: {message}")
            }
            _ => None,
        })
        .await
}

async fn expect_refusal(phone: &mut Phone, code: ErrorCode) {
    expect_error(phone, code).await;
    let close = phone.closed(WAIT).await.expect("a close frame");
    assert_eq!(close.code, CloseCode::Policy);
}

#[tokio::test]
async fn ready_names_the_session_and_capabilities() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.avatar_url = Some("https://example.invalid/avatar.html".into());
    })
    .await;
    let (_phone, ready) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let ServerFrame::Ready {
        session,
        avatar_url,
        capabilities,
    } = ready
    else {
        unreachable!()
    };
    assert_eq!(session, "mobile:tel-1");
    assert_eq!(
        avatar_url.as_deref(),
        Some("https://example.invalid/avatar.html")
    );
    assert_eq!(capabilities.max_media_bytes, 8 * 1024 * 1024);
    assert_eq!(capabilities.max_frame_bytes, 16 * 1024 * 1024);
    assert_eq!(capabilities.media_chunk_bytes, 3 * 1024 * 1024);
    assert!(capabilities.streaming && capabilities.voice);
    assert_eq!(capabilities.prompts.len(), 3);
}

#[tokio::test]
async fn hello_must_come_first_with_a_good_token() {
    let h = Harness::start_with(|c| {
        c.mobile.allowed_devices = vec!["tel-ok".into(), "tel-other".into()];
        c.mobile.extra_tokens = Some(Secret("bob:bobs-token-0123456789abcdef0123456789".into()));
    })
    .await;
    let mut phone = Phone::open(&h.mobile_url).await;
    phone.text("m1", "hi").await;
    expect_refusal(&mut phone, ErrorCode::NotReady).await;

    let mut phone = Phone::open(&h.mobile_url).await;
    phone.send(json!({"t": "something"})).await;
    expect_refusal(&mut phone, ErrorCode::NotReady).await;

    for token in ["wrong", ""] {
        let mut phone = Phone::open(&h.mobile_url).await;
        phone.hello(token, "tel-ok").await;
        expect_refusal(&mut phone, ErrorCode::AuthFailed).await;
    }
    let mut phone = Phone::open(&h.mobile_url).await;
    phone
        .send(json!({"t": "hello", "device": {"id": "tel-ok"}}))
        .await;
    expect_refusal(&mut phone, ErrorCode::AuthFailed).await;

    // Outside MOBILE_ALLOWED_DEVICES.
    let mut phone = Phone::open(&h.mobile_url).await;
    phone.hello(APP_TOKEN, "tel-stranger").await;
    expect_refusal(&mut phone, ErrorCode::AuthFailed).await;

    // The first user owns a device id; another user's token gets forbidden.
    Phone::connect(&h.mobile_url, APP_TOKEN, "tel-ok").await;
    let mut phone = Phone::open(&h.mobile_url).await;
    phone
        .hello("bobs-token-0123456789abcdef0123456789", "tel-ok")
        .await;
    expect_refusal(&mut phone, ErrorCode::Forbidden).await;
    Phone::connect(
        &h.mobile_url,
        "bobs-token-0123456789abcdef0123456789",
        "tel-other",
    )
    .await;

    // A token in the URL is refused outright.
    let url = format!("{}?token={APP_TOKEN}", h.mobile_url);
    match tokio_tungstenite::connect_async(url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 400)
        }
        other => panic!("expected 400, got {other:?}"),
    }
}

#[tokio::test]
async fn unknown_and_malformed_frames_keep_the_connection() {
    let h = open_mobile().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.send(json!({"t": "hologram", "x": 1})).await;
    expect_error(&mut phone, ErrorCode::UnsupportedFrame).await;
    phone.ws.send(Message::Text("{nope".into())).await.unwrap();
    expect_error(&mut phone, ErrorCode::BadFrame).await;
    phone.send(json!({"t": "text", "text": "no id"})).await;
    expect_error(&mut phone, ErrorCode::BadFrame).await;
    phone.send(json!({"t": "ping"})).await;
    assert_eq!(phone.recv().await, ServerFrame::Pong);
}

#[tokio::test]
async fn a_turn_streams_with_typing_and_avatar() {
    let h = open_mobile().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "hello phone").await;
    assert_eq!(phone.recv().await, ServerFrame::Typing { stop: false });
    assert_eq!(
        phone.recv().await,
        ServerFrame::Avatar {
            state: AvatarState::Thinking
        }
    );
    assert_eq!(
        phone.recv().await,
        ServerFrame::Avatar {
            state: AvatarState::Speaking
        }
    );
    let mut id = None;
    let mut edits = 0;
    let last = loop {
        let ServerFrame::Message(m) = phone.recv().await else {
            panic!("expected message frames")
        };
        assert!(m.edit);
        assert_eq!(*id.get_or_insert(m.id.clone()), m.id, "one message id");
        edits += 1;
        if m.final_ {
            break m;
        }
    };
    assert!(edits >= 3);
    assert_eq!(last.text, "You said: hello phone");
    assert_eq!(phone.recv().await, ServerFrame::Typing { stop: true });
    assert_eq!(
        phone.recv().await,
        ServerFrame::Avatar {
            state: AvatarState::Idle
        }
    );
}

/// Never silent: the demo agent's failing turn, and its stalled one once herald's turn
/// timeout has passed (in paused time), both end with the failure said and typing off.
#[tokio::test(start_paused = true)]
async fn failed_and_stalled_turns_are_said_to_have_failed() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.turn_timeout_s = 60;
    })
    .await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let thinking = |f| {
        matches!(
            f,
            ServerFrame::Avatar {
                state: AvatarState::Thinking
            }
        )
        .then_some(())
    };
    let failure_said = |f| match f {
        ServerFrame::Message(m) => Some(m.text),
        _ => None,
    };

    phone.text("m1", "/fail").await;
    phone.until(thinking).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(phone.until(failure_said).await, "Sorry, that did not work.");
    assert_eq!(phone.recv().await, ServerFrame::Typing { stop: true });

    phone.text("m2", "/stall").await;
    phone.until(thinking).await;
    tokio::time::advance(Duration::from_secs(59)).await;
    // Frames come in order: a pong first means nothing was said before it.
    phone.send(json!({"t": "ping"})).await;
    assert_eq!(
        phone
            .until(|f| (f
                != ServerFrame::Avatar {
                    state: AvatarState::Idle
                })
            .then_some(f))
            .await,
        ServerFrame::Pong
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(phone.until(failure_said).await, "Sorry, that did not work.");
    assert_eq!(phone.recv().await, ServerFrame::Typing { stop: true });
}

#[tokio::test]
async fn duplicates_never_reach_the_agent_twice_even_across_a_reconnect() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "once").await;
    phone.text("m1", "once").await;
    drop(phone);
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "once").await;
    phone.text("m2", "twice").await;
    let first = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.message_id, "m1");
    assert_eq!(second.message_id, "m2");
    assert_eq!(first.source.chat, Chat::mobile("tel-1"));
    assert_eq!(
        first.source.user_id,
        herald_mobile_proto::user_id_for_token(APP_TOKEN)
    );
    // Nothing else came between: the agent's next message is the one sent next.
    phone.text("m3", "a probe").await;
    assert_eq!(received(&mut inbox).await.message_id, "m3");
}

#[tokio::test]
async fn long_replies_are_chunked() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.max_message_chars = 500;
    })
    .await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "/long").await;
    let mut chunks = Vec::new();
    loop {
        if let ServerFrame::Message(m) = phone.recv().await {
            assert!(!m.edit);
            assert!(m.text.chars().count() <= 500);
            let chunk = m.chunk.unwrap();
            assert_eq!(chunk.index as usize, chunks.len());
            chunks.push(m.text);
            if m.final_ {
                assert_eq!(chunk.index + 1, chunk.total);
                break;
            }
        }
    }
    assert!(chunks.len() > 5);
    let whole = chunks.concat();
    assert!(whole.starts_with("This is sentence number 1 of"));
    assert!(whole.ends_with("number 120 of a long reply."));
}

#[tokio::test]
async fn cards_resolve_with_the_choice_that_counted() {
    let h = open_mobile().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;

    phone.text("m1", "/approve rm -rf /tmp/x").await;
    let approval = phone.card().await;
    assert_eq!(approval.kind, PromptKind::ExecApproval);
    assert_eq!(approval.command.as_deref(), Some("rm -rf /tmp/x"));
    assert!(approval.description.is_some());
    assert_eq!(approval.session, "mobile:tel-1");
    assert_eq!(approval.timeout_seconds, 300);
    let ids: Vec<&str> = approval.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["once", "session", "always", "deny"]);
    phone
        .send(json!({"t": "prompt", "prompt_id": approval.id, "option_id": "session"}))
        .await;
    assert_eq!(
        phone.prompt_done().await,
        (approval.id.clone(), Some("session".into()), false)
    );
    assert_eq!(phone.reply().await, "Approved (session): rm -rf /tmp/x");

    // A made-up option becomes the safe choice.
    phone.text("m2", "/approve reboot").await;
    let approval = phone.card().await;
    phone
        .send(json!({"t": "prompt", "prompt_id": approval.id, "option_id": "yes-please"}))
        .await;
    assert_eq!(phone.prompt_done().await.1.as_deref(), Some("deny"));
    assert_eq!(phone.reply().await, "Denied: reboot");

    phone.text("m3", "/ask Lights off?").await;
    let confirm = phone.card().await;
    assert_eq!(confirm.kind, PromptKind::Confirm);
    phone
        .send(json!({"t": "prompt", "prompt_id": confirm.id, "option_id": "once"}))
        .await;
    assert_eq!(phone.prompt_done().await.1.as_deref(), Some("once"));
    assert_eq!(phone.reply().await, "You answered yes.");

    phone.text("m4", "/choose CSV, JSON").await;
    let clarify = phone.card().await;
    assert_eq!(clarify.kind, PromptKind::Clarify);
    let ids: Vec<&str> = clarify.options.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "other"]);
    phone
        .send(json!({"t": "prompt", "prompt_id": clarify.id, "option_id": "c1"}))
        .await;
    assert_eq!(phone.prompt_done().await.1.as_deref(), Some("c1"));
    assert_eq!(phone.reply().await, "You chose JSON.");

    phone.text("m5", "/choose CSV, JSON").await;
    let clarify = phone.card().await;
    phone
        .send(json!({"t": "prompt", "prompt_id": clarify.id, "option_id": "other", "text": "YAML"}))
        .await;
    assert_eq!(phone.prompt_done().await.1.as_deref(), Some("other"));
    assert_eq!(phone.reply().await, "You wrote: YAML");

    // Answering again, or an unknown card: expired, connection intact.
    phone
        .send(json!({"t": "prompt", "prompt_id": clarify.id, "option_id": "c0"}))
        .await;
    assert_eq!(phone.prompt_done().await, (clarify.id.clone(), None, true));
    phone
        .send(json!({"t": "prompt", "prompt_id": "nope", "option_id": "c0"}))
        .await;
    assert!(phone.prompt_done().await.2);
}

#[tokio::test]
async fn only_the_device_shown_a_card_may_answer_it() {
    // Not shared with the user's other phones (tests/questions.rs covers copies).
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.questions.share = false;
    })
    .await;
    let (mut owner, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut other, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-2").await;
    owner.text("m1", "/ask Really?").await;
    let card = owner.card().await;
    other
        .send(json!({"t": "prompt", "prompt_id": card.id, "option_id": "once"}))
        .await;
    expect_error(&mut other, ErrorCode::Forbidden).await;
    // The card is still open for its owner, and the answer never became a message.
    owner
        .send(json!({"t": "prompt", "prompt_id": card.id, "option_id": "cancel"}))
        .await;
    assert_eq!(owner.prompt_done().await.1.as_deref(), Some("cancel"));
    assert_eq!(owner.reply().await, "You answered no.");
}

#[tokio::test(start_paused = true)]
async fn cards_expire_on_their_own() {
    let (factory, port, _inbox) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let prompt = Prompt::Confirm {
        title: "Quick".into(),
        text: "Answer fast".into(),
    };
    // Held: the clock must not run on while the store keeps the card.
    let id = promptly(port.ask(&Chat::mobile("tel-1"), prompt, Some(1)))
        .await
        .unwrap();
    let card = phone.card().await;
    assert_eq!((card.id.as_str(), card.timeout_seconds), (id.as_str(), 1));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(phone.prompt_done().await, (id.clone(), None, true));
    phone
        .send(json!({"t": "prompt", "prompt_id": id, "option_id": "once"}))
        .await;
    assert!(phone.prompt_done().await.2);
}

#[tokio::test]
async fn unpaired_users_get_a_code_and_approval_lets_them_in() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.mobile.extra_tokens = Some(Secret("carol:carols-token-0123456789abcdef01234567".into()));
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "hello?").await;
    let text = phone.reply().await;
    assert!(text.contains("herald pairing approve mobile "), "{text}");
    let code = text.rsplit(' ').next().unwrap().trim().to_owned();
    assert_eq!(code.len(), 8);
    assert!(inbox.try_recv().is_err());

    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "mobile", "code": code})),
        )
        .await;
    assert_eq!(status, 200);
    // The phone hears it at once, and the message that got the code is not lost.
    assert_eq!(
        phone.reply().await,
        "This app is now paired with the agent."
    );
    assert_eq!(received(&mut inbox).await.message_id, "m1");
    phone.text("m2", "now?").await;
    assert_eq!(received(&mut inbox).await.message_id, "m2");

    // Approval by user id, while connected.
    let (mut carol, _) = Phone::connect(
        &h.mobile_url,
        "carols-token-0123456789abcdef01234567",
        "tel-c",
    )
    .await;
    carol.text("c1", "me too").await;
    assert!(carol.reply().await.contains("Pairing code"));
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "mobile", "user_id": "carol"})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(carol.reply().await.contains("now paired"));
    let kept = received(&mut inbox).await;
    assert_eq!(
        (kept.message_id.as_str(), kept.source.user_id.as_str()),
        ("c1", "carol")
    );
    carol.text("c2", "and now").await;
    assert_eq!(received(&mut inbox).await.message_id, "c2");
}

async fn received(
    inbox: &mut tokio::sync::mpsc::UnboundedReceiver<herald_port::Inbound>,
) -> herald_port::Inbound {
    tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap()
}

fn media(id: &str, part: u32, parts: u32, bytes: &[u8]) -> serde_json::Value {
    json!({"t": "media", "id": id, "kind": "document", "mime": "application/pdf",
           "filename": "report.pdf", "caption": "see", "data": encode_base64(bytes),
           "part": part, "parts": parts})
}

#[tokio::test]
async fn media_uploads_are_reassembled_within_limits() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;

    // Chunks at the 4 KiB minimum, out of order, with a resend: one file, in part order.
    let chunk = vec![1u8; limits::MIN_CHUNK_BYTES];
    let first = vec![0u8; limits::MIN_CHUNK_BYTES];
    phone.send(media("f1", 1, 3, &chunk)).await;
    phone.send(media("f1", 0, 3, &first)).await;
    phone.send(media("f1", 0, 3, &first)).await;
    phone.send(media("f1", 2, 3, b"end")).await;
    let inbound = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    let InboundBody::Media {
        path,
        caption,
        mime,
        ..
    } = inbound.body
    else {
        panic!("{:?}", inbound.body)
    };
    let saved = std::fs::read(&path).unwrap();
    assert_eq!(saved.len(), 2 * limits::MIN_CHUNK_BYTES + 3);
    assert_eq!(saved, [first, chunk.clone(), b"end".to_vec()].concat());
    assert_eq!(caption.as_deref(), Some("see"));
    assert_eq!(mime.as_deref(), Some("application/pdf"));
    assert!(path.starts_with(h.dir.path()));

    // One byte under the minimum, not last: bad_frame.
    phone.send(media("f2", 0, 2, &chunk[1..])).await;
    expect_error(&mut phone, ErrorCode::BadFrame).await;
    // parts past 2048: bad_frame.
    phone
        .send(media("f3", 0, limits::MAX_PARTS + 1, &chunk))
        .await;
    expect_error(&mut phone, ErrorCode::BadFrame).await;
    // Exactly 2048 parts starts a series; a reconnect drops it again.
    phone.send(media("f4", 0, limits::MAX_PARTS, &chunk)).await;
    phone.send(json!({"t": "ping"})).await;
    assert_eq!(phone.recv().await, ServerFrame::Pong);
    drop(phone);
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    // Eight unfinished uploads are allowed, a ninth is too_big.
    for i in 0..limits::MAX_OPEN_UPLOADS {
        phone.send(media(&format!("open{i}"), 0, 2, &chunk)).await;
    }
    phone.send(json!({"t": "ping"})).await;
    assert_eq!(phone.recv().await, ServerFrame::Pong);
    phone.send(media("ninth", 0, 2, &chunk)).await;
    expect_error(&mut phone, ErrorCode::TooBig).await;

    // A single file of exactly max_media_bytes is accepted, one byte more is too_big.
    let max = vec![7u8; limits::MAX_MEDIA_BYTES];
    phone.send(media("big", 0, 1, &max)).await;
    let inbound = tokio::time::timeout(Duration::from_secs(20), inbox.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inbound.message_id, "big");
    let over = vec![7u8; limits::MAX_MEDIA_BYTES + 1];
    phone.send(media("bigger", 0, 1, &over)).await;
    expect_error(&mut phone, ErrorCode::TooBig).await;

    // An unfinished series is never delivered, and its buffer goes with the connection.
    drop(phone);
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.send(media("open0", 1, 2, b"tail")).await;
    phone.send(json!({"t": "ping"})).await;
    assert_eq!(phone.recv().await, ServerFrame::Pong);
    assert!(inbox.try_recv().is_err());
}

#[tokio::test]
async fn frames_over_16_mib_close_with_1009() {
    let h = open_mobile().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let huge = format!(
        r#"{{"t":"text","id":"x","text":"{}"}}"#,
        "a".repeat(16 * 1024 * 1024)
    );
    phone.ws.send(Message::Text(huge.into())).await.unwrap();
    expect_error(&mut phone, ErrorCode::TooBig).await;
    let close = phone.closed(WAIT).await.expect("close frame");
    assert_eq!(close.code, CloseCode::Size);
}

#[tokio::test]
async fn text_that_is_not_utf8_gets_bad_frame_and_closes_with_1007() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    let h = open_mobile().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let bad = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    phone.ws.send(Message::Frame(bad)).await.unwrap();
    expect_error(&mut phone, ErrorCode::BadFrame).await;
    let close = phone.closed(WAIT).await.expect("close frame");
    assert_eq!(close.code, CloseCode::Invalid);
}

fn wav(seconds: f32) -> Vec<u8> {
    let samples = (16_000.0 * seconds) as usize;
    let data = samples * 2;
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&16_000u32.to_le_bytes());
    out.extend_from_slice(&32_000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data as u32).to_le_bytes());
    out.resize(44 + data, 0);
    out
}

#[tokio::test]
async fn voice_reaches_the_agent_as_a_wav_file() {
    let (factory, _port, mut inbox) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let audio = wav(1.5);
    phone
        .send(json!({"t": "audio", "id": "v1", "format": "wav", "data": encode_base64(&audio), "text": "hello"}))
        .await;
    let inbound = tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    let InboundBody::Voice {
        path,
        duration_ms,
        transcript,
    } = inbound.body
    else {
        panic!("{:?}", inbound.body)
    };
    assert_eq!(duration_ms, 1500);
    assert_eq!(transcript.as_deref(), Some("hello"));
    assert_eq!(std::fs::read(path).unwrap(), audio);

    phone
        .send(json!({"t": "audio", "id": "v2", "format": "mp3", "data": encode_base64(b"xx")}))
        .await;
    expect_error(&mut phone, ErrorCode::BadFrame).await;
    phone
        .send(
            json!({"t": "audio", "id": "v3", "format": "wav", "data": encode_base64(b"not a wav")}),
        )
        .await;
    expect_error(&mut phone, ErrorCode::BadFrame).await;
}

#[tokio::test]
async fn the_demo_agent_hears_voice_and_sends_pictures() {
    let h = open_mobile().await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone
        .send(json!({"t": "audio", "id": "v1", "format": "wav", "data": encode_base64(&wav(2.0))}))
        .await;
    assert_eq!(phone.reply().await, "I heard 2.0 seconds of audio.");
    // The recording comes back as a voice message.
    let voice = phone
        .until(|f| match f {
            ServerFrame::Media(m) => Some(m),
            _ => None,
        })
        .await;
    assert_eq!(voice.kind, MediaKindDown::Voice);
    assert_eq!(voice.mime, "audio/wav");
    phone.text("m1", "/media").await;
    let picture = phone
        .until(|f| match f {
            ServerFrame::Media(m) => Some(m),
            _ => None,
        })
        .await;
    assert_eq!(picture.kind, MediaKindDown::Image);
    assert_eq!(picture.mime, "image/png");
    assert!(picture.final_);
    let bytes = herald_mobile_proto::decode_base64(picture.data.as_deref().unwrap()).unwrap();
    assert_eq!(bytes.len() as u64, picture.size);
    assert!(bytes.starts_with(b"\x89PNG"));
}

#[tokio::test]
async fn deliver_reaches_connected_phones_only() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.deliver_tokens = vec![Secret(DELIVER_TOKEN.into())];
    })
    .await;
    let (mut target, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut cron, _) = Phone::connect(&h.mobile_url, DELIVER_TOKEN, "cron").await;
    cron.send(json!({"t": "deliver", "to": "tel-1", "text": "Reminder: water the plants"}))
        .await;
    assert_eq!(target.reply().await, "Reminder: water the plants");
    cron.send(json!({"t": "deliver", "to": "tel-404", "text": "anyone?"}))
        .await;
    expect_error(&mut cron, ErrorCode::DeviceOffline).await;
    // A deliver token is not an app token.
    cron.text("m1", "chatting").await;
    expect_error(&mut cron, ErrorCode::Forbidden).await;
}

#[tokio::test]
async fn deliver_from_loopback_reaches_only_the_same_users_connected_devices_by_default() {
    // The default configuration: nothing about deliver is set.
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.extra_tokens = Some(Secret("bob:bobs-token-0123456789abcdef0123456789".into()));
    })
    .await;
    let (mut mine, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut bobs, _) = Phone::connect(
        &h.mobile_url,
        "bobs-token-0123456789abcdef0123456789",
        "tel-bob",
    )
    .await;
    let (mut app, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-2").await;
    app.send(json!({"t": "deliver", "to": "tel-1", "text": "from loopback",
                    "media": [{"kind": "document", "filename": "a.txt", "data": encode_base64(b"hi")}]}))
        .await;
    assert_eq!(mine.reply().await, "from loopback");
    let file = mine
        .until(|f| match f {
            ServerFrame::Media(m) => Some(m),
            _ => None,
        })
        .await;
    assert_eq!(file.mime, "text/plain");
    assert_eq!(file.size, 2);
    // Another user's phone is out of reach, connected or not.
    app.send(
        json!({"t": "deliver", "to": "tel-bob", "text": "hi Bob", "media": [
        {"kind": "document", "filename": "x.txt", "data": encode_base64(b"x")}]}),
    )
    .await;
    expect_error(&mut app, ErrorCode::Forbidden).await;
    // A phone with no live connection is offline, as the protocol says, whoever owns it
    // (a cron job that asked before the phone ever connected may try again later).
    app.send(json!({"t": "deliver", "to": "nobody-here", "text": "anyone?"}))
        .await;
    expect_error(&mut app, ErrorCode::DeviceOffline).await;
    // Bob's phone got nothing: the next thing it sees is its own turn.
    bobs.text("b1", "still mine").await;
    assert_eq!(bobs.reply().await, "You said: still mine");
}

/// A phone hears the answers to its frames in the order it sent them: a push's refusal,
/// which another device's side decides, comes before the pong of a ping sent after it,
/// so a sender that follows its pushes with a ping knows at the pong that all went.
#[tokio::test]
async fn a_push_is_answered_before_the_frames_sent_after_it() {
    let h = Harness::start_with(|c| c.mobile.allow_all_users = true).await;
    let (mut app, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-2").await;
    let deliver = json!({"t": "deliver", "to": "nobody-here", "text": "anyone?"});
    for _ in 0..10 {
        // Both in one write, so herald reads the ping while the push is still out.
        for frame in [&deliver, &json!({"t": "ping"})] {
            app.ws
                .feed(Message::Text(frame.to_string().into()))
                .await
                .unwrap();
        }
        app.ws.flush().await.unwrap();
        let first = app
            .until(|f| match f {
                ServerFrame::Error { code, .. } => Some(Some(code)),
                ServerFrame::Pong => Some(None),
                _ => None,
            })
            .await;
        assert_eq!(first, Some(ErrorCode::DeviceOffline), "the pong came first");
        app.until(|f| matches!(f, ServerFrame::Pong).then_some(()))
            .await;
    }
}

/// A push to the very phone that sends it arrives: its session hands the push on and
/// goes on serving the phone meanwhile, instead of waiting for itself.
#[tokio::test]
async fn a_phone_may_deliver_to_itself() {
    let h = Harness::start_with(|c| c.mobile.allow_all_users = true).await;
    let (mut app, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    app.send(json!({"t": "deliver", "to": "tel-1", "text": "a note to self"}))
        .await;
    assert_eq!(app.reply().await, "a note to self");
}

#[tokio::test]
async fn deliver_from_loopback_turned_off_is_forbidden_even_to_ones_own_devices() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.deliver_from_loopback = false;
        c.mobile.deliver_tokens = vec![Secret(DELIVER_TOKEN.into())];
    })
    .await;
    let (mut mine, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let (mut app, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-2").await;
    app.send(json!({"t": "deliver", "to": "tel-1", "text": "from loopback"}))
        .await;
    expect_error(&mut app, ErrorCode::Forbidden).await;
    // The refused push never arrived: the next thing tel-1 sees is a deliver token's.
    let (mut cron, _) = Phone::connect(&h.mobile_url, DELIVER_TOKEN, "cron").await;
    cron.send(json!({"t": "deliver", "to": "tel-1", "text": "from the deliver token"}))
        .await;
    assert_eq!(mine.reply().await, "from the deliver token");
}

#[tokio::test]
async fn deliver_from_ipv4_loopback_counts_on_a_dual_stack_listener() {
    let h = Harness::start_with(|c| {
        c.mobile.allow_all_users = true;
        c.mobile.host = "::".parse().unwrap();
    })
    .await;
    // Through 127.0.0.1 the peer is `::ffff:127.0.0.1`, which is still this machine.
    let url = format!("ws://127.0.0.1:{}/ws", h.server.mobile_addr().port());
    let (mut mine, _) = Phone::connect(&url, APP_TOKEN, "tel-1").await;
    let (mut app, _) = Phone::connect(&url, APP_TOKEN, "tel-2").await;
    app.send(json!({"t": "deliver", "to": "tel-1", "text": "over IPv4"}))
        .await;
    assert_eq!(mine.reply().await, "over IPv4");
}

#[tokio::test]
async fn a_phone_that_drops_mid_turn_gets_the_rest_in_order() {
    let (factory, port, mut inbox) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();
    let chat = Chat::mobile("tel-1");
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "start").await;
    tokio::time::timeout(WAIT, inbox.recv())
        .await
        .unwrap()
        .unwrap();
    let turn = herald_port::TurnId::next();
    port.turn_started(&chat, turn.clone()).await;
    phone
        .until(|f| matches!(f, ServerFrame::Avatar { .. }).then_some(()))
        .await;
    drop(phone);
    // Wait until the server has noticed the drop.
    for _ in 0..100 {
        if h.server.online_phones() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(h.server.online_phones(), 0);
    for n in 1..=3 {
        port.send_text(&chat, &format!("part {n}"), SendOptions::default())
            .await
            .unwrap();
    }
    port.turn_ended(&chat, turn, herald_port::Outcome::Success)
        .await;
    // After the turn, an offline phone is just offline.
    assert!(port
        .send_text(&chat, "late", SendOptions::default())
        .await
        .is_err());

    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let mut texts = Vec::new();
    while texts.len() < 3 {
        match phone.recv().await {
            ServerFrame::Message(m) => texts.push(m.text),
            ServerFrame::Avatar { .. } | ServerFrame::Typing { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(texts, ["part 1", "part 2", "part 3"]);
    assert_eq!(phone.recv().await, ServerFrame::Typing { stop: true });
}

#[tokio::test]
async fn names_are_cleaned_and_capped_at_the_door() {
    let h = Harness::start().await;
    let mut phone = Phone::open(&h.mobile_url).await;
    let name = format!("Bob\x1b]0;owned\x07\u{202E}{}", "x".repeat(100_000));
    phone
        .send(serde_json::json!({"t": "hello", "token": APP_TOKEN,
            "device": {"id": "tel-evil", "name": name, "platform": "\x1b[31mred"}}))
        .await;
    assert!(matches!(
        phone.recv().await,
        herald_mobile_proto::ServerFrame::Ready { .. }
    ));
    let (_, phones) = h.admin("GET", "/v1/phones", None).await;
    let stored = &phones[0];
    let stored_name = stored["name"].as_str().unwrap();
    assert!(stored_name.starts_with("Bob]0;owned"), "{stored_name:?}");
    assert_eq!(stored_name.chars().count(), 64);
    assert!(!stored_name
        .chars()
        .any(|c| c.is_control() || c == '\u{202E}'));
    assert_eq!(stored["platform"], "[31mred");

    let mut gadget = Gadget::new();
    gadget.hello.name = Some("Hall\x1b[2J\u{2066}".into());
    gadget.connect(&h.url).await;
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(devices[0]["name"], "Hall[2J");
}

#[tokio::test]
async fn guessing_the_app_token_is_throttled() {
    let h = Harness::start().await;
    for i in 0..10 {
        let mut phone = Phone::open(&h.mobile_url).await;
        phone.hello(&format!("guess-{i}"), "tel-guess").await;
        assert!(matches!(
            phone.recv().await,
            herald_mobile_proto::ServerFrame::Error {
                code: herald_mobile_proto::ErrorCode::AuthFailed,
                ..
            }
        ));
    }
    let mut phone = Phone::open(&h.mobile_url).await;
    phone.hello(APP_TOKEN, "tel-guess").await;
    match phone.recv().await {
        herald_mobile_proto::ServerFrame::Error { code, .. } => {
            assert_eq!(code, herald_mobile_proto::ErrorCode::RateLimited)
        }
        other => panic!("the right token got through the throttle: {other:?}"),
    }
    let close = phone.closed(WAIT).await.expect("a close frame");
    assert_eq!(
        close.code,
        CloseCode::Again,
        "1013: worth a try later, not 'no access'"
    );
}

#[tokio::test]
async fn an_unpaired_phone_writes_nothing_to_disk() {
    let h = Harness::start_in(test_config(), tempfile::tempdir().unwrap(), demo()).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-stranger").await;
    phone.send(media("m1", 0, 1, &[7u8; 5000])).await;
    let first = phone.reply().await;
    assert!(first.contains("Pairing code"), "{first}");
    phone
        .send(json!({"t": "audio", "id": "v1", "format": "wav", "data": encode_base64(&wav(1.0))}))
        .await;
    let second = phone.reply().await;
    assert!(second.contains("Pairing code"), "{second}");
    let files = std::fs::read_dir(h.dir.path().join("inbox"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(files, 0, "nothing of an unpaired phone is stored");

    // Once paired, the same upload id counts: it was not taken as seen.
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(json!({"platform": "mobile", "user_id": herald_mobile_proto::user_id_for_token(APP_TOKEN)})),
        )
        .await;
    assert_eq!(status, 200);
    // Told at once; nothing kept to send on (files are sent again, as the code said).
    assert_eq!(
        phone.reply().await,
        "This app is now paired with the agent."
    );
    phone.send(media("m1", 0, 1, &[7u8; 5000])).await;
    let answer = phone.reply().await;
    assert!(answer.starts_with("Got your document"), "{answer}");
}

/// How long the server waits for one frame to leave (`socket::SEND_TIMEOUT`).
const SEND_TIMEOUT: Duration = Duration::from_secs(15);

#[tokio::test(start_paused = true)]
async fn a_phone_that_stops_reading_is_dropped() {
    let (factory, port, _inbox) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();
    let (_deaf, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-deaf").await;
    // Far more than the socket buffers hold, to a phone that never reads any of it.
    let file = h.dir.path().join("big.bin");
    std::fs::write(&file, vec![7u8; 8 * 1024 * 1024]).unwrap();
    let started = tokio::time::Instant::now();
    let pusher = tokio::spawn(async move {
        for _ in 0..8 {
            if port
                .send_document(&Chat::mobile("tel-deaf"), file.clone(), None)
                .await
                .is_err()
            {
                break;
            }
        }
    });
    // The clock runs from timer to timer while nobody reads; it stands still while the
    // admin API answers.
    loop {
        let (_, phones) = h.admin("GET", "/v1/phones", None).await;
        if phones[0]["online"] == false {
            break;
        }
        assert!(
            started.elapsed() < SEND_TIMEOUT + Duration::from_secs(5),
            "still connected after {:?}: {phones}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let waited = started.elapsed();
    assert!(waited >= SEND_TIMEOUT, "dropped after only {waited:?}");
    let (_, text) = admin_text(h.dir.path(), "GET", "/metrics", None).await;
    assert!(text.contains("send_timeout"), "the drop is counted");
    pusher.abort();
}

/// A file in `dir` of `bytes` bytes, last written `days` ago.
fn aged_file(dir: &std::path::Path, name: &str, bytes: usize, days: u64) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, vec![0u8; bytes]).unwrap();
    let age = Duration::from_secs(days * 86_400);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - age)
        .unwrap();
    path
}

#[tokio::test]
async fn the_inbox_keeps_to_its_quota_and_age() {
    let dir = tempfile::tempdir().unwrap();
    let inbox_dir = dir.path().join("inbox");
    std::fs::create_dir(&inbox_dir).unwrap();
    let expired = aged_file(&inbox_dir, "expired.wav", 1000, 8);
    let oldest = aged_file(&inbox_dir, "oldest.pdf", 8 * 1024 * 1024, 3);
    let older = aged_file(&inbox_dir, "older.pdf", 6 * 1024 * 1024, 2);
    let crashed = aged_file(&inbox_dir, ".x.pdf.0123abcd.part", 1000, 0);
    let (factory, _port, mut inbound) = capture();
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    config.inbox.max_mb = 16;
    config.inbox.max_age_days = 7;
    let h = Harness::start_in(config, dir, factory).await;
    assert!(
        !expired.exists(),
        "older than max_age_days: removed at start-up"
    );
    assert!(!crashed.exists(), "a crash's leftover is swept");
    assert!(oldest.exists() && older.exists(), "14 MiB fit in 16");

    // 4 MiB more would not fit: the oldest file makes room, nothing else goes.
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.send(media("f1", 0, 1, &[5u8; 4 * 1024 * 1024])).await;
    let message = tokio::time::timeout(WAIT, inbound.recv())
        .await
        .unwrap()
        .unwrap();
    let InboundBody::Media { path, .. } = message.body else {
        panic!("{:?}", message.body)
    };
    assert_eq!(std::fs::read(&path).unwrap().len(), 4 * 1024 * 1024);
    assert!(!oldest.exists(), "the oldest file made room");
    assert!(older.exists(), "only as much as needed was removed");
}

#[tokio::test]
async fn one_user_cannot_fill_the_store_with_device_ids() {
    let h = Harness::start().await;
    for i in 0..herald_store::MAX_PHONES_PER_USER {
        let (phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, &format!("tel-{i}")).await;
        drop(phone);
    }
    let mut phone = Phone::open(&h.mobile_url).await;
    phone.hello(APP_TOKEN, "tel-one-too-many").await;
    match phone.recv().await {
        herald_mobile_proto::ServerFrame::Error { code, message } => {
            assert_eq!(code, herald_mobile_proto::ErrorCode::Forbidden);
            assert!(message.contains("herald forget"), "{message}");
        }
        other => panic!("a device id over the limit was let in: {other:?}"),
    }
    assert_eq!(
        phone.closed(WAIT).await.map(|c| c.code),
        Some(CloseCode::Policy)
    );
    // A phone the user already has still connects.
    Phone::connect(&h.mobile_url, APP_TOKEN, "tel-3").await;
    let (_, phones) = h.admin("GET", "/v1/phones", None).await;
    assert_eq!(
        phones.as_array().map(Vec::len),
        Some(herald_store::MAX_PHONES_PER_USER)
    );
}

/// Send the first half of a two-part file, then a question: the answer comes after the
/// session took the chunk, or the error does.
async fn hold(
    phone: &mut Phone,
    half: &[u8],
    n: usize,
) -> Result<String, (herald_mobile_proto::ErrorCode, String)> {
    phone.send(media("big", 0, 2, half)).await;
    phone
        .send(json!({"t": "text", "id": format!("q{n}"), "text": "hello"}))
        .await;
    phone.reply_or_error().await
}

#[tokio::test]
async fn one_users_phones_share_an_upload_budget() {
    let mut config = test_config();
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), demo()).await;
    let half = vec![3u8; 7 * 1024 * 1024];
    // Four phones of one user hold 28 MiB: each within its own 8 MiB.
    let mut phones = Vec::new();
    for i in 0..4 {
        let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, &format!("tel-{i}")).await;
        hold(&mut phone, &half, i).await.expect("within the budget");
        phones.push(phone);
    }
    // The fifth would take the user over 32 MiB.
    let (mut fifth, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-4").await;
    let (code, message) = hold(&mut fifth, &half, 4)
        .await
        .expect_err("over the user's budget");
    assert_eq!(code, herald_mobile_proto::ErrorCode::TooBig);
    assert!(message.contains("this user's devices"), "{message}");
    // A phone that leaves gives its share back.
    drop(phones.pop());
    let retry = async {
        for n in 5.. {
            match hold(&mut fifth, &half, n).await {
                Ok(_) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    tokio::time::timeout(WAIT, retry)
        .await
        .expect("the share came back");
}
