//! Binary media frames: a 4-byte header, then the payload.
//!
//! | offset | size   | field                                   |
//! |--------|--------|-----------------------------------------|
//! | 0      | u8     | channel: 1 audio, 2 image, 3 firmware   |
//! | 1      | u8     | stream id from `*.start` or `ota.offer` |
//! | 2      | u16 LE | sequence number, wrapping               |

use alloc::vec::Vec;

/// Length of the binary frame header.
pub const HEADER_LEN: usize = 4;

/// What a binary frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Channel {
    /// Mono PCM16 little-endian at the rate of the matching `audio.start`.
    Audio = 1,
    /// RGB565 little-endian, row-major, continuing where the previous chunk stopped.
    Image = 2,
    /// The next bytes of a firmware image.
    Firmware = 3,
}

impl TryFrom<u8> for Channel {
    type Error = FrameError;

    fn try_from(b: u8) -> Result<Self, FrameError> {
        match b {
            1 => Ok(Self::Audio),
            2 => Ok(Self::Image),
            3 => Ok(Self::Firmware),
            other => Err(FrameError::UnknownChannel(other)),
        }
    }
}

/// Why a binary frame was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the header.
    #[error("binary frame of {len} bytes is shorter than its header")]
    Short {
        /// Length of the frame.
        len: usize,
    },
    /// The channel byte names no channel.
    #[error("unknown binary channel {0}")]
    UnknownChannel(u8),
}

/// The header of a binary frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// What the payload is.
    pub channel: Channel,
    /// Which stream it belongs to.
    pub stream: u8,
    /// Position in the stream; wraps at 65536.
    pub seq: u16,
}

impl FrameHeader {
    /// The header's four wire bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let [lo, hi] = self.seq.to_le_bytes();
        [self.channel as u8, self.stream, lo, hi]
    }
}

/// Builds a binary frame from its header and payload.
pub fn encode_frame(header: FrameHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(payload);
    out
}

/// Splits a binary frame into its header and payload, borrowing the payload.
pub fn decode_frame(bytes: &[u8]) -> Result<(FrameHeader, &[u8]), FrameError> {
    let [channel, stream, lo, hi, payload @ ..] = bytes else {
        return Err(FrameError::Short { len: bytes.len() });
    };
    let header = FrameHeader {
        channel: Channel::try_from(*channel)?,
        stream: *stream,
        seq: u16::from_le_bytes([*lo, *hi]),
    };
    Ok((header, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer() {
        let header = FrameHeader {
            channel: Channel::Audio,
            stream: 7,
            seq: 0x1234,
        };
        let bytes = encode_frame(header, &[1, 2]);
        assert_eq!(bytes, [0x01, 0x07, 0x34, 0x12, 0x01, 0x02]);
        assert_eq!(decode_frame(&bytes), Ok((header, &[1u8, 2][..])));
    }

    #[test]
    fn header_only_frame_has_empty_payload() {
        let (h, p) = decode_frame(&[3, 0, 0xff, 0xff]).unwrap();
        assert_eq!(h.channel, Channel::Firmware);
        assert_eq!(h.seq, 0xffff);
        assert!(p.is_empty());
    }

    #[test]
    fn short_frames_are_rejected() {
        for len in 0..HEADER_LEN {
            let bytes = [1u8; HEADER_LEN];
            assert_eq!(decode_frame(&bytes[..len]), Err(FrameError::Short { len }));
        }
    }

    #[test]
    fn unknown_channels_are_rejected() {
        for ch in [0u8, 4, 9, 0xff] {
            assert_eq!(
                decode_frame(&[ch, 7, 0, 0, 1]),
                Err(FrameError::UnknownChannel(ch))
            );
        }
    }
}
