//! Checks every case of the shared vectors file, which the TypeScript SDK and the Python
//! plugin check too: if this passes, all sides agree on the wire.

use herald_mobile_proto::{
    limits, session_key, user_id_for_token, ClientFrame, ErrorCode, PromptAnswer, PromptCard,
    PromptKind, ServerFrame, TokenError, TokenSet,
};
use herald_test_support::vectors::{self, cases, s};
use serde_json::Value;

fn kind(name: &str) -> PromptKind {
    serde_json::from_value(Value::String(name.into())).unwrap()
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn has_a_description() {
    assert!(!s(&vectors::mobile(), "description").is_empty());
}

#[test]
fn client_frames() {
    let v = vectors::mobile();
    let mut seen = std::collections::BTreeSet::new();
    for case in cases(&v, "client_frames") {
        let name = s(case, "name");
        let frame = ClientFrame::decode(s(case, "wire")).unwrap_or_else(|e| panic!("{name}: {e}"));
        seen.insert(frame.t());
        let encoded = frame.encode();
        assert_eq!(parse(&encoded), case["canonical"], "{name}");
        let again = ClientFrame::decode(&case["canonical"].to_string()).unwrap();
        assert_eq!(again, frame, "{name}");
    }
    let all = [
        "hello", "text", "audio", "media", "prompt", "deliver", "ping",
    ];
    assert_eq!(
        seen,
        all.into_iter().collect(),
        "every client frame has a vector"
    );
}

#[test]
fn server_frames() {
    let v = vectors::mobile();
    let mut seen = std::collections::BTreeSet::new();
    for case in cases(&v, "server_frames") {
        let name = s(case, "name");
        let frame = ServerFrame::decode(s(case, "wire")).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!matches!(frame, ServerFrame::Unknown { .. }), "{name}");
        seen.insert(frame.t().to_owned());
        assert_eq!(parse(&frame.encode()), case["canonical"], "{name}");
        let again = ServerFrame::decode(&case["canonical"].to_string()).unwrap();
        assert_eq!(again, frame, "{name}");
    }
    let all = [
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
    let all: std::collections::BTreeSet<String> = all.into_iter().map(String::from).collect();
    assert_eq!(seen, all, "every server frame has a vector");
}

#[test]
fn server_frames_cover_every_error_code() {
    let v = vectors::mobile();
    let names: Vec<&str> = v["error_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let ours: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(names, ours);
    for code in ErrorCode::ALL {
        assert!(
            cases(&v, "server_frames")
                .iter()
                .any(|c| c["canonical"]["t"] == "error" && c["canonical"]["code"] == code.as_str()),
            "{code}"
        );
    }
}

#[test]
fn client_errors() {
    let v = vectors::mobile();
    for case in cases(&v, "client_errors") {
        let name = s(case, "name");
        let err = ClientFrame::decode(s(case, "wire"))
            .err()
            .unwrap_or_else(|| panic!("{name}: decoded"));
        assert_eq!(err.code().as_str(), s(case, "code"), "{name}: {err}");
    }
}

#[test]
fn server_tolerated_and_ignored() {
    let v = vectors::mobile();
    for case in cases(&v, "server_tolerated") {
        let name = s(case, "name");
        let frame = ServerFrame::decode(s(case, "wire")).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!matches!(frame, ServerFrame::Unknown { .. }), "{name}");
    }
    for case in cases(&v, "server_ignored") {
        let name = s(case, "name");
        let frame = ServerFrame::decode(s(case, "wire")).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(matches!(frame, ServerFrame::Unknown { .. }), "{name}");
    }
}

#[test]
fn server_errors() {
    let v = vectors::mobile();
    for case in cases(&v, "server_errors") {
        let name = s(case, "name");
        let err = ServerFrame::decode(s(case, "wire"))
            .err()
            .unwrap_or_else(|| panic!("{name}: decoded"));
        assert_eq!(err.code().as_str(), s(case, "code"), "{name}");
    }
}

#[test]
fn user_ids_and_session_keys() {
    let v = vectors::mobile();
    for case in cases(&v, "user_ids") {
        assert_eq!(user_id_for_token(s(case, "token")), s(case, "user_id"));
    }
    for case in cases(&v, "session_keys") {
        assert_eq!(session_key(s(case, "device_id")), s(case, "session"));
    }
}

#[test]
fn token_sets() {
    let v = vectors::mobile();
    for case in cases(&v, "token_sets") {
        let name = s(case, "name");
        let parsed = TokenSet::parse(case["primary"].as_str(), case["extra"].as_str());
        if let Some(want) = case["error"].as_str() {
            let got = match parsed {
                Err(TokenError::EmptyLabel { .. }) => "empty_label",
                Err(TokenError::EmptyToken { .. }) => "empty_token",
                Err(TokenError::DuplicateToken { .. }) => "duplicate_token",
                Ok(_) => "ok",
            };
            assert_eq!(got, want, "{name}");
            continue;
        }
        let set = parsed.unwrap_or_else(|e| panic!("{name}: {e}"));
        for check in case["authenticate"].as_array().unwrap() {
            assert_eq!(
                set.authenticate(s(check, "token")),
                check["user_id"].as_str(),
                "{name}: {check}"
            );
        }
    }
}

#[test]
fn prompt_options_and_safe_choices() {
    let v = vectors::mobile();
    for case in cases(&v, "prompt_options") {
        let choices: Vec<String> = serde_json::from_value(case["choices"].clone()).unwrap();
        let options = kind(s(case, "kind")).options(&choices);
        assert_eq!(
            serde_json::to_value(&options).unwrap(),
            case["options"],
            "{case}"
        );
    }
    for case in cases(&v, "safe_choices") {
        assert_eq!(kind(s(case, "kind")).safe_choice(), s(case, "safe"));
    }
}

#[test]
fn prompt_resolve() {
    let v = vectors::mobile();
    for case in cases(&v, "prompt_resolve") {
        let count = case["choice_count"].as_u64().unwrap() as usize;
        let got = kind(s(case, "kind")).resolve(case["option_id"].as_str(), count);
        assert_eq!(got, s(case, "resolved"), "{case}");
    }
}

#[test]
fn card_answers() {
    let v = vectors::mobile();
    for case in cases(&v, "card_answers") {
        let name = s(case, "name");
        let kind = kind(s(case, "kind"));
        let choices: Vec<String> = serde_json::from_value(case["choices"].clone()).unwrap();
        let card = PromptCard {
            id: "p1".into(),
            kind,
            text: "?".into(),
            options: kind.options(&choices),
            session: "mobile:tel-1".into(),
            timeout_seconds: limits::PROMPT_TIMEOUT_SECS,
            command: None,
            description: None,
        };
        let answer = PromptAnswer {
            prompt_id: "p1".into(),
            option_id: case["answer"]["option_id"].as_str().map(String::from),
            text: case["answer"]["text"].as_str().map(String::from),
        };
        let got = card.resolve(&answer);
        assert_eq!(got.option_id, s(case, "option_id"), "{name}");
        assert_eq!(got.response, case["response"].as_str(), "{name}");
    }
}

#[test]
fn limits_match() {
    let v = vectors::mobile();
    let l = &v["limits"];
    let want: [(&str, u64); 15] = [
        ("MAX_FRAME_BYTES", limits::MAX_FRAME_BYTES as u64),
        ("MAX_MEDIA_BYTES", limits::MAX_MEDIA_BYTES as u64),
        ("MEDIA_CHUNK_BYTES", limits::MEDIA_CHUNK_BYTES as u64),
        ("MAX_PARTS", limits::MAX_PARTS.into()),
        ("MIN_CHUNK_BYTES", limits::MIN_CHUNK_BYTES as u64),
        ("MAX_OPEN_UPLOADS", limits::MAX_OPEN_UPLOADS as u64),
        ("DEDUP_IDS", limits::DEDUP_IDS as u64),
        ("DEDUP_TTL_SECS", limits::DEDUP_TTL_SECS),
        ("OUTBOX_FRAMES", limits::OUTBOX_FRAMES as u64),
        ("OUTBOX_BYTES", limits::OUTBOX_BYTES as u64),
        ("OUTBOX_TTL_SECS", limits::OUTBOX_TTL_SECS),
        ("PROMPT_TIMEOUT_SECS", limits::PROMPT_TIMEOUT_SECS.into()),
        ("MAX_DEPTH", limits::MAX_DEPTH as u64),
        ("MAX_ID_BYTES", limits::MAX_ID_BYTES as u64),
        ("MAX_MESSAGE_CHARS", limits::MAX_MESSAGE_CHARS.into()),
    ];
    assert_eq!(l.as_object().unwrap().len(), want.len());
    for (name, value) in want {
        assert_eq!(l[name].as_u64(), Some(value), "{name}");
    }
}
