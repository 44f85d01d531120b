//! Random identifiers and secrets.

/// Fill `buf` from the operating system's CSPRNG.
///
/// Herald cannot run safely without randomness (nonces, codes, tokens), so a failing
/// OS source is treated as fatal rather than silently weakened.
pub fn fill_random(buf: &mut [u8]) {
    if let Err(err) = getrandom::fill(buf) {
        panic!("the operating system's random source failed: {err}");
    }
}

/// The operating system's CSPRNG, as the session cores take their entropy.
pub(crate) struct OsEntropy;

impl herald_session::Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) {
        fill_random(buf);
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

#[cfg(test)]
mod tests {
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
