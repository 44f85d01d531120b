//! The line protocol against `vectors/bridge-v1.json`, which the plugin's tests read too:
//! every line herald writes there is built here from typed values and must come out byte
//! for byte; every line herald reads must decode to the vectors' reading of it. (The
//! answers to herald's questions derive `Serialize` in tests only, to compare as JSON.)

use std::collections::BTreeSet;

use super::super::{fuzzing, ANSWER_TIMEOUT, CONCURRENT_REQUESTS, MAX_LINE};
use super::*;
use herald_port::{ActionSpec, PromptAnswer, Response, Screen, Source};
use herald_test_support::vectors::{self, cases, s};
use serde_json::json;

#[test]
fn limits_and_error_kinds_match() {
    let v = vectors::bridge();
    assert_eq!(v["protocol"], PROTOCOL);
    let limits = &v["limits"];
    assert_eq!(limits["max_line_bytes"], MAX_LINE);
    assert_eq!(limits["herald_answer_timeout_s"], ANSWER_TIMEOUT.as_secs());
    assert_eq!(limits["herald_concurrent_requests"], CONCURRENT_REQUESTS);
    for kind in cases(&v, "error_kinds") {
        let read: ErrorKind = serde_json::from_value(kind.clone()).unwrap();
        assert_ne!(read, ErrorKind::Other, "{kind}");
        assert_eq!(serde_json::to_value(read).unwrap(), *kind);
    }
}

#[test]
fn herald_writes_the_vectors_lines() {
    let v = vectors::bridge();
    let lines = cases(&v, "from_herald");
    let built = written();
    let cased: BTreeSet<&str> = lines.iter().map(|c| s(c, "name")).collect();
    let builders: BTreeSet<&str> = built.iter().map(|(name, _)| *name).collect();
    assert_eq!(cased, builders, "one builder a case");
    for (name, build) in built {
        let case = lines.iter().find(|c| s(c, "name") == name).unwrap();
        assert_eq!(build(), s(case, "line"), "{name}");
    }
}

#[test]
fn herald_reads_the_vectors_lines() {
    let v = vectors::bridge();
    for section in ["to_herald", "herald_tolerates"] {
        for case in cases(&v, section) {
            let (name, line) = (s(case, "name"), s(case, "line"));
            assert_eq!(read(line, &case["answers"]), case["reads"], "{name}");
            assert_eq!(fuzzing::refusal(line.as_bytes()), None, "{name}");
        }
    }
}

#[test]
fn herald_refuses_what_it_cannot_read() {
    let v = vectors::bridge();
    for case in cases(&v, "herald_refuses") {
        // News is never answered: one herald cannot read is dropped.
        if let Ok(Line::Event { op, args }) = serde_json::from_str(s(case, "line")) {
            let decoded = decode_notification(op, args);
            assert!(decoded.is_err(), "{}: {decoded:?}", s(case, "name"));
        }
        let answer = fuzzing::refusal(s(case, "line").as_bytes()).map(|line| {
            let line: Value = serde_json::from_str(&line).unwrap();
            json!({"id": line["id"], "kind": line["error"]["kind"]})
        });
        assert_eq!(
            answer.unwrap_or_default(),
            case["answer"],
            "{}",
            s(case, "name")
        );
    }
}

/// A line from Hermes as herald reads it, with the defaults it fills in written out;
/// `answers` names the question a response answers.
fn read(line: &str, answers: &Value) -> Value {
    match serde_json::from_str::<Line>(line).unwrap() {
        Line::Request { id, op, args } => {
            let (op, args) = match HermesRequest::decode(op, args).unwrap() {
                HermesRequest::Device { chat, request } => {
                    let mut request = serde_json::to_value(request).unwrap();
                    request["args"]["chat"] = json!(chat);
                    (request["op"].take(), request["args"].take())
                }
                HermesRequest::SetAuthorized {
                    platform,
                    user_id,
                    authorized,
                } => (
                    json!("set_authorized"),
                    json!({"platform": platform, "user_id": user_id, "authorized": authorized}),
                ),
                HermesRequest::Devices { platform } => {
                    (json!("devices"), json!({ "platform": platform }))
                }
            };
            json!({"type": "request", "id": id, "op": op, "args": args})
        }
        Line::Response {
            id,
            ok: true,
            result,
            ..
        } => {
            fn typed<T: serde::de::DeserializeOwned + Serialize>(result: Value) -> Value {
                serde_json::to_value(serde_json::from_value::<T>(result).unwrap()).unwrap()
            }
            let result = match answers.as_str().unwrap() {
                "is_authorized" => typed::<Authorized>(result),
                "pairing_code" => typed::<IssuedCode>(result),
                "pairings" => typed::<HermesPairings>(result),
                "approve_pairing" => typed::<ApprovedPairing>(result),
                "revoke_pairing" => typed::<RevokedPairing>(result),
                other => panic!("no question {other}"),
            };
            json!({"type": "response", "id": id, "ok": true, "result": result})
        }
        Line::Response {
            id,
            ok: false,
            error,
            ..
        } => {
            // As `Bridge::on_line` reads a failure that gives no reason.
            let error =
                error.unwrap_or_else(|| WireError::new(ErrorKind::Failed, "no reason given"));
            json!({"type": "response", "id": id, "ok": false, "error": error})
        }
        Line::Event { op, args } => {
            let (chat, notification) = decode_notification(op, args).unwrap();
            let mut news = serde_json::to_value(notification).unwrap();
            news["args"]["chat"] = json!(chat);
            json!({"type": "event", "op": news["op"], "args": news["args"]})
        }
    }
}

const GADGET: &str = "hg-0123456789abcdef";

fn gadget() -> Chat {
    Chat::gadget(GADGET)
}

fn profile() -> DeviceProfile {
    DeviceProfile {
        paired: true,
        screen: Some(Screen {
            width: Some(320),
            height: Some(240),
            text_cols: Some(25),
            text_rows: Some(8),
        }),
        charset: "ascii".into(),
        speaker_rate: Some(16_000),
        actions: vec![ActionSpec {
            name: "led.set".into(),
            description: "Set the status LED colour.".into(),
            params: json!({"type": "object", "properties": {"color": {"type": "string"}}}),
        }],
    }
}

/// An `inbound` event from the gadget, as message `m1`, with its profile when given.
fn from_gadget_with(body: InboundBody, profile: Option<DeviceProfile>) -> String {
    inbound(Inbound {
        source: Source {
            chat: gadget(),
            user_id: GADGET.into(),
            user_name: None,
        },
        message_id: "m1".into(),
        body,
        profile: profile.map(Box::new),
    })
}

fn from_gadget(body: InboundBody) -> String {
    from_gadget_with(body, None)
}

fn inbound(inbound: Inbound) -> String {
    let event = Event::Inbound(WireInbound::from(&inbound));
    OutLine::Event { event }.encode()
}

fn answer(choice: Choice) -> String {
    from_gadget(InboundBody::PromptAnswer(PromptAnswer {
        prompt_id: "p1".into(),
        choice,
    }))
}

fn ask(question: Question<'_>) -> String {
    OutLine::Request { id: 1, question }.encode()
}

fn result(response: Response) -> String {
    OutLine::answer(7, Ok(serde_json::to_value(response).unwrap())).encode()
}

fn error(error: impl Into<WireError>) -> String {
    OutLine::answer(7, Err(error.into())).encode()
}

type Build = fn() -> String;

/// Each line herald writes in `from_herald`, by case name.
fn written() -> Vec<(&'static str, Build)> {
    vec![
        ("ready", || {
            let ready = Ready {
                protocol: PROTOCOL,
                version: "0.1.0".into(),
                gadget_url: "ws://127.0.0.1:8765/gadget".into(),
                mobile_url: "ws://127.0.0.1:8766/mobile".into(),
                admin_url: "http://127.0.0.1:8767".into(),
            };
            OutLine::Event {
                event: Event::Ready(ready),
            }
            .encode()
        }),
        ("inbound text from a gadget, with its profile", || {
            let text = InboundBody::Text {
                text: "What time is it?".into(),
                reply_to: None,
            };
            from_gadget_with(text, Some(profile()))
        }),
        ("inbound text from a phone: a reply, its user named", || {
            inbound(Inbound {
                source: Source {
                    chat: Chat::mobile("tel-1"),
                    user_id: "a1ab41a28f3b2b8b".into(),
                    user_name: Some("Zoë".into()),
                },
                message_id: "m8".into(),
                body: InboundBody::Text {
                    text: "Grüße 👋 \"quoted\"".into(),
                    reply_to: Some("m7".into()),
                },
                profile: None,
            })
        }),
        ("inbound voice", || {
            from_gadget(InboundBody::Voice {
                path: "/home/u/.hermes/herald/media/m1.wav".into(),
                duration_ms: 1500,
                transcript: None,
            })
        }),
        ("inbound voice the device transcribed", || {
            from_gadget(InboundBody::Voice {
                path: "/home/u/.hermes/herald/media/m1.wav".into(),
                duration_ms: 900,
                transcript: Some("turn the light on".into()),
            })
        }),
        ("inbound image with its type and caption", || {
            from_gadget(InboundBody::Media {
                path: "/home/u/.hermes/herald/media/m1.jpg".into(),
                kind: MediaKind::Image,
                mime: Some("image/jpeg".into()),
                caption: Some("the view".into()),
            })
        }),
        ("inbound document without type or caption", || {
            from_gadget(InboundBody::Media {
                path: "/home/u/.hermes/herald/media/m1.bin".into(),
                kind: MediaKind::Document,
                mime: None,
                caption: None,
            })
        }),
        ("inbound command stop", || {
            from_gadget(InboundBody::Command(Command::Stop))
        }),
        ("inbound command new", || {
            from_gadget(InboundBody::Command(Command::New))
        }),
        ("prompt answer once", || answer(Choice::Once)),
        ("prompt answer session", || answer(Choice::Session)),
        ("prompt answer always", || answer(Choice::Always)),
        ("prompt answer deny", || answer(Choice::Deny)),
        ("prompt answer cancel", || answer(Choice::Cancel)),
        ("prompt answer: one option", || answer(Choice::Option(2))),
        ("prompt answer: several options", || {
            answer(Choice::Options(vec![0, 2]))
        }),
        ("prompt answer: every option turned down", || {
            answer(Choice::Options(Vec::new()))
        }),
        ("prompt answer in the user's words", || {
            answer(Choice::Other("blue".into()))
        }),
        ("speech stopped", || {
            from_gadget(InboundBody::SpeechStopped {
                speech_id: "5f3a9c0e12ab34cd".to_owned().try_into().unwrap(),
                reason: herald_port::SpeechStopReason::Interrupted,
            })
        }),
        ("turn timed out", || {
            from_gadget(InboundBody::TurnTimedOut {
                turn_id: "t-3f9c".to_owned().try_into().unwrap(),
            })
        }),
        ("is_authorized", || {
            ask(Question::IsAuthorized {
                platform: Platform::Gadget,
                user_id: GADGET,
            })
        }),
        ("pairing_code for a named user", || {
            ask(Question::PairingCode {
                platform: Platform::Mobile,
                user_id: "a1ab41a28f3b2b8b",
                user_name: Some("Zoë"),
            })
        }),
        ("pairing_code without a name", || {
            ask(Question::PairingCode {
                platform: Platform::Gadget,
                user_id: GADGET,
                user_name: None,
            })
        }),
        ("pairings", || {
            ask(Question::Pairings {
                platform: Platform::Gadget,
            })
        }),
        ("approve_pairing", || {
            ask(Question::ApprovePairing {
                platform: Platform::Gadget,
                code: "ABCD2345",
            })
        }),
        ("revoke_pairing", || {
            ask(Question::RevokePairing {
                platform: Platform::Gadget,
                user_id: GADGET,
            })
        }),
        ("result: a message id", || {
            result(Response::MessageId {
                message_id: "m2".into(),
            })
        }),
        ("result: a prompt id", || {
            result(Response::PromptId {
                prompt_id: "p1".into(),
            })
        }),
        ("result: an action's result", || {
            result(Response::ActionResult {
                result: json!({"color": "red", "ok": true}),
            })
        }),
        ("result: the actions", || {
            result(Response::Actions {
                actions: profile().actions,
            })
        }),
        ("result: a gadget's profile", || {
            result(Response::Profile { profile: profile() })
        }),
        ("result: a speech write dropped", || {
            result(Response::Dropped { dropped: true })
        }),
        ("result: done", || result(Response::Done {})),
        ("result: the devices", || {
            let devices: Vec<WireDevice> = [
                DeviceSummary {
                    chat: gadget(),
                    name: Some("Kitchen".into()),
                    online: true,
                    profile: Some(DeviceProfile {
                        screen: None,
                        speaker_rate: None,
                        actions: Vec::new(),
                        ..profile()
                    }),
                },
                DeviceSummary {
                    chat: Chat::mobile("tel-1"),
                    name: None,
                    online: false,
                    profile: None,
                },
            ]
            .into_iter()
            .map(WireDevice::from)
            .collect();
            OutLine::answer(7, Ok(json!({ "devices": devices }))).encode()
        }),
        ("error offline", || error(DeliveryError::Offline(gadget()))),
        ("error unknown_chat", || {
            error(DeliveryError::UnknownChat(Chat::mobile("tel-9")))
        }),
        ("error unsupported", || {
            error(DeliveryError::Unsupported {
                chat: Chat::mobile("tel-1"),
                reason: "a phone has no speaker stream".into(),
            })
        }),
        ("error unknown_message", || {
            error(DeliveryError::UnknownMessage("m9".into()))
        }),
        ("error failed", || {
            error(DeliveryError::Failed("the file cannot be read".into()))
        }),
        ("error unknown_action", || {
            error(ActionError::UnknownAction("fan.set".into()))
        }),
        ("error timeout", || error(ActionError::Timeout)),
        ("error disconnected", || error(ActionError::Disconnected)),
        ("error device", || {
            error(ActionError::Device("no such colour".into()))
        }),
        ("error an action's delivery", || {
            error(ActionError::Delivery(DeliveryError::Offline(gadget())))
        }),
        ("error bad_request", || {
            error(WireError::new(
                ErrorKind::BadRequest,
                "send_text: missing field `chat`",
            ))
        }),
        ("error unavailable", || {
            error(WireError::new(
                ErrorKind::Unavailable,
                "64 requests are already running",
            ))
        }),
    ]
}
