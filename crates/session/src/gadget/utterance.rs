//! An utterance being received: its channel-1 frames collected into the one buffer that
//! later becomes the WAV file, so the audio is never copied.

use std::time::Duration;

use herald_gadget_proto::{device, limits, FrameHeader};
use herald_media::wav::pcm16_duration;

/// Why an `audio.start` is refused; the message is the notice the device shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("Audio format {0} is not supported; send pcm16.")]
    Format(String),
    #[error(
        "Sample rate {0} Hz is not supported ({min} to {max} Hz).",
        min = limits::MIN_AUDIO_RATE,
        max = limits::MAX_AUDIO_RATE
    )]
    Rate(u32),
}

/// An utterance being received.
#[derive(Debug)]
pub struct Utterance {
    pub id: Option<String>,
    pub stream: u8,
    pub rate: u32,
    pcm: Vec<u8>,
    limit: usize,
    next_seq: Option<u16>,
    /// Frames missing according to the sequence numbers.
    pub gaps: u32,
    /// Audio dropped past `max_utterance_s`.
    pub dropped: usize,
}

impl Utterance {
    /// Check an `audio.start`.
    pub fn start(msg: &device::AudioStart, max_utterance_s: u32) -> Result<Utterance, Unsupported> {
        if msg.format != "pcm16" {
            return Err(Unsupported::Format(msg.format.clone()));
        }
        if !(limits::MIN_AUDIO_RATE..=limits::MAX_AUDIO_RATE).contains(&msg.rate) {
            return Err(Unsupported::Rate(msg.rate));
        }
        let limit = msg.rate as usize * 2 * max_utterance_s as usize;
        Ok(Utterance {
            id: msg.id.clone(),
            stream: msg.stream,
            rate: msg.rate,
            // About five seconds up front; the buffer grows only for long utterances.
            pcm: Vec::with_capacity(limit.min(msg.rate as usize * 2 * 5)),
            limit,
            next_seq: None,
            gaps: 0,
            dropped: 0,
        })
    }

    /// Take one channel-1 frame of this utterance's stream.
    pub fn push(&mut self, header: FrameHeader, payload: &[u8]) {
        if let Some(expected) = self.next_seq {
            self.gaps += u32::from(header.seq.wrapping_sub(expected));
        }
        self.next_seq = Some(header.seq.wrapping_add(1));
        let room = self.limit - self.pcm.len();
        let taken = payload.len().min(room);
        self.pcm.extend_from_slice(&payload[..taken]);
        self.dropped += payload.len() - taken;
    }

    pub fn duration(&self) -> Duration {
        pcm16_duration(self.pcm.len(), self.rate)
    }

    pub fn into_pcm(self) -> Vec<u8> {
        self.pcm
    }
}

#[cfg(test)]
mod tests {
    use herald_gadget_proto::Channel;

    use super::*;

    fn start(rate: u32, format: &str) -> device::AudioStart {
        device::AudioStart {
            id: Some("a1".into()),
            stream: 4,
            rate,
            format: format.into(),
            mode: Some("hold".into()),
        }
    }

    fn header(seq: u16) -> FrameHeader {
        FrameHeader {
            channel: Channel::Audio,
            stream: 4,
            seq,
        }
    }

    #[test]
    fn refuses_what_it_cannot_take() {
        let opus = Utterance::start(&start(16_000, "opus"), 60).unwrap_err();
        assert_eq!(
            opus.to_string(),
            "Audio format opus is not supported; send pcm16."
        );
        let slow = Utterance::start(&start(3_999, "pcm16"), 60).unwrap_err();
        assert_eq!(
            slow.to_string(),
            "Sample rate 3999 Hz is not supported (4000 to 48000 Hz)."
        );
        assert_eq!(
            Utterance::start(&start(48_001, "pcm16"), 60).unwrap_err(),
            Unsupported::Rate(48_001)
        );
        assert!(Utterance::start(&start(4_000, "pcm16"), 60).is_ok());
        assert!(Utterance::start(&start(48_000, "pcm16"), 60).is_ok());
    }

    #[test]
    fn counts_gaps_and_caps_the_length() {
        let mut u = Utterance::start(&start(8_000, "pcm16"), 1).unwrap();
        u.push(header(0), &[0; 640]);
        u.push(header(1), &[0; 640]);
        u.push(header(4), &[0; 640]);
        assert_eq!(u.gaps, 2);
        for seq in 5..40 {
            u.push(header(seq), &[0; 640]);
        }
        assert_eq!(u.duration(), Duration::from_secs(1));
        assert_eq!(u.dropped, 38 * 640 - 16_000);
        // Sequence numbers wrap.
        let mut u = Utterance::start(&start(8_000, "pcm16"), 1).unwrap();
        u.push(header(u16::MAX), &[0; 2]);
        u.push(header(0), &[0; 2]);
        assert_eq!(u.gaps, 0);
    }
}
