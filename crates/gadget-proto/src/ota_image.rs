//! The checks the server runs on an ESP-IDF application image before offering it.
//!
//! They catch the wrong file (not an image at all) and the wrong board before a single
//! byte is streamed; the device still verifies size, SHA-256 and the image itself.

use alloc::string::String;

use crate::codes::OtaRefusal;
use crate::limits::OTA_MIN_IMAGE;

/// First byte of every ESP-IDF image header.
pub const IMAGE_MAGIC: u8 = 0xE9;
/// Magic word of the application descriptor, a u32 LE at [`APP_DESC_MAGIC_OFFSET`].
pub const APP_DESC_MAGIC: u32 = 0xABCD_5432;
/// Where the application descriptor's magic word sits.
pub const APP_DESC_MAGIC_OFFSET: usize = 32;
/// Bytes of the NUL-padded version string.
pub const VERSION_RANGE: core::ops::Range<usize> = 48..80;
/// Bytes of the NUL-padded project name.
pub const PROJECT_RANGE: core::ops::Range<usize> = 80..112;
/// The ASCII tag firmware embeds to name its board: `HGBOARD=<board>`.
pub const BOARD_TAG: &[u8] = b"HGBOARD=";

/// What the server learns from an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// Version from the application descriptor; the offer's `version`.
    pub version: String,
    /// Project name from the application descriptor.
    pub project: String,
    /// Board named by the first non-empty `HGBOARD=` tag, if any.
    pub board: Option<String>,
    /// Image size in bytes.
    pub size: usize,
}

/// Why bytes are not an application image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Shorter than an image header plus application descriptor.
    #[error("image of {len} bytes is shorter than the minimum of {OTA_MIN_IMAGE}")]
    TooShort {
        /// Length of the bytes.
        len: usize,
    },
    /// The first byte is not 0xE9.
    #[error("bad image magic {0:#04x}")]
    BadMagic(u8),
    /// No application descriptor at offset 32.
    #[error("bad application descriptor magic {0:#010x}")]
    BadAppDescMagic(u32),
    /// The version or project field is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    BadText(&'static str),
}

impl ImageError {
    /// How the server reports it: always `not_an_image`.
    pub fn refusal(&self) -> OtaRefusal {
        OtaRefusal::NotAnImage
    }
}

/// Reads version, project and board of an ESP-IDF application image.
pub fn inspect_image(bytes: &[u8]) -> Result<ImageInfo, ImageError> {
    if bytes.len() < OTA_MIN_IMAGE {
        return Err(ImageError::TooShort { len: bytes.len() });
    }
    if bytes[0] != IMAGE_MAGIC {
        return Err(ImageError::BadMagic(bytes[0]));
    }
    let mut magic = [0u8; 4];
    magic.copy_from_slice(&bytes[APP_DESC_MAGIC_OFFSET..APP_DESC_MAGIC_OFFSET + 4]);
    let magic = u32::from_le_bytes(magic);
    if magic != APP_DESC_MAGIC {
        return Err(ImageError::BadAppDescMagic(magic));
    }
    Ok(ImageInfo {
        version: nul_padded(&bytes[VERSION_RANGE], "version")?,
        project: nul_padded(&bytes[PROJECT_RANGE], "project")?,
        board: find_board(bytes),
        size: bytes.len(),
    })
}

/// The text before the first NUL.
fn nul_padded(field: &[u8], name: &'static str) -> Result<String, ImageError> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    core::str::from_utf8(&field[..end])
        .map(String::from)
        .map_err(|_| ImageError::BadText(name))
}

/// The board of the first `HGBOARD=` tag followed by at least one board character, so a
/// format string like `"HGBOARD=%s"` elsewhere in the binary does not hide the real tag.
fn find_board(bytes: &[u8]) -> Option<String> {
    let mut rest = bytes;
    while let Some(at) = find(rest, BOARD_TAG) {
        let after = &rest[at + BOARD_TAG.len()..];
        let len = after
            .iter()
            .position(|&b| !is_board_char(b))
            .unwrap_or(after.len());
        if len > 0 {
            // Board characters are ASCII, so each byte is one char.
            return Some(after[..len].iter().map(|&b| char::from(b)).collect());
        }
        rest = after;
    }
    None
}

/// Whether `b` may be part of a board name: the name after `HGBOARD=` runs to the first
/// byte that is not one of these. Devices scanning an image as it streams use the same
/// rule, so both ends read the same board from the same bytes.
pub fn is_board_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn image(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[0] = IMAGE_MAGIC;
        b[32..36].copy_from_slice(&APP_DESC_MAGIC.to_le_bytes());
        b[48..53].copy_from_slice(b"0.2.0");
        b[80..87].copy_from_slice(b"gadget1");
        b
    }

    fn put(b: &mut [u8], at: usize, s: &[u8]) {
        b[at..at + s.len()].copy_from_slice(s);
    }

    #[test]
    fn reads_descriptor_and_board() {
        let mut b = image(400);
        put(&mut b, 300, b"HGBOARD=esp32s3-breadboard\0");
        let info = inspect_image(&b).unwrap();
        assert_eq!(
            info,
            ImageInfo {
                version: "0.2.0".into(),
                project: "gadget1".into(),
                board: Some("esp32s3-breadboard".into()),
                size: 400,
            }
        );
    }

    #[test]
    fn board_stops_at_first_foreign_byte() {
        let mut b = image(300);
        put(&mut b, 200, b"HGBOARD=m5.core_s3-v2 tail");
        assert_eq!(
            inspect_image(&b).unwrap().board.as_deref(),
            Some("m5.core_s3-v2")
        );
    }

    #[test]
    fn empty_tag_is_skipped() {
        let mut b = image(300);
        put(&mut b, 150, b"HGBOARD=%s\0");
        put(&mut b, 250, b"HGBOARD=real");
        assert_eq!(inspect_image(&b).unwrap().board.as_deref(), Some("real"));
    }

    #[test]
    fn tag_at_the_very_end() {
        let mut b = image(300);
        put(&mut b, 288, b"HGBOARD=abc\0");
        assert_eq!(inspect_image(&b).unwrap().board.as_deref(), Some("abc"));
        let mut b = image(296);
        put(&mut b, 288, b"HGBOARD=");
        assert_eq!(inspect_image(&b).unwrap().board, None);
    }

    #[test]
    fn no_tag_means_no_board() {
        assert_eq!(inspect_image(&image(288)).unwrap().board, None);
    }

    #[test]
    fn full_width_fields_have_no_nul() {
        let mut b = image(288);
        put(&mut b, 48, &[b'v'; 32]);
        let info = inspect_image(&b).unwrap();
        assert_eq!(info.version.len(), 32);
    }

    #[test]
    fn rejects_non_images() {
        assert_eq!(
            inspect_image(&image(300)[..287]),
            Err(ImageError::TooShort { len: 287 })
        );
        let mut b = image(300);
        b[0] = 0x7f;
        assert_eq!(inspect_image(&b), Err(ImageError::BadMagic(0x7f)));
        let mut b = image(300);
        b[32] = 0;
        assert_eq!(
            inspect_image(&b),
            Err(ImageError::BadAppDescMagic(0xABCD_5400))
        );
        let mut b = image(300);
        b[48] = 0xff;
        assert_eq!(inspect_image(&b), Err(ImageError::BadText("version")));
        let mut b = image(300);
        b[80] = 0xc3;
        assert_eq!(inspect_image(&b), Err(ImageError::BadText("project")));
        assert_eq!(ImageError::BadMagic(0).refusal(), OtaRefusal::NotAnImage);
    }
}
