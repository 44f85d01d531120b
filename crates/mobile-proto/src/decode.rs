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

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::DecodeError;
use crate::limits::{MAX_DEPTH, MAX_FRAME_BYTES};

/// Longest `t` kept verbatim in [`DecodeError::UnknownFrame`]; a hostile client must not be
/// able to make the server echo megabytes back.
const MAX_TAG_ECHO: usize = 64;

/// Runs passes 1 and 2: returns the frame's `t`.
pub(crate) fn frame_tag(text: &str) -> Result<String, DecodeError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooBig { len: text.len() });
    }
    check_depth(text)?;
    let shape: Shape =
        serde_json::from_str(text).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    match shape {
        Shape::NotObject => Err(DecodeError::NotObject),
        Shape::Object { t: None, .. } => Err(DecodeError::MissingT),
        Shape::Object {
            t: Some(t),
            duplicate_t: true,
        } => Err(DecodeError::malformed(&t, "duplicate field `t`")),
        Shape::Object { t: Some(t), .. } => Ok(t),
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

/// What the probe learns about a frame.
enum Shape {
    Object {
        t: Option<String>,
        duplicate_t: bool,
    },
    NotObject,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::NotObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::NotObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::NotObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::NotObject)
    }
    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::NotObject)
    }
    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::NotObject)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Shape::NotObject)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut t = None;
        let mut seen = false;
        let mut duplicate_t = false;
        while let Some(key) = map.next_key::<Key>()? {
            if key.is_t {
                let value = map.next_value::<Tag>()?;
                if seen {
                    duplicate_t = true;
                } else {
                    seen = true;
                    t = value.0;
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Shape::Object { t, duplicate_t })
    }
}

/// An object key, remembered only as "is it `t`".
struct Key {
    is_t: bool,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key { is_t: v == "t" })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The value of `t`: `Some` if it is a string, `None` for any other JSON value.
struct Tag(Option<String>);

impl<'de> Deserialize<'de> for Tag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TagVisitor)
    }
}

struct TagVisitor;

impl<'de> Visitor<'de> for TagVisitor {
    type Value = Tag;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a frame type")
    }

    fn visit_str<E>(self, v: &str) -> Result<Tag, E> {
        Ok(Tag(Some(bounded(v))))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Tag, E> {
        Ok(Tag(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Tag, E> {
        Ok(Tag(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Tag, E> {
        Ok(Tag(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Tag, E> {
        Ok(Tag(None))
    }
    fn visit_unit<E>(self) -> Result<Tag, E> {
        Ok(Tag(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tag, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Tag(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tag, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Tag(None))
    }
}

/// Keeps at most [`MAX_TAG_ECHO`] bytes of a tag. A shortened tag ends in `…`, so it can
/// never be mistaken for a real (short, ASCII) frame type.
fn bounded(tag: &str) -> String {
    shortened(tag, MAX_TAG_ECHO)
}

/// At most `max` bytes of `text`, cut at a character and marked with `…` when cut.
pub(crate) fn shortened(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    out.push('…');
    out
}

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
        let t = "é".repeat(100);
        let b = bounded(&t);
        assert!(b.len() <= MAX_TAG_ECHO + '…'.len_utf8());
        assert!(b.ends_with('…'));
        assert_eq!(bounded("ping"), "ping");
    }
}
