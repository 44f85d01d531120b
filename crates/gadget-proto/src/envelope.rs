//! The JSON envelope shared by both directions: size and depth checks, the `type` tag,
//! and the macro that builds one message enum per direction.
//!
//! Decoding probes the object for its `type` without building it, then parses the text
//! once more straight into the type that names (no `serde_json::Value` in between).
//! Rather than serde's internally tagged enums, which buffer the whole frame: that is
//! what lets an unknown `type` become [`crate::Unknown`] carrying its name, and lets a
//! bad field be reported together with the message type it belongs to.

use alloc::string::{String, ToString};

use herald_json_depth::probe::{probe, Shape};
use serde_json::Value;

use crate::codes::ErrorCode;
use crate::limits::{MAX_INBOUND_FRAME, MAX_JSON_DEPTH};

/// Why a text frame could not be decoded. Every variant is a protocol violation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame is longer than [`MAX_INBOUND_FRAME`] bytes.
    #[error("frame of {len} bytes exceeds the limit of {MAX_INBOUND_FRAME}")]
    TooLarge {
        /// Length of the frame in bytes.
        len: usize,
    },
    /// Arrays and objects nest deeper than [`MAX_JSON_DEPTH`].
    #[error("JSON nested deeper than {MAX_JSON_DEPTH} levels")]
    TooDeep,
    /// The frame is not valid JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The frame is JSON but not an object.
    #[error("JSON value is not an object")]
    NotObject,
    /// The object has no `type`, or `type` is not a string.
    #[error("missing or non-string \"type\"")]
    MissingType,
    /// The `type` is known but its fields are missing or of the wrong kind.
    #[error("invalid {type_name} message: {detail}")]
    InvalidFields {
        /// The message type, as on the wire.
        type_name: &'static str,
        /// What serde found wrong, for logs.
        detail: String,
    },
}

impl DecodeError {
    /// The protocol error code to answer with: always `protocol`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Protocol
    }
}

/// Longest [`DecodeError::InvalidFields`] detail kept, in bytes.
const MAX_DETAIL: usize = 256;

/// `detail` cut to [`MAX_DETAIL`] bytes (marked with `…`): the error goes back to the device
/// and into logs, and serde quotes bad values in full (`unknown variant` of a megabyte).
pub(crate) fn shortened(mut detail: String) -> String {
    if detail.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !detail.is_char_boundary(end) {
            end -= 1;
        }
        detail.truncate(end);
        detail.push('…');
    }
    detail
}

/// Refuses text nested deeper than `max` before serde recurses into it.
pub(crate) fn check_depth(text: &str, max: usize) -> Result<(), DecodeError> {
    herald_json_depth::check(text.as_bytes(), max).map_err(|_| DecodeError::TooDeep)
}

/// Runs the checks every text frame goes through and finds its `type`.
pub(crate) fn frame_type(text: &str) -> Result<String, DecodeError> {
    if text.len() > MAX_INBOUND_FRAME {
        return Err(DecodeError::TooLarge { len: text.len() });
    }
    check_depth(text, MAX_JSON_DEPTH)?;
    match probe(text, "type").map_err(|e| DecodeError::NotJson(e.to_string()))? {
        Shape::NotObject => Err(DecodeError::NotObject),
        Shape::Object { tag: None, .. } => Err(DecodeError::MissingType),
        Shape::Object {
            tag: Some(_),
            duplicate: true,
        } => Err(DecodeError::NotJson("\"type\" given twice".to_string())),
        Shape::Object { tag: Some(t), .. } => Ok(t),
    }
}

/// The typed body of a frame of a known `type`; `type` itself is skipped as an unknown
/// field.
pub(crate) fn body<'a, T: serde::Deserialize<'a>>(
    type_name: &'static str,
    text: &'a str,
) -> Result<T, DecodeError> {
    serde_json::from_str(text).map_err(|e| DecodeError::InvalidFields {
        type_name,
        detail: shortened(e.to_string()),
    })
}

/// `skip_serializing_if` helper: optional JSON payloads are omitted when absent or null,
/// so the encoder never writes `null`.
pub(crate) fn is_none_or_null(v: &Option<Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// `skip_serializing_if` helper for flags that are only sent when set.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// Builds a message enum for one direction: the enum with an `Unknown` catch-all, its
/// serde impls, `decode`, `encode`, `type_name` and `From` for each message struct.
macro_rules! message_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident via $wire:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident($ty:ty) = $tag:literal,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant($ty),
            )*
            /// A `type` this version does not know. Receivers ignore it; the name is kept
            /// for logs.
            Unknown($crate::common::Unknown),
        }

        /// Borrowed mirror of the enum so serde's internal tagging writes the `type` field.
        #[derive(::serde::Serialize)]
        #[serde(tag = "type")]
        enum $wire<'a> {
            $(
                #[serde(rename = $tag)]
                $variant(&'a $ty),
            )*
        }

        impl $name {
            /// Every `type` this enum knows, as on the wire.
            pub const TYPES: &'static [&'static str] = &[$($tag),*];

            /// Decodes one text frame, enforcing the size and depth limits first.
            pub fn decode(text: &str) -> Result<Self, $crate::envelope::DecodeError> {
                let type_name = $crate::envelope::frame_type(text)?;
                match type_name.as_str() {
                    $(
                        $tag => $crate::envelope::body::<$ty>($tag, text).map(Self::$variant),
                    )*
                    _ => Ok(Self::Unknown($crate::common::Unknown { type_name })),
                }
            }

            /// Decodes an already parsed JSON value. No size or depth limit applies here:
            /// use [`Self::decode`] on untrusted frames.
            pub fn from_value(
                value: ::serde_json::Value,
            ) -> Result<Self, $crate::envelope::DecodeError> {
                let ::serde_json::Value::Object(map) = value else {
                    return Err($crate::envelope::DecodeError::NotObject);
                };
                let type_name = match map.get("type") {
                    Some(::serde_json::Value::String(t)) => t.clone(),
                    _ => return Err($crate::envelope::DecodeError::MissingType),
                };
                let value = ::serde_json::Value::Object(map);
                match type_name.as_str() {
                    $(
                        $tag => ::serde_json::from_value::<$ty>(value)
                            .map(Self::$variant)
                            .map_err(|e| $crate::envelope::DecodeError::InvalidFields {
                                type_name: $tag,
                                detail: $crate::envelope::shortened(
                                    ::alloc::string::ToString::to_string(&e),
                                ),
                            }),
                    )*
                    _ => Ok(Self::Unknown($crate::common::Unknown { type_name })),
                }
            }

            /// Encodes as one text frame. Optional fields that are absent are omitted.
            pub fn encode(&self) -> ::alloc::string::String {
                // Cannot fail: every map key is a string and no Serialize impl here errors.
                ::serde_json::to_string(self).unwrap_or_default()
            }

            /// The `type` of this message as on the wire.
            pub fn type_name(&self) -> &str {
                match self {
                    $(Self::$variant(_) => $tag,)*
                    Self::Unknown(u) => &u.type_name,
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Self::$variant(m) => $wire::$variant(m).serialize(serializer),)*
                    Self::Unknown(u) => {
                        use ::serde::ser::SerializeMap;
                        let mut map = serializer.serialize_map(Some(1))?;
                        map.serialize_entry("type", &u.type_name)?;
                        map.end()
                    }
                }
            }
        }

        $(
            impl From<$ty> for $name {
                fn from(m: $ty) -> Self {
                    Self::$variant(m)
                }
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn nested(depth: usize) -> String {
        let mut s = String::from("{\"type\":\"event\",\"name\":\"n\",\"data\":");
        for _ in 1..depth {
            s.push('[');
        }
        for _ in 1..depth {
            s.push(']');
        }
        s.push('}');
        s
    }

    #[test]
    fn depth_limit_is_inclusive() {
        assert_eq!(check_depth(&nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH), Ok(()));
        assert_eq!(
            check_depth(&nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH),
            Err(DecodeError::TooDeep)
        );
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = "{\"a\":\"[[[[[[[[\\\"{{{{{{{{\"}";
        assert_eq!(check_depth(text, 1), Ok(()));
        // An escaped backslash ends the escape, so the quote after it closes the string.
        let text = "{\"a\":\"\\\\\",\"b\":[[]]}";
        assert_eq!(check_depth(text, 2), Err(DecodeError::TooDeep));
        assert_eq!(check_depth(text, 3), Ok(()));
    }

    #[test]
    fn envelope_errors() {
        assert!(matches!(
            frame_type("{\"type\":"),
            Err(DecodeError::NotJson(_))
        ));
        assert_eq!(frame_type("[1]"), Err(DecodeError::NotObject));
        assert_eq!(frame_type("\"hello\""), Err(DecodeError::NotObject));
        assert_eq!(frame_type("{}"), Err(DecodeError::MissingType));
        assert_eq!(frame_type("{\"type\":7}"), Err(DecodeError::MissingType));
        assert_eq!(frame_type("{\"type\":null}"), Err(DecodeError::MissingType));
        assert!(matches!(
            frame_type(r#"{"type":"ping","type":"pong"}"#),
            Err(DecodeError::NotJson(_))
        ));
        assert_eq!(
            frame_type(r#"{"a":{"type":"x"},"type":"ping"}"#),
            Ok("ping".to_string())
        );
        let big = " ".repeat(MAX_INBOUND_FRAME + 1);
        assert_eq!(
            frame_type(&big),
            Err(DecodeError::TooLarge {
                len: MAX_INBOUND_FRAME + 1
            })
        );
    }

    #[test]
    fn details_quoting_a_huge_value_are_shortened() {
        let code = "x".repeat(100_000);
        let text = alloc::format!(r#"{{"type":"error","code":"{code}","message":"m"}}"#);
        let err = crate::ServerMessage::decode(&text).unwrap_err();
        let DecodeError::InvalidFields { detail, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(
            detail.len() <= MAX_DETAIL + '…'.len_utf8(),
            "{}",
            detail.len()
        );
        assert!(detail.starts_with("unknown variant `xxx") && detail.ends_with('…'));
        // A cut never splits a character.
        let odd = shortened(alloc::format!("a{}", "é".repeat(200)));
        assert_eq!(odd.len(), 255 + '…'.len_utf8());
    }

    #[test]
    fn every_decode_error_is_a_protocol_error() {
        let errors = [
            DecodeError::TooLarge { len: 1 },
            DecodeError::TooDeep,
            DecodeError::NotJson(String::new()),
            DecodeError::NotObject,
            DecodeError::MissingType,
            DecodeError::InvalidFields {
                type_name: "hello",
                detail: String::new(),
            },
        ];
        for e in errors {
            assert_eq!(e.code(), ErrorCode::Protocol);
        }
    }
}
