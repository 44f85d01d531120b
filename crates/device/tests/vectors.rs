//! The shared identity and MAC vectors, checked through the device's own identity code:
//! the id it derives from its key, the MAC it answers a challenge with, and its check of
//! the server's firmware MAC.

use herald_device::Identity;
use herald_gadget_proto::Challenge;
use serde_json::Value;

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../vectors/gadget-v1.json"
));

fn cases(section: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(VECTORS).expect("vectors file is JSON");
    let cases = v[section].as_array().expect("section").clone();
    assert!(!cases.is_empty(), "{section} is empty");
    cases
}

fn s<'a>(c: &'a Value, field: &str) -> &'a str {
    c[field]
        .as_str()
        .unwrap_or_else(|| panic!("{}: {field}", c["name"]))
}

fn identity(c: &Value) -> Identity {
    let key: [u8; 32] = hex::decode(s(c, "key_hex"))
        .expect("hex key")
        .try_into()
        .expect("32 bytes");
    Identity::from_key(key)
}

#[test]
fn device_ids() {
    for c in cases("device_id") {
        assert_eq!(
            identity(&c).device_id(),
            s(&c, "device_id"),
            "{}",
            c["name"]
        );
    }
}

#[test]
fn valid_keys_give_their_ids() {
    for c in cases("keys").iter().filter(|c| c["ok"] == true) {
        assert_eq!(identity(c).device_id(), s(c, "device_id"), "{}", c["name"]);
    }
}

#[test]
fn challenge_answers_match_the_auth_macs() {
    let mut checked = 0;
    for c in cases("auth_mac") {
        let id = identity(&c);
        let challenge = Challenge {
            nonce: s(&c, "nonce").to_owned(),
            enrolled: true,
        };
        let mac = id
            .auth(&challenge)
            .mac
            .expect("enrolled devices send a MAC");
        // The device signs only for its own id; vectors naming another id are the
        // server's concern.
        if id.device_id() != s(&c, "device_id") {
            continue;
        }
        // Its answer equals the vector's MAC exactly when the vector is valid.
        assert_eq!(mac == s(&c, "mac"), c["valid"] == true, "{}", c["name"]);
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} cases checked");
}

#[test]
fn firmware_macs_verify_only_when_valid() {
    let mut checked = 0;
    for c in cases("ota_mac") {
        let id = identity(&c);
        // The device verifies with its own id; vectors naming another id are the server's
        // concern.
        if id.device_id() != s(&c, "device_id") {
            continue;
        }
        let size = c["size"].as_u64().expect("size");
        let verified = id.verify_ota(s(&c, "nonce"), s(&c, "sha256"), size, s(&c, "mac"));
        assert_eq!(verified, c["valid"] == true, "{}", c["name"]);
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} cases checked");
}
