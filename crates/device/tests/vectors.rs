//! The shared identity and MAC vectors, checked through the device's own identity code:
//! the id it derives from its key, the MAC it answers a challenge with, and its check of
//! the server's firmware MAC.

use herald_device::Identity;
use herald_gadget_proto::Challenge;
use herald_test_support::vectors::{self, cases, key, s, u};
use serde_json::Value;

fn identity(c: &Value) -> Identity {
    Identity::from_key(key(c))
}

#[test]
fn device_ids() {
    let v = vectors::gadget();
    for c in cases(&v, "device_id") {
        assert_eq!(identity(c).device_id(), s(c, "device_id"), "{}", c["name"]);
    }
}

#[test]
fn valid_keys_give_their_ids() {
    let v = vectors::gadget();
    for c in cases(&v, "keys").iter().filter(|c| c["ok"] == true) {
        assert_eq!(identity(c).device_id(), s(c, "device_id"), "{}", c["name"]);
    }
}

#[test]
fn challenge_answers_match_the_auth_macs() {
    let v = vectors::gadget();
    let mut checked = 0;
    for c in cases(&v, "auth_mac") {
        let id = identity(c);
        let challenge = Challenge {
            nonce: s(c, "nonce").to_owned(),
            enrolled: true,
        };
        let mac = id
            .auth(&challenge)
            .mac
            .expect("enrolled devices send a MAC");
        // The device signs only for its own id; vectors naming another id are the
        // server's concern.
        if id.device_id() != s(c, "device_id") {
            continue;
        }
        // Its answer equals the vector's MAC exactly when the vector is valid.
        assert_eq!(mac == s(c, "mac"), c["valid"] == true, "{}", c["name"]);
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} cases checked");
}

#[test]
fn firmware_macs_verify_only_when_valid() {
    let v = vectors::gadget();
    let mut checked = 0;
    for c in cases(&v, "ota_mac") {
        let id = identity(c);
        // The device verifies with its own id; vectors naming another id are the server's
        // concern.
        if id.device_id() != s(c, "device_id") {
            continue;
        }
        let size = u(c, "size");
        let verified = id.verify_ota(s(c, "nonce"), s(c, "sha256"), size, s(c, "mac"));
        assert_eq!(verified, c["valid"] == true, "{}", c["name"]);
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} cases checked");
}
