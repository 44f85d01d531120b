//! When a hands-free utterance is over: a voice activity detector (earshot, a small
//! neural network that runs some thousand times faster than real time) scores each
//! 16 ms of the microphone, and the utterance ends once speech was heard and then a
//! silence of `end_silence` followed, or at the length limit. A turn in which nobody
//! speaks ends too, and is cancelled rather than sent.

use std::time::Duration;

use earshot::Detector;

/// The detector's frame: 16 ms at 16 kHz.
const FRAME: usize = 256;
const FRAME_TIME: Duration = Duration::from_millis(16);
/// A frame scoring this or more is speech.
const VOICE: f32 = 0.5;
/// Speech must last this long to count: a click, a cough or the gadget's own 100 ms
/// "listening" note does not start the wait.
const SPEECH_MIN: Duration = Duration::from_millis(208);

/// Why an utterance is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The speaker stopped.
    Silence,
    /// It reached the length limit.
    Limit,
    /// Nothing was said: cancel, send nothing.
    NothingSaid,
}

/// The rules of a hands-free utterance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndRules {
    /// Silence after speech that ends it.
    pub end_silence: Duration,
    /// The longest utterance.
    pub max: Duration,
    /// How long to wait for the first word.
    pub no_speech: Duration,
}

/// Follows one utterance, 16 kHz mono samples at a time.
pub struct SpeechEnd {
    detector: Box<Detector>,
    rules: EndRules,
    /// Samples short of a whole frame.
    partial: Vec<i16>,
    heard: Duration,
    /// Speech heard so far, and the speech of the run now going on.
    spoken: bool,
    speaking_for: Duration,
    silent_for: Duration,
}

impl SpeechEnd {
    pub fn new(rules: EndRules) -> SpeechEnd {
        SpeechEnd {
            detector: Detector::default_boxed(),
            rules,
            partial: Vec::with_capacity(FRAME),
            heard: Duration::ZERO,
            spoken: false,
            speaking_for: Duration::ZERO,
            silent_for: Duration::ZERO,
        }
    }

    /// Takes the next samples; says when the utterance is over.
    pub fn push(&mut self, samples: &[i16]) -> Option<Ended> {
        let mut rest = samples;
        while !rest.is_empty() {
            let take = (FRAME - self.partial.len()).min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.partial.len() < FRAME {
                break;
            }
            let voice = self.detector.predict_i16(&self.partial) >= VOICE;
            self.partial.clear();
            if let Some(ended) = self.frame(voice) {
                return Some(ended);
            }
        }
        None
    }

    fn frame(&mut self, voice: bool) -> Option<Ended> {
        self.heard += FRAME_TIME;
        if voice {
            self.speaking_for += FRAME_TIME;
            self.silent_for = Duration::ZERO;
            self.spoken |= self.speaking_for >= SPEECH_MIN;
        } else {
            self.speaking_for = Duration::ZERO;
            self.silent_for += FRAME_TIME;
        }
        if self.heard >= self.rules.max {
            return Some(if self.spoken {
                Ended::Limit
            } else {
                Ended::NothingSaid
            });
        }
        if !self.spoken {
            return (self.heard >= self.rules.no_speech).then_some(Ended::NothingSaid);
        }
        (self.silent_for >= self.rules.end_silence).then_some(Ended::Silence)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::audio::{Capture, DEVICE_RATE};
    use std::process::Command;

    /// `text` as espeak-ng says it, at 16 kHz: real speech for the detector.
    pub(crate) fn spoken(text: &str) -> Vec<i16> {
        spoken_by("en-us", 160, 50, text)
    }

    /// `text` as espeak-ng's `voice` says it at `words_per_minute` and `pitch` (0 to
    /// 99), at 16 kHz.
    pub(crate) fn spoken_by(
        voice: &str,
        words_per_minute: u32,
        pitch: u32,
        text: &str,
    ) -> Vec<i16> {
        let dir = tempfile::tempdir().unwrap();
        let wav = dir.path().join("said.wav");
        let (speed, pitch) = (words_per_minute.to_string(), pitch.to_string());
        let status = Command::new("espeak-ng")
            .args(["-v", voice, "-s", &speed, "-p", &pitch, "-w"])
            .arg(&wav)
            .arg(text)
            .status()
            .expect("espeak-ng runs (scripts/setup installs it)");
        assert!(status.success());
        let bytes = std::fs::read(&wav).unwrap();
        let rate = u32::from_le_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]);
        let data = bytes
            .windows(4)
            .position(|w| w == b"data")
            .expect("a data chunk")
            + 8;
        let samples: Vec<i16> = crate::audio::pcm16_samples(&bytes[data..]).collect();
        let mut capture = Capture::new(rate, 1, DEVICE_RATE).unwrap();
        let mut out: Vec<i16> = capture.push(&samples).unwrap().concat();
        // What the resampler holds back comes out behind a little silence.
        out.extend(capture.push(&vec![0; rate as usize / 10]).unwrap().concat());
        out
    }

    pub(crate) fn silence(seconds: f64) -> Vec<i16> {
        vec![0; (seconds * f64::from(DEVICE_RATE)) as usize]
    }

    fn seconds(samples: usize) -> f64 {
        samples as f64 / f64::from(DEVICE_RATE)
    }

    const RULES: EndRules = EndRules {
        end_silence: Duration::from_millis(700),
        max: Duration::from_secs(30),
        no_speech: Duration::from_secs(5),
    };

    /// Feeds `audio` in the microphone's 40 ms frames; where it ended, in seconds.
    fn ends(rules: EndRules, audio: &[i16]) -> Option<(Ended, f64)> {
        let mut end = SpeechEnd::new(rules);
        let mut fed = 0;
        for frame in audio.chunks(640) {
            fed += frame.len();
            if let Some(ended) = end.push(frame) {
                return Some((ended, seconds(fed)));
            }
        }
        None
    }

    #[test]
    fn an_utterance_ends_when_the_speaker_stops_not_in_its_pauses() {
        let first = spoken("Turn on the kitchen lights.");
        let second = spoken("And set a timer for ten minutes, please.");
        // A pause between sentences (espeak's own, about 0.4 s) shorter than the end
        // silence does not end it.
        let audio = [silence(0.5), first.clone(), second, silence(3.0)].concat();
        // Where the last word fades out (espeak's file goes on a little in silence).
        let audible = audio
            .chunks(FRAME)
            .rposition(|f| crate::audio::level(f).0 > -50.0)
            .expect("sound");
        let speech_ends = seconds((audible + 1) * FRAME);
        let (ended, at) = ends(RULES, &audio).expect("it ends");
        assert_eq!(ended, Ended::Silence);
        // The end silence after the last word, give or take a microphone frame and
        // the detector's tail.
        let after = at - speech_ends;
        assert!(
            (0.6..=0.9).contains(&after),
            "ended {after:.2} s after the speech"
        );
        assert!(
            at > seconds(first.len()) + 0.5,
            "ended in the pause at {at:.2} s"
        );
    }

    #[test]
    fn silence_and_noise_are_not_speech_and_the_turn_is_dropped() {
        // A steady hum and a quiet hiss, as a room has.
        let hum: Vec<i16> = (0..DEVICE_RATE as usize * 6)
            .map(|i| {
                let t = i as f64 / f64::from(DEVICE_RATE);
                let hiss = ((i as u64).wrapping_mul(2_654_435_761) % 401) as f64 - 200.0;
                ((2.0 * std::f64::consts::PI * 50.0 * t).sin() * 600.0 + hiss) as i16
            })
            .collect();
        let (ended, at) = ends(RULES, &hum).expect("it gives up");
        assert_eq!(ended, Ended::NothingSaid);
        assert!((4.9..=5.1).contains(&at), "{at}");
        assert_eq!(
            ends(RULES, &silence(5.5)).map(|e| e.0),
            Some(Ended::NothingSaid)
        );
    }

    #[test]
    fn a_long_utterance_stops_at_the_limit() {
        let words = spoken("One two three four five six seven eight nine ten eleven twelve.");
        let rules = EndRules {
            max: Duration::from_secs(2),
            ..RULES
        };
        let (ended, at) = ends(rules, &[words.clone(), words].concat()).expect("it ends");
        assert_eq!(ended, Ended::Limit);
        assert!((2.0..=2.05).contains(&at), "{at}");
    }
}
