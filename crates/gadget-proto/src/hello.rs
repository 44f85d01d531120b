//! The `hello` message: who the device is and what it can do.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::codes::ErrorCode;
use crate::envelope::is_none_or_null;
use crate::limits::{MAX_BOARD, MAX_FIRMWARE, MAX_NAME};
use crate::PROTO_VERSION;

/// `hello` (device → server): the first frame of every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol version the device speaks; the server rejects anything but 1.
    pub proto: u32,
    /// `hg-` plus the first 16 hex characters of sha256(device key).
    pub device_id: String,
    /// Human-readable name, shown to the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Board name; firmware images must carry the same `HGBOARD=` tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    /// Firmware version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<String>,
    /// Access token, needed only when the host sets `GADGET_ACCESS_TOKEN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// What the device has; every member is optional.
    #[serde(default, skip_serializing_if = "Caps::is_empty")]
    pub caps: Caps,
    /// The device's tool manifest for the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionSpec>,
    /// Initial sensor readings; `state` messages merge into them.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub sensors: Map<String, Value>,
}

/// Device capabilities. An absent member means the device lacks it: no `speaker`, no audio.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Caps {
    /// A screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<DisplayCaps>,
    /// A microphone; utterances arrive in this format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mic: Option<AudioCaps>,
    /// A speaker; the server resamples to its rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<AudioCaps>,
    /// Names of the device's buttons, e.g. `talk`, `cancel`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// `hold` (push-to-talk) or `tap`; a string so new modes do not break decoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talk_mode: Option<String>,
    /// Present when the device installs firmware updates over this connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ota: Option<OtaCaps>,
}

impl Caps {
    /// True when the device declared nothing, so `caps` can be left out.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A screen. Every field is optional so a text-only or unusual display still gets through
/// the handshake; the server falls back to conservative defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DisplayCaps {
    /// Width in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Height in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Whether the screen shows colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<bool>,
    /// Characters the font has; `ascii` makes the server fold text to ASCII.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    /// Text columns of the screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_cols: Option<u32>,
    /// Text rows of the screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_rows: Option<u32>,
    /// The box images are fitted into; without it the device gets a notice instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageBox>,
}

/// The largest image a device shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageBox {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Pixel format; v1 defines only `rgb565`.
    pub format: String,
}

/// An audio path: its sample rate and sample format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioCaps {
    /// Samples per second.
    pub rate: u32,
    /// Sample format; v1 defines only `pcm16`.
    pub format: String,
}

/// Firmware update support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtaCaps {
    /// Largest image the device can install, in bytes.
    pub max_size: u64,
}

/// One entry of the device's tool manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionSpec {
    /// Name the server puts in `action.name`, e.g. `led.set`.
    pub name: String,
    /// What the action does, written for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub params: Option<Value>,
}

/// Why a decoded `hello` is refused. All are protocol errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// The device speaks a version this server does not.
    #[error("unsupported protocol version {0}")]
    UnsupportedProto(u32),
    /// `device_id` is not `hg-` followed by 16 lowercase hex characters.
    #[error("malformed device id")]
    MalformedDeviceId,
    /// A text field is longer than the protocol allows.
    #[error("{field} is {len} characters, more than {max}")]
    TooLong {
        /// The field, as on the wire.
        field: &'static str,
        /// Its length in characters.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl HelloError {
    /// The protocol error code to answer with: always `protocol`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Protocol
    }
}

impl Hello {
    /// Checks what decoding alone cannot: the version, the id's shape and length caps.
    pub fn validate(&self) -> Result<(), HelloError> {
        if self.proto != PROTO_VERSION {
            return Err(HelloError::UnsupportedProto(self.proto));
        }
        if !is_valid_device_id(&self.device_id) {
            return Err(HelloError::MalformedDeviceId);
        }
        check_len("name", self.name.as_deref(), MAX_NAME)?;
        check_len("board", self.board.as_deref(), MAX_BOARD)?;
        check_len("firmware", self.firmware.as_deref(), MAX_FIRMWARE)?;
        Ok(())
    }
}

/// Limits count characters, not bytes, as the reference server does.
fn check_len(field: &'static str, value: Option<&str>, max: usize) -> Result<(), HelloError> {
    let len = value.map_or(0, |v| v.chars().count());
    if len > max {
        return Err(HelloError::TooLong { field, len, max });
    }
    Ok(())
}

/// Whether `id` matches `^hg-[0-9a-f]{16}$`.
pub fn is_valid_device_id(id: &str) -> bool {
    match id.strip_prefix("hg-") {
        Some(hex) => hex.len() == 16 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn hello() -> Hello {
        Hello {
            proto: 1,
            device_id: "hg-630dcd2966c43366".to_string(),
            name: None,
            board: None,
            firmware: None,
            token: None,
            caps: Caps::default(),
            actions: Vec::new(),
            sensors: Map::new(),
        }
    }

    #[test]
    fn minimal_hello_is_valid() {
        assert_eq!(hello().validate(), Ok(()));
    }

    #[test]
    fn other_versions_are_refused() {
        for proto in [0, 2, u32::MAX] {
            let h = Hello { proto, ..hello() };
            assert_eq!(h.validate(), Err(HelloError::UnsupportedProto(proto)));
            assert_eq!(h.validate().unwrap_err().code(), ErrorCode::Protocol);
        }
    }

    #[test]
    fn device_id_shape() {
        assert!(is_valid_device_id("hg-0123456789abcdef"));
        for bad in [
            "",
            "hg-",
            "hg-0123456789abcde",
            "hg-0123456789abcdef0",
            "hg-0123456789ABCDEF",
            "hg-0123456789abcdeg",
            "HG-0123456789abcdef",
            "xx-0123456789abcdef",
            "hg_0123456789abcdef",
            " hg-0123456789abcdef",
            "hg-0123456789abcdé",
        ] {
            assert!(!is_valid_device_id(bad), "{bad}");
            let h = Hello {
                device_id: bad.to_string(),
                ..hello()
            };
            assert_eq!(h.validate(), Err(HelloError::MalformedDeviceId));
        }
    }

    #[test]
    fn length_caps_count_characters() {
        let ok = Hello {
            name: Some("é".repeat(MAX_NAME)),
            board: Some("b".repeat(MAX_BOARD)),
            firmware: Some("1".repeat(MAX_FIRMWARE)),
            ..hello()
        };
        assert_eq!(ok.validate(), Ok(()));

        let cases = [
            ("name", MAX_NAME),
            ("board", MAX_BOARD),
            ("firmware", MAX_FIRMWARE),
        ];
        for (field, max) in cases {
            let long = Some("x".repeat(max + 1));
            let mut h = hello();
            match field {
                "name" => h.name = long,
                "board" => h.board = long,
                _ => h.firmware = long,
            }
            assert_eq!(
                h.validate(),
                Err(HelloError::TooLong {
                    field,
                    len: max + 1,
                    max
                })
            );
        }
    }

    #[test]
    fn empty_caps_and_lists_are_omitted() {
        let json = serde_json::to_string(&hello()).unwrap();
        assert_eq!(json, r#"{"proto":1,"device_id":"hg-630dcd2966c43366"}"#);
    }
}
