//! Sound in and out of the simulated board: the microphone hears an audio file, and what
//! the speaker plays is kept and written to a WAV file.
//!
//! Both reuse `herald-media`: its decoder reads any file it knows (WAV, MP3, Ogg, FLAC)
//! and resamples it to the mic rate, exactly as the server prepares audio for a speaker,
//! and its WAV writer saves the speaker's samples atomically.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use herald_gadget_proto::limits::AUDIO_FRAME_MS;
use herald_media::audio::{Decoder, FrameStream};
use herald_media::wav::write_wav;

/// The longest clip the microphone takes: past the device's 30 s recording cap.
const MAX_CLIP: Duration = Duration::from_secs(60);
/// The most speaker audio kept for the WAV file; later audio is not recorded.
const MAX_SPEAKER: Duration = Duration::from_secs(600);

/// Mono PCM16 samples at `rate` decoded from the audio file at `path`.
pub fn load_clip(path: &Path, rate: u32) -> anyhow::Result<Vec<i16>> {
    let decoder =
        Decoder::open(path).with_context(|| format!("cannot read audio {}", path.display()))?;
    let mut frames = FrameStream::new(decoder, rate, AUDIO_FRAME_MS)?;
    let max = samples_in(MAX_CLIP, rate);
    let mut clip = Vec::new();
    while let Some(frame) = frames.next_frame()? {
        clip.extend(
            frame
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]])),
        );
        if clip.len() > max {
            bail!("{} is longer than {} s", path.display(), MAX_CLIP.as_secs());
        }
    }
    Ok(clip)
}

fn samples_in(duration: Duration, rate: u32) -> usize {
    usize::try_from(duration.as_secs() * u64::from(rate)).unwrap_or(usize::MAX)
}

/// The microphone while TALK is held: the clip from its start, then silence.
#[derive(Debug)]
pub struct Mic {
    clip: Vec<i16>,
    at: usize,
    frame: usize,
}

impl Mic {
    /// A microphone at `rate` hearing `clip`, one 40 ms frame at a time.
    pub fn new(clip: Vec<i16>, rate: u32) -> Mic {
        let frame = usize::try_from(u64::from(rate) * u64::from(AUDIO_FRAME_MS) / 1000)
            .unwrap_or(1)
            .max(1);
        Mic { clip, at: 0, frame }
    }

    /// The next 40 ms of sound.
    pub fn next_frame(&mut self) -> Vec<i16> {
        let end = (self.at + self.frame).min(self.clip.len());
        let mut samples = self.clip[self.at..end].to_vec();
        samples.resize(self.frame, 0);
        self.at = end;
        samples
    }

    /// Whether the clip has been heard to its end.
    pub fn finished(&self) -> bool {
        self.at >= self.clip.len()
    }
}

/// Everything the speaker played, for a WAV file.
#[derive(Debug)]
pub struct Speaker {
    path: PathBuf,
    rate: u32,
    samples: Vec<i16>,
    /// Samples played since the last save.
    unsaved: usize,
}

impl Speaker {
    pub fn new(path: PathBuf) -> Speaker {
        Speaker {
            path,
            rate: 0,
            samples: Vec::new(),
            unsaved: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues samples at `rate`. A file has one rate: audio at another starts it over.
    pub fn play(&mut self, rate: u32, samples: &[i16]) {
        if rate != self.rate {
            self.rate = rate;
            self.samples.clear();
        }
        let room = samples_in(MAX_SPEAKER, rate).saturating_sub(self.samples.len());
        let kept = &samples[..samples.len().min(room)];
        self.samples.extend_from_slice(kept);
        self.unsaved += kept.len();
    }

    /// Writes the file if anything was played since the last save; returns how long the
    /// audio played since then lasts.
    pub fn save(&mut self) -> anyhow::Result<Option<Duration>> {
        if self.unsaved == 0 {
            return Ok(None);
        }
        let played = Duration::from_secs_f64(self.unsaved as f64 / f64::from(self.rate));
        self.unsaved = 0;
        let bytes: Vec<u8> = self.samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        write_wav(&self.path, self.rate, &bytes)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(Some(played))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_media::wav::inspect;

    #[test]
    fn a_wav_file_becomes_mic_frames_at_the_mic_rate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tone.wav");
        // Half a second at 8 kHz, heard by a 16 kHz microphone.
        let pcm: Vec<u8> = (0..4000i16)
            .flat_map(|i| ((i % 50) * 300).to_le_bytes())
            .collect();
        write_wav(&path, 8000, &pcm).unwrap();
        let clip = load_clip(&path, 16_000).unwrap();
        assert!((7_900..=8_100).contains(&clip.len()), "{}", clip.len());
        assert!(clip.iter().any(|s| *s != 0));

        let mut mic = Mic::new(clip, 16_000);
        let frames: Vec<Vec<i16>> =
            std::iter::from_fn(|| (!mic.finished()).then(|| mic.next_frame())).collect();
        assert_eq!(frames.len(), 13);
        assert!(frames.iter().all(|f| f.len() == 640));
        // After the clip, silence.
        assert!(mic.next_frame().iter().all(|s| *s == 0));
    }

    #[test]
    fn what_is_not_audio_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "hello").unwrap();
        let err = load_clip(&path, 16_000).unwrap_err();
        assert!(format!("{err:#}").contains("notes.txt"), "{err:#}");
        assert!(load_clip(&dir.path().join("missing.wav"), 16_000).is_err());
    }

    #[test]
    fn the_speaker_file_holds_what_was_played() {
        let dir = tempfile::tempdir().unwrap();
        let mut speaker = Speaker::new(dir.path().join("speaker.wav"));
        assert_eq!(speaker.save().unwrap(), None);
        speaker.play(16_000, &[1; 8_000]);
        speaker.play(16_000, &[2; 8_000]);
        assert_eq!(speaker.save().unwrap(), Some(Duration::from_secs(1)));
        speaker.play(16_000, &[3; 4_000]);
        assert_eq!(speaker.save().unwrap(), Some(Duration::from_millis(250)));
        let info = inspect(&std::fs::read(speaker.path()).unwrap()).unwrap();
        assert_eq!((info.rate, info.channels), (16_000, 1));
        assert_eq!(info.duration, Duration::from_millis(1250));
    }
}
