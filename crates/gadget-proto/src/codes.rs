//! The closed sets of strings the protocol uses as codes.

use alloc::string::String;
use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Code of an `error` message, also the close reason of the WebSocket that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A handshake receive did not arrive in time.
    Timeout,
    /// The peer broke the protocol: binary frame in the handshake, bad JSON, not an
    /// object, wrong `type`, unsupported `proto`, malformed id.
    Protocol,
    /// `hello.token` did not match the host's access token.
    BadToken,
    /// The key did not hash to the device id, or the MAC was wrong.
    AuthFailed,
    /// Too many devices are waiting to enroll.
    Busy,
}

impl ErrorCode {
    /// All codes, for tests and exhaustive tables.
    pub const ALL: [ErrorCode; 5] = [
        Self::Timeout,
        Self::Protocol,
        Self::BadToken,
        Self::AuthFailed,
        Self::Busy,
    ];

    /// The wire name, as used in `error.code` and the close reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Protocol => "protocol",
            Self::BadToken => "bad_token",
            Self::AuthFailed => "auth_failed",
            Self::Busy => "busy",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a device abandoned a firmware update (`ota.error.code`).
///
/// Newer firmware may report codes this crate does not know; they decode as
/// [`OtaErrorCode::Other`] so an unexpected code never breaks the message around it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OtaErrorCode {
    /// The device does not install updates.
    Unsupported,
    /// The `ota.offer` was malformed.
    BadOffer,
    /// The image is larger than the device's update partition.
    TooLarge,
    /// `ota.begin` or data arrived without an offer.
    NoOffer,
    /// The `ota.begin` MAC did not verify.
    Unauthorized,
    /// Writing to flash failed.
    Flash,
    /// A firmware frame's sequence number skipped.
    Sequence,
    /// The bytes received do not add up to the offered size.
    Size,
    /// The SHA-256 of the bytes received does not match the offer.
    Checksum,
    /// The bootloader rejected the image.
    Invalid,
    /// No data arrived for 30 s.
    Timeout,
    /// `ota.end` arrived with no update in progress.
    NoUpdate,
    /// A code this version does not know, kept verbatim.
    Other(String),
}

impl OtaErrorCode {
    /// Every code the spec defines, for tests and exhaustive tables.
    pub const KNOWN: [OtaErrorCode; 12] = [
        Self::Unsupported,
        Self::BadOffer,
        Self::TooLarge,
        Self::NoOffer,
        Self::Unauthorized,
        Self::Flash,
        Self::Sequence,
        Self::Size,
        Self::Checksum,
        Self::Invalid,
        Self::Timeout,
        Self::NoUpdate,
    ];

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Unsupported => "unsupported",
            Self::BadOffer => "bad_offer",
            Self::TooLarge => "too_large",
            Self::NoOffer => "no_offer",
            Self::Unauthorized => "unauthorized",
            Self::Flash => "flash",
            Self::Sequence => "sequence",
            Self::Size => "size",
            Self::Checksum => "checksum",
            Self::Invalid => "invalid",
            Self::Timeout => "timeout",
            Self::NoUpdate => "no_update",
            Self::Other(s) => s,
        }
    }

    /// Maps a wire name to its code; unknown names become [`OtaErrorCode::Other`]. Use this
    /// rather than building `Other` by hand, so a known name is never hidden in `Other`.
    pub fn parse(s: &str) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|c| c.as_str() == s)
            .unwrap_or_else(|| Self::Other(String::from(s)))
    }

    /// Whether the spec defines this code.
    pub fn is_known(&self) -> bool {
        !matches!(self, Self::Other(_))
    }
}

impl fmt::Display for OtaErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for OtaErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OtaErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(Self::parse(&s))
    }
}

/// Why the server refuses to offer a firmware image, decided before any byte is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtaRefusal {
    /// The device did not advertise `caps.ota`.
    Unsupported,
    /// The image exceeds `caps.ota.max_size`.
    TooLarge,
    /// The image's `HGBOARD=` tag does not name the device's `hello.board`.
    WrongBoard,
    /// The bytes are not an ESP-IDF application image.
    NotAnImage,
    /// An update is already running for this device.
    Busy,
}

impl OtaRefusal {
    /// All refusals, for tests and exhaustive tables.
    pub const ALL: [OtaRefusal; 5] = [
        Self::Unsupported,
        Self::TooLarge,
        Self::WrongBoard,
        Self::NotAnImage,
        Self::Busy,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unsupported => "unsupported",
            Self::TooLarge => "too_large",
            Self::WrongBoard => "wrong_board",
            Self::NotAnImage => "not_an_image",
            Self::Busy => "busy",
        }
    }
}

impl fmt::Display for OtaRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a turn ended (`turn.end.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The agent finished the turn.
    Success,
    /// The agent failed.
    Failure,
    /// The turn was stopped (`cancel`, `/stop`).
    Cancelled,
}

impl Outcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_use_wire_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, alloc::format!("\"{}\"", code.as_str()));
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("nope"), None);
    }

    #[test]
    fn ota_error_codes_round_trip_and_tolerate_new_ones() {
        for code in OtaErrorCode::KNOWN {
            let json = serde_json::to_string(&code).unwrap();
            let back: OtaErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
            assert!(code.is_known());
        }
        let other: OtaErrorCode = serde_json::from_str("\"brownout\"").unwrap();
        assert_eq!(other, OtaErrorCode::Other("brownout".into()));
        assert!(!other.is_known());
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"brownout\"");
        assert_eq!(OtaErrorCode::parse("checksum"), OtaErrorCode::Checksum);
    }

    #[test]
    fn refusals_and_outcomes_use_wire_names() {
        for r in OtaRefusal::ALL {
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                alloc::format!("\"{}\"", r.as_str())
            );
        }
        for o in [Outcome::Success, Outcome::Failure, Outcome::Cancelled] {
            let back: Outcome =
                serde_json::from_str(&alloc::format!("\"{}\"", o.as_str())).unwrap();
            assert_eq!(back, o);
        }
    }
}
