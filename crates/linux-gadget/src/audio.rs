//! Sound for the gadget: a microphone and a speaker on the system's sound cards.
//!
//! The cards run at whatever rate and channel count they offer (a USB microphone at
//! 48 kHz, a speaker in stereo); the protocol wants mono PCM16 at the device's rate.
//! [`Capture`] turns what a card records into the device core's 40 ms mic frames, and
//! [`Render`] turns what the core plays into the card's frames, both with
//! `herald-media`'s streaming resampler (the one the server uses for speakers). They are
//! plain logic, tested here; [`card`] drives real cards through cpal (ALSA, and so
//! PulseAudio or PipeWire through their ALSA plugins) on a thread of its own, and
//! implements the runner's [`LiveSound`](herald_sim::runner::LiveSound).

#[cfg(all(target_os = "linux", feature = "sound"))]
pub mod card;
pub mod speech_end;

use herald_gadget_proto::limits::AUDIO_FRAME_MS;
use herald_media::audio::{AudioError, Pulled, SpeechStream};
use tokio::sync::watch;

/// The rate of the gadget's microphone and speaker, as the protocol's reference board.
pub const DEVICE_RATE: u32 = 16_000;
/// How much a card's output is rendered at a time.
const RENDER_MS: u32 = 10;

/// How one card is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardState {
    /// None is configured.
    Off,
    Ok,
    /// It failed, for this reason; it is tried again at its next use.
    Failed(String),
}

impl std::fmt::Display for CardState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CardState::Off => f.write_str("off"),
            CardState::Ok => f.write_str("ok"),
            CardState::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// Both cards' states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoundState {
    pub microphone: CardState,
    pub speaker: CardState,
}

impl SoundState {
    pub fn failed(&self) -> bool {
        [&self.microphone, &self.speaker]
            .iter()
            .any(|card| matches!(card, CardState::Failed(_)))
    }
}

/// The cards' states as the sound thread finds them, for `status` and the LED to show.
#[derive(Debug)]
pub struct SoundHealth(watch::Sender<SoundState>);

impl Default for SoundHealth {
    fn default() -> Self {
        SoundHealth(watch::Sender::new(SoundState {
            microphone: CardState::Off,
            speaker: CardState::Off,
        }))
    }
}

impl SoundHealth {
    pub fn set_microphone(&self, state: CardState) {
        self.0.send_if_modified(|now| {
            std::mem::replace(&mut now.microphone, state) != now.microphone
        });
    }

    pub fn set_speaker(&self, state: CardState) {
        self.0
            .send_if_modified(|now| std::mem::replace(&mut now.speaker, state) != now.speaker);
    }

    pub fn now(&self) -> SoundState {
        self.0.borrow().clone()
    }

    /// Changes from now on.
    pub fn watch(&self) -> watch::Receiver<SoundState> {
        self.0.subscribe()
    }
}

/// Samples as PCM16 little-endian bytes.
pub(crate) fn pcm16_bytes(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// PCM16 little-endian bytes as samples.
pub(crate) fn pcm16_samples(bytes: &[u8]) -> impl Iterator<Item = i16> + '_ {
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
}

/// A card's recording as the device core's mic frames.
pub struct Capture {
    card_rate: u32,
    channels: u16,
    stream: SpeechStream,
}

impl Capture {
    /// From a card recording `channels` channels at `card_rate` to 40 ms frames at `rate`.
    pub fn new(card_rate: u32, channels: u16, rate: u32) -> Result<Capture, AudioError> {
        Ok(Capture {
            card_rate,
            channels,
            stream: SpeechStream::new(rate, AUDIO_FRAME_MS)?,
        })
    }

    /// Takes interleaved samples from the card; returns the frames now complete.
    pub fn push(&mut self, interleaved: &[i16]) -> Result<Vec<Vec<i16>>, AudioError> {
        self.stream
            .push_pcm(self.card_rate, self.channels, &pcm16_bytes(interleaved))?;
        let mut frames = Vec::new();
        while let Pulled::Frame(frame) = self.stream.next_frame()? {
            frames.push(pcm16_samples(frame).collect());
        }
        Ok(frames)
    }
}

/// What the device core plays, as interleaved samples for a card.
pub struct Render {
    card_rate: u32,
    channels: usize,
    stream: SpeechStream,
    /// Samples pushed since the last flush.
    open: bool,
}

impl Render {
    /// For a card playing `channels` channels at `card_rate`.
    pub fn new(card_rate: u32, channels: u16) -> Result<Render, AudioError> {
        Ok(Render {
            card_rate,
            channels: usize::from(channels.max(1)),
            stream: SpeechStream::new(card_rate, RENDER_MS)?,
            open: false,
        })
    }

    /// The sound paused: appends what the resampler still holds to `out` and starts
    /// afresh. Returns whether there was anything to flush.
    pub fn flush(&mut self, out: &mut Vec<i16>) -> Result<bool, AudioError> {
        if !std::mem::take(&mut self.open) {
            return Ok(false);
        }
        self.stream.finish();
        self.drain(out)?;
        self.stream = SpeechStream::new(self.card_rate, RENDER_MS)?;
        Ok(true)
    }

    fn drain(&mut self, out: &mut Vec<i16>) -> Result<(), AudioError> {
        while let Pulled::Frame(frame) = self.stream.next_frame()? {
            for sample in pcm16_samples(frame) {
                out.extend(std::iter::repeat_n(sample, self.channels));
            }
        }
        Ok(())
    }

    /// Takes mono samples at `rate`; appends what is ready for the card to `out`.
    pub fn push(
        &mut self,
        rate: u32,
        samples: &[i16],
        out: &mut Vec<i16>,
    ) -> Result<(), AudioError> {
        self.stream.push_pcm(rate, 1, &pcm16_bytes(samples))?;
        self.open = true;
        self.drain(out)
    }
}

/// How loud `samples` are: (RMS, peak) in dBFS, -inf for silence.
pub fn level(samples: &[i16]) -> (f64, f64) {
    let db = |x: f64| 20.0 * (x / 32768.0).log10();
    if samples.is_empty() {
        return (f64::NEG_INFINITY, f64::NEG_INFINITY);
    }
    let sum: f64 = samples.iter().map(|s| f64::from(*s).powi(2)).sum();
    let peak = samples
        .iter()
        .map(|s| f64::from(*s).abs())
        .fold(0.0, f64::max);
    (db((sum / samples.len() as f64).sqrt()), db(peak))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, channels: u16, ms: u32, hz: f64) -> Vec<i16> {
        let n = rate * ms / 1000;
        (0..n)
            .flat_map(|i| {
                let t = f64::from(i) / f64::from(rate);
                let s = (8000.0 * (2.0 * std::f64::consts::PI * hz * t).sin()) as i16;
                std::iter::repeat_n(s, usize::from(channels))
            })
            .collect()
    }

    #[test]
    fn a_stereo_48k_card_becomes_40ms_mono_frames_at_16k() {
        let mut capture = Capture::new(48_000, 2, DEVICE_RATE).unwrap();
        let mut frames = Vec::new();
        // One second, in the card's 10 ms periods.
        for period in tone(48_000, 2, 1000, 440.0).chunks(2 * 480) {
            frames.extend(capture.push(period).unwrap());
        }
        // The resampler holds back a little: all but the last frame or two are out.
        assert!((23..=25).contains(&frames.len()), "{}", frames.len());
        assert!(frames.iter().all(|f| f.len() == 640));
        let (rms, peak) = level(&frames[5..20].concat());
        // A sine of amplitude 8000 (-12.3 dBFS peak, -15.3 dBFS RMS) survives.
        assert!((rms + 15.3).abs() < 0.5, "{rms}");
        assert!((peak + 12.3).abs() < 0.5, "{peak}");
    }

    #[test]
    fn the_speaker_is_resampled_and_fills_every_channel() {
        let mut render = Render::new(44_100, 2).unwrap();
        let mut out = Vec::new();
        render
            .push(DEVICE_RATE, &tone(DEVICE_RATE, 1, 500, 300.0), &mut out)
            .unwrap();
        render
            .push(DEVICE_RATE, &tone(DEVICE_RATE, 1, 500, 300.0), &mut out)
            .unwrap();
        // The resampler holds some back until the sound pauses.
        assert!(out.len() / 2 < 43_000, "{}", out.len() / 2);
        assert!(render.flush(&mut out).unwrap());
        assert!(!render.flush(&mut out).unwrap());
        let frames = out.len() / 2;
        assert!((44_000..=44_200).contains(&frames), "{frames}");
        assert!(out.chunks_exact(2).all(|lr| lr[0] == lr[1]));
        let (rms, _) = level(&out[4410..80_000]);
        assert!((rms + 15.3).abs() < 0.5, "{rms}");
    }

    #[test]
    fn silence_has_no_level() {
        assert_eq!(level(&[]).0, f64::NEG_INFINITY);
        assert_eq!(level(&[0; 100]).1, f64::NEG_INFINITY);
        let (rms, peak) = level(&[i16::MIN; 10]);
        assert!(rms.abs() < 1e-9 && peak.abs() < 1e-9);
    }
}
