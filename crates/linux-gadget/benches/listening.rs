//! What listening for the end of speech costs: the voice activity detector of a
//! hands-free turn on the microphone's 40 ms frames.
//!
//! Run with `cargo bench -p herald-linux-gadget`. The throughput is in "elem/s" where one
//! element is one second of audio: seconds of audio per second of one core, so the share
//! of a core while listening is its inverse.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_linux_gadget::{EndRules, SpeechEnd};

const RATE: u32 = 16_000;
const SECONDS: u32 = 10;

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
            for frame in audio.chunks(640) {
                black_box(end.push(black_box(frame)));
            }
        });
    });
    group.finish();
}

criterion_group!(benches, listening);
criterion_main!(benches);
