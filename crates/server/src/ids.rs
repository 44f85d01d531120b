//! Randomness as the session cores take it.

/// The operating system's CSPRNG, as the session cores take their entropy.
pub(crate) struct OsEntropy;

impl herald_session::Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) {
        herald_files::secret::fill_random(buf);
    }
}
