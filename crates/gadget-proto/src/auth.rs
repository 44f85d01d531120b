//! Device identity and the two MACs of the protocol.
//!
//! A device's id is derived from its key, so nobody can claim an id without the key. After
//! enrollment the key never crosses the network again: the device proves it holds the key
//! with [`auth_mac`], and the server proves it is the one the device enrolled with before
//! a firmware update with [`ota_mac`].
//!
//! Nonces enter the MACs as the base64 string exactly as sent, not decoded, so both sides
//! hash the same bytes without agreeing on a decoder.

use alloc::string::{String, ToString};

use base64_simd::STANDARD;
use hmac::digest::{Key, KeyInit};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::limits::KEY_LEN;

type HmacSha256 = Hmac<Sha256>;

/// Domain-separation prefix of every MAC input.
const MAC_PREFIX: &str = "hermes-gadget/v1|";

/// Why a base64 device key was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not strict standard base64 with padding.
    #[error("key is not valid base64")]
    Base64,
    /// Decoded to the wrong number of bytes.
    #[error("key is {0} bytes, expected 32")]
    Length(usize),
}

/// `hg-` followed by the first 16 hex characters of sha256(key).
pub fn device_id(key: &[u8; KEY_LEN]) -> String {
    let digest = Sha256::digest(key);
    let mut id = String::with_capacity(19);
    id.push_str("hg-");
    id.push_str(&hex::encode(&digest[..8]));
    id
}

/// Decodes an enrollment key: strict standard base64, padded, exactly 32 bytes.
pub fn decode_key(b64: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let bytes = STANDARD.decode_to_vec(b64).map_err(|_| KeyError::Base64)?;
    <[u8; KEY_LEN]>::try_from(bytes.as_slice()).map_err(|_| KeyError::Length(bytes.len()))
}

/// Standard base64 with padding, the encoding of every binary value on the wire.
pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode_to_string(bytes)
}

/// The handshake MAC: HMAC-SHA256(key, "hermes-gadget/v1|" + device_id + "|" + nonce).
pub fn auth_mac(key: &[u8; KEY_LEN], device_id: &str, nonce_b64: &str) -> [u8; 32] {
    hmac(key, &[MAC_PREFIX, device_id, "|", nonce_b64])
}

/// Checks a handshake MAC sent as base64. Malformed or empty MACs are simply wrong.
pub fn verify_auth_mac(
    key: &[u8; KEY_LEN],
    device_id: &str,
    nonce_b64: &str,
    mac_b64: &str,
) -> bool {
    verify(&auth_mac(key, device_id, nonce_b64), mac_b64)
}

/// The firmware-update MAC: HMAC-SHA256(key, "hermes-gadget/v1|ota|" + device_id + "|" +
/// nonce + "|" + sha256_hex + "|" + size in decimal).
pub fn ota_mac(
    key: &[u8; KEY_LEN],
    device_id: &str,
    nonce_b64: &str,
    sha256_hex: &str,
    size: u64,
) -> [u8; 32] {
    let size = size.to_string();
    hmac(
        key,
        &[
            MAC_PREFIX, "ota|", device_id, "|", nonce_b64, "|", sha256_hex, "|", &size,
        ],
    )
}

/// Checks a firmware-update MAC sent as base64. Malformed or empty MACs are simply wrong.
pub fn verify_ota_mac(
    key: &[u8; KEY_LEN],
    device_id: &str,
    nonce_b64: &str,
    sha256_hex: &str,
    size: u64,
    mac_b64: &str,
) -> bool {
    verify(
        &ota_mac(key, device_id, nonce_b64, sha256_hex, size),
        mac_b64,
    )
}

/// Constant-time equality; slices of different lengths are unequal.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

fn verify(expected: &[u8; 32], mac_b64: &str) -> bool {
    match STANDARD.decode_to_vec(mac_b64) {
        Ok(given) => ct_eq(expected, &given),
        Err(_) => false,
    }
}

fn hmac(key: &[u8; KEY_LEN], parts: &[&str]) -> [u8; 32] {
    // HMAC zero-pads keys shorter than the hash block, so padding the 32-byte key to the
    // 64-byte block ourselves gives the same MAC through the infallible constructor.
    let mut block = Key::<HmacSha256>::default();
    block[..KEY_LEN].copy_from_slice(key);
    let mut mac = <HmacSha256 as KeyInit>::new(&block);
    for part in parts {
        mac.update(part.as_bytes());
    }
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> [u8; 32] {
        core::array::from_fn(|i| i as u8)
    }

    const ID: &str = "hg-630dcd2966c43366";
    const NONCE: &str = "bm9uY2Utbm9uY2Utbm9uY2U=";
    const AUTH_MAC: &str = "AMUEF53Phk8+1vHw7R8PgiDwlPd8rXUx+cgyYv1YJX0=";
    const OTA_NONCE: &str = "AAECAwQFBgcICQoLDA0ODw==";
    const EMPTY_SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const OTA_MAC: &str = "ieymn+y1CMEJ5uX8yGz8VrXxT2KKjSOnzJC5qagTTwk=";

    #[test]
    fn device_id_known_answer() {
        assert_eq!(device_id(&key()), ID);
    }

    #[test]
    fn auth_mac_known_answer() {
        assert_eq!(b64(&auth_mac(&key(), ID, NONCE)), AUTH_MAC);
        assert!(verify_auth_mac(&key(), ID, NONCE, AUTH_MAC));
    }

    #[test]
    fn auth_mac_rejects_any_change() {
        let mut other = key();
        other[0] ^= 1;
        assert!(!verify_auth_mac(&other, ID, NONCE, AUTH_MAC));
        assert!(!verify_auth_mac(
            &key(),
            ID,
            "AAAAAAAAAAAAAAAAAAAAAA==",
            AUTH_MAC
        ));
        assert!(!verify_auth_mac(
            &key(),
            "hg-0000000000000000",
            NONCE,
            AUTH_MAC
        ));
        assert!(!verify_auth_mac(&key(), ID, NONCE, ""));
        assert!(!verify_auth_mac(&key(), ID, NONCE, "not base64!"));
        // A truncated MAC is valid base64 but the wrong length.
        assert!(!verify_auth_mac(
            &key(),
            ID,
            NONCE,
            &b64(&auth_mac(&key(), ID, NONCE)[..16])
        ));
    }

    #[test]
    fn ota_mac_known_answer() {
        assert_eq!(
            b64(&ota_mac(&key(), ID, OTA_NONCE, EMPTY_SHA, 1234)),
            OTA_MAC
        );
        assert!(verify_ota_mac(
            &key(),
            ID,
            OTA_NONCE,
            EMPTY_SHA,
            1234,
            OTA_MAC
        ));
        assert!(!verify_ota_mac(
            &key(),
            ID,
            OTA_NONCE,
            EMPTY_SHA,
            1235,
            OTA_MAC
        ));
        assert!(!verify_ota_mac(&key(), ID, OTA_NONCE, EMPTY_SHA, 1234, ""));
    }

    #[test]
    fn decode_key_is_strict() {
        assert_eq!(decode_key(&b64(&key())), Ok(key()));
        assert_eq!(decode_key(&b64(&[7u8; 16])), Err(KeyError::Length(16)));
        assert_eq!(decode_key(&b64(&[7u8; 33])), Err(KeyError::Length(33)));
        assert_eq!(decode_key(""), Err(KeyError::Length(0)));
        let good = b64(&key());
        let unpadded = good.trim_end_matches('=');
        assert_eq!(decode_key(unpadded), Err(KeyError::Base64));
        assert_eq!(
            decode_key(&alloc::format!(" {good}")),
            Err(KeyError::Base64)
        );
        assert_eq!(
            decode_key(&alloc::format!("{good}\n")),
            Err(KeyError::Base64)
        );
        let url_safe = good.replace('+', "-").replace('/', "_");
        if url_safe != good {
            assert_eq!(decode_key(&url_safe), Err(KeyError::Base64));
        }
        assert_eq!(decode_key("!!!!"), Err(KeyError::Base64));
    }

    #[test]
    fn ct_eq_compares_lengths() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert!(ct_eq(b"", b""));
    }
}
