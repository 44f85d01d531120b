//! Streaming speech: the values of the `speech_*` requests, each checked as it is read,
//! so a transport only ever sees an id, a rate, a channel count or a chunk that is usable.

use serde::{Deserialize, Serialize};

/// Longest speech id, in bytes.
pub const MAX_SPEECH_ID: usize = 64;
/// Lowest and highest rate of the PCM a speech stream takes.
pub const MIN_SPEECH_RATE: u32 = 8_000;
pub const MAX_SPEECH_RATE: u32 = 48_000;
/// Largest chunk of PCM one write may bring, decoded. A bridge line holds at most 1 MiB,
/// so its base64 (4/3 of this) still fits with room for the rest of the request.
pub const MAX_SPEECH_CHUNK: usize = 512 * 1024;

/// The agent's name for one speech stream (a reply spoken as it is made).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SpeechId(String);

impl SpeechId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SpeechId {
    type Error = String;

    fn try_from(id: String) -> Result<Self, String> {
        if id.is_empty() || id.len() > MAX_SPEECH_ID {
            return Err(format!("a speech id has 1 to {MAX_SPEECH_ID} bytes"));
        }
        Ok(SpeechId(id))
    }
}

impl From<SpeechId> for String {
    fn from(id: SpeechId) -> String {
        id.0
    }
}

/// The format of the PCM a stream's writes bring: 16-bit little-endian, interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawFormat", into = "RawFormat")]
pub struct PcmFormat {
    pub sample_rate: u32,
    /// 1 or 2; two are averaged to mono.
    pub channels: u16,
}

#[derive(Serialize, Deserialize)]
struct RawFormat {
    sample_rate: u32,
    channels: u16,
}

impl TryFrom<RawFormat> for PcmFormat {
    type Error = String;

    fn try_from(raw: RawFormat) -> Result<Self, String> {
        if !(MIN_SPEECH_RATE..=MAX_SPEECH_RATE).contains(&raw.sample_rate) {
            return Err(format!(
                "sample_rate {} is outside {MIN_SPEECH_RATE}..={MAX_SPEECH_RATE}",
                raw.sample_rate
            ));
        }
        if !(1..=2).contains(&raw.channels) {
            return Err(format!("channels {} is not 1 or 2", raw.channels));
        }
        Ok(PcmFormat {
            sample_rate: raw.sample_rate,
            channels: raw.channels,
        })
    }
}

impl From<PcmFormat> for RawFormat {
    fn from(format: PcmFormat) -> RawFormat {
        RawFormat {
            sample_rate: format.sample_rate,
            channels: format.channels,
        }
    }
}

/// A chunk of PCM bytes, base64 on the wire; any length up to [`MAX_SPEECH_CHUNK`] (a
/// sample may straddle two chunks).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PcmChunk(pub Vec<u8>);

impl std::fmt::Debug for PcmChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PcmChunk({} bytes)", self.0.len())
    }
}

impl TryFrom<String> for PcmChunk {
    type Error = String;

    fn try_from(base64: String) -> Result<Self, String> {
        // Checked before decoding, so an oversized chunk costs no allocation.
        if base64.len() / 4 * 3 > MAX_SPEECH_CHUNK + 3 {
            return Err(format!("a chunk holds at most {MAX_SPEECH_CHUNK} bytes"));
        }
        let bytes = base64_simd::forgiving_decode_to_vec(base64.as_bytes())
            .map_err(|_| "pcm is not base64".to_owned())?;
        if bytes.len() > MAX_SPEECH_CHUNK {
            return Err(format!("a chunk holds at most {MAX_SPEECH_CHUNK} bytes"));
        }
        Ok(PcmChunk(bytes))
    }
}

impl From<PcmChunk> for String {
    fn from(chunk: PcmChunk) -> String {
        base64_simd::STANDARD.encode_to_string(&chunk.0)
    }
}

/// Why herald stopped a speech stream before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeechStopReason {
    /// The user spoke over it, cancelled, or started a new conversation.
    Interrupted,
}
