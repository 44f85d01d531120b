//! What the core asks of the host synchronously, because it needs the answer at once.
//!
//! Everything else the host does is an [`crate::Action`] it performs after the fact (send a
//! frame, draw, play, store the key). Randomness and firmware writes are different: the
//! core needs the random bytes to build the next message, and whether a flash write failed
//! decides the next message too, so they are calls with results rather than actions.

/// Why the host could not write or install a firmware image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlashError {
    /// Erasing or writing the update partition failed (`ota.error` `flash`).
    #[error("flash write failed")]
    Io,
    /// The bootloader's own checks rejected the image (`ota.error` `invalid`).
    #[error("the bootloader rejected the image")]
    InvalidImage,
}

/// The host services the core calls directly.
pub trait Host {
    /// Fills `buf` with cryptographically secure random bytes (device key, OTA nonces).
    fn fill_random(&mut self, buf: &mut [u8]);

    /// Prepares the inactive update partition for an image of `size` bytes.
    fn ota_begin(&mut self, size: u64) -> Result<(), FlashError>;

    /// Appends the next bytes of the image.
    fn ota_write(&mut self, bytes: &[u8]) -> Result<(), FlashError>;

    /// Validates the written image and makes it the one to boot next, on probation.
    fn ota_finish(&mut self) -> Result<(), FlashError>;

    /// Drops a partly written image; called at most once per `ota_begin`.
    fn ota_abort(&mut self);
}
