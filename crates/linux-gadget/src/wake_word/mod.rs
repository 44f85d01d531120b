//! A wake word made from the owner's own voice.
//!
//! The owner says the word a few times ("takes", checked here for level and length and
//! cut to the word); [`train`] makes a reference of them with rustpotter (the takes'
//! MFCCs, which the live sound is compared with by dynamic time warping), and a
//! [`Spotter`] listens for it in the microphone's frames. Plain logic over 16 kHz
//! samples: the sound cards, the files and the service are elsewhere.

use std::collections::HashMap;
use std::time::Duration;

use herald_media::wav::wav_header;
use rustpotter::{
    AudioFmt, DetectorConfig, Endianness, Rustpotter, RustpotterConfig, SampleFormat, WakewordRef,
    WakewordRefBuildFromBuffers, WakewordSave,
};

use crate::audio::{level, pcm16_bytes, DEVICE_RATE};

pub mod commands;
pub mod ear;

/// Where the takes are kept, in the state directory.
pub const TAKES_DIR: &str = "wake-word";
/// The reference made of them, in the state directory.
pub const MODEL_FILE: &str = "wake-word.rpw";
/// The fewest takes a reference is made of, and the most (each costs time per frame).
pub const MIN_TAKES: usize = 3;
pub const MAX_TAKES: usize = 10;
/// How long a word may be, said.
const SHORTEST: Duration = Duration::from_millis(300);
const LONGEST: Duration = Duration::from_millis(2000);
/// A take whose loudest moment is below this (dBFS) is too quiet to learn from.
const QUIETEST_PEAK: f64 = -35.0;
/// A take that reaches this (dBFS) was clipped.
const CLIPPED_PEAK: f64 = -0.2;
/// Level steps a take is measured in.
const STEP: usize = DEVICE_RATE as usize / 100;
/// Quiet kept around the word, so it starts and ends as the live sound does.
const MARGIN: usize = 10 * STEP;
/// The sensitivity when none is set: with espeak-ng's voices as the owner, the word in
/// new sentences scored 0.60 to 0.70 and look-alikes ("Hello there, Harold") up to 0.54
/// (see `herald gadget wake-word bench` for yours).
pub const DEFAULT_SENSITIVITY: f32 = 0.4;
/// How many MFCCs describe each 10 ms (rustpotter's usual).
const MFCCS: u16 = 16;

#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    #[error("nothing was heard: is the microphone on and the right one?")]
    Silent,
    #[error("too quiet (loudest {0:.0} dBFS, at least {QUIETEST_PEAK:.0} needed): speak up or come closer")]
    TooQuiet(f64),
    #[error("too loud: the sound was clipped; step back or lower the microphone's gain")]
    Clipped,
    #[error("too short ({0:.2} s): say the whole word")]
    TooShort(f64),
    #[error("too long ({0:.1} s): say only the word, with quiet before and after")]
    TooLong(f64),
}

#[derive(Debug, thiserror::Error)]
pub enum WakeError {
    #[error("{found} takes of the word: at least {MIN_TAKES} are needed")]
    TooFewTakes { found: usize },
    #[error("{found} takes of the word: at most {MAX_TAKES} are used")]
    TooManyTakes { found: usize },
    #[error("the sensitivity is between 0 and 1, not {0}")]
    Sensitivity(f32),
    #[error("the wake word's reference: {0}")]
    Reference(String),
}

/// The word in `heard` (16 kHz mono, quiet around it), with a little quiet kept.
pub fn take(heard: &[i16]) -> Result<Vec<i16>, TakeError> {
    let (_, peak) = level(heard);
    if peak == f64::NEG_INFINITY {
        return Err(TakeError::Silent);
    }
    if peak < QUIETEST_PEAK {
        return Err(TakeError::TooQuiet(peak));
    }
    if peak >= CLIPPED_PEAK {
        return Err(TakeError::Clipped);
    }
    // The word is where the sound is within 30 dB of its loudest 10 ms.
    let steps: Vec<f64> = heard.chunks(STEP).map(|s| level(s).0).collect();
    let loudest = steps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let loud = |l: &f64| *l > loudest - 30.0;
    let first = steps.iter().position(loud).unwrap_or(0);
    let last = steps.iter().rposition(loud).unwrap_or(0);
    let said = seconds((last + 1 - first) * STEP);
    if said < SHORTEST.as_secs_f64() {
        return Err(TakeError::TooShort(said));
    }
    if said > LONGEST.as_secs_f64() {
        return Err(TakeError::TooLong(said));
    }
    let start = (first * STEP).saturating_sub(MARGIN);
    let end = ((last + 1) * STEP + MARGIN).min(heard.len());
    Ok(heard[start..end].to_vec())
}

fn seconds(samples: usize) -> f64 {
    samples as f64 / f64::from(DEVICE_RATE)
}

/// `samples` as a WAV file's bytes, 16 kHz mono PCM16.
pub fn wav(samples: &[i16]) -> Vec<u8> {
    let pcm = pcm16_bytes(samples);
    // A take is at most a few seconds: far below what a header can say.
    let mut bytes = wav_header(DEVICE_RATE, pcm.len())
        .map(|h| h.to_vec())
        .unwrap_or_default();
    bytes.extend(pcm);
    bytes
}

/// The reference for the word `name` made of `takes` (each from [`take`]), as the bytes
/// of its file.
pub fn train(name: &str, takes: &[Vec<i16>]) -> Result<Vec<u8>, WakeError> {
    if takes.len() < MIN_TAKES {
        return Err(WakeError::TooFewTakes { found: takes.len() });
    }
    if takes.len() > MAX_TAKES {
        return Err(WakeError::TooManyTakes { found: takes.len() });
    }
    let buffers: HashMap<String, Vec<u8>> = takes
        .iter()
        .enumerate()
        .map(|(i, samples)| (format!("take-{}", i + 1), wav(samples)))
        .collect();
    let reference =
        WakewordRef::new_from_sample_buffers(name.to_owned(), None, None, buffers, MFCCS)
            .map_err(WakeError::Reference)?;
    reference.save_to_buffer().map_err(WakeError::Reference)
}

/// The word was heard.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// How alike it was to the takes, 0 to 1.
    pub score: f32,
}

/// Listens for the wake word in 16 kHz mono samples.
pub struct Spotter {
    detector: Rustpotter,
    /// Samples not yet a whole frame of the detector's.
    pending: Vec<i16>,
}

impl Spotter {
    /// From a reference's bytes ([`train`]). `sensitivity` (0 to 1; a score of at least
    /// 1 - sensitivity is the word) trades missed words for false wakes: higher hears
    /// the word more often, and other things as the word more often too.
    pub fn new(reference: &[u8], sensitivity: f32) -> Result<Spotter, WakeError> {
        if !(0.0..=1.0).contains(&sensitivity) {
            return Err(WakeError::Sensitivity(sensitivity));
        }
        let threshold = 1.0 - sensitivity;
        let config = RustpotterConfig {
            fmt: AudioFmt {
                sample_rate: DEVICE_RATE as usize,
                sample_format: SampleFormat::I16,
                channels: 1,
                endianness: Endianness::Little,
            },
            detector: DetectorConfig {
                threshold,
                // Against the takes' average: rustpotter's usual share of the threshold.
                avg_threshold: threshold * 0.4,
                // Said as soon as enough frames agree, not a window later: the turn
                // that follows the word starts sooner.
                eager: true,
                ..DetectorConfig::default()
            },
            filters: Default::default(),
        };
        let mut detector = Rustpotter::new(&config).map_err(WakeError::Reference)?;
        detector
            .add_wakeword_from_buffer("wake", reference)
            .map_err(WakeError::Reference)?;
        Ok(Spotter {
            detector,
            pending: Vec::new(),
        })
    }

    /// Takes the next samples; the word, if it ended in them.
    pub fn hear(&mut self, samples: &[i16]) -> Option<Detection> {
        let frame = self.detector.get_samples_per_frame();
        self.pending.extend_from_slice(samples);
        let mut heard = None;
        let whole = self.pending.len() / frame * frame;
        for chunk in self.pending[..whole].chunks_exact(frame) {
            if let Some(found) = self.detector.process_samples(chunk.to_vec()) {
                heard = Some(Detection { score: found.score });
            }
        }
        self.pending.drain(..whole);
        heard
    }

    /// Forget what was heard (after the word, or while the gadget was not listening).
    pub fn reset(&mut self) {
        self.detector.reset();
        self.pending.clear();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::audio::speech_end::tests::{silence, spoken_by};

    /// The owner, as a test can have one: one voice, at its own speeds and pitches.
    pub(crate) fn owner(words_per_minute: u32, pitch: u32, text: &str) -> Vec<i16> {
        spoken_by("en-us+m3", words_per_minute, pitch, text)
    }

    /// The owner's takes of the word.
    pub(crate) fn takes() -> Vec<Vec<i16>> {
        [(140, 45), (150, 50), (160, 55), (170, 48), (145, 60)]
            .iter()
            .map(|(speed, pitch)| take(&owner(*speed, *pitch, "hey herald")).unwrap())
            .collect()
    }

    /// When `spotter` hears the word in `audio`, in seconds, with its score.
    fn heard(spotter: &mut Spotter, audio: &[i16]) -> Vec<(f64, f32)> {
        let mut found = Vec::new();
        for (i, frame) in audio.chunks(640).enumerate() {
            if let Some(d) = spotter.hear(frame) {
                found.push((seconds((i + 1) * 640), d.score));
            }
        }
        found
    }

    #[test]
    fn a_take_is_cut_to_the_word_and_a_bad_one_says_why() {
        let word = owner(150, 50, "hey herald");
        let cut = take(&[silence(1.0), word.clone(), silence(1.0)].concat()).unwrap();
        assert!(
            cut.len() < word.len() + 2 * MARGIN,
            "{}",
            seconds(cut.len())
        );
        assert!(matches!(take(&silence(2.0)), Err(TakeError::Silent)));
        let faint: Vec<i16> = word.iter().map(|s| s / 200).collect();
        assert!(matches!(take(&faint), Err(TakeError::TooQuiet(_))));
        let loud: Vec<i16> = word.iter().map(|s| s.saturating_mul(40)).collect();
        assert!(matches!(take(&loud), Err(TakeError::Clipped)));
        let long = owner(150, 50, "hey herald, what is the weather like today");
        assert!(matches!(take(&long), Err(TakeError::TooLong(_))));
        let click = [silence(0.5), vec![9000; 800], silence(0.5)].concat();
        assert!(matches!(take(&click), Err(TakeError::TooShort(_))));
    }

    #[test]
    fn the_word_is_heard_in_speech_said_unlike_the_takes_and_nothing_else_is() {
        let reference = train("hey herald", &takes()).unwrap();
        assert!(matches!(
            train("hey herald", &takes()[..2]),
            Err(WakeError::TooFewTakes { found: 2 })
        ));
        let mut spotter = Spotter::new(&reference, DEFAULT_SENSITIVITY).unwrap();
        // Held out: a speed and a pitch none of the takes has, within a sentence.
        let before = owner(165, 42, "Good morning.");
        let word = owner(165, 42, "hey herald");
        let after = owner(165, 42, "what is the weather like today?");
        let audio = [silence(0.5), before, silence(0.6)].concat();
        let word_ends = seconds(audio.len() + word.len());
        let audio = [audio, word, silence(0.4), after, silence(1.0)].concat();
        let found = heard(&mut spotter, &audio);
        assert_eq!(found.len(), 1, "{found:?}");
        let (at, score) = found[0];
        assert!(
            (word_ends - 0.5..word_ends + 0.6).contains(&at),
            "heard at {at:.2} s, the word ends at {word_ends:.2} s"
        );
        assert!(score >= 1.0 - DEFAULT_SENSITIVITY, "{score}");

        spotter.reset();
        let other = owner(
            165,
            42,
            "Her aunt held the door. Hello there, Harold. Set a timer for ten minutes, \
             and turn off the lights in the hall.",
        );
        assert_eq!(heard(&mut spotter, &other), []);
    }

    #[test]
    fn a_sensitivity_out_of_range_is_refused() {
        let reference = train("hey herald", &takes()).unwrap();
        assert!(matches!(
            Spotter::new(&reference, 1.5),
            Err(WakeError::Sensitivity(_))
        ));
        assert!(Spotter::new(b"not a reference", 0.5).is_err());
    }
}
