//! Checks every case of the shared vectors file, the one the Python plugin, the TypeScript
//! SDK and the firmware pin too.

use std::collections::BTreeSet;

use herald_gadget_proto::auth::{
    auth_mac, b64, decode_key, device_id, ota_mac, verify_auth_mac, verify_ota_mac, KeyError,
};
use herald_gadget_proto::ota_image::{inspect_image, ImageError};
use herald_gadget_proto::{
    decode_frame, encode_frame, Channel, DecodeError, DeviceMessage, ErrorCode, FrameError,
    FrameHeader, HelloError, OtaErrorCode, OtaRefusal, Outcome, ServerMessage,
};
use herald_test_support::vectors::{self, b, cases, key, s, u};
use serde_json::Value;

#[test]
fn file_has_description_and_unique_names() {
    let v = vectors::gadget();
    assert!(v["description"].as_str().is_some_and(|d| !d.is_empty()));
    assert_eq!(v["proto"], 1);
    assert_eq!(v["subprotocol"], herald_gadget_proto::SUBPROTOCOL);
    for section in [
        "device_id",
        "keys",
        "auth_mac",
        "ota_mac",
        "frames",
        "ota_images",
        "messages",
    ] {
        let mut seen = BTreeSet::new();
        for c in cases(&v, section) {
            assert!(seen.insert(s(c, "name")), "duplicate name {}", c["name"]);
        }
    }
}

#[test]
fn codes_match() {
    let v = vectors::gadget();
    let names = |k: &str| -> Vec<String> {
        v["codes"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_owned())
            .collect()
    };
    let errors: Vec<_> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(names("error"), errors);
    let ota: Vec<_> = OtaErrorCode::KNOWN
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(names("ota_error"), ota);
    let refusals: Vec<_> = OtaRefusal::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(names("ota_refusal"), refusals);
    let outcomes: Vec<_> = [Outcome::Success, Outcome::Failure, Outcome::Cancelled]
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(names("turn_outcome"), outcomes);
}

#[test]
fn limits_match() {
    use herald_gadget_proto::limits::*;
    let v = vectors::gadget();
    let l = &v["limits"];
    let pairs: [(&str, u64); 32] = [
        ("max_inbound_frame", MAX_INBOUND_FRAME as u64),
        ("max_json_depth", MAX_JSON_DEPTH as u64),
        ("max_name", MAX_NAME as u64),
        ("max_board", MAX_BOARD as u64),
        ("max_firmware", MAX_FIRMWARE as u64),
        ("max_text", MAX_TEXT as u64),
        ("max_id", MAX_ID as u64),
        ("handshake_timeout_s", HANDSHAKE_TIMEOUT_SECS),
        ("action_timeout_s", ACTION_TIMEOUT_SECS),
        ("ota_frame", OTA_FRAME as u64),
        ("ota_ack_interval", OTA_ACK_INTERVAL),
        ("ota_max_unacked", OTA_MAX_UNACKED),
        ("ota_min_image", OTA_MIN_IMAGE as u64),
        ("pairing_code_len", PAIRING_CODE_LEN as u64),
        ("session_id_len", SESSION_ID_LEN as u64),
        ("min_audio_rate", MIN_AUDIO_RATE as u64),
        ("max_audio_rate", MAX_AUDIO_RATE as u64),
        ("heartbeat_default_s", DEFAULT_HEARTBEAT_SECS.into()),
        ("heartbeat_min_s", MIN_HEARTBEAT_SECS.into()),
        ("heartbeat_max_s", MAX_HEARTBEAT_SECS.into()),
        ("dead_after_heartbeats", DEAD_AFTER_HEARTBEATS.into()),
        ("audio_frame_ms", AUDIO_FRAME_MS.into()),
        ("connect_timeout_s", CONNECT_TIMEOUT_SECS),
        ("backoff_reset_after_s", BACKOFF_RESET_AFTER_SECS),
        ("min_press_ms", MIN_PRESS_MS),
        ("max_recording_s", MAX_RECORDING_SECS),
        ("prompt_guard_ms", PROMPT_GUARD_MS),
        ("session_new_hold_ms", SESSION_NEW_HOLD_MS),
        ("no_reply_s", NO_REPLY_SECS),
        ("card_ttl_s", DEFAULT_CARD_TTL_SECS.into()),
        ("image_ttl_s", DEFAULT_IMAGE_TTL_SECS.into()),
        ("notice_ttl_s", DEFAULT_NOTICE_TTL_SECS.into()),
    ];
    for (name, value) in pairs {
        assert_eq!(l[name].as_u64(), Some(value), "{name}");
    }
    assert_eq!(l["pairing_code_alphabet"], PAIRING_CODE_ALPHABET);
    assert_eq!(
        l["reconnect_backoff_s"],
        serde_json::json!(RECONNECT_BACKOFF_SECS)
    );
}

#[test]
fn device_ids() {
    let v = vectors::gadget();
    for c in cases(&v, "device_id") {
        assert_eq!(device_id(&key(c)), s(c, "device_id"), "{}", c["name"]);
    }
}

#[test]
fn keys() {
    let v = vectors::gadget();
    for c in cases(&v, "keys") {
        let name = &c["name"];
        let got = decode_key(s(c, "key_b64"));
        if b(c, "ok") {
            let k = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(k, key(c), "{name}");
            assert_eq!(device_id(&k), s(c, "device_id"), "{name}");
            assert_eq!(b64(&k), s(c, "key_b64"), "{name}");
        } else {
            let expected = match s(c, "error") {
                "base64" => KeyError::Base64,
                "length" => KeyError::Length(u(c, "decoded_len") as usize),
                other => panic!("{name}: unknown error {other}"),
            };
            assert_eq!(got, Err(expected), "{name}");
        }
    }
}

#[test]
fn auth_macs() {
    let v = vectors::gadget();
    for c in cases(&v, "auth_mac") {
        let (k, id, nonce, mac) = (key(c), s(c, "device_id"), s(c, "nonce"), s(c, "mac"));
        let valid = b(c, "valid");
        assert_eq!(verify_auth_mac(&k, id, nonce, mac), valid, "{}", c["name"]);
        if valid {
            assert_eq!(b64(&auth_mac(&k, id, nonce)), mac, "{}", c["name"]);
        }
    }
}

#[test]
fn ota_macs() {
    let v = vectors::gadget();
    for c in cases(&v, "ota_mac") {
        let (k, id, nonce, sha, size, mac) = (
            key(c),
            s(c, "device_id"),
            s(c, "nonce"),
            s(c, "sha256"),
            u(c, "size"),
            s(c, "mac"),
        );
        let valid = b(c, "valid");
        assert_eq!(
            verify_ota_mac(&k, id, nonce, sha, size, mac),
            valid,
            "{}",
            c["name"]
        );
        if valid {
            assert_eq!(
                b64(&ota_mac(&k, id, nonce, sha, size)),
                mac,
                "{}",
                c["name"]
            );
        }
    }
}

#[test]
fn frames() {
    let v = vectors::gadget();
    for c in cases(&v, "frames") {
        let name = &c["name"];
        let bytes = hex::decode(s(c, "bytes_hex")).unwrap();
        let got = decode_frame(&bytes);
        if b(c, "ok") {
            let (header, payload) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(header.channel as u64, u(c, "channel"), "{name}");
            assert_eq!(u64::from(header.stream), u(c, "stream"), "{name}");
            assert_eq!(u64::from(header.seq), u(c, "seq"), "{name}");
            assert_eq!(hex::encode(payload), s(c, "payload_hex"), "{name}");
            let channel = Channel::try_from(u(c, "channel") as u8).unwrap();
            let rebuilt = encode_frame(
                FrameHeader {
                    channel,
                    stream: u(c, "stream") as u8,
                    seq: u(c, "seq") as u16,
                },
                payload,
            );
            assert_eq!(rebuilt, bytes, "{name}");
        } else {
            let expected = match s(c, "error") {
                "short" => FrameError::Short {
                    len: u(c, "len") as usize,
                },
                "unknown_channel" => FrameError::UnknownChannel(u(c, "channel") as u8),
                other => panic!("{name}: unknown error {other}"),
            };
            assert_eq!(got, Err(expected), "{name}");
        }
    }
}

fn build_image(c: &Value) -> Vec<u8> {
    let mut image = vec![0u8; u(c, "size") as usize];
    for p in c["patches"].as_array().unwrap() {
        let at = u(p, "offset") as usize;
        let bytes = match (p["hex"].as_str(), p["ascii"].as_str()) {
            (Some(h), None) => hex::decode(h).unwrap(),
            (None, Some(a)) => a.as_bytes().to_vec(),
            _ => panic!("{}: patch needs hex or ascii", c["name"]),
        };
        if at + bytes.len() <= image.len() {
            image[at..at + bytes.len()].copy_from_slice(&bytes);
        }
    }
    image
}

#[test]
fn ota_images() {
    let v = vectors::gadget();
    for c in cases(&v, "ota_images") {
        let name = &c["name"];
        let got = inspect_image(&build_image(c));
        if b(c, "ok") {
            let info = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(info.version, s(c, "version"), "{name}");
            assert_eq!(info.project, s(c, "project"), "{name}");
            assert_eq!(info.board.as_deref(), c["board"].as_str(), "{name}");
            assert_eq!(info.size as u64, u(c, "size"), "{name}");
        } else {
            let err = got.expect_err(name.as_str().unwrap());
            let kind = match err {
                ImageError::TooShort { .. } => "too_short",
                ImageError::BadMagic(_) => "bad_magic",
                ImageError::BadAppDescMagic(_) => "bad_app_desc",
                ImageError::BadText(_) => "bad_text",
            };
            assert_eq!(kind, s(c, "error"), "{name}");
            assert_eq!(err.refusal().as_str(), s(c, "refusal"), "{name}");
        }
    }
}

fn decode_kind(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::TooLarge { .. } => "too_large",
        DecodeError::TooDeep => "too_deep",
        DecodeError::NotJson(_) => "not_json",
        DecodeError::NotObject => "not_object",
        DecodeError::MissingType => "missing_type",
        DecodeError::InvalidFields { .. } => "invalid_fields",
    }
}

fn hello_kind(e: &HelloError) -> &'static str {
    match e {
        HelloError::UnsupportedProto(_) => "unsupported_proto",
        HelloError::MalformedDeviceId => "malformed_device_id",
        HelloError::TooLong { .. } => "too_long",
        HelloError::TooManyActions { .. } => "too_many_actions",
        HelloError::ParamsTooLarge { .. } => "params_too_large",
    }
}

fn frame_text(c: &Value) -> String {
    if let Some(text) = c["text"].as_str() {
        return text.to_owned();
    }
    let mut text = serde_json::to_string(&c["json"]).unwrap();
    if let Some(pad) = c["pad_to"].as_u64() {
        while text.len() < pad as usize {
            text.push(' ');
        }
    }
    text
}

/// One decoded message of either direction, so both share the checks below.
enum Decoded {
    Device(Box<DeviceMessage>),
    Server(ServerMessage),
}

impl Decoded {
    fn type_name(&self) -> &str {
        match self {
            Decoded::Device(m) => m.type_name(),
            Decoded::Server(m) => m.type_name(),
        }
    }
    fn is_unknown(&self) -> bool {
        match self {
            Decoded::Device(m) => matches!(**m, DeviceMessage::Unknown(_)),
            Decoded::Server(m) => matches!(m, ServerMessage::Unknown(_)),
        }
    }
    fn encode(&self) -> String {
        match self {
            Decoded::Device(m) => m.encode(),
            Decoded::Server(m) => m.encode(),
        }
    }
}

#[test]
fn messages() {
    let v = vectors::gadget();
    let mut covered_device = BTreeSet::new();
    let mut covered_server = BTreeSet::new();
    for c in cases(&v, "messages") {
        let name = &c["name"];
        let text = frame_text(c);
        let device = match s(c, "direction") {
            "device_to_server" => true,
            "server_to_device" => false,
            other => panic!("{name}: direction {other}"),
        };
        let decoded = if device {
            DeviceMessage::decode(&text).map(|m| Decoded::Device(Box::new(m)))
        } else {
            ServerMessage::decode(&text).map(Decoded::Server)
        };
        let expected = s(c, "decode");
        if expected != "ok" {
            let err = match decoded {
                Ok(_) => panic!("{name}: decoded, expected {expected}"),
                Err(e) => e,
            };
            assert_eq!(decode_kind(&err), expected, "{name}: {err}");
            assert_eq!(err.code().as_str(), s(c, "error_code"), "{name}");
            if let (DecodeError::InvalidFields { type_name, .. }, Some(t)) =
                (&err, c["type"].as_str())
            {
                assert_eq!(*type_name, t, "{name}");
            }
            continue;
        }
        let msg = decoded.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(msg.type_name(), s(c, "type"), "{name}");
        let unknown = c["unknown"].as_bool().unwrap_or(false);
        assert_eq!(msg.is_unknown(), unknown, "{name}");
        if !unknown {
            if device {
                covered_device.insert(msg.type_name().to_owned());
            } else {
                covered_server.insert(msg.type_name().to_owned());
            }
        }
        let encoded: Value = serde_json::from_str(&msg.encode()).unwrap();
        if c["roundtrip"].as_bool() == Some(true) {
            let original: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(encoded, original, "{name}");
        }
        if !c["encoded"].is_null() {
            assert_eq!(encoded, c["encoded"], "{name}");
        }
        if let Some(validate) = c["validate"].as_str() {
            let hello = match &msg {
                Decoded::Device(m) => match &**m {
                    DeviceMessage::Hello(h) => h,
                    _ => panic!("{name}: validate on a non-hello"),
                },
                Decoded::Server(_) => panic!("{name}: validate on a server message"),
            };
            match hello.validate() {
                Ok(()) => assert_eq!(validate, "ok", "{name}"),
                Err(e) => {
                    assert_eq!(hello_kind(&e), validate, "{name}: {e}");
                    assert_eq!(e.code().as_str(), s(c, "validate_code"), "{name}");
                }
            }
        }
    }
    let all_device: BTreeSet<_> = DeviceMessage::TYPES.iter().map(|t| t.to_string()).collect();
    let all_server: BTreeSet<_> = ServerMessage::TYPES.iter().map(|t| t.to_string()).collect();
    assert_eq!(covered_device, all_device, "device types without a vector");
    assert_eq!(covered_server, all_server, "server types without a vector");
}

#[test]
fn seed_hello_decodes_to_typed_fields() {
    let v = vectors::gadget();
    let case = cases(&v, "messages")
        .iter()
        .find(|c| c["name"] == "hello: the seed's example")
        .unwrap();
    let DeviceMessage::Hello(h) = DeviceMessage::decode(&frame_text(case)).unwrap() else {
        panic!("not a hello");
    };
    assert_eq!(h.proto, 1);
    assert_eq!(h.device_id, "hg-630dcd2966c43366");
    assert_eq!(h.name.as_deref(), Some("Kitchen Gadget"));
    assert_eq!(h.board.as_deref(), Some("esp32s3-breadboard"));
    let display = h.caps.display.as_ref().unwrap();
    assert_eq!(display.width, Some(320));
    assert_eq!(display.charset.as_deref(), Some("ascii"));
    let image = display.image.as_ref().unwrap();
    assert_eq!((image.width, image.height), (320, 196));
    assert_eq!(h.caps.mic.as_ref().unwrap().rate, 16000);
    assert_eq!(h.caps.inputs, ["talk", "cancel", "up", "down"]);
    assert_eq!(h.caps.talk_mode.as_deref(), Some("hold"));
    assert!(h.caps.ota.is_none());
    assert_eq!(h.actions.len(), 1);
    assert_eq!(h.actions[0].name, "led.set");
    assert_eq!(h.sensors["battery_pct"], 87);
    assert_eq!(h.validate(), Ok(()));
}
