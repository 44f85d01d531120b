//! Decoding, downmixing, resampling and framing, measured on real files and exact tones.

use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use herald_media::audio::{
    AudioError, Decoder, FrameStream, PcmSource, Pulled, SampleSource, SpeechStream,
};
use herald_media::wav::write_wav;

const FRAME_MS: u32 = 40;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every frame's length in samples, and all samples as floats in -1..1.
fn drain<S: SampleSource>(mut stream: FrameStream<S>) -> (Vec<usize>, Vec<f32>) {
    let mut lengths = Vec::new();
    let mut samples = Vec::new();
    while let Some(frame) = stream.next_frame().unwrap() {
        assert_eq!(frame.len() % 2, 0);
        lengths.push(frame.len() / 2);
        samples.extend(
            frame
                .chunks_exact(2)
                .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0),
        );
    }
    (lengths, samples)
}

/// Least-squares fit of a sinusoid at `freq` Hz: (amplitude, RMS of what is left).
fn fit_tone(samples: &[f32], rate: u32, freq: f64) -> (f64, f64) {
    let w = 2.0 * std::f64::consts::PI * freq / f64::from(rate);
    let (mut xs, mut xc, mut ss, mut cc, mut sc) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (n, x) in samples.iter().enumerate() {
        let (s, c) = (w * n as f64).sin_cos();
        let x = f64::from(*x);
        xs += x * s;
        xc += x * c;
        ss += s * s;
        cc += c * c;
        sc += s * c;
    }
    let det = ss * cc - sc * sc;
    let a = (xs * cc - xc * sc) / det;
    let b = (xc * ss - xs * sc) / det;
    let residual: f64 = samples
        .iter()
        .enumerate()
        .map(|(n, x)| {
            let (s, c) = (w * n as f64).sin_cos();
            (f64::from(*x) - a * s - b * c).powi(2)
        })
        .sum();
    (
        (a * a + b * b).sqrt(),
        (residual / samples.len() as f64).sqrt(),
    )
}

fn rms(samples: &[f32]) -> f64 {
    let sum: f64 = samples.iter().map(|x| f64::from(*x).powi(2)).sum();
    (sum / samples.len() as f64).sqrt()
}

/// The middle of a signal, away from the edges where a tone starts and stops abruptly.
fn middle(samples: &[f32], rate: u32) -> &[f32] {
    let edge = rate as usize / 10;
    &samples[edge..samples.len() - edge]
}

/// An exact sine in f32 (no PCM16 rounding), read in awkward chunk sizes.
struct Tone {
    rate: u32,
    freq: f64,
    amplitude: f64,
    len: usize,
    pos: usize,
}

impl Tone {
    fn new(rate: u32, freq: f64, amplitude: f64, seconds: f64) -> Tone {
        let len = (f64::from(rate) * seconds) as usize;
        Tone {
            rate,
            freq,
            amplitude,
            len,
            pos: 0,
        }
    }
}

impl SampleSource for Tone {
    fn rate(&self) -> u32 {
        self.rate
    }

    fn read(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        let end = (self.pos + 997).min(self.len);
        if end == self.pos {
            return Ok(false);
        }
        let w = 2.0 * std::f64::consts::PI * self.freq / f64::from(self.rate);
        out.extend((self.pos..end).map(|n| (self.amplitude * (w * n as f64).sin()) as f32));
        self.pos = end;
        Ok(true)
    }
}

#[test]
fn resampling_keeps_an_in_band_tone_and_the_exact_length() {
    for (from, to) in [
        (24_000, 16_000),
        (22_050, 16_000),
        (44_100, 16_000),
        (16_000, 48_000),
        (8_000, 16_000),
    ] {
        let tone = Tone::new(from, 1000.0, 0.5, 2.0);
        let input_len = tone.len;
        let (_, out) = drain(FrameStream::new(tone, to, FRAME_MS).unwrap());
        let expected = (input_len as u64 * u64::from(to) + u64::from(from) / 2) / u64::from(from);
        assert_eq!(out.len() as u64, expected, "{from} -> {to} Hz");
        let (amplitude, residual) = fit_tone(middle(&out, to), to, 1000.0);
        assert!(
            (amplitude - 0.5).abs() < 0.003,
            "{from} -> {to} Hz: amplitude {amplitude}"
        );
        // Everything that is not the 1 kHz tone (distortion, aliasing, noise) stays below
        // -85 dB of it: near the PCM16 rounding floor (-96 dB).
        assert!(
            residual < 0.5 * 10f64.powf(-85.0 / 20.0),
            "{from} -> {to} Hz: residual {residual}"
        );
    }
}

#[test]
fn resampling_is_band_limited() {
    // Tones above the new Nyquist frequency (8 kHz) must vanish instead of folding back into
    // the band (10 kHz would alias to 6 kHz, 9 kHz to 7 kHz).
    for (from, freq) in [(24_000, 10_000.0), (22_050, 9_000.0), (48_000, 12_000.0)] {
        let (_, out) =
            drain(FrameStream::new(Tone::new(from, freq, 0.5, 1.0), 16_000, FRAME_MS).unwrap());
        let level = rms(middle(&out, 16_000)) / (0.5 / 2f64.sqrt());
        let db = 20.0 * level.log10();
        assert!(db < -85.0, "{freq} Hz from {from} Hz kept at {db:.1} dB");
    }
}

#[test]
fn the_passband_keeps_all_of_speech() {
    // The filter's edge sits near 7 kHz for a 16 kHz device: telephone band and sibilants
    // pass at full level.
    for freq in [100.0, 3_400.0, 6_000.0] {
        let (_, out) =
            drain(FrameStream::new(Tone::new(24_000, freq, 0.5, 1.0), 16_000, FRAME_MS).unwrap());
        let (amplitude, _) = fit_tone(middle(&out, 16_000), 16_000, freq);
        assert!(
            (amplitude - 0.5).abs() < 0.01,
            "{freq} Hz: amplitude {amplitude}"
        );
    }
}

#[test]
fn frames_are_exactly_forty_ms_but_the_last() {
    for (rate, frame_samples) in [(16_000usize, 640usize), (22_050, 882), (8_000, 320)] {
        let samples = rate * 3 / 2 + 7; // 1.5 s and a few samples
        let pcm = vec![0x11u8; samples * 2];
        let stream = FrameStream::new(PcmSource::new(pcm, rate as u32), rate as u32, 40).unwrap();
        assert_eq!(stream.frame_duration(), Duration::from_millis(40));
        let (lengths, _) = drain(stream);
        let (last, full) = lengths.split_last().unwrap();
        assert!(full.iter().all(|n| *n == frame_samples));
        assert_eq!(*last, samples - full.len() * frame_samples);
        assert!(*last > 0 && *last <= frame_samples);
    }
}

#[test]
fn pcm_at_the_target_rate_passes_through_bit_exact() {
    let pcm: Vec<u8> = (0..16_000 * 2 + 100)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut stream = FrameStream::new(PcmSource::new(&pcm[..], 16_000), 16_000, 40).unwrap();
    let mut out = Vec::new();
    while let Some(frame) = stream.next_frame().unwrap() {
        out.extend_from_slice(frame);
    }
    assert_eq!(out, pcm);
}

#[test]
fn a_saved_utterance_plays_back_bit_exact() {
    // The voice-message round trip: written by `write_wav`, read back by the decoder.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("utterance.wav");
    let pcm: Vec<u8> = (0..12_345u32)
        .flat_map(|i| ((i * 7919 % 65_536) as u16).to_le_bytes())
        .collect();
    write_wav(&path, 16_000, &pcm).unwrap();
    let decoder = Decoder::open(&path).unwrap();
    assert_eq!(decoder.rate(), 16_000);
    let mut stream = FrameStream::new(decoder, 16_000, 40).unwrap();
    let mut out = Vec::new();
    while let Some(frame) = stream.next_frame().unwrap() {
        out.extend_from_slice(frame);
    }
    assert_eq!(out, pcm);
}

#[test]
fn every_format_decodes_downmixes_and_resamples() {
    // Each fixture: 1 s of 440 Hz at 22.05 kHz, left channel at 0.6, right at 0.2. An average
    // of the channels is 0.4; the left alone would be 0.6 and a sum 0.8.
    for (extension, max_residual) in [
        ("wav", 0.001),
        ("flac", 0.001),
        ("mp3", 0.03),
        ("ogg", 0.03),
    ] {
        let path = fixture(&format!("tone440_stereo_22050.{extension}"));
        let decoder = Decoder::open(&path).unwrap();
        assert_eq!(decoder.rate(), 22_050, "{extension}");
        let (lengths, samples) = drain(FrameStream::new(decoder, 16_000, FRAME_MS).unwrap());
        assert!(lengths[..lengths.len() - 1].iter().all(|n| *n == 640));
        let off_by = samples.len().abs_diff(16_000);
        assert!(off_by <= 640, "{extension}: {} samples", samples.len());
        let (amplitude, residual) = fit_tone(middle(&samples, 16_000), 16_000, 440.0);
        // Lossy encoders may shift a pure tone's level a little (this MP3's by 5%).
        assert!(
            (amplitude - 0.4).abs() < 0.025,
            "{extension}: amplitude {amplitude}"
        );
        assert!(residual < max_residual, "{extension}: residual {residual}");
    }
}

#[test]
fn content_decides_the_format_not_the_name() {
    let bytes = std::fs::read(fixture("tone440_stereo_22050.ogg")).unwrap();
    let decoder = Decoder::from_reader(Cursor::new(bytes), Some("wav")).unwrap();
    let (_, samples) = drain(FrameStream::new(decoder, 16_000, FRAME_MS).unwrap());
    assert!(samples.len().abs_diff(16_000) <= 640);
}

/// A reader that counts the bytes handed out.
struct Counting {
    inner: Cursor<Vec<u8>>,
    read: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Seek for Counting {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

#[test]
fn the_first_frame_is_out_after_reading_a_small_part_of_the_file() {
    // 10 s of MP3 (24 kHz mono, 64 kbit/s, with an ID3v2 tag in front).
    let bytes = std::fs::read(fixture("speech10s_mono_24000.mp3")).unwrap();
    let total = bytes.len() as u64;
    let read = Arc::new(AtomicU64::new(0));
    let reader = Counting {
        inner: Cursor::new(bytes),
        read: read.clone(),
    };
    let decoder = Decoder::from_reader(reader, Some("mp3")).unwrap();
    let mut stream = FrameStream::new(decoder, 16_000, FRAME_MS).unwrap();
    assert_eq!(stream.next_frame().unwrap().map(<[u8]>::len), Some(1280));
    let at_first_frame = read.load(Ordering::Relaxed);
    assert!(
        at_first_frame * 10 < total,
        "{at_first_frame} of {total} bytes read before the first frame"
    );
    let mut samples = 640;
    while let Some(frame) = stream.next_frame().unwrap() {
        samples += frame.len() / 2;
    }
    assert_eq!(read.load(Ordering::Relaxed), total, "the count is real");
    assert!(samples.abs_diff(160_000) <= 640, "{samples} samples");
}

#[test]
fn garbage_and_empty_input_are_errors() {
    let noise: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(40_503) >> 7) as u8)
        .collect();
    for (name, bytes) in [("noise", noise), ("empty", Vec::new())] {
        match Decoder::from_reader(Cursor::new(bytes), Some("mp3")) {
            Err(AudioError::Unsupported(_)) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(matches!(
        Decoder::open(&fixture("no-such-file.mp3")),
        Err(AudioError::Io(_))
    ));
}

#[test]
fn a_truncated_file_plays_what_arrived() {
    for extension in ["wav", "mp3", "flac", "ogg"] {
        let bytes = std::fs::read(fixture(&format!("tone440_stereo_22050.{extension}"))).unwrap();
        let cut = bytes[..bytes.len() * 5 / 6].to_vec();
        let opened = Decoder::from_reader(Cursor::new(cut), Some(extension));
        if extension == "ogg" {
            // All of this file's audio is in one 1.8 KB Ogg page, which the cut leaves
            // incomplete: the demuxer finds no audio page to start from.
            assert!(matches!(opened, Err(AudioError::Corrupt(_))), "{opened:?}");
            continue;
        }
        let (_, samples) = drain(FrameStream::new(opened.unwrap(), 16_000, FRAME_MS).unwrap());
        assert!(
            (8_000..15_000).contains(&samples.len()),
            "{extension}: {} samples",
            samples.len()
        );
    }
}

#[test]
fn damaged_files_never_panic() {
    // Overwrite a run of bytes at many places in each file: every outcome is a value (frames,
    // or an error), never a panic or an endless loop.
    for extension in ["wav", "mp3", "ogg", "flac"] {
        let original =
            std::fs::read(fixture(&format!("tone440_stereo_22050.{extension}"))).unwrap();
        for step in 0..12usize {
            let mut bytes = original.clone();
            // Spread over the file, headers included.
            let at = (step * bytes.len() / 12 + step * 31).min(bytes.len() - 1);
            let end = (at + 64).min(bytes.len());
            for (i, b) in bytes[at..end].iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(97) ^ 0x5A;
            }
            let Ok(decoder) = Decoder::from_reader(Cursor::new(bytes), Some(extension)) else {
                continue;
            };
            let Ok(mut stream) = FrameStream::new(decoder, 16_000, FRAME_MS) else {
                continue;
            };
            let mut frames = 0;
            while let Ok(Some(_)) = stream.next_frame() {
                frames += 1;
                assert!(frames < 10_000, "{extension} damaged at {at}: endless");
            }
        }
    }
}

#[test]
fn impossible_rates_and_frames_are_refused() {
    let pcm = [0u8; 100];
    assert!(matches!(
        FrameStream::new(PcmSource::new(&pcm[..], 0), 16_000, 40),
        Err(AudioError::Rate(0))
    ));
    assert!(matches!(
        FrameStream::new(PcmSource::new(&pcm[..], 16_000), 1_000_000, 40),
        Err(AudioError::Rate(1_000_000))
    ));
    assert!(matches!(
        FrameStream::new(PcmSource::new(&pcm[..], 16_000), 16_000, 0),
        Err(AudioError::FrameDuration(0))
    ));
    assert!(matches!(
        FrameStream::new(PcmSource::new(&pcm[..], 16_000), 16_000, u32::MAX),
        Err(AudioError::FrameDuration(u32::MAX))
    ));
}

#[test]
fn streams_can_move_to_a_blocking_thread() {
    fn send<T: Send + 'static>(_: &T) {}
    let decoder = Decoder::open(&fixture("tone440_stereo_22050.flac")).unwrap();
    send(&FrameStream::new(decoder, 16_000, FRAME_MS).unwrap());
    let boxed: Box<dyn SampleSource + Send> = Box::new(PcmSource::new(vec![0u8; 64], 8_000));
    send(&FrameStream::new(boxed, 16_000, FRAME_MS).unwrap());
}

#[test]
fn an_mp3_with_cover_art_in_its_tag_decodes() {
    // A JPEG inside the ID3v2 tag holds bytes that look like MP3 frame headers; the tag must
    // be skipped as a whole, not scanned.
    let decoder = Decoder::open(&fixture("tone440_cover_art.mp3")).unwrap();
    let (_, samples) = drain(FrameStream::new(decoder, 16_000, FRAME_MS).unwrap());
    assert!(
        samples.len().abs_diff(16_000) <= 640,
        "{} samples",
        samples.len()
    );
    let (amplitude, _) = fit_tone(middle(&samples, 16_000), 16_000, 440.0);
    assert!((amplitude - 0.4).abs() < 0.025, "amplitude {amplitude}");
}

#[test]
fn a_run_of_undecodable_packets_is_an_error() {
    // Every MP3 frame header intact (so the demuxer keeps finding packets), everything else
    // scrambled (so the decoder can use none of them).
    let mut bytes = std::fs::read(fixture("tone440_stereo_22050.mp3")).unwrap();
    let mut i = 1000;
    while i + 1 < bytes.len() {
        if bytes[i] == 0xFF && bytes[i + 1] & 0xE0 == 0xE0 {
            i += 6;
        } else {
            bytes[i] ^= 0x5A;
            i += 1;
        }
    }
    let decoder = Decoder::from_reader(Cursor::new(bytes), Some("mp3")).unwrap();
    let mut stream = FrameStream::new(decoder, 16_000, FRAME_MS).unwrap();
    let outcome = loop {
        match stream.next_frame() {
            Ok(Some(_)) => {}
            other => break other.map(|_| ()),
        }
    };
    assert!(
        matches!(outcome, Err(AudioError::Corrupt(_))),
        "{outcome:?}"
    );
}

/// PCM16 LE of a 440 Hz sine at `rate`, `channels` identical channels interleaved.
fn sine_pcm(rate: u32, seconds: f64, channels: usize) -> Vec<u8> {
    let len = (f64::from(rate) * seconds) as usize;
    let w = 2.0 * std::f64::consts::PI * 440.0 / f64::from(rate);
    (0..len)
        .flat_map(|n| {
            let v = (12_000.0 * (w * n as f64).sin()).round() as i16;
            std::iter::repeat_n(v.to_le_bytes(), channels).flatten()
        })
        .collect()
}

/// Everything a finished speech stream plays: frame lengths and PCM16 samples.
fn drain_speech(stream: &mut SpeechStream) -> (Vec<usize>, Vec<i16>) {
    let (mut lengths, mut samples) = (Vec::new(), Vec::new());
    loop {
        match stream.next_frame().unwrap() {
            Pulled::Frame(frame) => {
                lengths.push(frame.len() / 2);
                samples.extend(
                    frame
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]])),
                );
            }
            Pulled::NeedInput => panic!("a finished stream asked for input"),
            Pulled::End => return (lengths, samples),
        }
    }
}

/// Pushes `pcm` in chunks whose sizes cycle through `sizes`, taking every frame it has
/// between pushes, as a speaker that plays while the reply is written would.
fn streamed(pcm: &[u8], rate: u32, channels: u16, sizes: &[usize]) -> Vec<i16> {
    let mut stream = SpeechStream::new(16_000, FRAME_MS).unwrap();
    let mut samples = Vec::new();
    let mut rest = pcm;
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, after) = rest.split_at((*size).min(rest.len()));
        rest = after;
        stream.push_pcm(rate, channels, chunk).unwrap();
        while let Pulled::Frame(frame) = stream.next_frame().unwrap() {
            assert_eq!(frame.len(), 1280, "only whole frames before the end");
            samples.extend(
                frame
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]])),
            );
        }
    }
    stream.finish();
    samples.extend(drain_speech(&mut stream).1);
    samples
}

#[test]
fn streamed_pcm_resamples_the_same_whatever_the_chunking() {
    let pcm = sine_pcm(24_000, 1.5, 1);
    let whole = streamed(&pcm, 24_000, 1, &[pcm.len()]);
    assert_eq!(whole.len(), 24_000, "1.5 s at 16 kHz");
    for sizes in [&[1usize][..], &[3, 1001, 7, 4097, 2], &[333, 5]] {
        let chunked = streamed(&pcm, 24_000, 1, sizes);
        assert_eq!(chunked.len(), whole.len(), "{sizes:?}");
        let worst = whole
            .iter()
            .zip(&chunked)
            .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
            .max();
        assert!(worst <= Some(1), "{sizes:?}: off by {worst:?}");
    }
    // And it is the tone, resampled as a file would be.
    let floats: Vec<f32> = whole.iter().map(|s| f32::from(*s) / 32768.0).collect();
    let (amplitude, residual) = fit_tone(middle(&floats, 16_000), 16_000, 440.0);
    assert!(
        (amplitude - 12_000.0 / 32768.0).abs() < 0.005,
        "{amplitude}"
    );
    assert!(residual < 0.002, "{residual}");
}

#[test]
fn streamed_stereo_is_averaged_to_mono() {
    let mono = streamed(&sine_pcm(24_000, 0.5, 1), 24_000, 1, &[4_001]);
    let stereo = streamed(&sine_pcm(24_000, 0.5, 2), 24_000, 2, &[4_001, 3]);
    assert_eq!(mono, stereo);
    // Opposite channels cancel out.
    let cancelled: Vec<u8> = (0..8_000i16)
        .flat_map(|n| {
            let v = (n % 200) * 100;
            [v.to_le_bytes(), (-v).to_le_bytes()].concat()
        })
        .collect();
    let silent = streamed(&cancelled, 16_000, 2, &[999]);
    assert_eq!(silent.len(), 8_000);
    assert!(silent.iter().all(|s| *s == 0));
}

#[test]
fn pcm_and_files_at_other_rates_play_in_order_as_one_run_of_frames() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("one.wav");
    let second = dir.path().join("two.wav");
    write_wav(&first, 22_050, &sine_pcm(22_050, 0.5, 1)).unwrap();
    write_wav(&second, 8_000, &sine_pcm(8_000, 0.25, 1)).unwrap();
    let mut stream = SpeechStream::new(16_000, FRAME_MS).unwrap();
    stream
        .push_pcm(24_000, 1, &sine_pcm(24_000, 0.3, 1))
        .unwrap();
    stream
        .push_source(Box::new(Decoder::open(&first).unwrap()))
        .unwrap();
    stream
        .push_source(Box::new(Decoder::open(&second).unwrap()))
        .unwrap();
    stream.finish();
    let (lengths, samples) = drain_speech(&mut stream);
    // 0.3 + 0.5 + 0.25 s, every frame full but the last.
    assert_eq!(samples.len(), 4_800 + 8_000 + 4_000);
    assert!(lengths[..lengths.len() - 1].iter().all(|n| *n == 640));
    assert!(SpeechStream::new(16_000, 0).is_err());
    assert!(stream.push_pcm(500, 1, &[0, 0]).is_err());
}
