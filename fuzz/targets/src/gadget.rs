//! The gadget protocol: text frames both ways, the binary frame header, firmware images.

use herald_gadget_proto::limits::{KEY_LEN, MAX_INBOUND_FRAME, MAX_JSON_DEPTH, OTA_MIN_IMAGE};
use herald_gadget_proto::ota_image::{
    inspect_image, is_board_char, ImageError, APP_DESC_MAGIC, BOARD_TAG, IMAGE_MAGIC,
    PROJECT_RANGE, VERSION_RANGE,
};
use herald_gadget_proto::{
    auth, decode_frame, encode_frame, Channel, DecodeError, DeviceMessage, FrameError,
    ServerMessage, HEADER_LEN,
};
use serde_json::Value;

use crate::json::{bounded_error, depth_scan_is_sound, same};

/// A fixed device key for the MAC checks.
const KEY: [u8; KEY_LEN] = [7; KEY_LEN];

/// One text frame, decoded as the server decodes a device's frames and as a device
/// decodes the server's. Whatever decodes must encode and decode back to itself.
pub fn gadget_text(data: &[u8]) {
    // WebSocket text frames are UTF-8; the socket library refuses anything else.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    depth_scan_is_sound(text, MAX_JSON_DEPTH);

    match DeviceMessage::decode(text) {
        Ok(msg) => {
            let back = round_trip(&msg, DeviceMessage::decode, DeviceMessage::from_value);
            assert_eq!(back.type_name(), msg.type_name());
            device_message_checks(&msg);
        }
        Err(err) => bounded_error("DeviceMessage::decode", &err),
    }
    match ServerMessage::decode(text) {
        Ok(msg) => {
            let back = round_trip(&msg, ServerMessage::decode, ServerMessage::from_value);
            assert_eq!(back.type_name(), msg.type_name());
        }
        Err(err) => bounded_error("ServerMessage::decode", &err),
    }
}

/// Encodes `msg`, decodes the result and checks it is the same message.
fn round_trip<M: serde::Serialize + std::fmt::Debug>(
    msg: &M,
    decode: fn(&str) -> Result<M, DecodeError>,
    from_value: fn(Value) -> Result<M, DecodeError>,
) -> M {
    let encoded = serde_json::to_string(msg).unwrap_or_default();
    assert!(!encoded.is_empty(), "{msg:?} does not encode");
    let back = match decode(&encoded) {
        Ok(back) => back,
        // Encoding may write a number longer than it was sent (`1e9` as `1000000000.0`).
        Err(DecodeError::TooLarge { .. }) if encoded.len() > MAX_INBOUND_FRAME => {
            let value = serde_json::from_str(&encoded).unwrap_or(Value::Null);
            from_value(value).unwrap_or_else(|e| panic!("{encoded} does not decode: {e}"))
        }
        Err(e) => panic!("{msg:?} encodes as {encoded}, which does not decode: {e}"),
    };
    let (a, b) = (to_value(msg), to_value(&back));
    assert!(same(&a, &b), "{a} came back as {b}");
    back
}

fn to_value(msg: &impl serde::Serialize) -> Value {
    serde_json::to_value(msg).unwrap_or(Value::Null)
}

/// What the server does next with the fields of a decoded device message.
fn device_message_checks(msg: &DeviceMessage) {
    match msg {
        DeviceMessage::Hello(hello) => {
            let valid = hello.validate().is_ok();
            assert!(!valid || herald_gadget_proto::is_valid_device_id(&hello.device_id));
        }
        DeviceMessage::Auth(a) => {
            if let Some(key) = &a.key {
                // Keys are strict base64: exactly one spelling decodes to each key.
                if let Ok(bytes) = auth::decode_key(key) {
                    assert_eq!(&auth::b64(&bytes), key, "a second spelling of a key");
                }
            }
            if let Some(mac) = &a.mac {
                let nonce = "bm9uY2Utbm9uY2Utbm9uY2U=";
                let id = auth::device_id(&KEY);
                let right = auth::b64(&auth::auth_mac(&KEY, &id, nonce));
                assert_eq!(auth::verify_auth_mac(&KEY, &id, nonce, mac), *mac == right);
            }
        }
        _ => {}
    }
}

/// One binary frame: a header that decodes must encode back to the same bytes.
pub fn gadget_frame(data: &[u8]) {
    match decode_frame(data) {
        Ok((header, payload)) => {
            assert_eq!(payload.len(), data.len() - HEADER_LEN);
            assert_eq!(encode_frame(header, payload), data);
        }
        Err(FrameError::Short { len }) => assert!(len == data.len() && len < HEADER_LEN),
        Err(FrameError::UnknownChannel(c)) => {
            assert!(data.len() >= HEADER_LEN && data[0] == c);
            assert!(Channel::try_from(c).is_err());
        }
    }
}

/// The checks the server runs on a firmware image before offering it, against a plain
/// reading of what they promise.
pub fn ota_image(data: &[u8]) {
    match inspect_image(data) {
        Ok(info) => {
            assert!(data.len() >= OTA_MIN_IMAGE && data[0] == IMAGE_MAGIC);
            assert_eq!(data[32..36], APP_DESC_MAGIC.to_le_bytes());
            assert_eq!(info.size, data.len());
            for (field, range) in [
                (&info.version, VERSION_RANGE),
                (&info.project, PROJECT_RANGE),
            ] {
                let bytes = &data[range];
                assert!(bytes.starts_with(field.as_bytes()) && !field.contains('\0'));
                assert!(field.len() == bytes.len() || bytes[field.len()] == 0);
            }
            assert_eq!(info.board, first_board(data));
        }
        Err(ImageError::TooShort { len }) => assert!(len == data.len() && len < OTA_MIN_IMAGE),
        Err(ImageError::BadMagic(b)) => assert!(b == data[0] && b != IMAGE_MAGIC),
        Err(ImageError::BadAppDescMagic(m)) => {
            assert!(m != APP_DESC_MAGIC && data[32..36] == m.to_le_bytes());
        }
        Err(ImageError::BadText(field)) => {
            let range = if field == "version" {
                VERSION_RANGE
            } else {
                PROJECT_RANGE
            };
            let bytes = &data[range];
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            assert!(std::str::from_utf8(&bytes[..end]).is_err());
        }
    }
}

/// The board of the first tag followed by a board character, by trying every offset.
fn first_board(data: &[u8]) -> Option<String> {
    (0..data.len()).find_map(|at| {
        let after = data[at..].strip_prefix(BOARD_TAG)?;
        let len = after.iter().take_while(|&&b| is_board_char(b)).count();
        (len > 0).then(|| String::from_utf8_lossy(&after[..len]).into_owned())
    })
}
