//! Audio for a device's speaker: whatever the agent produced, as PCM16 frames at the
//! device's rate.
//!
//! The pipeline has two stages joined by [`SampleSource`]:
//!
//! 1. a source yields mono `f32` samples at its own rate, a packet at a time:
//!    [`Decoder`] for files (WAV, MP3, Ogg Vorbis, FLAC; any rate, any channel count, averaged
//!    to mono) and [`PcmSource`] for raw mono PCM16 already in memory;
//! 2. [`FrameStream`] resamples them with a band-limited (windowed sinc) filter to the target
//!    rate and hands out fixed-duration PCM16 little-endian frames, one at a time, ready to be
//!    put after a binary frame header.
//!
//! [`SpeechStream`] is the second stage for speech that is still being made: PCM chunks
//! ([`PcmChunks`]) and whole files are pushed as they come, and it says when it needs more.
//!
//! Everything streams: a source decodes one packet only when the resampler needs more input,
//! so the first frame is ready after a few packets, not after the whole file, and memory stays
//! a few packets' worth whatever the file's length. Apart from the packets symphonia reads,
//! nothing is allocated per frame: every buffer is reused from frame to frame.
//!
//! Decoding is CPU work: an async caller runs [`FrameStream::next_frame`] on a blocking
//! thread, or at least keeps it between its pacing sleeps (see [`crate::pacing`]).

mod decode;
mod frames;
mod pcm;
mod stream;

pub use decode::Decoder;
pub use frames::FrameStream;
pub use pcm::PcmSource;
pub use stream::{PcmChunks, Pulled, SpeechStream, MAX_CHANNELS};

/// Why audio could not be read, decoded or resampled.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// Not a container or codec this crate decodes (or not audio at all).
    #[error("unsupported audio: {0}")]
    Unsupported(&'static str),
    /// The data is malformed beyond what skipping a damaged packet can hide.
    #[error("corrupt audio: {0}")]
    Corrupt(&'static str),
    /// A sample rate outside [`MIN_RATE`]..=[`MAX_RATE`].
    #[error("sample rate {0} Hz is out of range")]
    Rate(u32),
    /// A frame duration that holds no sample at the target rate, or more than a second.
    #[error("{0} ms is not a usable frame duration")]
    FrameDuration(u32),
    /// The resampler refused its buffers (a bug here, not bad input).
    #[error("resampling failed: {0}")]
    Resample(String),
    /// Reading the file failed.
    #[error("reading audio failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Lowest sample rate accepted at either end of a [`FrameStream`].
pub const MIN_RATE: u32 = 1_000;
/// Highest sample rate accepted at either end of a [`FrameStream`].
pub const MAX_RATE: u32 = 384_000;

/// Mono audio samples, produced a chunk at a time.
pub trait SampleSource {
    /// Sample rate of what [`read`](SampleSource::read) yields, in Hz.
    fn rate(&self) -> u32;

    /// Appends the next chunk of mono samples (nominally within -1.0..=1.0) to `out`.
    /// Returns `Ok(false)`, having appended nothing, once the source is exhausted.
    fn read(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError>;
}

impl<S: SampleSource + ?Sized> SampleSource for Box<S> {
    fn rate(&self) -> u32 {
        (**self).rate()
    }

    fn read(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        (**self).read(out)
    }
}
