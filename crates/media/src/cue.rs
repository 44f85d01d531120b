//! Herald's own sounds for a gadget's speaker: short tones that say "listening", "heard
//! you", "still working" and "that failed" when the agent has nothing to say yet (or
//! never will).
//!
//! Synthesized, not recorded: a few sine tones with a soft attack and release (no click
//! at either end), rendered as mono PCM16 at whatever rate is asked, so they cost no file
//! and play through the same resampling and pacing as speech.

use std::f32::consts::TAU;

/// What a cue tells the person at the gadget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    /// The gadget listens, without a button held: one short, high note.
    Listening,
    /// A voice turn was taken: two quick rising notes.
    Heard,
    /// The agent is still working and has said nothing yet: one soft, low note.
    Working,
    /// The turn failed: two falling notes.
    Failed,
}

/// One note: its pitch, length and loudness (0 to 1 of full scale).
struct Note {
    hz: f32,
    ms: u32,
    level: f32,
}

impl Cue {
    fn notes(self) -> &'static [Note] {
        match self {
            Cue::Listening => &[Note {
                hz: 988.0,
                ms: 100,
                level: 0.2,
            }],
            Cue::Heard => &[
                Note {
                    hz: 660.0,
                    ms: 70,
                    level: 0.25,
                },
                Note {
                    hz: 880.0,
                    ms: 90,
                    level: 0.25,
                },
            ],
            Cue::Working => &[Note {
                hz: 440.0,
                ms: 140,
                level: 0.12,
            }],
            Cue::Failed => &[
                Note {
                    hz: 494.0,
                    ms: 150,
                    level: 0.25,
                },
                Note {
                    hz: 330.0,
                    ms: 220,
                    level: 0.25,
                },
            ],
        }
    }

    /// The cue as mono PCM16 little-endian at `rate` Hz.
    pub fn render(self, rate: u32) -> Vec<u8> {
        let mut pcm = Vec::new();
        for note in self.notes() {
            let samples = (u64::from(rate) * u64::from(note.ms) / 1000) as usize;
            // 8 ms ramps in and out, or a third of a very short note.
            let ramp = ((rate as usize) / 125).min(samples / 3).max(1);
            for n in 0..samples {
                let envelope = (n.min(samples - 1 - n) as f32 / ramp as f32).min(1.0);
                let phase = TAU * note.hz * n as f32 / rate as f32;
                let sample = phase.sin() * note.level * envelope * f32::from(i16::MAX);
                pcm.extend_from_slice(&(sample as i16).to_le_bytes());
            }
        }
        pcm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(pcm: &[u8]) -> Vec<i16> {
        pcm.chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect()
    }

    #[test]
    fn cues_are_short_audible_and_start_and_end_in_silence() {
        for cue in [Cue::Listening, Cue::Heard, Cue::Working, Cue::Failed] {
            for rate in [16_000, 24_000, 48_000] {
                let s = samples(&cue.render(rate));
                let seconds = s.len() as f32 / rate as f32;
                assert!((0.1..0.5).contains(&seconds), "{cue:?} lasts {seconds} s");
                let peak = s.iter().map(|v| v.unsigned_abs()).max().unwrap();
                assert!(peak > 3000, "{cue:?} is heard (peak {peak})");
                assert!(s[0].unsigned_abs() < 300 && s[s.len() - 1].unsigned_abs() < 300);
            }
        }
    }

    #[test]
    fn a_still_working_cue_is_quieter_than_the_others() {
        let peak = |cue: Cue| {
            samples(&cue.render(16_000))
                .iter()
                .map(|v| v.unsigned_abs())
                .max()
        };
        assert!(peak(Cue::Working) < peak(Cue::Heard));
        assert!(peak(Cue::Working) < peak(Cue::Failed));
    }
}
