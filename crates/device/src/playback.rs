//! Speaker audio: a jitter buffer between the server's frames and the host's speaker queue.
//!
//! The server paces audio to real time, at most 0.5 s ahead, but frames still arrive in
//! bursts and gaps. The buffer fills to [`PREBUFFER_MS`] before playing (or less, when the
//! stream already ended), then releases samples on the core's clock: at any moment the
//! speaker has been handed the elapsed play time plus [`LEAD_MS`], so the host queue
//! never runs dry between ticks and never holds more than that lead. Running dry mid-stream
//! goes back to buffering. The buffer holds at most [`CAPACITY_MS`]; what a misbehaving
//! sender pushes beyond that is dropped and counted rather than growing memory.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use herald_gadget_proto::limits::AUDIO_FRAME_MS;

use crate::time::{millis, Instant};

/// Audio buffered before playback starts.
pub const PREBUFFER_MS: u64 = 200;
/// How far ahead of the play position samples are handed to the host.
pub const LEAD_MS: u64 = 100;
/// Most audio the buffer holds: the spec's "about 1 s is enough".
pub const CAPACITY_MS: u64 = 1_000;

/// The stream being played.
#[derive(Debug)]
struct Stream {
    id: u8,
    rate: u32,
    buffer: VecDeque<i16>,
    /// A sample's first byte when a frame ended mid-sample.
    odd_byte: Option<u8>,
    next_seq: Option<u16>,
    ended: bool,
    /// When playing: when play started and how many samples went to the host since.
    clock: Option<(Instant, u64)>,
    next_tick: Option<Instant>,
}

impl Stream {
    fn samples_for(&self, ms: u64) -> u64 {
        u64::from(self.rate) * ms / 1000
    }
}

/// What a poll released.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Release {
    /// Sample rate of the stream.
    pub(crate) rate: u32,
    /// Samples for the speaker, possibly none.
    pub(crate) samples: Vec<i16>,
    /// The stream played out to its end and is gone.
    pub(crate) finished: bool,
}

/// Counters a host may show or log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlaybackStats {
    /// Frames whose sequence number skipped ahead.
    pub gaps: u32,
    /// Samples dropped because the buffer was full.
    pub overflow: u64,
    /// Times the buffer ran dry mid-stream.
    pub underruns: u32,
}

/// The jitter buffer.
#[derive(Debug, Default)]
pub(crate) struct Player {
    stream: Option<Stream>,
    stats: PlaybackStats,
}

impl Player {
    pub(crate) fn stats(&self) -> PlaybackStats {
        self.stats
    }

    /// Whether a stream is buffered or playing.
    pub(crate) fn is_active(&self) -> bool {
        self.stream.is_some()
    }

    /// A new stream replaces any other; true when one was replaced.
    pub(crate) fn start(&mut self, id: u8, rate: u32) -> bool {
        let rate = rate.max(1);
        let replaced = self.stream.is_some();
        let capacity = usize::try_from(u64::from(rate) * CAPACITY_MS / 1000).unwrap_or(0);
        self.stream = Some(Stream {
            id,
            rate,
            buffer: VecDeque::with_capacity(capacity),
            odd_byte: None,
            next_seq: None,
            ended: false,
            clock: None,
            next_tick: None,
        });
        replaced
    }

    /// Buffers a channel-1 payload; frames of other streams are ignored.
    pub(crate) fn push(&mut self, id: u8, seq: u16, payload: &[u8]) {
        let Some(s) = self.stream.as_mut().filter(|s| s.id == id && !s.ended) else {
            return;
        };
        if let Some(expected) = s.next_seq {
            if seq != expected {
                self.stats.gaps += 1;
            }
        }
        s.next_seq = Some(seq.wrapping_add(1));
        let capacity = usize::try_from(s.samples_for(CAPACITY_MS)).unwrap_or(0);
        let mut bytes = payload.iter().copied();
        if let Some(lo) = s.odd_byte.take() {
            match bytes.next() {
                Some(hi) => {
                    push_bounded(s, capacity, i16::from_le_bytes([lo, hi]), &mut self.stats)
                }
                None => s.odd_byte = Some(lo),
            }
        }
        while let Some(lo) = bytes.next() {
            match bytes.next() {
                Some(hi) => {
                    push_bounded(s, capacity, i16::from_le_bytes([lo, hi]), &mut self.stats)
                }
                None => s.odd_byte = Some(lo),
            }
        }
    }

    /// The stream completed normally: play out what is buffered.
    pub(crate) fn end(&mut self, id: u8) {
        if let Some(s) = self.stream.as_mut().filter(|s| s.id == id) {
            s.ended = true;
        }
    }

    /// Drops the stream if it is `id`; true when it was playing.
    pub(crate) fn abort(&mut self, id: u8) -> bool {
        let matches = self.stream.as_ref().is_some_and(|s| s.id == id);
        if matches {
            self.stream = None;
        }
        matches
    }

    /// Drops any stream; true when one was playing.
    pub(crate) fn stop(&mut self) -> bool {
        self.stream.take().is_some()
    }

    /// When samples are next due.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.stream.as_ref().and_then(|s| s.next_tick)
    }

    /// Releases the samples due at `now`; `None` when there is nothing to do.
    pub(crate) fn poll(&mut self, now: Instant) -> Option<Release> {
        let s = self.stream.as_mut()?;
        if s.clock.is_none() {
            let ready = s.buffer.len() as u64 >= s.samples_for(PREBUFFER_MS)
                || (s.ended && !s.buffer.is_empty());
            if !ready {
                if !s.ended {
                    return None;
                }
                let rate = s.rate;
                self.stream = None;
                return Some(Release {
                    rate,
                    samples: Vec::new(),
                    finished: true,
                });
            }
            s.clock = Some((now, 0));
        }
        let (started, released) = s.clock.unwrap_or((now, 0));
        let elapsed =
            u64::try_from(now.saturating_duration_since(started).as_millis()).unwrap_or(u64::MAX);
        let due = s.samples_for(elapsed.saturating_add(LEAD_MS));
        let n = usize::try_from(due.saturating_sub(released))
            .unwrap_or(usize::MAX)
            .min(s.buffer.len());
        let samples: Vec<i16> = s.buffer.drain(..n).collect();
        s.clock = Some((started, released + n as u64));
        let finished = s.buffer.is_empty() && s.ended;
        if s.buffer.is_empty() && !s.ended {
            // Ran dry mid-stream: buffer up again before playing on.
            self.stats.underruns += 1;
            s.clock = None;
            s.next_tick = None;
        } else {
            // Keep the tick steady when pushes poll in between.
            let tick = millis(u64::from(AUDIO_FRAME_MS));
            s.next_tick = Some(s.next_tick.filter(|t| *t > now).unwrap_or(now + tick));
        }
        let rate = s.rate;
        if finished {
            // The host's queue still holds the last LEAD_MS; that is the speaker's now.
            self.stream = None;
        }
        (finished || !samples.is_empty()).then_some(Release {
            rate,
            samples,
            finished,
        })
    }
}

fn push_bounded(s: &mut Stream, capacity: usize, sample: i16, stats: &mut PlaybackStats) {
    if s.buffer.len() < capacity {
        s.buffer.push_back(sample);
    } else {
        stats.overflow += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const RATE: u32 = 16_000;

    fn pcm(samples: usize) -> Vec<u8> {
        vec![0u8; samples * 2]
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn released(r: Option<Release>) -> usize {
        r.map_or(0, |r| r.samples.len())
    }

    #[test]
    fn waits_for_the_prebuffer_then_paces_with_a_lead() {
        let mut p = Player::default();
        assert!(!p.start(1, RATE));
        p.push(1, 0, &pcm(1_600)); // 100 ms
        assert_eq!(p.poll(at(0)), None);
        assert_eq!(p.deadline(), None);
        p.push(1, 1, &pcm(3_200)); // 300 ms in all
                                   // Play starts: the host gets the 100 ms lead.
        assert_eq!(released(p.poll(at(0))), 1_600);
        assert_eq!(p.deadline(), Some(at(40)));
        // 40 ms later, 40 ms more.
        assert_eq!(released(p.poll(at(40))), 640);
        assert_eq!(released(p.poll(at(40))), 0);
        assert_eq!(p.deadline(), Some(at(80)));
        // A late tick catches up in one go.
        assert_eq!(released(p.poll(at(120))), 1_280);
    }

    #[test]
    fn a_short_ended_stream_plays_at_once_and_finishes() {
        let mut p = Player::default();
        p.start(2, RATE);
        p.push(2, 0, &pcm(800));
        p.end(2);
        let r = p.poll(at(5)).unwrap();
        assert_eq!((r.rate, r.samples.len(), r.finished), (RATE, 800, true));
        assert!(!p.is_active());
        assert_eq!(p.poll(at(6)), None);
    }

    #[test]
    fn an_ended_stream_finishes_after_its_last_samples() {
        let mut p = Player::default();
        p.start(2, RATE);
        p.push(2, 0, &pcm(8_000)); // 500 ms
        p.end(2);
        let mut total = 0;
        let mut t = 0;
        loop {
            let r = p.poll(at(t)).unwrap();
            total += r.samples.len();
            if r.finished {
                break;
            }
            t = p.deadline().unwrap().as_millis();
        }
        assert_eq!(total, 8_000);
        // 500 ms of audio with a 100 ms lead is handed over by 400 ms.
        assert_eq!(t, 400);
    }

    #[test]
    fn running_dry_goes_back_to_buffering() {
        let mut p = Player::default();
        p.start(3, RATE);
        p.push(3, 0, &pcm(3_200));
        assert_eq!(released(p.poll(at(0))), 1_600);
        assert_eq!(released(p.poll(at(200))), 1_600);
        assert_eq!(p.stats().underruns, 1);
        assert_eq!(p.deadline(), None);
        assert!(p.is_active());
        p.push(3, 1, &pcm(1_000));
        assert_eq!(p.poll(at(240)), None);
        p.push(3, 2, &pcm(3_000));
        assert_eq!(released(p.poll(at(280))), 1_600);
    }

    #[test]
    fn the_buffer_is_bounded_and_gaps_are_counted() {
        let mut p = Player::default();
        p.start(4, RATE);
        p.push(4, 0, &pcm(20_000));
        p.push(4, 2, &pcm(4_000));
        assert_eq!(p.stats().overflow, 8_000);
        assert_eq!(p.stats().gaps, 1);
        p.push(4, 3, &pcm(1));
        assert_eq!(p.stats().gaps, 1);
    }

    #[test]
    fn samples_split_across_frames_are_joined() {
        let mut p = Player::default();
        p.start(5, RATE);
        p.push(5, 0, &[0x01]);
        p.push(5, 1, &[0x02, 0x03]);
        p.push(5, 2, &[0x04]);
        p.end(5);
        let r = p.poll(at(0)).unwrap();
        assert_eq!(r.samples, vec![0x0201, 0x0403]);
    }

    #[test]
    fn other_streams_are_ignored_and_replaced() {
        let mut p = Player::default();
        p.start(6, RATE);
        p.push(7, 0, &pcm(4_000));
        p.end(7);
        assert!(!p.abort(7));
        assert_eq!(p.poll(at(0)), None);
        assert!(p.start(8, RATE));
        assert!(p.abort(8));
        assert!(!p.stop());
    }
}
