//! The ids a core mints (turns, messages, questions, actions), from entropy its shell
//! injects: the operating system's random source in the server, a seeded sequence in
//! tests, so a test's ids are the same every run.

/// Where a core's randomness comes from.
pub trait Entropy: Send + Sync {
    /// Fill `buf` with fresh bytes.
    fn fill(&mut self, buf: &mut [u8]);
}

/// A core's id generator.
pub struct Ids(Box<dyn Entropy>);

impl Ids {
    /// Ids from `entropy`.
    pub fn new(entropy: impl Entropy + 'static) -> Ids {
        Ids(Box::new(entropy))
    }

    /// Ids that are the same every run: a counter mixed by SplitMix64, for tests and
    /// simulations. Not for anything a stranger could guess at.
    pub fn seeded(seed: u64) -> Ids {
        Ids::new(Seeded(seed))
    }

    /// Fill `buf` with fresh bytes (a handshake's nonce).
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.0.fill(buf);
    }

    /// `len` lowercase hex characters.
    pub fn hex(&mut self, len: usize) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = vec![0u8; len.div_ceil(2)];
        self.0.fill(&mut bytes);
        let mut text: String = bytes
            .iter()
            .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
            .map(char::from)
            .collect();
        text.truncate(len);
        text
    }
}

impl std::fmt::Debug for Ids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ids")
    }
}

struct Seeded(u64);

impl Entropy for Seeded {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ids;

    #[test]
    fn seeded_ids_repeat_per_seed_and_differ_between_calls() {
        let (mut a, mut b) = (Ids::seeded(7), Ids::seeded(7));
        let first = a.hex(12);
        assert_eq!(first.len(), 12);
        assert!(first
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(first, b.hex(12));
        assert_ne!(a.hex(12), first);
        assert_eq!(Ids::seeded(8).hex(7).len(), 7);
        assert_ne!(Ids::seeded(8).hex(12), first);
    }
}
