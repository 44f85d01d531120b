//! The shared first steps of decoding a text frame, for both directions.
//!
//! Decoding runs in three passes over the text, each cheap and each with one job:
//! 1. a byte scan that rejects nesting deeper than [`MAX_DEPTH`] before any parser recurses;
//! 2. a probe that checks the text is one JSON object and finds its `t`, skipping every
//!    other value without building it;
//! 3. a typed parse of the body chosen by `t`.
//!
//! Splitting 2 from 3 is what lets the caller tell "not a frame at all" (`bad_frame`) from
//! "a frame of a type I do not know" (`unsupported_frame` on the server, ignored on a
//! client) without serde's internally tagged enums, which buffer the whole frame (base64
//! payload included) into an intermediate tree and blur those cases into one error string.

use herald_json_depth::probe::{probe, Shape};
use serde::de::Deserialize;

use crate::error::DecodeError;
use crate::limits::{MAX_DEPTH, MAX_FRAME_BYTES};

/// Runs passes 1 and 2: returns the frame's `t`.
pub(crate) fn frame_tag(text: &str) -> Result<String, DecodeError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooBig { len: text.len() });
    }
    check_depth(text)?;
    let shape = probe(text, "t").map_err(|e| DecodeError::NotJson(e.to_string()))?;
    match shape {
        Shape::NotObject => Err(DecodeError::NotObject),
        Shape::Object { tag: None, .. } => Err(DecodeError::MissingT),
        Shape::Object {
            tag: Some(t),
            duplicate: true,
        } => Err(DecodeError::malformed(&t, "duplicate field `t`")),
        Shape::Object { tag: Some(t), .. } => Ok(t),
    }
}

/// Pass 3: the typed body of a frame whose `t` is known. `t` itself is an unknown field to
/// the body type and is skipped like any other.
pub(crate) fn body<'a, T: Deserialize<'a>>(frame: &str, text: &'a str) -> Result<T, DecodeError> {
    serde_json::from_str(text).map_err(|e| DecodeError::malformed(frame, e.to_string()))
}

fn check_depth(text: &str) -> Result<(), DecodeError> {
    herald_json_depth::check(text.as_bytes(), MAX_DEPTH).map_err(|_| DecodeError::TooDeep)
}

pub(crate) use herald_json_depth::probe::shortened;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_limit_is_exact() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(check_depth(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(check_depth(&deep), Err(DecodeError::TooDeep));
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let s = format!(
            r#"{{"t":"x","a":"{}\"{}"}}"#,
            "[".repeat(100),
            "{".repeat(100)
        );
        assert!(check_depth(&s).is_ok());
    }

    #[test]
    fn unclosed_deep_text_is_too_deep_not_a_parser_stack_overflow() {
        let s = "[".repeat(100_000);
        assert_eq!(frame_tag(&s), Err(DecodeError::TooDeep));
    }

    #[test]
    fn probe_classifies() {
        assert!(matches!(frame_tag(""), Err(DecodeError::NotJson(_))));
        assert!(matches!(frame_tag("{"), Err(DecodeError::NotJson(_))));
        assert!(matches!(frame_tag("{} x"), Err(DecodeError::NotJson(_))));
        assert_eq!(frame_tag("[1,2]"), Err(DecodeError::NotObject));
        assert_eq!(frame_tag("\"t\""), Err(DecodeError::NotObject));
        assert_eq!(frame_tag("null"), Err(DecodeError::NotObject));
        assert_eq!(frame_tag("{}"), Err(DecodeError::MissingT));
        assert_eq!(frame_tag(r#"{"t":1}"#), Err(DecodeError::MissingT));
        assert_eq!(frame_tag(r#"{"t":null}"#), Err(DecodeError::MissingT));
        assert_eq!(frame_tag(r#"{"t":["ping"]}"#), Err(DecodeError::MissingT));
        assert_eq!(
            frame_tag(r#"{"a":{"t":"x"},"t":"ping"}"#),
            Ok("ping".into())
        );
        assert_eq!(frame_tag(r#"{"\u0074":"ping"}"#), Ok("ping".into()));
        assert!(matches!(
            frame_tag(r#"{"t":"ping","t":"pong"}"#),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn too_big_is_checked_first() {
        let s = " ".repeat(MAX_FRAME_BYTES + 1);
        assert_eq!(
            frame_tag(&s),
            Err(DecodeError::TooBig {
                len: MAX_FRAME_BYTES + 1
            })
        );
    }

    #[test]
    fn long_tags_are_shortened() {
        let frame = format!(r#"{{"t":"{}"}}"#, "é".repeat(100));
        let t = frame_tag(&frame).unwrap();
        assert!(t.len() <= herald_json_depth::probe::MAX_TAG + '…'.len_utf8());
        assert!(t.ends_with('…'));
    }
}
