//! The device's identity: a 32-byte key made once and the id derived from it.
//!
//! The key is generated through the host's random source on first boot and handed to the
//! host to persist ([`crate::Action::StoreKey`]); every later boot passes it back in. It
//! crosses the network once, at enrollment; afterwards the device proves it holds the key
//! with the handshake MAC and checks the server's firmware MAC with it. The derivation and
//! both MACs are the protocol crate's, so device and server compute them with one code.

use alloc::string::String;
use core::fmt;

use herald_gadget_proto::auth::{auth_mac, b64, device_id, verify_ota_mac};
use herald_gadget_proto::limits::KEY_LEN;
use herald_gadget_proto::{Auth, Challenge};

use crate::host::Host;

/// A device key and its id.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    key: [u8; KEY_LEN],
    device_id: String,
}

impl Identity {
    /// The identity of a stored key.
    pub fn from_key(key: [u8; KEY_LEN]) -> Identity {
        let device_id = device_id(&key);
        Identity { key, device_id }
    }

    /// A new identity from the host's random source.
    pub fn generate(host: &mut impl Host) -> Identity {
        let mut key = [0u8; KEY_LEN];
        host.fill_random(&mut key);
        Identity::from_key(key)
    }

    /// `hg-` plus the first 16 hex characters of sha256(key).
    pub fn device_id(&self) -> &str {
        &self.device_id
    }

    /// The key, for the host to persist; never log it.
    pub fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// The answer to a challenge: the key itself on first contact (trust on first use),
    /// else the MAC over the nonce as sent.
    pub fn auth(&self, challenge: &Challenge) -> Auth {
        if challenge.enrolled {
            Auth {
                key: None,
                mac: Some(b64(&auth_mac(&self.key, &self.device_id, &challenge.nonce))),
            }
        } else {
            Auth {
                key: Some(b64(&self.key)),
                mac: None,
            }
        }
    }

    /// Whether `ota.begin`'s MAC proves the server holds this device's key and authorizes
    /// exactly this image (its SHA-256 and size) for this nonce.
    pub fn verify_ota(&self, nonce_b64: &str, sha256_hex: &str, size: u64, mac_b64: &str) -> bool {
        verify_ota_mac(
            &self.key,
            &self.device_id,
            nonce_b64,
            sha256_hex,
            size,
            mac_b64,
        )
    }
}

impl fmt::Debug for Identity {
    // The key is a secret: only the id is ever printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("device_id", &self.device_id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::ToString;

    fn spec_key() -> [u8; KEY_LEN] {
        core::array::from_fn(|i| i as u8)
    }

    #[test]
    fn first_contact_sends_the_key_then_macs() {
        let id = Identity::from_key(spec_key());
        assert_eq!(id.device_id(), "hg-630dcd2966c43366");
        let mut challenge = Challenge {
            nonce: "bm9uY2Utbm9uY2Utbm9uY2U=".to_string(),
            enrolled: false,
        };
        let auth = id.auth(&challenge);
        assert_eq!(
            auth.key.as_deref(),
            Some("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        );
        assert_eq!(auth.mac, None);
        challenge.enrolled = true;
        let auth = id.auth(&challenge);
        assert_eq!(auth.key, None);
        assert_eq!(
            auth.mac.as_deref(),
            Some("AMUEF53Phk8+1vHw7R8PgiDwlPd8rXUx+cgyYv1YJX0=")
        );
    }

    #[test]
    fn debug_hides_the_key() {
        let text = format!("{:?}", Identity::from_key([0xab; KEY_LEN]));
        assert!(text.contains("hg-"), "{text}");
        assert!(!text.contains("171"), "{text}");
        assert!(!text.to_lowercase().contains("ab, ab"), "{text}");
    }
}
