//! Each line type against the JSON the plugin reads and writes: inbound events, answers,
//! decoded requests and errors, the `devices` entries and herald's own requests.

use super::*;
use herald_port::{Prompt, PromptAnswer, Source};
use serde_json::json;

fn inbound(body: InboundBody) -> Value {
    let inbound = Inbound {
        source: Source {
            chat: Chat::gadget("hg-0123456789abcdef"),
            user_id: "hg-0123456789abcdef".into(),
            user_name: None,
        },
        message_id: "m1".into(),
        body,
        profile: None,
    };
    let line = OutLine::Event {
        event: Event::Inbound(WireInbound::from(&inbound)),
    };
    serde_json::from_str(&line.encode()).unwrap()
}

#[test]
fn inbound_events_carry_the_source_and_body() {
    let line = inbound(InboundBody::Text {
        text: "hi".into(),
        reply_to: None,
    });
    assert_eq!(
        line,
        json!({"type": "event", "op": "inbound", "args": {
            "source": {"chat": {"platform": "gadget", "id": "hg-0123456789abcdef"},
                       "user_id": "hg-0123456789abcdef"},
            "message_id": "m1",
            "body": {"kind": "text", "text": "hi"}}})
    );
}

#[test]
fn answers_use_hermess_words() {
    let answer = |choice| {
        inbound(InboundBody::PromptAnswer(PromptAnswer {
            prompt_id: "p1".into(),
            choice,
        }))["args"]["body"]
            .clone()
    };
    assert_eq!(
        answer(Choice::Session),
        json!({"kind": "prompt_answer", "prompt_id": "p1", "choice": "session"})
    );
    assert_eq!(
        answer(Choice::Option(2)),
        json!({"kind": "prompt_answer", "prompt_id": "p1", "choice": "option", "index": 2})
    );
    assert_eq!(
        answer(Choice::Options(vec![0, 2])),
        json!({"kind": "prompt_answer", "prompt_id": "p1", "choice": "options", "indices": [0, 2]})
    );
    assert_eq!(
        answer(Choice::Options(Vec::new())),
        json!({"kind": "prompt_answer", "prompt_id": "p1", "choice": "options", "indices": []})
    );
    assert_eq!(
        answer(Choice::Other("blue".into())),
        json!({"kind": "prompt_answer", "prompt_id": "p1", "choice": "other", "text": "blue"})
    );
}

#[test]
fn voice_is_a_wav_path() {
    let body = inbound(InboundBody::Voice {
        path: "/tmp/v.wav".into(),
        duration_ms: 1500,
        transcript: None,
    })["args"]["body"]
        .clone();
    assert_eq!(
        body,
        json!({"kind": "voice", "path": "/tmp/v.wav", "duration_ms": 1500})
    );
}

#[test]
fn a_stopped_speech_stream_is_named_with_its_reason() {
    let body = inbound(InboundBody::SpeechStopped {
        speech_id: "s-1".to_owned().try_into().unwrap(),
        reason: herald_port::SpeechStopReason::Interrupted,
    })["args"]["body"]
        .clone();
    assert_eq!(
        body,
        json!({"kind": "speech_stopped", "speech_id": "s-1", "reason": "interrupted"})
    );
}

#[test]
fn speech_requests_decode_and_bad_ones_are_bad_requests() {
    let chat = json!({"platform": "gadget", "id": "hg-1"});
    let request = HermesRequest::decode(
        "speech_write".into(),
        json!({"chat": chat, "speech_id": "s-1", "pcm": "AQID"}),
    )
    .unwrap();
    assert!(matches!(
        request,
        HermesRequest::Device { request: Request::SpeechWrite { pcm, .. }, .. } if pcm.0 == [1, 2, 3]
    ));
    let err = HermesRequest::decode(
        "speech_begin".into(),
        json!({"chat": chat, "speech_id": "s-1", "sample_rate": 96000, "channels": 1}),
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadRequest);
    assert!(err.message.contains("sample_rate"), "{}", err.message);
}

#[test]
fn requests_decode_or_say_why_not() {
    let request = HermesRequest::decode(
        "ask".into(),
        json!({"chat": {"platform": "mobile", "id": "tel-1"},
               "prompt": {"kind": "exec_approval", "command": "rm -rf /tmp/x",
                          "description": "recursive delete", "allow_permanent": false}}),
    )
    .unwrap();
    let HermesRequest::Device {
        chat,
        request: Request::Ask { prompt, ttl_s },
    } = request
    else {
        panic!("not an ask: {request:?}")
    };
    assert_eq!(chat, Chat::mobile("tel-1"));
    assert_eq!(ttl_s, None);
    assert_eq!(
        prompt,
        Prompt::ExecApproval {
            command: "rm -rf /tmp/x".into(),
            description: "recursive delete".into(),
            allow_permanent: false,
            allow_session: true,
        }
    );
    // Hermes 0.22's several questions: one ask each, possibly multi-select.
    let clarify = HermesRequest::decode(
        "ask".into(),
        json!({"chat": {"platform": "gadget", "id": "hg-1"},
               "prompt": {"kind": "clarify", "question": "Which rooms?",
                          "choices": ["hall", "den"], "multi_select": true}}),
    )
    .unwrap();
    let HermesRequest::Device {
        request: Request::Ask { prompt, .. },
        ..
    } = clarify
    else {
        panic!("not an ask: {clarify:?}")
    };
    assert_eq!(
        prompt,
        Prompt::Clarify {
            question: "Which rooms?".into(),
            choices: vec!["hall".into(), "den".into()],
            multi_select: true,
        }
    );

    let unknown = HermesRequest::decode("fly".into(), json!({})).unwrap_err();
    assert_eq!(unknown.kind, ErrorKind::BadRequest);
    let missing = HermesRequest::decode("send_text".into(), json!({"text": "x"})).unwrap_err();
    assert_eq!(missing.kind, ErrorKind::BadRequest);
    assert!(missing.message.contains("chat"), "{}", missing.message);
}

#[test]
fn errors_keep_the_ports_variant() {
    let offline: WireError = DeliveryError::Offline(Chat::gadget("hg-1")).into();
    assert_eq!(offline.kind, ErrorKind::Offline);
    let timeout: WireError = ActionError::Timeout.into();
    assert_eq!(timeout.kind, ErrorKind::Timeout);
    let wrapped: WireError =
        ActionError::Delivery(DeliveryError::UnknownChat(Chat::mobile("x"))).into();
    assert_eq!(wrapped.kind, ErrorKind::UnknownChat);
    let newer: WireError =
        serde_json::from_value(json!({"kind": "brand_new", "message": "?"})).unwrap();
    assert_eq!(newer.kind, ErrorKind::Other);
}

#[test]
fn a_connected_gadgets_profile_is_spread_into_its_devices_entry() {
    let profile = DeviceProfile {
        paired: true,
        screen: Some(herald_port::Screen {
            width: Some(320),
            height: Some(240),
            text_cols: None,
            text_rows: None,
        }),
        charset: "ascii".into(),
        speaker_rate: Some(16_000),
        actions: Vec::new(),
    };
    let online = WireDevice::from(DeviceSummary {
        chat: Chat::gadget("hg-1"),
        name: Some("Desk".into()),
        online: true,
        profile: Some(profile),
    });
    assert_eq!(
        serde_json::to_value(online).unwrap(),
        json!({"platform": "gadget", "id": "hg-1", "name": "Desk", "online": true,
               "paired": true, "charset": "ascii", "speaker_rate": 16000, "actions": [],
               "screen": {"width": 320, "height": 240, "text_cols": null, "text_rows": null}})
    );
    let offline = WireDevice::from(DeviceSummary {
        chat: Chat::mobile("tel-1"),
        name: None,
        online: false,
        profile: None,
    });
    assert_eq!(
        serde_json::to_value(offline).unwrap(),
        json!({"platform": "mobile", "id": "tel-1", "name": null, "online": false})
    );
    let asked = HermesRequest::decode(
        "profile".into(),
        json!({"chat": {"platform": "gadget", "id": "hg-1"}}),
    );
    assert!(matches!(
        asked,
        Ok(HermesRequest::Device { chat, request: Request::Profile {} }) if chat == Chat::gadget("hg-1")
    ));
    let host = HermesRequest::decode("devices".into(), json!({"platform": "mobile"}));
    assert!(matches!(
        host,
        Ok(HermesRequest::Devices {
            platform: Some(Platform::Mobile)
        })
    ));
}

#[test]
fn herald_asks_hermes_with_numbered_requests() {
    let line = OutLine::Request {
        id: 7,
        question: Question::PairingCode {
            platform: Platform::Mobile,
            user_id: "u1",
            user_name: Some("Ann"),
        },
    };
    assert_eq!(
        serde_json::from_str::<Value>(&line.encode()).unwrap(),
        json!({"type": "request", "id": 7, "op": "pairing_code",
               "args": {"platform": "mobile", "user_id": "u1", "user_name": "Ann"}})
    );
}
