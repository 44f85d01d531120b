//! The costs issue 4 asks about, on one core.
//!
//! Run with `cargo bench -p herald-media`. Audio benches report throughput in "elem/s" where
//! one element is one second of audio, so the figure reads directly as seconds of audio per
//! second of CPU (the work is single-threaded, so wall time on an idle core is CPU time).

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use herald_media::audio::{Decoder, FrameStream, PcmSource};
use herald_media::image::fit_rgb565;
use herald_media::wav::write_wav;
use image::codecs::jpeg::JpegEncoder;
use image::{ExtendedColorType, ImageEncoder, Rgb, RgbImage};

/// The device's speaker rate and frame length in gadget protocol v1.
const DEVICE_RATE: u32 = 16_000;
const FRAME_MS: u32 = 40;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `seconds` of a two-tone signal as PCM16 LE at `rate`.
fn pcm(rate: u32, seconds: u32) -> Vec<u8> {
    (0..rate * seconds)
        .flat_map(|n| {
            let t = f64::from(n) / f64::from(rate);
            let x = 0.4 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()
                + 0.2 * (2.0 * std::f64::consts::PI * 3100.0 * t).sin();
            ((x * 32767.0) as i16).to_le_bytes()
        })
        .collect()
}

/// Frames drained from a stream: the whole pipeline's work.
fn drain<S: herald_media::audio::SampleSource>(mut stream: FrameStream<S>) -> usize {
    let mut bytes = 0;
    while let Some(frame) = stream.next_frame().unwrap() {
        bytes += black_box(frame).len();
    }
    bytes
}

fn resampling(c: &mut Criterion) {
    const SECONDS: u32 = 10;
    let mut group = c.benchmark_group("resample_to_16k");
    group.throughput(Throughput::Elements(u64::from(SECONDS)));
    for rate in [24_000, 22_050] {
        let input = pcm(rate, SECONDS);
        group.bench_function(format!("{rate}_hz"), |b| {
            b.iter(|| {
                let source = PcmSource::new(&input[..], rate);
                drain(FrameStream::new(source, DEVICE_RATE, FRAME_MS).unwrap())
            })
        });
    }
    group.finish();
}

fn mp3(c: &mut Criterion) {
    // 10 s, 24 kHz mono, 64 kbit/s, as a TTS engine would write it.
    let path = fixture("speech10s_mono_24000.mp3");
    let mut group = c.benchmark_group("mp3_10s_to_16k");
    group.bench_function("first_frame", |b| {
        b.iter(|| {
            let decoder = Decoder::open(&path).unwrap();
            let mut stream = FrameStream::new(decoder, DEVICE_RATE, FRAME_MS).unwrap();
            black_box(stream.next_frame().unwrap().map(<[u8]>::len))
        })
    });
    group.throughput(Throughput::Elements(10));
    group.bench_function("whole_file", |b| {
        b.iter(|| {
            let decoder = Decoder::open(&path).unwrap();
            drain(FrameStream::new(decoder, DEVICE_RATE, FRAME_MS).unwrap())
        })
    });
    group.finish();
}

fn image_fit(c: &mut Criterion) {
    // A 12-megapixel photo stand-in: smooth gradients with fine detail, JPEG quality 85.
    let photo = RgbImage::from_fn(4000, 3000, |x, y| {
        Rgb([(x / 16) as u8, (y / 12) as u8, ((x ^ y) & 0xFF) as u8])
    });
    let mut jpeg = Vec::new();
    JpegEncoder::new_with_quality(&mut jpeg, 85)
        .write_image(photo.as_raw(), 4000, 3000, ExtendedColorType::Rgb8)
        .unwrap();
    println!("a {} KB JPEG", jpeg.len() / 1024);
    let mut group = c.benchmark_group("image");
    group.sample_size(10);
    group.bench_function("jpeg_4000x3000_into_320x196_rgb565", |b| {
        b.iter(|| fit_rgb565(black_box(&jpeg), 320, 196).unwrap())
    });
    group.finish();
}

fn wav_assembly(c: &mut Criterion) {
    // 60 s at 16 kHz: the longest utterance the server accepts by default.
    let utterance = pcm(DEVICE_RATE, 60);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("utterance.wav");
    let mut group = c.benchmark_group("wav");
    group.sample_size(20);
    group.bench_function("write_60s_16k_synced", |b| {
        b.iter(|| write_wav(&path, DEVICE_RATE, black_box(&utterance)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, resampling, mp3, image_fit, wav_assembly);
criterion_main!(benches);
