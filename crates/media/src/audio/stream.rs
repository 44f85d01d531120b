//! Speech that is still being made while it plays: PCM arriving in chunks of any size,
//! and whole files, one after the other, cut into one run of frames at the target rate.
//!
//! [`FrameStream`](super::FrameStream) pulls from a source that is complete; here input is
//! pushed as it comes, and running out of it is not the end: [`SpeechStream::next_frame`]
//! says it needs more ([`Pulled::NeedInput`]) and holds what it has until then. The input is
//! a queue of segments, each resampled on its own (a sentence's file may have another rate
//! than the PCM before it), and their output joins in one sample queue, so frames run on
//! across segment edges with no gap. Inside a PCM segment the resampler runs on across
//! pushes: it works in fixed chunks of input, so the output is the same whatever the
//! chunking, and chunk edges cannot click.

use std::collections::VecDeque;

use super::frames::{check_rate, frame_samples, to_pcm16, Resampling};
use super::{AudioError, SampleSource};

/// Most channels a PCM segment may interleave (they are averaged to mono).
pub const MAX_CHANNELS: u16 = 8;

/// Interleaved PCM16 little-endian bytes, in chunks of any size, as mono samples. A sample
/// (or a frame of channels) split across two chunks is carried over to the next.
#[derive(Debug, Clone)]
pub struct PcmChunks {
    channels: usize,
    /// The start of a frame the last chunk cut; fewer than `2 * channels` bytes.
    carry: Vec<u8>,
}

impl PcmChunks {
    /// Chunks of `channels` interleaved channels (1..=[`MAX_CHANNELS`]).
    pub fn new(channels: u16) -> Result<PcmChunks, AudioError> {
        if !(1..=MAX_CHANNELS).contains(&channels) {
            return Err(AudioError::Unsupported("channel count"));
        }
        let channels = usize::from(channels);
        Ok(PcmChunks {
            channels,
            carry: Vec::with_capacity(2 * channels),
        })
    }

    /// Appends the mono samples `chunk` completes to `out` (within -1.0..1.0).
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<f32>) {
        let frame = 2 * self.channels;
        if !self.carry.is_empty() {
            let take = (frame - self.carry.len()).min(chunk.len());
            self.carry.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.carry.len() < frame {
                return;
            }
            out.push(self.mono(&self.carry));
            self.carry.clear();
        }
        let whole = chunk.len() / frame * frame;
        out.extend(chunk[..whole].chunks_exact(frame).map(|f| self.mono(f)));
        self.carry.extend_from_slice(&chunk[whole..]);
    }

    fn mono(&self, frame: &[u8]) -> f32 {
        let sum: f32 = frame
            .chunks_exact(2)
            .map(|s| f32::from(i16::from_le_bytes([s[0], s[1]])))
            .sum();
        sum / (32768.0 * self.channels as f32)
    }
}

/// What [`SpeechStream::next_frame`] has.
#[derive(Debug, PartialEq)]
pub enum Pulled<'a> {
    /// The next frame, PCM16 LE at the target rate: full, but the very last.
    Frame(&'a [u8]),
    /// Nothing until more input is pushed (or the stream is finished).
    NeedInput,
    /// Finished and played out.
    End,
}

/// Frames of speech whose input is pushed as it comes; see the module docs.
pub struct SpeechStream {
    rate: u32,
    frame_samples: usize,
    /// In playing order; only the last may be an open PCM segment.
    segments: VecDeque<Segment>,
    /// [`SpeechStream::finish`] was called: no segment will follow.
    finished: bool,
    /// Samples at the target rate; `pending[taken..]` have not been handed out yet.
    pending: Vec<f32>,
    taken: usize,
    frame: Vec<u8>,
}

impl std::fmt::Debug for SpeechStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpeechStream")
            .field("rate", &self.rate)
            .field("segments", &self.segments.len())
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

struct Segment {
    input: Input,
    /// `None` when the input is at the target rate already.
    resampling: Option<Resampling>,
}

enum Input {
    Pcm {
        rate: u32,
        chunks: PcmChunks,
        /// Pushed samples not yet taken by the resampler (or, at the target rate, the
        /// output).
        samples: Vec<f32>,
        /// No more chunks will join this segment.
        closed: bool,
    },
    Source(Box<dyn SampleSource + Send>),
}

/// What one step of a segment did.
enum Step {
    More,
    Starved,
    Done,
}

impl SpeechStream {
    /// Frames of `frame_ms` milliseconds at `rate` Hz, as [`FrameStream`](super::FrameStream)
    /// cuts them.
    pub fn new(rate: u32, frame_ms: u32) -> Result<SpeechStream, AudioError> {
        let frame_samples = frame_samples(rate, frame_ms)?;
        Ok(SpeechStream {
            rate,
            frame_samples,
            segments: VecDeque::new(),
            finished: false,
            pending: Vec::with_capacity(4 * frame_samples),
            taken: 0,
            frame: Vec::with_capacity(2 * frame_samples),
        })
    }

    /// Appends a chunk of interleaved PCM16 LE at `rate` Hz with `channels` channels: to the
    /// PCM segment being fed when it has that format, else as a new segment.
    pub fn push_pcm(&mut self, rate: u32, channels: u16, chunk: &[u8]) -> Result<(), AudioError> {
        let joins = matches!(
            self.segments.back(),
            Some(Segment { input: Input::Pcm { rate: r, chunks, closed: false, .. }, .. })
                if *r == rate && chunks.channels == usize::from(channels)
        );
        if !joins {
            check_rate(rate)?;
            let chunks = PcmChunks::new(channels)?;
            let resampling = self.resampler_from(rate)?;
            self.close_pcm();
            self.segments.push_back(Segment {
                input: Input::Pcm {
                    rate,
                    chunks,
                    samples: Vec::new(),
                    closed: false,
                },
                resampling,
            });
        }
        if let Some(Segment {
            input: Input::Pcm {
                chunks, samples, ..
            },
            ..
        }) = self.segments.back_mut()
        {
            chunks.push(chunk, samples);
        }
        Ok(())
    }

    /// Appends a whole source (a decoded file), played after everything pushed before it.
    pub fn push_source(&mut self, source: Box<dyn SampleSource + Send>) -> Result<(), AudioError> {
        check_rate(source.rate())?;
        let resampling = self.resampler_from(source.rate())?;
        self.close_pcm();
        self.segments.push_back(Segment {
            input: Input::Source(source),
            resampling,
        });
        Ok(())
    }

    /// Nothing more will be pushed: what is queued plays out, then [`Pulled::End`].
    pub fn finish(&mut self) {
        self.close_pcm();
        self.finished = true;
    }

    /// The next frame, resampling only as much as it needs.
    pub fn next_frame(&mut self) -> Result<Pulled<'_>, AudioError> {
        loop {
            let ready = self.pending.len() - self.taken;
            let last = self.finished && self.segments.is_empty();
            if ready >= self.frame_samples || (last && ready > 0) {
                let count = ready.min(self.frame_samples);
                let samples = &self.pending[self.taken..self.taken + count];
                self.frame.clear();
                self.frame
                    .extend(samples.iter().flat_map(|s| to_pcm16(*s).to_le_bytes()));
                self.taken += count;
                return Ok(Pulled::Frame(&self.frame));
            }
            if last {
                return Ok(Pulled::End);
            }
            // What was handed out is dropped here, so `pending` holds about a frame plus
            // one resampler chunk.
            self.pending.drain(..self.taken);
            self.taken = 0;
            let Some(segment) = self.segments.front_mut() else {
                return Ok(Pulled::NeedInput);
            };
            match segment.step(&mut self.pending)? {
                Step::More => {}
                Step::Done => {
                    self.segments.pop_front();
                }
                Step::Starved => return Ok(Pulled::NeedInput),
            }
        }
    }

    fn resampler_from(&self, rate: u32) -> Result<Option<Resampling>, AudioError> {
        if rate == self.rate {
            Ok(None)
        } else {
            Resampling::new(rate, self.rate).map(Some)
        }
    }

    /// The PCM segment being fed ends: its resampler's tail plays before what follows.
    fn close_pcm(&mut self) {
        if let Some(Segment {
            input: Input::Pcm { closed, .. },
            ..
        }) = self.segments.back_mut()
        {
            *closed = true;
        }
    }
}

impl Segment {
    /// Appends some output to `out`, or says why there is none.
    fn step(&mut self, out: &mut Vec<f32>) -> Result<Step, AudioError> {
        Ok(match (&mut self.input, &mut self.resampling) {
            (Input::Source(source), None) => {
                if source.read(out)? {
                    Step::More
                } else {
                    Step::Done
                }
            }
            (Input::Source(source), Some(resampling)) => {
                if resampling.step(source, out)? {
                    Step::Done
                } else {
                    Step::More
                }
            }
            (
                Input::Pcm {
                    samples, closed, ..
                },
                None,
            ) => {
                if !samples.is_empty() {
                    out.append(samples);
                    Step::More
                } else if *closed {
                    Step::Done
                } else {
                    Step::Starved
                }
            }
            (
                Input::Pcm {
                    samples, closed, ..
                },
                Some(resampling),
            ) => {
                resampling.input().append(samples);
                if resampling.resample_ready(out)? {
                    Step::More
                } else if *closed {
                    resampling.finish(out)?;
                    Step::Done
                } else {
                    Step::Starved
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(samples: &[i16]) -> Vec<u8> {
        samples.iter().flat_map(|s| s.to_le_bytes()).collect()
    }

    #[test]
    fn samples_split_across_chunks_come_out_whole_and_stereo_is_averaged() {
        let bytes = le(&[100, -300, 1000, 3000, -32768, -32768]);
        for split in 0..=bytes.len() {
            let mut chunks = PcmChunks::new(2).unwrap();
            let mut out = Vec::new();
            chunks.push(&bytes[..split], &mut out);
            chunks.push(&bytes[split..], &mut out);
            assert_eq!(out, [-100.0 / 32768.0, 2000.0 / 32768.0, -1.0], "{split}");
        }
        assert!(PcmChunks::new(0).is_err());
        assert!(PcmChunks::new(MAX_CHANNELS + 1).is_err());
    }

    #[test]
    fn a_starved_stream_waits_then_ends_with_the_short_last_frame() {
        let mut stream = SpeechStream::new(16_000, 40).unwrap();
        assert_eq!(stream.next_frame().unwrap(), Pulled::NeedInput);
        stream.push_pcm(16_000, 1, &le(&[7; 1000])).unwrap();
        assert!(matches!(stream.next_frame().unwrap(), Pulled::Frame(f) if f.len() == 1280));
        assert_eq!(stream.next_frame().unwrap(), Pulled::NeedInput);
        stream.finish();
        assert!(matches!(stream.next_frame().unwrap(), Pulled::Frame(f) if f.len() == 720));
        assert_eq!(stream.next_frame().unwrap(), Pulled::End);
    }
}
