//! What listening costs: the voice activity detector that ends a hands-free turn, and
//! the wake-word spotter that listens all the time, each on the microphone's 40 ms frames.
//!
//! Run with `cargo bench -p herald-linux-gadget --bench listening`. The throughput is in
//! "elem/s" where one element is one second of audio: seconds of audio per second of one
//! core, so the share of a core while listening is its inverse. The wake word needs
//! espeak-ng (scripts/system-packages.txt): it stands in for the owner, as in the tests.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_linux_gadget::{take, train, EndRules, SpeechEnd, Spotter, DEFAULT_SENSITIVITY};
use herald_media::audio::{Decoder, FrameStream};

const RATE: u32 = 16_000;
const SECONDS: u32 = 10;
const FRAME: usize = 640;

/// A voice-like signal: a 140 Hz buzz with its harmonics, in syllables of 200 ms.
fn voice_like() -> Vec<i16> {
    (0..RATE * SECONDS)
        .map(|n| {
            let t = f64::from(n) / f64::from(RATE);
            let syllable = ((t * 5.0).fract() < 0.7) as u8 as f64;
            let buzz: f64 = (1..=8)
                .map(|h| (std::f64::consts::TAU * 140.0 * f64::from(h) * t).sin() / f64::from(h))
                .sum();
            (buzz * syllable * 4000.0) as i16
        })
        .collect()
}

/// `text` as espeak-ng's en-us+m3 (the tests' owner) says it, at 16 kHz through the
/// gadget's own resampler.
fn owner(dir: &Path, words_per_minute: u32, pitch: u32, text: &str) -> Vec<i16> {
    let wav = dir.join("said.wav");
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us+m3", "-s", &words_per_minute.to_string()])
        .args(["-p", &pitch.to_string(), "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .expect("espeak-ng runs (scripts/setup installs it)");
    assert!(status.success());
    let mut frames = FrameStream::new(Decoder::open(&wav).unwrap(), RATE, 40).unwrap();
    let mut samples = Vec::new();
    while let Some(frame) = frames.next_frame().unwrap() {
        samples.extend(
            frame
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]])),
        );
    }
    samples
}

/// The gadget's spotter at the default sensitivity, for a reference made of the tests'
/// five takes of "hey herald".
fn spotter(dir: &Path) -> Spotter {
    let takes: Vec<Vec<i16>> = [(140, 45), (150, 50), (160, 55), (170, 48), (145, 60)]
        .iter()
        .map(|(speed, pitch)| take(&owner(dir, *speed, *pitch, "hey herald")).unwrap())
        .collect();
    let reference = train("hey herald", &takes).unwrap();
    Spotter::new(&reference, DEFAULT_SENSITIVITY).unwrap()
}

fn listening(c: &mut Criterion) {
    let audio = voice_like();
    let rules = EndRules {
        end_silence: Duration::from_millis(700),
        max: Duration::from_secs(60),
        no_speech: Duration::from_secs(60),
    };
    let mut group = c.benchmark_group("listening");
    group.throughput(Throughput::Elements(u64::from(SECONDS)));
    group.bench_function("end of speech, 10 s in 40 ms frames", |b| {
        b.iter(|| {
            let mut end = SpeechEnd::new(rules);
            for frame in audio.chunks(FRAME) {
                black_box(end.push(black_box(frame)));
            }
        });
    });

    // Ten seconds of the owner speaking without the word, at a speed and pitch none of
    // the takes has: what the spotter does all day.
    let dir = tempfile::tempdir().unwrap();
    let mut spotter = spotter(dir.path());
    let text = "Good morning. Set a timer for ten minutes, and turn off the lights in the \
                hall. Is it going to rain tomorrow? Add milk and eggs to the shopping list, \
                then read me the news.";
    let mut speech = owner(dir.path(), 165, 42, text);
    speech.resize(RATE as usize * SECONDS as usize, 0);
    // About 0.1 s an iteration: 40 of them fit in criterion's usual 5 s.
    group.sample_size(40);
    group.bench_function("wake word, 10 s of speech in 40 ms frames", |b| {
        b.iter(|| {
            spotter.reset();
            for frame in speech.chunks(FRAME) {
                black_box(spotter.hear(black_box(frame)));
            }
        });
    });
    group.finish();
}

criterion_group!(benches, listening);
criterion_main!(benches);
