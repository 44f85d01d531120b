//! Push-to-talk recording: one utterance from `audio.start` to `audio.end` or
//! `audio.cancel`, its samples cut into 40 ms channel-1 frames.
//!
//! The host delivers mic samples in whatever blocks its driver produces; the recorder
//! re-cuts them so every frame but the last holds exactly 40 ms (640 samples at 16 kHz),
//! and stops taking samples at the 30 s cap whatever the host sends.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use herald_gadget_proto::device::{AudioEnd, AudioStart};
use herald_gadget_proto::limits::{AUDIO_FRAME_MS, MAX_RECORDING_SECS, MIN_PRESS_MS};
use herald_gadget_proto::{AudioCancel, Channel, DeviceMessage, FrameHeader};

use crate::config::PCM16;
use crate::time::{millis, secs, Instant};

/// Reason sent with `audio.cancel` for a press under 350 ms.
pub(crate) const TOO_SHORT: &str = "too short";

/// How a recording ended on release.
pub(crate) enum Finish {
    /// Under 350 ms: the utterance is discarded.
    TooShort(DeviceMessage),
    /// The last, partial frame (if any) and the `audio.end` that follows it.
    Ended {
        last_frame: Option<Vec<u8>>,
        end: DeviceMessage,
    },
}

/// An utterance being recorded.
#[derive(Debug)]
pub(crate) struct Recording {
    id: String,
    stream: u8,
    rate: u32,
    started: Instant,
    seq: u16,
    frame_samples: usize,
    pending: Vec<i16>,
    samples: u64,
    max_samples: u64,
}

impl Recording {
    /// Starts an utterance and returns it with its `audio.start`.
    pub(crate) fn start(id: String, stream: u8, rate: u32, now: Instant) -> (Self, DeviceMessage) {
        let frame_samples = usize::try_from(u64::from(rate) * u64::from(AUDIO_FRAME_MS) / 1000)
            .unwrap_or(usize::MAX)
            .max(1);
        let start = DeviceMessage::AudioStart(AudioStart {
            id: Some(id.clone()),
            stream,
            rate,
            format: PCM16.to_string(),
            mode: Some("hold".to_string()),
        });
        let recording = Recording {
            id,
            stream,
            rate,
            started: now,
            seq: 0,
            frame_samples,
            pending: Vec::with_capacity(frame_samples),
            samples: 0,
            max_samples: u64::from(rate) * MAX_RECORDING_SECS,
        };
        (recording, start)
    }

    /// When the 30 s cap stops the recording.
    pub(crate) fn deadline(&self) -> Instant {
        self.started + secs(MAX_RECORDING_SECS)
    }

    /// Takes samples, handing each completed frame to `send`. Samples past the cap are
    /// dropped.
    pub(crate) fn push(&mut self, samples: &[i16], mut send: impl FnMut(Vec<u8>)) {
        let room = usize::try_from(self.max_samples - self.samples).unwrap_or(usize::MAX);
        let samples = &samples[..samples.len().min(room)];
        self.samples += samples.len() as u64;
        let mut rest = samples;
        while !rest.is_empty() {
            let take = (self.frame_samples - self.pending.len()).min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() == self.frame_samples {
                send(self.frame());
            }
        }
    }

    /// Ends the utterance on release (or at the cap).
    pub(crate) fn finish(mut self, now: Instant) -> Finish {
        if now.saturating_duration_since(self.started) < millis(MIN_PRESS_MS) {
            return Finish::TooShort(self.cancel(TOO_SHORT));
        }
        let last_frame = (!self.pending.is_empty()).then(|| self.frame());
        let end = DeviceMessage::AudioEnd(AudioEnd {
            id: Some(self.id),
            stream: self.stream,
            duration_ms: Some(self.samples * 1000 / u64::from(self.rate.max(1))),
        });
        Finish::Ended { last_frame, end }
    }

    /// Discards the utterance.
    pub(crate) fn cancel(self, reason: &str) -> DeviceMessage {
        DeviceMessage::AudioCancel(AudioCancel {
            id: Some(self.id),
            stream: self.stream,
            reason: Some(reason.to_string()),
        })
    }

    fn frame(&mut self) -> Vec<u8> {
        let header = FrameHeader {
            channel: Channel::Audio,
            stream: self.stream,
            seq: self.seq,
        };
        self.seq = self.seq.wrapping_add(1);
        let mut frame = Vec::with_capacity(4 + 2 * self.pending.len());
        frame.extend_from_slice(&header.encode());
        for s in self.pending.drain(..) {
            frame.extend_from_slice(&s.to_le_bytes());
        }
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_gadget_proto::decode_frame;

    fn start(now: u64) -> Recording {
        Recording::start("a1".to_string(), 3, 16_000, Instant::from_millis(now)).0
    }

    #[test]
    fn frames_are_40_ms_whatever_the_block_size() {
        let mut rec = start(0);
        let mut frames = Vec::new();
        for _ in 0..10 {
            rec.push(&[7i16; 300], |f| frames.push(f));
        }
        // 3000 samples: four full frames of 640, 440 left over.
        assert_eq!(frames.len(), 4);
        for (i, f) in frames.iter().enumerate() {
            let (h, payload) = decode_frame(f).unwrap();
            assert_eq!((h.channel, h.stream, h.seq), (Channel::Audio, 3, i as u16));
            assert_eq!(payload.len(), 1280);
            assert_eq!(&payload[..2], &7i16.to_le_bytes());
        }
        let Finish::Ended { last_frame, end } = rec.finish(Instant::from_millis(400)) else {
            panic!("long enough");
        };
        let last = last_frame.unwrap();
        let (h, payload) = decode_frame(&last).unwrap();
        assert_eq!((h.seq, payload.len()), (4, 880));
        assert_eq!(
            end,
            DeviceMessage::AudioEnd(AudioEnd {
                id: Some("a1".into()),
                stream: 3,
                duration_ms: Some(187)
            })
        );
    }

    #[test]
    fn short_press_is_cancelled() {
        let rec = start(1_000);
        assert!(matches!(
            rec.finish(Instant::from_millis(1_349)),
            Finish::TooShort(DeviceMessage::AudioCancel(AudioCancel { reason: Some(r), .. })) if r == TOO_SHORT
        ));
        let rec = start(1_000);
        assert!(matches!(
            rec.finish(Instant::from_millis(1_350)),
            Finish::Ended { .. }
        ));
    }

    #[test]
    fn samples_past_30_s_are_dropped() {
        let mut rec = start(0);
        let mut sent = 0;
        let block = [0i16; 16_000];
        for _ in 0..31 {
            rec.push(&block, |f| sent += (f.len() - 4) / 2);
        }
        assert_eq!(sent, 16_000 * 30);
        assert_eq!(rec.deadline(), Instant::from_millis(30_000));
    }
}
