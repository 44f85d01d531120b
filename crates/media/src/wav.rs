//! Voice messages as WAV files: mono PCM16 straight from the buffer it was received into.
//!
//! A gadget streams an utterance as channel-1 frames of little-endian PCM16, which is exactly
//! the data chunk of a WAV file. So [`write_wav`] writes a 44-byte header and then the
//! caller's buffer as it is: the audio is never copied, converted or re-encoded, whatever its
//! length. Both go to the file the way every private file is written (`herald_files`: a
//! hidden temporary beside the target, synced, then renamed over it, mode 0600), so a crash
//! leaves either no file or a whole one, and only its owner may read someone's voice.
//!
//! There is deliberately no `&[i16]` variant: on the wire and in the receive buffer the
//! samples are already bytes, and turning `i16`s back into bytes would need a copy.

use std::time::Duration;

/// Length of the canonical header [`write_wav`] puts before the samples.
pub const WAV_HEADER_LEN: usize = 44;

/// Bytes per PCM16 sample.
const SAMPLE_BYTES: usize = 2;

/// Why a WAV file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WavError {
    /// Zero, or so high that the byte rate overflows its 32-bit field.
    #[error("sample rate {0} Hz cannot be written to a WAV file")]
    Rate(u32),
    /// RIFF sizes are 32-bit: about 18 hours at 16 kHz, far beyond any utterance.
    #[error("{0} bytes of audio do not fit in a WAV file")]
    TooLong(usize),
    /// Creating, writing, syncing or renaming the file failed.
    #[error("writing the WAV file failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes `pcm` (mono PCM16 little-endian at `rate` Hz) to `path` as a WAV file, replacing
/// any file already there, and returns the audio's duration.
///
/// The samples are written from `pcm` directly after the header, with no copy. A trailing odd
/// byte (half a sample, which a device should never send) is left out.
#[cfg(feature = "files")]
pub fn write_wav(path: &std::path::Path, rate: u32, pcm: &[u8]) -> Result<Duration, WavError> {
    let pcm = &pcm[..pcm.len() - pcm.len() % SAMPLE_BYTES];
    let header = wav_header(rate, pcm.len())?;
    herald_files::write_private_parts(path, &[header.as_slice(), pcm])?;
    Ok(pcm16_duration(pcm.len(), rate))
}

/// How long `bytes` of mono PCM16 last at `rate` Hz (zero for a rate of zero). Exact to the
/// nanosecond, so durations of frames add up to the duration of their concatenation.
pub fn pcm16_duration(bytes: usize, rate: u32) -> Duration {
    if rate == 0 {
        return Duration::ZERO;
    }
    let samples = (bytes / SAMPLE_BYTES) as u128;
    let nanos = samples * 1_000_000_000 / u128::from(rate);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The 44-byte RIFF/WAVE header for `data_len` bytes of mono PCM16 at `rate` Hz.
pub fn wav_header(rate: u32, data_len: usize) -> Result<[u8; WAV_HEADER_LEN], WavError> {
    let byte_rate = rate
        .checked_mul(SAMPLE_BYTES as u32)
        .filter(|r| *r > 0)
        .ok_or(WavError::Rate(rate))?;
    let data = u32::try_from(data_len)
        .ok()
        .filter(|len| *len <= u32::MAX - (WAV_HEADER_LEN as u32 - 8))
        .ok_or(WavError::TooLong(data_len))?;
    let mut h = [0u8; WAV_HEADER_LEN];
    h[0..4].copy_from_slice(b"RIFF");
    // The RIFF size counts everything after its own field.
    h[4..8].copy_from_slice(&(data + (WAV_HEADER_LEN as u32 - 8)).to_le_bytes());
    h[8..12].copy_from_slice(b"WAVE");
    h[12..16].copy_from_slice(b"fmt ");
    h[16..20].copy_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    h[20..22].copy_from_slice(&1u16.to_le_bytes()); // integer PCM
    h[22..24].copy_from_slice(&1u16.to_le_bytes()); // mono
    h[24..28].copy_from_slice(&rate.to_le_bytes());
    h[28..32].copy_from_slice(&byte_rate.to_le_bytes());
    h[32..34].copy_from_slice(&(SAMPLE_BYTES as u16).to_le_bytes()); // block align
    h[34..36].copy_from_slice(&16u16.to_le_bytes()); // bits per sample
    h[36..40].copy_from_slice(b"data");
    h[40..44].copy_from_slice(&data.to_le_bytes());
    Ok(h)
}

/// What a WAV file someone sent us holds, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavInfo {
    /// Samples per second.
    pub rate: u32,
    /// Interleaved channels.
    pub channels: u16,
    /// Bits per sample.
    pub bits: u16,
    /// How long the `data` chunk plays.
    pub duration: Duration,
}

/// Why bytes are not a usable WAV file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a usable WAV file: {0}")]
pub struct NotWav(&'static str);

/// Reads the header of a RIFF/WAVE file (chunks in any order, unknown chunks skipped)
/// without decoding its samples; the duration comes from the size of the `data` chunk.
pub fn inspect(bytes: &[u8]) -> Result<WavInfo, NotWav> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(NotWav("no RIFF/WAVE header"));
    }
    let mut format = None;
    let mut at = 12;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let body = at + 8;
        let len = usize::try_from(len).map_err(|_| NotWav("chunk too large"))?;
        match id {
            b"fmt " => {
                let fmt = bytes
                    .get(body..body + 16)
                    .ok_or(NotWav("short fmt chunk"))?;
                let channels = u16::from_le_bytes([fmt[2], fmt[3]]);
                let rate = u32::from_le_bytes([fmt[4], fmt[5], fmt[6], fmt[7]]);
                let bits = u16::from_le_bytes([fmt[14], fmt[15]]);
                if channels == 0 || rate == 0 || bits == 0 {
                    return Err(NotWav("empty format"));
                }
                format = Some((rate, channels, bits));
            }
            b"data" => {
                let (rate, channels, bits) = format.ok_or(NotWav("data before fmt"))?;
                // A streamed file may give a placeholder length: count what is there.
                let available = bytes.len() - body;
                let data = len.min(available) as u128;
                let frame = u128::from(channels) * u128::from(bits).div_ceil(8);
                let nanos = data / frame * 1_000_000_000 / u128::from(rate);
                return Ok(WavInfo {
                    rate,
                    channels,
                    bits,
                    duration: Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)),
                });
            }
            _ => {}
        }
        // Chunks are padded to an even length.
        at = body.saturating_add(len).saturating_add(len % 2);
    }
    Err(NotWav("no data chunk"))
}

#[cfg(all(test, feature = "files"))]
mod tests {
    use super::*;

    fn tone(samples: usize) -> Vec<u8> {
        (0..samples)
            .flat_map(|i| ((i as i16).wrapping_mul(97)).to_le_bytes())
            .collect()
    }

    #[test]
    fn header_then_the_samples_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("voice.wav");
        let pcm = tone(16_000);
        let duration = write_wav(&path, 16_000, &pcm).unwrap();
        assert_eq!(duration, Duration::from_secs(1));

        let file = std::fs::read(&path).unwrap();
        assert_eq!(file.len(), WAV_HEADER_LEN + pcm.len());
        let u32_at = |i: usize| u32::from_le_bytes(file[i..i + 4].try_into().unwrap());
        let u16_at = |i: usize| u16::from_le_bytes(file[i..i + 2].try_into().unwrap());
        assert_eq!(&file[0..4], b"RIFF");
        assert_eq!(u32_at(4) as usize, file.len() - 8);
        assert_eq!(&file[8..16], b"WAVEfmt ");
        assert_eq!(u32_at(16), 16);
        assert_eq!(u16_at(20), 1, "integer PCM");
        assert_eq!(u16_at(22), 1, "mono");
        assert_eq!(u32_at(24), 16_000);
        assert_eq!(u32_at(28), 32_000, "byte rate");
        assert_eq!(u16_at(32), 2, "block align");
        assert_eq!(u16_at(34), 16, "bits per sample");
        assert_eq!(&file[36..40], b"data");
        assert_eq!(u32_at(40) as usize, pcm.len());
        assert_eq!(&file[WAV_HEADER_LEN..], &pcm[..]);
    }

    #[test]
    fn replaces_atomically_privately_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("voice.wav");
        write_wav(&path, 8_000, &tone(8_000)).unwrap();
        write_wav(&path, 8_000, &tone(400)).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize,
            WAV_HEADER_LEN + 800
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["voice.wav"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        // Renaming a file over a non-empty directory fails after the data was written.
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), b"x").unwrap();
        assert!(matches!(
            write_wav(&path, 16_000, &tone(10)),
            Err(WavError::Io(_))
        ));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn odd_trailing_byte_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd.wav");
        let mut pcm = tone(3);
        pcm.push(0x7f);
        write_wav(&path, 16_000, &pcm).unwrap();
        let file = std::fs::read(&path).unwrap();
        assert_eq!(&file[WAV_HEADER_LEN..], &pcm[..6]);
        assert_eq!(u32::from_le_bytes(file[40..44].try_into().unwrap()), 6);
    }

    #[test]
    fn impossible_rates_are_refused_before_touching_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.wav");
        for rate in [0, u32::MAX] {
            assert!(matches!(
                write_wav(&path, rate, &tone(10)),
                Err(WavError::Rate(r)) if r == rate
            ));
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn header_refuses_sizes_riff_cannot_describe() {
        assert!(matches!(
            wav_header(16_000, u32::MAX as usize),
            Err(WavError::TooLong(_))
        ));
        let largest = wav_header(16_000, u32::MAX as usize - 36).unwrap();
        assert_eq!(largest[4..8], u32::MAX.to_le_bytes(), "RIFF size");
        assert_eq!(largest[40..44], (u32::MAX - 36).to_le_bytes(), "data size");
    }

    #[test]
    fn durations() {
        assert_eq!(pcm16_duration(1280, 16_000), Duration::from_millis(40));
        assert_eq!(pcm16_duration(1764, 22_050), Duration::from_millis(40));
        assert_eq!(
            pcm16_duration(60 * 48_000 * 2, 48_000),
            Duration::from_secs(60)
        );
        assert_eq!(pcm16_duration(3, 16_000), pcm16_duration(2, 16_000));
        assert_eq!(pcm16_duration(1000, 0), Duration::ZERO);
    }

    #[test]
    fn inspect_reads_back_what_write_wav_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.wav");
        write_wav(&path, 16_000, &vec![0u8; 32_000]).unwrap();
        let info = inspect(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!((info.rate, info.channels, info.bits), (16_000, 1, 16));
        assert_eq!(info.duration, Duration::from_secs(1));
        assert!(inspect(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(inspect(b"not a wav at all").is_err());
    }
}
