//! Property tests: every frame survives encode → decode unchanged, never writes `null`,
//! tolerates fields it does not know, and arbitrary text never makes a decoder panic.

use herald_mobile_proto::{
    limits, Audio, AvatarState, Capabilities, Chunk, ClientFrame, Deliver, DeliverMedia,
    DeviceInfo, ErrorCode, Hello, MediaDown, MediaKind, MediaKindDown, MediaUp, Message,
    OptionStyle, PromptAnswer, PromptCard, PromptKind, PromptOption, PushCapability, PushKeys,
    PushSubscription, ServerFrame, Text, Visibility,
};
use proptest::option::of;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;

/// Ids the server accepts: 1..=40 chars without control characters (at most 160 bytes).
fn id() -> impl Strategy<Value = String> {
    "[^\\p{Cc}]{1,40}"
}

fn text() -> impl Strategy<Value = String> {
    any::<String>()
}

fn media_kind() -> impl Strategy<Value = MediaKind> {
    select(vec![
        MediaKind::Image,
        MediaKind::Video,
        MediaKind::Document,
        MediaKind::Audio,
    ])
}

/// Kinds a `deliver` may carry (everything but `Unknown`).
fn known_kind_down() -> impl Strategy<Value = MediaKindDown> {
    select(vec![
        MediaKindDown::Image,
        MediaKindDown::Voice,
        MediaKindDown::Video,
        MediaKindDown::Document,
        MediaKindDown::Animation,
    ])
}

fn kind_down() -> impl Strategy<Value = MediaKindDown> {
    prop_oneof![known_kind_down(), Just(MediaKindDown::Unknown)]
}

fn prompt_kind() -> impl Strategy<Value = PromptKind> {
    select(vec![
        PromptKind::ExecApproval,
        PromptKind::Confirm,
        PromptKind::Clarify,
        PromptKind::Unknown,
    ])
}

fn deliver_media() -> impl Strategy<Value = DeliverMedia> {
    (
        known_kind_down(),
        of(text()),
        of(text()),
        of(text()),
        text(),
    )
        .prop_map(|(kind, mime, filename, caption, data)| DeliverMedia {
            kind,
            mime,
            filename,
            caption,
            data,
        })
}

fn client_frame() -> impl Strategy<Value = ClientFrame> {
    let hello =
        (of(text()), id(), of(text()), of(text())).prop_map(|(token, id, name, platform)| {
            ClientFrame::Hello(Hello {
                token,
                device: DeviceInfo { id, name, platform },
            })
        });
    let text_frame = (id(), text(), of(id()))
        .prop_map(|(id, text, reply_to)| ClientFrame::Text(Text { id, text, reply_to }));
    let audio = (id(), text(), text(), of(text())).prop_map(|(id, format, data, text)| {
        ClientFrame::Audio(Audio {
            id,
            format,
            data,
            text,
        })
    });
    let parts = (1..=limits::MAX_PARTS).prop_flat_map(|parts| (0..parts, Just(parts)));
    let media = (
        id(),
        media_kind(),
        of(text()),
        of(text()),
        of(text()),
        text(),
        parts,
    )
        .prop_map(|(id, kind, mime, filename, caption, data, (part, parts))| {
            // Every chunk but the last must carry at least MIN_CHUNK_BYTES.
            let data = if part + 1 < parts {
                format!("{}{data}", "A".repeat(limits::MIN_CHUNK_BYTES / 3 * 4 + 4))
            } else {
                data
            };
            ClientFrame::Media(MediaUp {
                id,
                kind,
                mime,
                filename,
                caption,
                data,
                part,
                parts,
            })
        });
    let prompt = (id(), of(text()), of(text())).prop_map(|(prompt_id, option_id, text)| {
        ClientFrame::Prompt(PromptAnswer {
            prompt_id,
            option_id,
            text,
        })
    });
    let deliver = (
        id(),
        of(text()),
        prop::collection::vec(deliver_media(), 0..3),
    )
        .prop_map(|(to, text, media)| {
            // Something must be delivered.
            let text = if text.is_none() && media.is_empty() {
                Some(String::new())
            } else {
                text
            };
            ClientFrame::Deliver(Deliver { to, text, media })
        });
    let subscribe = (
        "[a-z0-9./:-]{1,200}",
        "[A-Za-z0-9_-]{1,90}",
        "[A-Za-z0-9_-]{1,30}",
    )
        .prop_map(|(endpoint, p256dh, auth)| {
            ClientFrame::PushSubscribe(PushSubscription {
                endpoint,
                keys: PushKeys { p256dh, auth },
            })
        });
    let visibility =
        any::<bool>().prop_map(|visible| ClientFrame::Visibility(Visibility { visible }));
    prop_oneof![
        hello,
        text_frame,
        audio,
        media,
        prompt,
        deliver,
        Just(ClientFrame::Ping),
        subscribe,
        Just(ClientFrame::PushUnsubscribe),
        visibility,
    ]
}

fn capabilities() -> impl Strategy<Value = Capabilities> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(prompt_kind(), 0..5),
        prop::option::of("[A-Za-z0-9_-]{1,90}"),
    )
        .prop_map(
            |(
                max_media_bytes,
                max_frame_bytes,
                media_chunk_bytes,
                max_message_chars,
                streaming,
                voice,
                prompts,
                vapid_key,
            )| Capabilities {
                max_media_bytes,
                max_frame_bytes,
                media_chunk_bytes,
                max_message_chars,
                streaming,
                voice,
                prompts,
                push: vapid_key.map(|vapid_key| PushCapability { vapid_key }),
            },
        )
}

fn prompt_option() -> impl Strategy<Value = PromptOption> {
    let style = select(vec![
        OptionStyle::Plain,
        OptionStyle::Primary,
        OptionStyle::Danger,
    ]);
    (text(), text(), style).prop_map(|(id, label, style)| PromptOption { id, label, style })
}

/// Frame types the server knows; `Unknown` must never carry one of these.
const KNOWN_SERVER_TAGS: [&str; 9] = [
    "ready",
    "message",
    "typing",
    "avatar",
    "prompt",
    "prompt_done",
    "media",
    "error",
    "pong",
];

fn server_frame() -> impl Strategy<Value = ServerFrame> {
    let ready =
        (text(), of(text()), capabilities()).prop_map(|(session, avatar_url, capabilities)| {
            ServerFrame::Ready {
                session,
                avatar_url,
                capabilities,
            }
        });
    let chunk = (any::<u32>(), any::<u32>()).prop_map(|(index, total)| Chunk { index, total });
    let message = (
        text(),
        text(),
        of(chunk),
        any::<bool>(),
        any::<bool>(),
        of(text()),
    )
        .prop_map(|(id, text, chunk, final_, edit, reply_to)| {
            ServerFrame::Message(Message {
                id,
                text,
                chunk,
                final_,
                edit,
                reply_to,
            })
        });
    let typing = any::<bool>().prop_map(|stop| ServerFrame::Typing { stop });
    let avatar = select(vec![
        AvatarState::Idle,
        AvatarState::Thinking,
        AvatarState::Speaking,
    ])
    .prop_map(|state| ServerFrame::Avatar { state });
    let prompt = (
        text(),
        prompt_kind(),
        text(),
        prop::collection::vec(prompt_option(), 0..6),
        text(),
        any::<u32>(),
        of(text()),
        of(text()),
    )
        .prop_map(
            |(id, kind, text, options, session, timeout_seconds, command, description)| {
                ServerFrame::Prompt(PromptCard {
                    id,
                    kind,
                    text,
                    options,
                    session,
                    timeout_seconds,
                    command,
                    description,
                })
            },
        );
    let done = (text(), of(text()), any::<bool>()).prop_map(|(prompt_id, option_id, expired)| {
        ServerFrame::PromptDone {
            prompt_id,
            option_id,
            expired,
        }
    });
    let media = (
        (text(), kind_down(), text(), of(text()), of(text())),
        (
            any::<u32>(),
            any::<u32>(),
            any::<bool>(),
            any::<u64>(),
            of(text()),
            of(text()),
        ),
    )
        .prop_map(
            |((id, kind, mime, filename, caption), (part, parts, final_, size, data, url))| {
                ServerFrame::Media(MediaDown {
                    id,
                    kind,
                    mime,
                    filename,
                    caption,
                    part,
                    parts,
                    final_,
                    size,
                    data,
                    url,
                })
            },
        );
    let error = (select(ErrorCode::ALL.to_vec()), text())
        .prop_map(|(code, message)| ServerFrame::Error { code, message });
    let unknown = "[a-z_]{1,12}"
        .prop_filter("not a known frame type", |t| {
            !KNOWN_SERVER_TAGS.contains(&t.as_str())
        })
        .prop_map(|t| ServerFrame::Unknown { t });
    prop_oneof![
        ready,
        message,
        typing,
        avatar,
        prompt,
        done,
        media,
        error,
        Just(ServerFrame::Pong),
        Just(ServerFrame::PushSubscribed),
        Just(ServerFrame::PushUnsubscribed),
        unknown
    ]
}

fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.iter().any(has_null),
        Value::Object(o) => o.values().any(has_null),
        _ => false,
    }
}

/// Adds a field no version of the protocol has.
fn with_extra_field(encoded: &str, extra: Value) -> String {
    let mut v: Value = serde_json::from_str(encoded).unwrap();
    v.as_object_mut()
        .unwrap()
        .insert("zz_future_field".into(), extra);
    v.to_string()
}

fn small_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn client_frames_round_trip(frame in client_frame()) {
        let encoded = frame.encode();
        let value: Value = serde_json::from_str(&encoded).unwrap();
        prop_assert!(!has_null(&value), "{encoded}");
        prop_assert_eq!(value["t"].as_str(), Some(frame.t()));
        prop_assert_eq!(ClientFrame::decode(&encoded), Ok(frame));
    }

    #[test]
    fn server_frames_round_trip(frame in server_frame()) {
        let encoded = frame.encode();
        let value: Value = serde_json::from_str(&encoded).unwrap();
        prop_assert!(!has_null(&value), "{encoded}");
        prop_assert_eq!(value["t"].as_str(), Some(frame.t()));
        prop_assert_eq!(ServerFrame::decode(&encoded), Ok(frame));
    }

    #[test]
    fn unknown_fields_are_ignored(
        client in client_frame(),
        server in server_frame(),
        extra in small_json(),
    ) {
        let c = with_extra_field(&client.encode(), extra.clone());
        prop_assert_eq!(ClientFrame::decode(&c), Ok(client));
        let s = with_extra_field(&server.encode(), extra);
        prop_assert_eq!(ServerFrame::decode(&s), Ok(server));
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = ClientFrame::decode(&text);
        let _ = ServerFrame::decode(&text);
    }

    #[test]
    fn arbitrary_json_never_panics(value in small_json(), t in select(vec![
        "hello", "text", "audio", "media", "prompt", "deliver", "ping", "ready", "message",
        "typing", "avatar", "prompt_done", "error", "pong", "x",
    ])) {
        let _ = ClientFrame::decode(&value.to_string());
        let mut obj = serde_json::Map::new();
        obj.insert("t".into(), Value::from(t));
        obj.insert("id".into(), value.clone());
        obj.insert("data".into(), value);
        let text = Value::Object(obj).to_string();
        if let Err(e) = ClientFrame::decode(&text) {
            prop_assert!(matches!(e.code(), ErrorCode::BadFrame | ErrorCode::UnsupportedFrame));
        }
        let _ = ServerFrame::decode(&text);
    }

    #[test]
    fn truncated_frames_are_bad_frames(frame in client_frame(), cut in any::<prop::sample::Index>()) {
        let encoded = frame.encode();
        let at = cut.index(encoded.len());
        if let Some(prefix) = encoded.get(..at) {
            // A strict prefix of one object is never a complete JSON value.
            let err = ClientFrame::decode(prefix).unwrap_err();
            prop_assert_eq!(err.code(), ErrorCode::BadFrame);
        }
    }
}
