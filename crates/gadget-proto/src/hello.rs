//! The `hello` message: who the device is and what it can do.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::codes::ErrorCode;
use crate::envelope::is_none_or_null;
use crate::limits::{
    MAX_ACTIONS, MAX_ACTION_DESCRIPTION, MAX_ACTION_PARAMS, MAX_BOARD, MAX_FIRMWARE, MAX_ID,
    MAX_NAME,
};
use crate::PROTO_VERSION;

/// `hello` (device → server): the first frame of every connection.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
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

/// Every field but the token, which a logged `hello` must not give away.
impl core::fmt::Debug for Hello {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Hello")
            .field("proto", &self.proto)
            .field("device_id", &self.device_id)
            .field("name", &self.name)
            .field("board", &self.board)
            .field("firmware", &self.firmware)
            .field("token", &self.token.as_ref().map(|_| "<secret>"))
            .field("caps", &self.caps)
            .field("actions", &self.actions)
            .field("sensors", &self.sensors)
            .finish()
    }
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
    /// The tool manifest is longer than the protocol allows.
    #[error("{count} actions, more than {max}")]
    TooManyActions {
        /// Actions offered.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An action's parameter schema is larger than the protocol allows.
    #[error("the parameters of action {name:?} are {len} bytes of JSON, more than {max}")]
    ParamsTooLarge {
        /// The action.
        name: String,
        /// The schema's size, serialized.
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
        // The manifest reaches the agent's context: bounded, so one device cannot fill it.
        if self.actions.len() > MAX_ACTIONS {
            return Err(HelloError::TooManyActions {
                count: self.actions.len(),
                max: MAX_ACTIONS,
            });
        }
        for action in &self.actions {
            check_len("actions[].name", Some(&action.name), MAX_ID)?;
            check_len(
                "actions[].description",
                action.description.as_deref(),
                MAX_ACTION_DESCRIPTION,
            )?;
            let len = action
                .params
                .as_ref()
                .and_then(|p| serde_json::to_string(p).ok())
                .map_or(0, |json| json.len());
            if len > MAX_ACTION_PARAMS {
                return Err(HelloError::ParamsTooLarge {
                    name: action.name.clone(),
                    len,
                    max: MAX_ACTION_PARAMS,
                });
            }
        }
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
    fn debug_hides_the_token() {
        let hello = Hello {
            token: Some("s3cret-access-token".to_string()),
            ..hello()
        };
        let shown = alloc::format!("{hello:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("hg-630dcd2966c43366") && shown.contains("<secret>"));
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
    fn the_manifest_is_bounded() {
        let action = |name: &str, description: usize, params: usize| ActionSpec {
            name: name.to_string(),
            description: Some("d".repeat(description)),
            params: Some(Value::String("p".repeat(params))),
        };
        // serde_json writes the string with its two quotes.
        let edge = action("led.set", MAX_ACTION_DESCRIPTION, MAX_ACTION_PARAMS - 2);
        let full = Hello {
            actions: (0..MAX_ACTIONS).map(|_| edge.clone()).collect(),
            ..hello()
        };
        assert_eq!(full.validate(), Ok(()));
        let one_more = Hello {
            actions: (0..=MAX_ACTIONS).map(|_| edge.clone()).collect(),
            ..hello()
        };
        assert_eq!(
            one_more.validate(),
            Err(HelloError::TooManyActions {
                count: MAX_ACTIONS + 1,
                max: MAX_ACTIONS
            })
        );
        let wordy = Hello {
            actions: Vec::from([action("a", MAX_ACTION_DESCRIPTION + 1, 0)]),
            ..hello()
        };
        assert!(matches!(
            wordy.validate(),
            Err(HelloError::TooLong {
                field: "actions[].description",
                ..
            })
        ));
        let heavy = Hello {
            actions: Vec::from([action("a", 0, MAX_ACTION_PARAMS - 1)]),
            ..hello()
        };
        assert!(
            matches!(heavy.validate(), Err(HelloError::ParamsTooLarge { len, .. }) if len == MAX_ACTION_PARAMS + 1)
        );
        let long_name = Hello {
            actions: Vec::from([action(&"n".repeat(MAX_ID + 1), 0, 0)]),
            ..hello()
        };
        assert!(matches!(
            long_name.validate(),
            Err(HelloError::TooLong {
                field: "actions[].name",
                ..
            })
        ));
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
