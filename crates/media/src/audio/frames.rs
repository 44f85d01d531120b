//! Resampling to the device's rate and cutting fixed-duration PCM16 frames.
//!
//! The resampler is rubato's asynchronous sinc resampler with a fixed ratio. Why these
//! parameters:
//! - windowed sinc, not linear interpolation: interpolation alone folds everything above the
//!   new Nyquist frequency back into the audible band (a 10 kHz sibilant becomes a 6 kHz
//!   whistle at 16 kHz); the sinc filter removes it first;
//! - 128 taps with a squared Blackman window: attenuation beyond 16-bit resolution, and an
//!   automatic cutoff near 0.87 of the lower Nyquist (7 kHz when the device plays 16 kHz),
//!   which keeps all of speech. Longer filters only move that edge a little closer to 8 kHz
//!   for tiny speakers that cannot play it, at twice the cost per sample;
//! - linear interpolation between 256 precomputed filter phases: two dot products per output
//!   sample (cubic needs four), with interpolation error below the 16-bit noise floor;
//! - the sinc resampler rather than rubato's FFT one: it needs no FFT library (compile time)
//!   and already runs over a thousand times faster than real time (see the crate's benches).

use std::time::Duration;

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{
    Async, FixedAsync, Indexing, Resampler, SincInterpolationParameters, SincInterpolationType,
    WindowFunction,
};

use super::{AudioError, SampleSource, MAX_RATE, MIN_RATE};
use crate::wav::pcm16_duration;

/// Source samples per resampler call: about 20-40 ms of audio, so the first frame needs
/// little input while the per-call overhead stays negligible.
const CHUNK: usize = 1024;
/// Longest frame accepted: frames are a transport unit, and this bounds the buffers.
const MAX_FRAME_MS: u32 = 1000;
const SINC_LEN: usize = 128;
const OVERSAMPLING: usize = 256;

/// Fixed-duration mono PCM16 little-endian frames at a target rate, from any
/// [`SampleSource`].
#[derive(Debug)]
pub struct FrameStream<S> {
    source: S,
    rate: u32,
    frame_samples: usize,
    /// `None` when the source is already at the target rate.
    resampling: Option<Resampling>,
    /// Samples at the target rate; `pending[taken..]` have not been handed out yet.
    pending: Vec<f32>,
    taken: usize,
    /// No more samples will be added to `pending`.
    finished: bool,
    /// The frame [`FrameStream::next_frame`] lends out.
    frame: Vec<u8>,
}

impl<S: SampleSource> FrameStream<S> {
    /// Frames of `frame_ms` milliseconds (at most one second) at `rate` Hz from `source`. A
    /// frame holds `rate * frame_ms / 1000` samples (rounded down; 640 for 40 ms at 16 kHz).
    pub fn new(source: S, rate: u32, frame_ms: u32) -> Result<Self, AudioError> {
        check_rate(source.rate())?;
        let frame_samples = frame_samples(rate, frame_ms)?;
        let resampling = if source.rate() == rate {
            None
        } else {
            Some(Resampling::new(source.rate(), rate)?)
        };
        Ok(FrameStream {
            source,
            rate,
            frame_samples,
            resampling,
            pending: Vec::with_capacity(2 * CHUNK.max(frame_samples)),
            taken: 0,
            finished: false,
            frame: Vec::with_capacity(2 * frame_samples),
        })
    }

    /// How long a full frame plays; the pacing clock's unit.
    pub fn frame_duration(&self) -> Duration {
        pcm16_duration(2 * self.frame_samples, self.rate)
    }

    /// The next frame, decoding and resampling only as much as it needs; `None` at the end.
    /// Every frame is full except possibly the last, which holds the remaining samples.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, AudioError> {
        while self.pending.len() - self.taken < self.frame_samples && !self.finished {
            self.fill()?;
        }
        let count = (self.pending.len() - self.taken).min(self.frame_samples);
        if count == 0 {
            return Ok(None);
        }
        let samples = &self.pending[self.taken..self.taken + count];
        self.frame.clear();
        self.frame
            .extend(samples.iter().flat_map(|s| to_pcm16(*s).to_le_bytes()));
        self.taken += count;
        Ok(Some(&self.frame))
    }

    /// Adds samples to `pending`, or marks the stream finished.
    fn fill(&mut self) -> Result<(), AudioError> {
        // What was handed out is dropped here, so `pending` never holds more than a frame
        // plus one resampler chunk.
        self.pending.drain(..self.taken);
        self.taken = 0;
        match &mut self.resampling {
            None => self.finished = !self.source.read(&mut self.pending)?,
            Some(resampling) => {
                self.finished = resampling.step(&mut self.source, &mut self.pending)?;
            }
        }
        Ok(())
    }
}

/// A resampler with its input queue and the bookkeeping that makes the output exactly as long
/// as the input (rubato delays its output by half a filter and pads the last chunk).
#[derive(Debug)]
pub(super) struct Resampling {
    resampler: Async<f32>,
    /// Source samples not yet resampled.
    input: Vec<f32>,
    /// One call's output before it is appended to the pending samples.
    output: Vec<f32>,
    source_done: bool,
    /// Leading output samples that are still filter delay, not audio.
    delay_left: usize,
    /// Source samples fed so far, and output samples kept so far.
    consumed: u64,
    produced: u64,
    from: u32,
    to: u32,
}

impl Resampling {
    pub(super) fn new(from: u32, to: u32) -> Result<Self, AudioError> {
        let parameters = SincInterpolationParameters::new(SINC_LEN, WindowFunction::Blackman2)
            .oversampling_factor(OVERSAMPLING)
            .interpolation(SincInterpolationType::Linear);
        let resampler = Async::<f32>::new_sinc(
            f64::from(to) / f64::from(from),
            1.0,
            &parameters,
            CHUNK,
            1,
            FixedAsync::Input,
        )
        .map_err(|e| AudioError::Resample(e.to_string()))?;
        Ok(Resampling {
            delay_left: resampler.output_delay(),
            input: Vec::with_capacity(2 * CHUNK),
            output: vec![0.0; resampler.output_frames_max()],
            resampler,
            source_done: false,
            consumed: 0,
            produced: 0,
            from,
            to,
        })
    }

    /// Resamples one more chunk into `out`; returns true once everything has been.
    pub(super) fn step(
        &mut self,
        source: &mut impl SampleSource,
        out: &mut Vec<f32>,
    ) -> Result<bool, AudioError> {
        let needed = self.resampler.input_frames_next();
        while self.input.len() < needed && !self.source_done {
            self.source_done = !source.read(&mut self.input)?;
        }
        if self.resample_ready(out)? {
            return Ok(false);
        }
        self.finish(out)?;
        Ok(true)
    }

    /// Source samples waiting to be resampled; a live source appends to them.
    pub(super) fn input(&mut self) -> &mut Vec<f32> {
        &mut self.input
    }

    /// Resamples one chunk into `out` if enough input waits for it; false if not.
    pub(super) fn resample_ready(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        let needed = self.resampler.input_frames_next();
        if self.input.len() < needed {
            return Ok(false);
        }
        self.process(needed, None, out)?;
        self.input.drain(..needed);
        Ok(true)
    }

    /// The end of the source: the partial last chunk, then silence until the delayed
    /// tail is out, so the output is exactly as long as the input.
    pub(super) fn finish(&mut self, out: &mut Vec<f32>) -> Result<(), AudioError> {
        let rest = self.input.len();
        self.process(rest, Some(rest), out)?;
        self.input.clear();
        let expected = (u128::from(self.consumed) * u128::from(self.to)
            + u128::from(self.from / 2))
            / u128::from(self.from);
        let expected = u64::try_from(expected).unwrap_or(u64::MAX);
        while self.produced < expected {
            self.process(0, Some(0), out)?;
        }
        // The padding of the last call ran past the end of the audio.
        let excess = usize::try_from(self.produced - expected).unwrap_or(usize::MAX);
        out.truncate(out.len().saturating_sub(excess));
        Ok(())
    }

    /// One resampler call on `self.input[..frames]`, appending what is audio to `out`.
    fn process(
        &mut self,
        frames: usize,
        partial: Option<usize>,
        out: &mut Vec<f32>,
    ) -> Result<(), AudioError> {
        let failed = |e: &dyn std::fmt::Display| AudioError::Resample(e.to_string());
        let input =
            InterleavedSlice::new(&self.input[..frames], 1, frames).map_err(|e| failed(&e))?;
        let capacity = self.output.len();
        let mut output =
            InterleavedSlice::new_mut(&mut self.output, 1, capacity).map_err(|e| failed(&e))?;
        let indexing = Indexing {
            partial_len: partial,
            ..Indexing::default()
        };
        let (_, written) = self
            .resampler
            .process_into_buffer(&input, &mut output, Some(&indexing))
            .map_err(|e| failed(&e))?;
        self.consumed += frames as u64;
        let skip = self.delay_left.min(written);
        self.delay_left -= skip;
        out.extend_from_slice(&self.output[skip..written]);
        self.produced += (written - skip) as u64;
        Ok(())
    }
}

pub(super) fn check_rate(rate: u32) -> Result<(), AudioError> {
    if (MIN_RATE..=MAX_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(AudioError::Rate(rate))
    }
}

/// Samples in a frame of `frame_ms` at `rate` (which is checked too).
pub(super) fn frame_samples(rate: u32, frame_ms: u32) -> Result<usize, AudioError> {
    check_rate(rate)?;
    let samples = (u64::from(rate) * u64::from(frame_ms) / 1000) as usize;
    if samples == 0 || frame_ms > MAX_FRAME_MS {
        return Err(AudioError::FrameDuration(frame_ms));
    }
    Ok(samples)
}

/// Full scale is 32768 both ways, so PCM16 read by [`super::PcmSource`] comes back bit-exact.
pub(super) fn to_pcm16(sample: f32) -> i16 {
    (sample * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}
