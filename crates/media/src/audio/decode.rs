//! Audio files (WAV, MP3, Ogg Vorbis, FLAC) decoded packet by packet and averaged to mono.
//!
//! Built on symphonia with only those formats compiled in. The container is recognised from
//! its content (the file extension is only a hint), so a misnamed file still plays. A damaged
//! packet is skipped, as players do, but a run of them is an error rather than minutes of
//! silence; a file cut short plays up to the cut.

use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use symphonia::core::codecs::audio::{AudioDecoder, AudioDecoderOptions};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;

use super::{AudioError, SampleSource};

/// Consecutive undecodable packets tolerated before the file counts as corrupt.
const MAX_BAD_PACKETS: u32 = 16;

/// A decoding audio file: the [`SampleSource`] for whatever an agent writes.
pub struct Decoder {
    format: Box<dyn FormatReader>,
    codec: Box<dyn AudioDecoder>,
    track: u32,
    rate: u32,
    /// The last packet's samples, interleaved; reused so decoding does not allocate.
    interleaved: Vec<f32>,
    bad_packets: u32,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("format", &self.format.format_info().short_name)
            .field("rate", &self.rate)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// Opens the file at `path` and reads its headers (no audio is decoded yet).
    pub fn open(path: &Path) -> Result<Decoder, AudioError> {
        let file = std::fs::File::open(path)?;
        let extension = path.extension().and_then(|e| e.to_str());
        Decoder::probe(Box::new(file), extension)
    }

    /// Reads audio from any seekable reader, such as a `Cursor` over bytes in memory.
    /// `extension` (`"mp3"`, ...) is a hint; the content decides.
    pub fn from_reader<R>(reader: R, extension: Option<&str>) -> Result<Decoder, AudioError>
    where
        R: Read + Seek + Send + Sync + 'static,
    {
        Decoder::probe(Box::new(Seekable(reader)), extension)
    }

    fn probe(source: Box<dyn MediaSource>, extension: Option<&str>) -> Result<Self, AudioError> {
        let stream = MediaSourceStream::new(source, Default::default());
        let mut hint = Hint::new();
        if let Some(extension) = extension {
            hint.with_extension(extension);
        }
        let format = symphonia::default::get_probe()
            .probe(
                &hint,
                stream,
                FormatOptions::default(),
                MetadataOptions::default(),
            )
            .map_err(decoding_error)?;
        let track = format
            .default_track(TrackType::Audio)
            .ok_or(AudioError::Unsupported("no audio track"))?;
        let params = track
            .codec_params
            .as_ref()
            .and_then(|p| p.audio())
            .ok_or(AudioError::Unsupported("no audio codec parameters"))?;
        let rate = params
            .sample_rate
            .ok_or(AudioError::Unsupported("unknown sample rate"))?;
        let codec = symphonia::default::get_codecs()
            .make_audio_decoder(params, &AudioDecoderOptions::default())
            .map_err(decoding_error)?;
        let track = track.id;
        Ok(Decoder {
            format,
            codec,
            track,
            rate,
            interleaved: Vec::new(),
            bad_packets: 0,
        })
    }
}

impl SampleSource for Decoder {
    fn rate(&self) -> u32 {
        self.rate
    }

    fn read(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        loop {
            let packet = match self.format.next_packet() {
                Ok(Some(packet)) => packet,
                Ok(None) => return Ok(false),
                // A truncated file: play what arrived.
                Err(SymphoniaError::IoError(e)) if e.kind() == ErrorKind::UnexpectedEof => {
                    return Ok(false)
                }
                // A chained Ogg stream continues with a new one: play the first.
                Err(SymphoniaError::ResetRequired) => return Ok(false),
                Err(e) => return Err(decoding_error(e)),
            };
            if packet.track_id != self.track {
                continue;
            }
            let decoded = match self.codec.decode(&packet) {
                Ok(decoded) => decoded,
                Err(SymphoniaError::DecodeError(_) | SymphoniaError::IoError(_)) => {
                    self.bad_packets += 1;
                    if self.bad_packets > MAX_BAD_PACKETS {
                        return Err(AudioError::Corrupt("too many undecodable packets"));
                    }
                    continue;
                }
                Err(e) => return Err(decoding_error(e)),
            };
            self.bad_packets = 0;
            if decoded.spec().rate() != self.rate {
                return Err(AudioError::Unsupported("sample rate changes mid-stream"));
            }
            let channels = decoded.num_planes();
            if channels == 0 || decoded.frames() == 0 {
                // Gapless trimming can leave a packet empty.
                continue;
            }
            decoded.copy_to_vec_interleaved(&mut self.interleaved);
            if channels == 1 {
                out.extend_from_slice(&self.interleaved);
            } else {
                let scale = 1.0 / channels as f32;
                out.extend(
                    self.interleaved
                        .chunks_exact(channels)
                        .map(|frame| frame.iter().sum::<f32>() * scale),
                );
            }
            return Ok(true);
        }
    }
}

/// Any `Read + Seek` as a symphonia source. Its length is left unknown, which only skips the
/// search for tags at the end of the file.
struct Seekable<R>(R);

impl<R: Read> Read for Seekable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: Seek> Seek for Seekable<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.0.seek(pos)
    }
}

impl<R: Read + Seek + Send + Sync> MediaSource for Seekable<R> {
    fn is_seekable(&self) -> bool {
        true
    }

    fn byte_len(&self) -> Option<u64> {
        None
    }
}

fn decoding_error(e: SymphoniaError) -> AudioError {
    match e {
        // Content that is no known format is reported as unsupported by the probe itself;
        // running out of data here means a recognised file was cut short.
        SymphoniaError::IoError(e) if e.kind() == ErrorKind::UnexpectedEof => {
            AudioError::Corrupt("the file ends too early")
        }
        SymphoniaError::IoError(e) => AudioError::Io(e),
        SymphoniaError::Unsupported(what) => AudioError::Unsupported(what),
        SymphoniaError::DecodeError(what) | SymphoniaError::LimitError(what) => {
            AudioError::Corrupt(what)
        }
        SymphoniaError::SeekError(_) => AudioError::Corrupt("unexpected seek"),
        SymphoniaError::ResetRequired => AudioError::Unsupported("chained streams"),
        // The error enum is non-exhaustive.
        _ => AudioError::Corrupt("undecodable stream"),
    }
}
