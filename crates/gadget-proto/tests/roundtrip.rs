//! Property tests: every message of both directions and every binary frame survives an
//! encode/decode round trip, and absent optional fields never appear as `null`.

use herald_gadget_proto::{
    decode_frame, device, encode_frame, server, ActionResult, ActionSpec, Answer, AudioCancel,
    AudioCaps, Auth, Caps, Channel, DeviceMessage, DisplayCaps, ErrorCode, Event, FrameHeader,
    Hello, ImageBox, OtaAck, OtaCaps, OtaDone, OtaError, OtaErrorCode, OtaReady, Outcome, Ping,
    Pong, PromptReply, ServerMessage, State, Text, Unknown, HEADER_LEN,
};
use proptest::collection::{btree_map, vec};
use proptest::option::of;
use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value};

fn text() -> impl Strategy<Value = String> {
    "(?s).{0,12}"
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    of(text())
}

/// JSON payloads without `null`, so any `null` in an encoding is a bug of the encoder.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::String),
        prop_oneof![Just(21.5), Just(-0.25), Just(1.0)].prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn map() -> impl Strategy<Value = Map<String, Value>> {
    btree_map(text(), value(), 0..4).prop_map(|m| m.into_iter().collect())
}

fn audio_caps() -> impl Strategy<Value = AudioCaps> {
    (any::<u32>(), text()).prop_map(|(rate, format)| AudioCaps { rate, format })
}

fn caps() -> impl Strategy<Value = Caps> {
    let image = (any::<u32>(), any::<u32>(), text()).prop_map(|(width, height, format)| ImageBox {
        width,
        height,
        format,
    });
    let display = (
        of(any::<u32>()),
        of(any::<u32>()),
        of(any::<bool>()),
        opt_text(),
        of(any::<u32>()),
        of(any::<u32>()),
        of(image),
    )
        .prop_map(
            |(width, height, color, charset, text_cols, text_rows, image)| DisplayCaps {
                width,
                height,
                color,
                charset,
                text_cols,
                text_rows,
                image,
            },
        );
    (
        of(display),
        of(audio_caps()),
        of(audio_caps()),
        vec(text(), 0..4),
        opt_text(),
        of(any::<u64>().prop_map(|max_size| OtaCaps { max_size })),
    )
        .prop_map(|(display, mic, speaker, inputs, talk_mode, ota)| Caps {
            display,
            mic,
            speaker,
            inputs,
            talk_mode,
            ota,
        })
}

fn hello() -> impl Strategy<Value = Hello> {
    let action =
        (text(), opt_text(), of(value())).prop_map(|(name, description, params)| ActionSpec {
            name,
            description,
            params,
        });
    (
        any::<u32>(),
        text(),
        (opt_text(), opt_text(), opt_text(), opt_text()),
        caps(),
        vec(action, 0..3),
        map(),
    )
        .prop_map(
            |(proto, device_id, (name, board, firmware, token), caps, actions, sensors)| Hello {
                proto,
                device_id,
                name,
                board,
                firmware,
                token,
                caps,
                actions,
                sensors,
            },
        )
}

fn ota_error_code() -> impl Strategy<Value = OtaErrorCode> {
    prop_oneof![
        proptest::sample::select(OtaErrorCode::KNOWN.to_vec()),
        text().prop_map(|s| OtaErrorCode::parse(&s)),
    ]
}

fn unknown_type(known: &'static [&'static str]) -> impl Strategy<Value = Unknown> {
    "[a-z_.]{1,16}"
        .prop_filter("must not be a known type", move |t| {
            !known.contains(&t.as_str())
        })
        .prop_map(|type_name| Unknown { type_name })
}

fn device_message() -> impl Strategy<Value = DeviceMessage> {
    use DeviceMessage as M;
    Union::new(vec![
        hello().prop_map(M::Hello).boxed(),
        (opt_text(), opt_text())
            .prop_map(|(key, mac)| M::Auth(Auth { key, mac }))
            .boxed(),
        (opt_text(), text())
            .prop_map(|(id, text)| M::Text(Text { id, text }))
            .boxed(),
        (opt_text(), any::<u8>(), any::<u32>(), text(), opt_text())
            .prop_map(|(id, stream, rate, format, mode)| {
                M::AudioStart(device::AudioStart {
                    id,
                    stream,
                    rate,
                    format,
                    mode,
                })
            })
            .boxed(),
        (opt_text(), any::<u8>(), of(any::<u64>()))
            .prop_map(|(id, stream, duration_ms)| {
                M::AudioEnd(device::AudioEnd {
                    id,
                    stream,
                    duration_ms,
                })
            })
            .boxed(),
        (opt_text(), any::<u8>(), opt_text())
            .prop_map(|(id, stream, reason)| M::AudioCancel(AudioCancel { id, stream, reason }))
            .boxed(),
        Just(M::Cancel(Default::default())).boxed(),
        Just(M::SessionNew(Default::default())).boxed(),
        (text(), prop_oneof![Just(Answer::Yes), Just(Answer::No)])
            .prop_map(|(id, answer)| M::PromptReply(PromptReply { id, answer }))
            .boxed(),
        (text(), any::<bool>(), of(value()), opt_text())
            .prop_map(|(id, ok, result, error)| {
                M::ActionResult(ActionResult {
                    id,
                    ok,
                    result,
                    error,
                })
            })
            .boxed(),
        map()
            .prop_map(|sensors| M::State(State { sensors }))
            .boxed(),
        (text(), of(value()), any::<bool>())
            .prop_map(|(name, data, notify)| M::Event(Event { name, data, notify }))
            .boxed(),
        of(any::<u64>()).prop_map(|ts| M::Ping(Ping { ts })).boxed(),
        of(any::<u64>()).prop_map(|ts| M::Pong(Pong { ts })).boxed(),
        text()
            .prop_map(|nonce| M::OtaReady(OtaReady { nonce }))
            .boxed(),
        any::<u64>()
            .prop_map(|offset| M::OtaAck(OtaAck { offset }))
            .boxed(),
        text()
            .prop_map(|version| M::OtaDone(OtaDone { version }))
            .boxed(),
        (ota_error_code(), opt_text())
            .prop_map(|(code, message)| M::OtaError(OtaError { code, message }))
            .boxed(),
        unknown_type(DeviceMessage::TYPES)
            .prop_map(M::Unknown)
            .boxed(),
    ])
}

fn server_message() -> impl Strategy<Value = ServerMessage> {
    use server::*;
    use ServerMessage as M;
    let error_code = proptest::sample::select(ErrorCode::ALL.to_vec());
    let outcome = prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Failure),
        Just(Outcome::Cancelled)
    ];
    Union::new(vec![
        (text(), any::<bool>())
            .prop_map(|(nonce, enrolled)| M::Challenge(Challenge { nonce, enrolled }))
            .boxed(),
        (text(), any::<bool>(), any::<u32>(), text(), any::<u32>())
            .prop_map(|(session, paired, heartbeat_s, server, proto)| {
                M::Welcome(Welcome {
                    session,
                    paired,
                    heartbeat_s,
                    server,
                    proto,
                })
            })
            .boxed(),
        (text(), text())
            .prop_map(|(code, command)| M::Pairing(Pairing { code, command }))
            .boxed(),
        Just(M::Paired(Paired {})).boxed(),
        Just(M::Unpaired(Unpaired {})).boxed(),
        text()
            .prop_map(|turn| M::TurnStart(TurnStart { turn }))
            .boxed(),
        text()
            .prop_map(|text| M::Transcript(Transcript { text }))
            .boxed(),
        text().prop_map(|text| M::Status(Status { text })).boxed(),
        (text(), text())
            .prop_map(|(turn, text)| M::ReplyDelta(ReplyDelta { turn, text }))
            .boxed(),
        (opt_text(), text(), any::<bool>())
            .prop_map(|(turn, text, interim)| {
                M::Reply(Reply {
                    turn,
                    text,
                    interim,
                })
            })
            .boxed(),
        (text(), outcome)
            .prop_map(|(turn, outcome)| M::TurnEnd(TurnEnd { turn, outcome }))
            .boxed(),
        (text(), of(any::<u32>()))
            .prop_map(|(text, ttl_s)| M::Notice(Notice { text, ttl_s }))
            .boxed(),
        (text(), text(), text(), of(any::<u32>()))
            .prop_map(|(id, title, text, ttl_s)| {
                M::Prompt(Prompt {
                    id,
                    title,
                    text,
                    ttl_s,
                })
            })
            .boxed(),
        text()
            .prop_map(|id| M::PromptClose(PromptClose { id }))
            .boxed(),
        (error_code, text())
            .prop_map(|(code, message)| M::Error(Error { code, message }))
            .boxed(),
        (text(), text(), of(any::<u32>()))
            .prop_map(|(title, body, ttl_s)| M::Display(Display { title, body, ttl_s }))
            .boxed(),
        (
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            text(),
            of(any::<u32>()),
        )
            .prop_map(|(stream, width, height, format, ttl_s)| {
                M::ImageStart(ImageStart {
                    stream,
                    width,
                    height,
                    format,
                    ttl_s,
                })
            })
            .boxed(),
        any::<u8>()
            .prop_map(|stream| M::ImageEnd(ImageEnd { stream }))
            .boxed(),
        (any::<u8>(), any::<u32>(), text(), opt_text())
            .prop_map(|(stream, rate, format, turn)| {
                M::AudioStart(server::AudioStart {
                    stream,
                    rate,
                    format,
                    turn,
                })
            })
            .boxed(),
        any::<u8>()
            .prop_map(|stream| M::AudioEnd(server::AudioEnd { stream }))
            .boxed(),
        any::<u8>()
            .prop_map(|stream| M::AudioAbort(AudioAbort { stream }))
            .boxed(),
        (text(), text(), value())
            .prop_map(|(id, name, args)| M::Action(Action { id, name, args }))
            .boxed(),
        (any::<u8>(), any::<u64>(), text(), text())
            .prop_map(|(stream, size, sha256, version)| {
                M::OtaOffer(OtaOffer {
                    stream,
                    size,
                    sha256,
                    version,
                })
            })
            .boxed(),
        text().prop_map(|mac| M::OtaBegin(OtaBegin { mac })).boxed(),
        Just(M::OtaEnd(OtaEnd {})).boxed(),
        Just(M::OtaAbort(OtaAbort {})).boxed(),
        of(any::<u64>()).prop_map(|ts| M::Ping(Ping { ts })).boxed(),
        of(any::<u64>()).prop_map(|ts| M::Pong(Pong { ts })).boxed(),
        unknown_type(ServerMessage::TYPES)
            .prop_map(M::Unknown)
            .boxed(),
    ])
}

fn assert_no_null(v: &Value, path: &str) {
    match v {
        Value::Null => panic!("null at {path}"),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                assert_no_null(item, &format!("{path}[{i}]"));
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                assert_no_null(item, &format!("{path}.{k}"));
            }
        }
        _ => {}
    }
}

fn frame_header() -> impl Strategy<Value = FrameHeader> {
    (
        prop_oneof![
            Just(Channel::Audio),
            Just(Channel::Image),
            Just(Channel::Firmware)
        ],
        any::<u8>(),
        any::<u16>(),
    )
        .prop_map(|(channel, stream, seq)| FrameHeader {
            channel,
            stream,
            seq,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn device_messages_round_trip(msg in device_message()) {
        let text = msg.encode();
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_no_null(&json, "$");
        prop_assert_eq!(&json["type"], msg.type_name());
        prop_assert_eq!(DeviceMessage::decode(&text), Ok(msg));
    }

    #[test]
    fn server_messages_round_trip(msg in server_message()) {
        let text = msg.encode();
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_no_null(&json, "$");
        prop_assert_eq!(&json["type"], msg.type_name());
        prop_assert_eq!(ServerMessage::decode(&text), Ok(msg));
    }

    #[test]
    fn frames_round_trip(header in frame_header(), payload in vec(any::<u8>(), 0..64)) {
        let bytes = encode_frame(header, &payload);
        prop_assert_eq!(bytes.len(), HEADER_LEN + payload.len());
        prop_assert_eq!(&bytes[..HEADER_LEN], &header.encode()[..]);
        let (h, p) = decode_frame(&bytes).unwrap();
        prop_assert_eq!(h, header);
        prop_assert_eq!(p, &payload[..]);
    }

    #[test]
    fn any_decoded_frame_re_encodes_to_its_bytes(bytes in vec(any::<u8>(), 0..12)) {
        if let Ok((h, p)) = decode_frame(&bytes) {
            prop_assert_eq!(encode_frame(h, p), bytes);
        }
    }

    #[test]
    fn decoders_never_panic(text in "(?s).{0,64}") {
        let _ = DeviceMessage::decode(&text);
        let _ = ServerMessage::decode(&text);
    }

    #[test]
    fn decoders_never_panic_on_tagged_objects(
        t in proptest::sample::select(
            [DeviceMessage::TYPES, ServerMessage::TYPES].concat()
        ),
        fields in map(),
    ) {
        let mut obj = fields;
        obj.insert("type".into(), Value::from(t));
        let text = serde_json::to_string(&obj).unwrap();
        let _ = DeviceMessage::decode(&text);
        let _ = ServerMessage::decode(&text);
    }
}
