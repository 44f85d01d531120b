//! The mobile protocol's text frames, both ways, and the base64 payloads they carry.

use herald_mobile_proto::limits::{MAX_DEPTH, MAX_FRAME_BYTES};
use herald_mobile_proto::{
    base64_decoded_len, decode_base64, encode_base64, ClientFrame, PromptAnswer, PromptCard,
    PromptKind, ServerFrame,
};
use serde_json::Value;

use crate::json::{bounded_error, depth_scan_is_sound, same};

/// One text frame, decoded as the server decodes a phone's frames and as a client decodes
/// the server's. Whatever decodes must encode and decode back to itself; whatever does
/// not must give an `error` frame a client can read.
pub fn mobile_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    depth_scan_is_sound(text, MAX_DEPTH);

    match ClientFrame::decode(text) {
        Ok(frame) => {
            let encoded = frame.encode();
            if encoded.len() <= MAX_FRAME_BYTES {
                let back = ClientFrame::decode(&encoded)
                    .unwrap_or_else(|e| panic!("{frame:?} encodes as {encoded}: {e}"));
                assert_same(&frame, &back);
            }
            client_frame_checks(&frame);
        }
        Err(err) => {
            bounded_error("ClientFrame::decode", &err);
            // The server answers with this frame; the phone must be able to read it.
            let reply = ServerFrame::from(&err);
            let back = ServerFrame::decode(&reply.encode());
            assert_eq!(back.as_ref(), Ok(&reply));
        }
    }
    match ServerFrame::decode(text) {
        Ok(frame) => {
            let encoded = frame.encode();
            if encoded.len() <= MAX_FRAME_BYTES {
                let back = ServerFrame::decode(&encoded)
                    .unwrap_or_else(|e| panic!("{frame:?} encodes as {encoded}: {e}"));
                assert_same(&frame, &back);
            }
        }
        Err(err) => bounded_error("ServerFrame::decode", &err),
    }
}

fn assert_same<T: serde::Serialize>(a: &T, b: &T) {
    let (a, b) = (to_value(a), to_value(b));
    assert!(same(&a, &b), "{a} came back as {b}");
}

fn to_value(frame: &impl serde::Serialize) -> Value {
    serde_json::to_value(frame).unwrap_or(Value::Null)
}

/// What the server does next with the fields of a decoded frame.
fn client_frame_checks(frame: &ClientFrame) {
    match frame {
        ClientFrame::Audio(a) => base64_checks(&a.data),
        ClientFrame::Media(m) => base64_checks(&m.data),
        ClientFrame::Deliver(d) => d.media.iter().for_each(|m| base64_checks(&m.data)),
        ClientFrame::Prompt(answer) => prompt_checks(answer),
        _ => {}
    }
}

/// Size checks run on `base64_decoded_len` before decoding, so it must never be low.
fn base64_checks(data: &str) {
    match decode_base64(data) {
        Ok(bytes) => {
            let estimate = base64_decoded_len(data);
            assert!(
                bytes.len() <= estimate,
                "{data:?}: {} > {estimate}",
                bytes.len()
            );
            if !data.bytes().any(|b| b.is_ascii_whitespace()) {
                assert_eq!(bytes.len(), estimate, "{data:?}");
            }
            assert_eq!(decode_base64(&encode_base64(&bytes)), Ok(bytes));
        }
        Err(err) => bounded_error("decode_base64", &err),
    }
}

/// Whatever a phone answers, the choice that counts is on the card or the safe one.
fn prompt_checks(answer: &PromptAnswer) {
    let choices = ["CSV".to_owned(), "JSON".to_owned()];
    for kind in [
        PromptKind::ExecApproval,
        PromptKind::Confirm,
        PromptKind::Clarify,
        PromptKind::Unknown,
    ] {
        let card = PromptCard {
            id: answer.prompt_id.clone(),
            kind,
            text: "?".into(),
            options: kind.options(&choices),
            session: "mobile:fuzz".into(),
            timeout_seconds: 60,
            command: None,
            description: None,
        };
        let resolution = card.resolve(answer);
        let safe = resolution.option_id == kind.safe_choice();
        assert!(safe || kind.is_valid_option(resolution.option_id, choices.len()));
        assert!(safe || card.options.iter().any(|o| o.id == resolution.option_id));
        if safe {
            assert_eq!(resolution.response, None);
        }
    }
}
