//! A frame's type tag, found without building the frame.
//!
//! Both protocols name a frame's type in one member of a JSON object (`t` for phones,
//! `type` for gadgets). The probe walks the object once, keeps that member if it is a
//! string and skips every other value without allocating it, so a frame carrying
//! megabytes of base64 costs one pass and no tree. Telling "not an object", "no tag" and
//! "a tag" apart here is what lets each protocol answer each case in its own words.

use alloc::string::String;
use core::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Longest tag kept; a longer one is cut and ends in `…`, so it can never be taken for a
/// real (short, ASCII) type, and a hostile peer cannot make it echo megabytes.
pub const MAX_TAG: usize = 64;

/// What the probe learned about a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// An object; `tag` is the member's value when it is a string.
    Object {
        tag: Option<String>,
        duplicate: bool,
    },
    /// Any other JSON value.
    NotObject,
}

/// Parse `text` (already checked for depth) far enough to find the member `key`; the
/// error is the parser's when `text` is not one JSON value.
pub fn probe(text: &str, key: &str) -> Result<Shape, serde_json::Error> {
    let mut parser = serde_json::Deserializer::from_str(text);
    let shape = ShapeVisitor { key }.deserialize(&mut parser)?;
    parser.end()?;
    Ok(shape)
}

impl<'de> DeserializeSeed<'de> for ShapeVisitor<'_> {
    type Value = Shape;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Shape, D::Error> {
        d.deserialize_any(self)
    }
}

struct ShapeVisitor<'k> {
    key: &'k str,
}

impl<'de> Visitor<'de> for ShapeVisitor<'_> {
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
        let (mut tag, mut seen, mut duplicate) = (None, false, false);
        while let Some(is_tag) = map.next_key_seed(KeyIs(self.key))? {
            if !is_tag {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = map.next_value_seed(TagValue)?;
            if seen {
                duplicate = true;
            } else {
                (seen, tag) = (true, value);
            }
        }
        Ok(Shape::Object { tag, duplicate })
    }
}

/// An object key, remembered only as "is it the tag".
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

/// The tag's value: `Some` if it is a string, `None` for any other JSON value.
struct TagValue;

impl<'de> DeserializeSeed<'de> for TagValue {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TagValue {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a frame type")
    }

    fn visit_str<E>(self, v: &str) -> Result<Option<String>, E> {
        Ok(Some(shortened(v, MAX_TAG)))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<String>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// At most `max` bytes of `text`, cut at a character and marked with `…` when cut.
pub fn shortened(text: &str, max: usize) -> String {
    if text.len() <= max {
        return String::from(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::from(&text[..end]);
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn tag(t: &str) -> Shape {
        Shape::Object {
            tag: Some(t.to_string()),
            duplicate: false,
        }
    }

    #[test]
    fn finds_the_tag_by_its_key_and_skips_the_rest() {
        assert_eq!(
            probe(r#"{"data":[1,{"t":"no"}],"t":"media"}"#, "t").unwrap(),
            tag("media")
        );
        assert_eq!(
            probe(r#"{"t":"x","type":"hello"}"#, "type").unwrap(),
            tag("hello")
        );
        let untagged = Shape::Object {
            tag: None,
            duplicate: false,
        };
        assert_eq!(probe(r#"{"type":7}"#, "type").unwrap(), untagged);
        assert_eq!(probe("{}", "type").unwrap(), untagged);
        for other in ["[1]", "\"hello\"", "null", "1.5", "true"] {
            assert_eq!(probe(other, "t").unwrap(), Shape::NotObject, "{other}");
        }
        assert!(probe("{\"t\":", "t").is_err());
        assert!(probe("{} x", "t").is_err(), "one value and nothing after");
    }

    #[test]
    fn a_second_tag_is_noticed_and_a_long_one_cut() {
        let twice = probe(r#"{"t":"a","t":"b"}"#, "t").unwrap();
        assert_eq!(
            twice,
            Shape::Object {
                tag: Some("a".into()),
                duplicate: true
            }
        );
        let long = alloc::format!(r#"{{"t":"{}"}}"#, "é".repeat(100));
        let Shape::Object { tag: Some(t), .. } = probe(&long, "t").unwrap() else {
            panic!()
        };
        assert!(t.len() <= MAX_TAG + '…'.len_utf8() && t.ends_with('…'));
    }
}
