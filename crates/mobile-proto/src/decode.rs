//! The shared steps of decoding a text frame, for both directions.
//!
//! Every frame is first measured and byte-scanned for nesting deeper than [`MAX_DEPTH`],
//! before any parser recurses. Then one of two roads:
//! - **`t` first**, as every SDK writes frames: one pass reads the tag, then parses the
//!   body it names from the members after it, so the megabytes of base64 in a `media`
//!   frame are scanned once.
//! - **The careful road**, for any other frame and for every frame the first road cannot
//!   finish: a probe checks the text is one JSON object and finds its `t` wherever it is,
//!   skipping every other value without building it; then a typed parse of the body.
//!   Its answer, error or frame, is the one given; the first road only ever succeeds
//!   where this one would, with the same frame.
//!
//! Finding the tag before the body is what lets the caller tell "not a frame at all"
//! (`bad_frame`) from "a frame of a type I do not know" (`unsupported_frame` on the
//! server, ignored on a client) without serde's internally tagged enums, which buffer the
//! whole frame (base64 payload included) into an intermediate tree and blur those cases
//! into one error string.

use std::marker::PhantomData;

use herald_json_depth::probe::{probe, Shape};
use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, Visitor};

use crate::error::DecodeError;
use crate::limits::{MAX_DEPTH, MAX_FRAME_BYTES};

/// The frames of one direction, by tag.
pub(crate) trait Frame: Sized {
    /// The frame of type `t` read from `members`, or `None` if `t` names no frame.
    /// `members` may still hold `t` itself: each body skips it as an unknown field.
    fn from_members<'de, D: Deserializer<'de>>(
        t: &str,
        members: D,
    ) -> Option<Result<Self, D::Error>>;
}

#[derive(Debug, PartialEq)]
pub(crate) enum Decoded<F> {
    Frame(F),
    /// A well-formed frame whose `t` (shortened) names none.
    Unknown(String),
}

pub(crate) fn decode<F: Frame>(text: &str) -> Result<Decoded<F>, DecodeError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooBig { len: text.len() });
    }
    check_depth(text)?;
    match tag_first(text) {
        Some(frame) => Ok(Decoded::Frame(frame)),
        None => careful(text),
    }
}

/// The careful road, for text already measured and checked for depth.
fn careful<F: Frame>(text: &str) -> Result<Decoded<F>, DecodeError> {
    let t = frame_tag(text)?;
    let mut parser = serde_json::Deserializer::from_str(text);
    let Some(frame) = F::from_members(&t, &mut parser) else {
        return Ok(Decoded::Unknown(t));
    };
    frame
        .and_then(|frame| parser.end().map(|()| frame))
        .map(Decoded::Frame)
        .map_err(|e| DecodeError::malformed(&t, e.to_string()))
}

/// The first road: `Some` for an object that opens with `t`, a string without escapes
/// that names a frame, whose body parses and holds no second `t`.
fn tag_first<F: Frame>(text: &str) -> Option<F> {
    if !opens_with_t(text) {
        return None;
    }
    let mut parser = serde_json::Deserializer::from_str(text);
    let frame = parser.deserialize_map(TagFirst(PhantomData)).ok()?;
    parser.end().ok()?;
    Some(frame)
}

/// Whether the text's first member is `t`, spelled without escapes.
fn opens_with_t(text: &str) -> bool {
    let ws = [' ', '\t', '\n', '\r'];
    text.trim_start_matches(ws)
        .strip_prefix('{')
        .map(|s| s.trim_start_matches(ws))
        .and_then(|s| s.strip_prefix("\"t\""))
        .is_some_and(|s| s.trim_start_matches(ws).starts_with(':'))
}

struct TagFirst<F>(PhantomData<F>);

impl<'de, F: Frame> Visitor<'de> for TagFirst<F> {
    type Value = F;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a frame")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<F, A::Error> {
        // The key is `t`, as `opens_with_t` saw; an escaped tag is not borrowed and
        // fails here, for the careful road.
        map.next_key::<IgnoredAny>()?;
        let t: &'de str = map.next_value()?;
        F::from_members(t, MapAccessDeserializer::new(NoSecondTag(map)))
            .unwrap_or_else(|| Err(A::Error::custom("no such frame")))
    }
}

/// The members after the first `t`. A second `t` fails the first road, so the careful
/// road reports it; so does an escaped key, which cannot be borrowed.
struct NoSecondTag<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for NoSecondTag<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(key) = self.0.next_key::<&'de str>()? else {
            return Ok(None);
        };
        if key == "t" {
            return Err(A::Error::custom("duplicate field `t`"));
        }
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// The careful road's probe: the frame's `t`.
fn frame_tag(text: &str) -> Result<String, DecodeError> {
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

fn check_depth(text: &str) -> Result<(), DecodeError> {
    herald_json_depth::check(text.as_bytes(), MAX_DEPTH).map_err(|_| DecodeError::TooDeep)
}

pub(crate) use herald_json_depth::probe::shortened;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::Deserialize;

    use super::*;
    use crate::ClientFrame;

    /// A direction with two frames: `ping`, and `media` with one field.
    #[derive(Debug, PartialEq)]
    enum Test {
        Ping,
        Media(String),
    }

    #[derive(Deserialize)]
    struct MediaBody {
        data: String,
    }

    impl Frame for Test {
        fn from_members<'de, D: Deserializer<'de>>(
            t: &str,
            members: D,
        ) -> Option<Result<Self, D::Error>> {
            Some(match t {
                "ping" => IgnoredAny::deserialize(members).map(|_| Test::Ping),
                "media" => MediaBody::deserialize(members).map(|b| Test::Media(b.data)),
                _ => return None,
            })
        }
    }

    fn media(data: &str) -> Result<Decoded<Test>, DecodeError> {
        Ok(Decoded::Frame(Test::Media(data.into())))
    }

    /// Texts that try each road and each way off the first one.
    const TEXTS: &[&str] = &[
        r#"{"t":"media","data":"x"}"#,
        r#" { "t" : "media" , "data" : "x" } "#,
        r#"{"data":"x","t":"media"}"#,
        r#"{"t":"media","data":"x","meta":{"t":1}}"#,
        r#"{"t":"me\u0064ia","data":"x"}"#,
        r#"{"t":"media","d\u0061ta":"x"}"#,
        r#"{"t":"media","data":"x","t":"ping"}"#,
        r#"{"t":"media","data":"x","\u0074":"media"}"#,
        r#"{"t":"media"}"#,
        r#"{"t":"media","data":1}"#,
        r#"{"t":"media","data":"x"} x"#,
        r#"{"t":"media","data":"x""#,
        r#"{"t":"zzz","a":1}"#,
        r#"{"t":"zzz","a":"#,
        r#"{"t":1,"data":"x"}"#,
        r#"{"t":"ping"}"#,
        r#"{"t":"ping","a":[1,2,{"b":null}]}"#,
        r#"{"t":"ping","a":"\u0000"}"#,
        "{\"t\":\"ping\",\"a\":\"\u{1}\"}",
        r#"{"t":"ping",}"#,
        r#"{}"#,
        r#"[]"#,
    ];

    #[test]
    fn the_first_road_succeeds_only_where_the_careful_one_does_and_agrees() {
        for text in TEXTS {
            if let Some(frame) = tag_first::<Test>(text) {
                assert_eq!(careful::<Test>(text), Ok(Decoded::Frame(frame)), "{text}");
            }
        }
        // The same for the real frames of a phone.
        let hello = r#"{"t":"hello","token":"k","device":{"id":"phone-1","platform":"ios"}}"#;
        let chunk = format!(
            r#"{{"t":"media","id":"m","kind":"image","data":"{}","part":0,"parts":1}}"#,
            crate::encode_base64(&[9; 300])
        );
        for text in [hello, chunk.as_str(), r#"{"t":"ping"}"#] {
            let frame = tag_first::<ClientFrame>(text).expect(text);
            assert_eq!(careful::<ClientFrame>(text), Ok(Decoded::Frame(frame)));
        }
    }

    #[test]
    fn each_text_decodes_as_the_careful_road_says() {
        assert_eq!(decode::<Test>(TEXTS[0]), media("x"));
        assert_eq!(decode::<Test>(TEXTS[1]), media("x"));
        assert_eq!(decode::<Test>(TEXTS[2]), media("x"), "`t` last");
        assert_eq!(decode::<Test>(TEXTS[3]), media("x"), "a `t` deeper down");
        assert_eq!(decode::<Test>(TEXTS[4]), media("x"), "an escaped tag");
        assert_eq!(decode::<Test>(TEXTS[5]), media("x"), "an escaped key");
        for twice in [TEXTS[6], TEXTS[7]] {
            assert!(
                matches!(decode::<Test>(twice), Err(DecodeError::Malformed { ref reason, .. })
                    if reason.contains("duplicate field `t`")),
                "{twice}"
            );
        }
        for wrong in [TEXTS[8], TEXTS[9]] {
            assert!(matches!(
                decode::<Test>(wrong),
                Err(DecodeError::Malformed { .. })
            ));
        }
        for not_json in [TEXTS[10], TEXTS[11], TEXTS[13], TEXTS[18], TEXTS[19]] {
            assert!(
                matches!(decode::<Test>(not_json), Err(DecodeError::NotJson(_))),
                "{not_json}"
            );
        }
        assert_eq!(
            decode::<Test>(TEXTS[12]),
            Ok(Decoded::Unknown("zzz".into()))
        );
        assert_eq!(decode::<Test>(TEXTS[14]), Err(DecodeError::MissingT));
        assert_eq!(decode::<Test>(TEXTS[15]), Ok(Decoded::Frame(Test::Ping)));
        assert_eq!(decode::<Test>(TEXTS[16]), Ok(Decoded::Frame(Test::Ping)));
        assert_eq!(decode::<Test>(TEXTS[17]), Ok(Decoded::Frame(Test::Ping)));
        assert_eq!(decode::<Test>(TEXTS[20]), Err(DecodeError::MissingT));
        assert_eq!(decode::<Test>(TEXTS[21]), Err(DecodeError::NotObject));
    }

    /// Members that keep or break each rule of the first road.
    fn member() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            r#""data":"x""#,
            r#""data":1"#,
            r#""d\u0061ta":"y""#,
            r#""t":"ping""#,
            r#""\u0074":"media""#,
            r#""a":{"t":1}"#,
            r#""b":[1,"t"]"#,
        ])
    }

    proptest! {
        #[test]
        fn the_roads_agree_on_any_order_of_members(
            members in prop::collection::vec(member(), 0..5),
            tag in prop::sample::select(vec!["media", "ping", "zzz", "me\\u0064ia"]),
            at in 0..5usize,
        ) {
            let mut members: Vec<String> = members.into_iter().map(String::from).collect();
            members.insert(at.min(members.len()), format!(r#""t":"{tag}""#));
            let text = format!("{{{}}}", members.join(","));
            if let Some(frame) = tag_first::<Test>(&text) {
                prop_assert_eq!(careful::<Test>(&text), Ok(Decoded::Frame(frame)), "{}", text);
            }
        }
    }

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
        assert_eq!(decode::<Test>(&s), Err(DecodeError::TooDeep));
        let s = format!(r#"{{"t":"media","data":"x","a":{}"#, "[".repeat(100_000));
        assert_eq!(decode::<Test>(&s), Err(DecodeError::TooDeep));
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
            decode::<Test>(&s),
            Err(DecodeError::TooBig {
                len: MAX_FRAME_BYTES + 1
            })
        );
    }

    #[test]
    fn long_tags_are_shortened() {
        let frame = format!(r#"{{"t":"{}"}}"#, "é".repeat(100));
        let Ok(Decoded::Unknown(t)) = decode::<Test>(&frame) else {
            panic!("an unknown frame");
        };
        assert!(t.len() <= herald_json_depth::probe::MAX_TAG + '…'.len_utf8());
        assert!(t.ends_with('…'));
    }
}
