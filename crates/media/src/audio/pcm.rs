//! Raw mono PCM16 already in memory (a recorded utterance played back, synthesized speech).

use super::{AudioError, SampleSource};

/// Samples converted per [`read`](SampleSource::read): small enough to start quickly, large
/// enough that the per-call cost vanishes.
const CHUNK_SAMPLES: usize = 1024;

/// Mono PCM16 little-endian samples at a known rate, read in place from any byte container
/// (`Vec<u8>`, `Arc<[u8]>`, `&[u8]`, ...): nothing is copied up front.
#[derive(Debug, Clone)]
pub struct PcmSource<B> {
    pcm: B,
    rate: u32,
    /// Byte offset of the next sample.
    pos: usize,
}

impl<B: AsRef<[u8]>> PcmSource<B> {
    /// Reads `pcm` as mono PCM16 LE at `rate` Hz. A trailing odd byte is ignored.
    pub fn new(pcm: B, rate: u32) -> Self {
        PcmSource { pcm, rate, pos: 0 }
    }
}

impl<B: AsRef<[u8]>> SampleSource for PcmSource<B> {
    fn rate(&self) -> u32 {
        self.rate
    }

    fn read(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        let rest = self.pcm.as_ref().get(self.pos..).unwrap_or_default();
        let take = (rest.len() / 2).min(CHUNK_SAMPLES) * 2;
        if take == 0 {
            return Ok(false);
        }
        out.extend(
            rest[..take]
                .chunks_exact(2)
                .map(|s| f32::from(i16::from_le_bytes([s[0], s[1]])) / 32768.0),
        );
        self.pos += take;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_all_samples_in_chunks_then_ends() {
        let samples: Vec<i16> = (0..2500).map(|i| (i * 13 - 16000) as i16).collect();
        let mut bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        bytes.push(0xAA); // half a sample: ignored
        let mut source = PcmSource::new(bytes.as_slice(), 8_000);
        assert_eq!(source.rate(), 8_000);
        let mut out = Vec::new();
        let mut reads = 0;
        while source.read(&mut out).unwrap() {
            reads += 1;
        }
        assert_eq!(reads, 3, "1024 + 1024 + 452 samples");
        assert_eq!(out.len(), samples.len());
        for (got, want) in out.iter().zip(&samples) {
            assert_eq!(*got, f32::from(*want) / 32768.0);
        }
        assert!(!source.read(&mut out).unwrap(), "stays exhausted");
        assert_eq!(out.len(), samples.len());
    }

    #[test]
    fn extremes_map_into_unit_range() {
        let bytes = [i16::MIN.to_le_bytes(), i16::MAX.to_le_bytes()].concat();
        let mut out = Vec::new();
        PcmSource::new(bytes, 16_000).read(&mut out).unwrap();
        assert_eq!(out[0], -1.0);
        assert!(out[1] < 1.0 && out[1] > 0.9999);
    }
}
