//! Error codes on the wire and the decoder's error type.
//!
//! Every way a frame can be wrong is a [`DecodeError`] variant, and every variant maps onto
//! exactly one [`ErrorCode`], so the server never has to guess what to answer.

use serde::{Deserialize, Serialize};

/// The `code` of an `error` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Wrong or missing token; the server closes with 1008.
    AuthFailed,
    /// The device id belongs to another user, the card belongs to another device, or a
    /// `deliver` came from someone not allowed to send it.
    Forbidden,
    /// A frame, file or upload buffer over its limit.
    TooBig,
    /// The frame could not be understood (not JSON, wrong fields, too deep).
    BadFrame,
    /// A well-formed frame of a type the server does not know; the connection stays open.
    UnsupportedFrame,
    /// `deliver` to a device with no live connection.
    DeviceOffline,
    /// A frame before `hello`.
    NotReady,
    /// The client is sending faster than allowed.
    RateLimited,
    /// The server failed; not the client's fault.
    Internal,
}

impl ErrorCode {
    /// Every code, in the order of the spec.
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::AuthFailed,
        ErrorCode::Forbidden,
        ErrorCode::TooBig,
        ErrorCode::BadFrame,
        ErrorCode::UnsupportedFrame,
        ErrorCode::DeviceOffline,
        ErrorCode::NotReady,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
    ];

    /// The wire name, e.g. `"bad_frame"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorCode::AuthFailed => "auth_failed",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TooBig => "too_big",
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::UnsupportedFrame => "unsupported_frame",
            ErrorCode::DeviceOffline => "device_offline",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
        }
    }

    /// The code for a wire name, if it is one of ours.
    pub fn from_wire(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest [`DecodeError::Malformed`] reason kept, in bytes.
const MAX_REASON: usize = 256;

/// Why a text frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Longer than [`crate::limits::MAX_FRAME_BYTES`]; checked before anything else.
    #[error("frame is {len} bytes, over the limit of {max} bytes", max = crate::limits::MAX_FRAME_BYTES)]
    TooBig {
        /// Length of the frame text in bytes.
        len: usize,
    },
    /// Nested deeper than [`crate::limits::MAX_DEPTH`].
    #[error("JSON nested deeper than {max} levels", max = crate::limits::MAX_DEPTH)]
    TooDeep,
    /// Not valid JSON at all.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// Valid JSON, but not an object.
    #[error("frame is not a JSON object")]
    NotObject,
    /// An object without a string `t` field.
    #[error("frame has no string \"t\" field")]
    MissingT,
    /// A well-formed frame whose `t` this side does not know. Only the server reports this;
    /// a client decodes it as `ServerFrame::Unknown`.
    #[error("unsupported frame type {0:?}")]
    UnknownFrame(String),
    /// A known frame type whose fields are wrong: missing, mistyped or out of range.
    #[error("malformed {frame:?} frame: {reason}")]
    Malformed {
        /// The frame's `t`.
        frame: String,
        /// What is wrong, for the error frame's `message` and for logs.
        reason: String,
    },
}

impl DecodeError {
    /// What the server answers with in `error{code}`.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::TooBig { .. } => ErrorCode::TooBig,
            DecodeError::UnknownFrame(_) => ErrorCode::UnsupportedFrame,
            DecodeError::TooDeep
            | DecodeError::NotJson(_)
            | DecodeError::NotObject
            | DecodeError::MissingT
            | DecodeError::Malformed { .. } => ErrorCode::BadFrame,
        }
    }

    /// A `Malformed` error. The reason is shortened because the server sends it back and
    /// logs it, and serde quotes bad values in full (`unknown variant` of a megabyte).
    pub(crate) fn malformed(frame: &str, reason: impl Into<String>) -> DecodeError {
        DecodeError::Malformed {
            frame: frame.to_owned(),
            reason: crate::decode::shortened(&reason.into(), MAX_REASON),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_match_serde() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::from_wire("nope"), None);
    }

    #[test]
    fn reasons_quoting_a_huge_value_are_shortened() {
        let kind = "x".repeat(100_000);
        let text = format!(r#"{{"t":"media","id":"m","kind":"{kind}","data":""}}"#);
        let err = crate::ClientFrame::decode(&text).unwrap_err();
        let DecodeError::Malformed { reason, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(
            reason.len() <= MAX_REASON + '…'.len_utf8(),
            "{}",
            reason.len()
        );
        assert!(reason.starts_with("unknown variant `xxx") && reason.ends_with('…'));
    }

    #[test]
    fn decode_errors_map_to_codes() {
        assert_eq!(DecodeError::TooBig { len: 1 }.code(), ErrorCode::TooBig);
        assert_eq!(
            DecodeError::UnknownFrame("x".into()).code(),
            ErrorCode::UnsupportedFrame
        );
        for e in [
            DecodeError::TooDeep,
            DecodeError::NotJson("x".into()),
            DecodeError::NotObject,
            DecodeError::MissingT,
            DecodeError::malformed("text", "x"),
        ] {
            assert_eq!(e.code(), ErrorCode::BadFrame, "{e}");
        }
    }
}
