//! Secrets: fresh randomness, and tokens kept in private files.

use std::path::Path;

/// Fill `buf` from the operating system's CSPRNG.
///
/// Herald cannot run safely without randomness (nonces, codes, tokens), so a failing
/// OS source is treated as fatal rather than silently weakened.
pub fn fill_random(buf: &mut [u8]) {
    if let Err(err) = getrandom::fill(buf) {
        panic!("the operating system's random source failed: {err}");
    }
}

/// `len` lowercase hex characters (`len` even) of fresh randomness.
pub fn random_hex(len: usize) -> String {
    let mut bytes = vec![0u8; len.div_ceil(2)];
    fill_random(&mut bytes);
    let mut text = hex::encode(bytes);
    text.truncate(len);
    text
}

/// The token kept in the private file `path`; a new one (64 hex characters) when the
/// file is missing or holds fewer than 32 characters, the least a guessable secret
/// may have.
pub fn load_or_create_token(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(token) if token.trim().len() >= 32 => Ok(token.trim().to_owned()),
        _ => {
            let token = random_hex(64);
            crate::write_private(path, token.as_bytes())?;
            Ok(token)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kept_token_is_read_back_and_a_missing_or_short_one_made_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("some.token");
        let made = super::load_or_create_token(&path).unwrap();
        assert_eq!(made.len(), 64);
        assert_eq!(super::load_or_create_token(&path).unwrap(), made);
        std::fs::write(&path, "short\n").unwrap();
        let anew = super::load_or_create_token(&path).unwrap();
        assert!(anew.len() == 64 && anew != made);
    }

    #[test]
    fn hex_ids_have_the_asked_length() {
        for len in [8, 12, 64] {
            let id = super::random_hex(len);
            assert_eq!(id.len(), len);
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
        assert_ne!(super::random_hex(12), super::random_hex(12));
    }
}
