//! Base64 payloads (`data` of `audio`, `media` and `deliver`).
//!
//! Frames keep `data` as the base64 text it arrived as: decoding is left to whoever needs
//! the bytes, so relaying, deduplicating or rejecting a frame never pays for it. The helpers
//! here decide how lenient that decoding is, once for every caller.

/// `data` was not base64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("data is not valid base64")]
pub struct Base64Error;

/// Encodes bytes as padded standard base64.
pub fn encode_base64(bytes: &[u8]) -> String {
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// Decodes standard base64 as leniently as the web does ("forgiving-base64" of the WHATWG
/// Infra standard): padding may be left off (some platform encoders drop it), the unused
/// bits of the last character are ignored, and line breaks and other ASCII whitespace are
/// skipped, because Android's `Base64.DEFAULT` wraps lines every 76 characters. Decoded
/// with SIMD where the processor has it: a phone's upload is mostly this work.
pub fn decode_base64(data: &str) -> Result<Vec<u8>, Base64Error> {
    base64_simd::forgiving_decode_to_vec(data.as_bytes()).map_err(|_| Base64Error)
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
    fn unused_bits_of_the_last_character_are_ignored() {
        // "aGVsbG8" is "hello"; "9" differs from "8" only in bits that carry no byte.
        assert_eq!(decode_base64("aGVsbG9").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVsbG9=").unwrap(), b"hello");
    }

    #[test]
    fn large_payloads_round_trip() {
        // Long enough for the vector paths, with a tail that is not a whole block.
        let bytes: Vec<u8> = (0..100_003u32).map(|i| (i * 7 + i / 251) as u8).collect();
        assert_eq!(decode_base64(&encode_base64(&bytes)).unwrap(), bytes);
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(decode_base64("<base64>").is_err());
        assert!(decode_base64("aGVsbG8").is_ok_and(|b| b == b"hello"));
        assert!(decode_base64("aGVsbG8==").is_err(), "too much padding");
        assert!(decode_base64("a").is_err(), "a lone character");
        assert!(decode_base64("a b c !").is_err());
        assert!(decode_base64("aGVsbG8=-_").is_err());
    }
}
