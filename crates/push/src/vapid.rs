//! The server's VAPID key (RFC 8292): made once, kept 0600 in the data directory, and
//! used to sign a short-lived token for each push, which tells a push service that the
//! pushes to a subscription come from the server the app subscribed with.

use std::path::Path;

use base64_simd::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};

use crate::PushError;

/// How long a signed token holds (RFC 8292 allows at most 24 hours).
pub const TOKEN_SECONDS: u64 = 12 * 3600;

pub struct VapidKey {
    signing: SigningKey,
    /// The public key as an app subscribes with it: uncompressed, base64url.
    public: String,
}

/// Never the private key in a log.
impl std::fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl VapidKey {
    /// The key in `path` (64 hex digits), made and written there (mode 0600) on first
    /// use. A file that holds no valid key is an error naming it, never replaced: the
    /// apps subscribed with the key it held.
    pub fn load_or_create(path: &Path) -> Result<VapidKey, PushError> {
        let bad = |why: &str| PushError::Key {
            path: path.to_owned(),
            why: why.to_owned(),
        };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let bytes = hex_decode(text.trim()).ok_or_else(|| bad("not 64 hex digits"))?;
                let signing = SigningKey::from_slice(&bytes).map_err(|_| bad("not a P-256 key"))?;
                Ok(VapidKey::from_signing(signing))
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let signing = random_key()?;
                let hex: String = signing
                    .to_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                herald_files::write_private(path, format!("{hex}\n").as_bytes()).map_err(
                    |source| PushError::KeyFile {
                        path: path.to_owned(),
                        source,
                    },
                )?;
                Ok(VapidKey::from_signing(signing))
            }
            Err(source) => Err(PushError::KeyFile {
                path: path.to_owned(),
                source,
            }),
        }
    }

    fn from_signing(signing: SigningKey) -> VapidKey {
        let point = signing.verifying_key().to_encoded_point(false);
        let public = URL_SAFE_NO_PAD.encode_to_string(point.as_bytes());
        VapidKey { signing, public }
    }

    /// The public key, uncompressed and base64url: an app's `applicationServerKey`.
    pub fn public_key(&self) -> &str {
        &self.public
    }

    /// The `Authorization` header for a push to a service at `audience` (the endpoint's
    /// origin), valid from `now_s` (Unix seconds) for [`TOKEN_SECONDS`].
    pub fn authorization(&self, audience: &str, contact: &str, now_s: u64) -> String {
        let header = URL_SAFE_NO_PAD.encode_to_string(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({
            "aud": audience,
            "exp": now_s + TOKEN_SECONDS,
            "sub": contact,
        });
        let claims = URL_SAFE_NO_PAD.encode_to_string(claims.to_string());
        let signed = format!("{header}.{claims}");
        let signature: Signature = self.signing.sign(signed.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode_to_string(signature.to_bytes());
        format!("vapid t={signed}.{signature}, k={}", self.public)
    }
}

fn random_key() -> Result<SigningKey, PushError> {
    // A random 32-byte string is a valid scalar but for a chance of about 2^-128; draw
    // again in that case rather than fail.
    loop {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|err| PushError::Random(err.to_string()))?;
        if let Ok(key) = SigningKey::from_slice(&bytes) {
            return Ok(key);
        }
    }
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::signature::Verifier;
    use p256::ecdsa::VerifyingKey;

    use super::*;

    #[test]
    fn the_key_is_made_once_kept_private_and_refused_when_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vapid.key");
        let made = VapidKey::load_or_create(&path).unwrap();
        let again = VapidKey::load_or_create(&path).unwrap();
        assert_eq!(made.public_key(), again.public_key());
        assert_eq!(
            URL_SAFE_NO_PAD
                .decode_to_vec(made.public_key())
                .unwrap()
                .len(),
            65
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!format!("{made:?}").contains(&std::fs::read_to_string(&path).unwrap()[..16]));

        std::fs::write(&path, "not a key\n").unwrap();
        let err = VapidKey::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("vapid.key"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "not a key\n",
            "kept"
        );
    }

    #[test]
    fn the_token_is_an_es256_jwt_for_the_audience_signed_by_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = VapidKey::load_or_create(&dir.path().join("vapid.key")).unwrap();
        let header = key.authorization("https://push.example.net", "mailto:me@example.org", 1000);
        let (token, k) = header
            .strip_prefix("vapid t=")
            .and_then(|rest| rest.split_once(", k="))
            .unwrap();
        assert_eq!(k, key.public_key());
        let (signed, signature) = token.rsplit_once('.').unwrap();
        let (_, claims) = signed.split_once('.').unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode_to_vec(claims).unwrap()).unwrap();
        assert_eq!(claims["aud"], "https://push.example.net");
        assert_eq!(claims["exp"], 1000 + TOKEN_SECONDS);
        assert_eq!(claims["sub"], "mailto:me@example.org");
        let public = URL_SAFE_NO_PAD.decode_to_vec(k).unwrap();
        let verifying = VerifyingKey::from_sec1_bytes(&public).unwrap();
        let signature =
            Signature::from_slice(&URL_SAFE_NO_PAD.decode_to_vec(signature).unwrap()).unwrap();
        assert!(verifying.verify(signed.as_bytes(), &signature).is_ok());
    }
}
