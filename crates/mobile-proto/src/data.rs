//! Base64 payloads (`data` of `audio`, `media` and `deliver`).
//!
//! Frames keep `data` as the base64 text it arrived as: decoding is left to whoever needs
//! the bytes, so relaying, deduplicating or rejecting a frame never pays for it. The helpers
//! here decide how lenient that decoding is, once for every caller.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

/// Standard alphabet; padding optional on input (some platform encoders drop it), always
/// written on output.
const ENGINE: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// `data` was not base64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("data is not valid base64: {0}")]
pub struct Base64Error(String);

/// Encodes bytes as padded standard base64.
pub fn encode_base64(bytes: &[u8]) -> String {
    ENGINE.encode(bytes)
}

/// Decodes standard base64, with or without padding.
///
/// Line breaks and other ASCII whitespace are tolerated because Android's
/// `Base64.DEFAULT` wraps lines every 76 characters; the copy that strips them is made only
/// when the fast path fails.
pub fn decode_base64(data: &str) -> Result<Vec<u8>, Base64Error> {
    match ENGINE.decode(data) {
        Ok(bytes) => Ok(bytes),
        Err(first) => {
            if !data.bytes().any(|b| b.is_ascii_whitespace()) {
                return Err(Base64Error(first.to_string()));
            }
            let compact: Vec<u8> = data.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
            ENGINE
                .decode(compact)
                .map_err(|e| Base64Error(e.to_string()))
        }
    }
}

/// The number of bytes `data` decodes to, without decoding it, for size checks before the
/// work. Exact for unwrapped base64 (padded or not); for invalid input it is only an
/// estimate, and the decode that follows will fail anyway.
pub fn base64_decoded_len(data: &str) -> usize {
    let n = data.trim_end_matches('=').len();
    n / 4 * 3
        + match n % 4 {
            2 => 1,
            3 => 2,
            _ => 0,
        }
}

/// A file cut into the pieces its `media` frames carry: at most
/// [`MEDIA_CHUNK_BYTES`](crate::limits::MEDIA_CHUNK_BYTES) each, and always at least one
/// (an empty file is one empty piece), so `parts` is never 0.
pub fn media_pieces(bytes: &[u8]) -> Vec<&[u8]> {
    if bytes.is_empty() {
        return vec![bytes];
    }
    bytes.chunks(crate::limits::MEDIA_CHUNK_BYTES).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_lengths() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len as u8).collect();
            let text = encode_base64(&bytes);
            assert_eq!(decode_base64(&text).unwrap(), bytes);
            assert_eq!(base64_decoded_len(&text), len);
            let bare = text.trim_end_matches('=');
            assert_eq!(decode_base64(bare).unwrap(), bytes);
            assert_eq!(base64_decoded_len(bare), len);
        }
    }

    #[test]
    fn wrapped_lines_are_accepted() {
        let bytes = vec![7u8; 200];
        let text = encode_base64(&bytes);
        let wrapped: String = text
            .as_bytes()
            .chunks(76)
            .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
            .collect();
        assert_eq!(decode_base64(&wrapped).unwrap(), bytes);
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(decode_base64("<base64>").is_err());
        assert!(decode_base64("a b c !").is_err());
        assert!(decode_base64("aGVsbG8=-_").is_err());
    }
}
