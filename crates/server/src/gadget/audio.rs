//! Voice in and speech out for one gadget.
//!
//! [`Utterance`] collects an utterance's channel-1 frames into the one buffer that later
//! becomes the WAV file, so the audio is never copied. [`Playback`] streams speech: the
//! file is decoded and resampled in small batches on the blocking pool into a small
//! bounded queue, and a task paces the frames out to the device's outbox, at most half a
//! second ahead of real time. The session only starts them, stops them and waits for
//! their end.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use herald_gadget_proto::{
    device, encode_frame, limits, server, Channel, FrameHeader, ServerMessage,
};
use herald_media::audio::{Decoder, FrameStream};
use herald_media::pacing::Pacer;
use herald_media::wav::pcm16_duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::debug;

use crate::metrics::Metrics;
use crate::socket::{Outgoing, SendQueue};

const FRAME: Duration = Duration::from_millis(limits::AUDIO_FRAME_MS as u64);
const LEAD: Duration = Duration::from_millis(limits::AUDIO_MAX_LEAD_MS as u64);
/// Decoded frames waiting to be paced out: enough to hide a slow decode, small enough
/// that nothing is decoded far ahead of need.
const DECODED_AHEAD: usize = 16;

/// An utterance being received.
#[derive(Debug)]
pub(super) struct Utterance {
    pub id: Option<String>,
    pub stream: u8,
    pub rate: u32,
    pcm: Vec<u8>,
    limit: usize,
    next_seq: Option<u16>,
    /// Frames missing according to the sequence numbers.
    pub gaps: u32,
    /// Audio dropped past `max_utterance_s`.
    pub dropped: usize,
}

impl Utterance {
    /// Check an `audio.start`; the error is the notice that explains the refusal.
    pub fn start(msg: &device::AudioStart, max_utterance_s: u32) -> Result<Utterance, String> {
        if msg.format != "pcm16" {
            return Err(format!(
                "Audio format {} is not supported; send pcm16.",
                msg.format
            ));
        }
        if !(limits::MIN_AUDIO_RATE..=limits::MAX_AUDIO_RATE).contains(&msg.rate) {
            return Err(format!(
                "Sample rate {} Hz is not supported ({} to {} Hz).",
                msg.rate,
                limits::MIN_AUDIO_RATE,
                limits::MAX_AUDIO_RATE
            ));
        }
        let limit = msg.rate as usize * 2 * max_utterance_s as usize;
        Ok(Utterance {
            id: msg.id.clone(),
            stream: msg.stream,
            rate: msg.rate,
            // About five seconds up front; the buffer grows only for long utterances.
            pcm: Vec::with_capacity(limit.min(msg.rate as usize * 2 * 5)),
            limit,
            next_seq: None,
            gaps: 0,
            dropped: 0,
        })
    }

    /// Take one channel-1 frame of this utterance's stream.
    pub fn push(&mut self, header: FrameHeader, payload: &[u8]) {
        if let Some(expected) = self.next_seq {
            self.gaps += u32::from(header.seq.wrapping_sub(expected));
        }
        self.next_seq = Some(header.seq.wrapping_add(1));
        let room = self.limit - self.pcm.len();
        let taken = payload.len().min(room);
        self.pcm.extend_from_slice(&payload[..taken]);
        self.dropped += payload.len() - taken;
    }

    pub fn duration(&self) -> Duration {
        pcm16_duration(self.pcm.len(), self.rate)
    }

    pub fn into_pcm(self) -> Vec<u8> {
        self.pcm
    }
}

/// An audio file to speak, opened, with its extension as a hint for the decoder.
pub(super) struct SpeechFile {
    file: std::fs::File,
    extension: Option<String>,
}

impl SpeechFile {
    /// Opened at once: the agent may delete the file as soon as its request is answered.
    pub async fn open(path: &Path) -> std::io::Result<SpeechFile> {
        let file = tokio::fs::File::open(path).await?.into_std().await;
        let extension = path.extension().and_then(|e| e.to_str()).map(str::to_owned);
        Ok(SpeechFile { file, extension })
    }
}

/// A speech stream being sent; dropping it stops the stream where it is.
pub(super) struct Playback {
    pub stream: u8,
    task: JoinHandle<()>,
}

impl Drop for Playback {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Playback {
    /// Start streaming `speech` to the device behind `outbox` at `rate` Hz.
    pub fn start(
        speech: SpeechFile,
        stream: u8,
        rate: u32,
        turn: Option<String>,
        outbox: SendQueue,
        metrics: Arc<Metrics>,
    ) -> Playback {
        let task = tokio::spawn(stream_out(speech, stream, rate, turn, outbox, metrics));
        Playback { stream, task }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Wait until the stream has played to its end (or failed); once only.
    pub async fn finished(&mut self) {
        let _ = (&mut self.task).await;
    }
}

async fn stream_out(
    speech: SpeechFile,
    stream: u8,
    rate: u32,
    turn: Option<String>,
    outbox: SendQueue,
    metrics: Arc<Metrics>,
) {
    let (frames, mut decoded) = mpsc::channel::<Vec<u8>>(DECODED_AHEAD);
    let decoder = tokio::spawn(decode(speech, rate, frames));
    let start = ServerMessage::AudioStart(server::AudioStart {
        stream,
        rate,
        format: "pcm16".into(),
        turn,
    });
    if outbox.send(Outgoing::Text(start.encode())).await.is_err() {
        return;
    }
    let mut pacer: Option<(Pacer, Instant)> = None;
    let mut seq = 0u16;
    while let Some(pcm) = decoded.recv().await {
        let (pacer, started) = pacer.get_or_insert_with(|| {
            let now = Instant::now();
            (Pacer::new(now.into_std(), FRAME, LEAD), now)
        });
        let due = Instant::from_std(pacer.next_send_at());
        tokio::time::sleep_until(due).await;
        let header = FrameHeader {
            channel: Channel::Audio,
            stream,
            seq,
        };
        if outbox
            .send(Outgoing::Binary(encode_frame(header, &pcm)))
            .await
            .is_err()
        {
            return;
        }
        let sent = Instant::now();
        // Frames the lead lets out at once are due when the stream starts, not before.
        let scheduled = due.max(*started);
        metrics
            .audio_lateness
            .observe(sent.saturating_duration_since(scheduled));
        pacer.frame_sent(sent.into_std());
        seq = seq.wrapping_add(1);
    }
    let ok = matches!(decoder.await, Ok(true));
    let end = if ok {
        ServerMessage::AudioEnd(server::AudioEnd { stream })
    } else {
        ServerMessage::AudioAbort(server::AudioAbort { stream })
    };
    let _ = outbox.send(Outgoing::Text(end.encode())).await;
}

/// Frames decoded per trip to the blocking pool.
const BATCH: usize = DECODED_AHEAD / 2;

/// Decode and resample in batches on the blocking pool, handing frames over as they are
/// needed. A stream holds a pool thread only while a batch decodes, never while its
/// frames wait to be paced out, so thousands of streams share the pool's threads.
/// False when decoding failed.
async fn decode(speech: SpeechFile, rate: u32, frames: mpsc::Sender<Vec<u8>>) -> bool {
    let open = move || {
        let decoder = Decoder::from_reader(speech.file, speech.extension.as_deref())?;
        FrameStream::new(decoder, rate, limits::AUDIO_FRAME_MS)
    };
    let mut stream = match tokio::task::spawn_blocking(open).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            debug!(%err, "speech decoding failed");
            return false;
        }
        Err(_) => return false,
    };
    loop {
        // Room for a whole batch first: the next one decodes while the queue plays out.
        let Ok(permits) = frames.reserve_many(BATCH).await else {
            // Stopped: nobody wants the rest.
            return true;
        };
        let batch = tokio::task::spawn_blocking(move || {
            let mut batch = Vec::with_capacity(BATCH);
            let mut failed = None;
            while batch.len() < BATCH {
                match stream.next_frame() {
                    Ok(Some(frame)) => batch.push(frame.to_vec()),
                    Ok(None) => break,
                    Err(err) => {
                        failed = Some(err);
                        break;
                    }
                }
            }
            (stream, batch, failed)
        })
        .await;
        let Ok((back, batch, failed)) = batch else {
            return false;
        };
        // What decoded before a failure still plays.
        let last = batch.len() < BATCH;
        for (permit, frame) in permits.zip(batch) {
            permit.send(frame);
        }
        if let Some(err) = failed {
            debug!(%err, "speech decoding failed");
            return false;
        }
        if last {
            return true;
        }
        stream = back;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(rate: u32, format: &str) -> device::AudioStart {
        device::AudioStart {
            id: Some("a1".into()),
            stream: 4,
            rate,
            format: format.into(),
            mode: Some("hold".into()),
        }
    }

    fn header(seq: u16) -> FrameHeader {
        FrameHeader {
            channel: Channel::Audio,
            stream: 4,
            seq,
        }
    }

    #[test]
    fn refuses_what_it_cannot_take() {
        assert!(Utterance::start(&start(16_000, "opus"), 60).is_err());
        assert!(Utterance::start(&start(3_999, "pcm16"), 60).is_err());
        assert!(Utterance::start(&start(48_001, "pcm16"), 60).is_err());
        assert!(Utterance::start(&start(4_000, "pcm16"), 60).is_ok());
        assert!(Utterance::start(&start(48_000, "pcm16"), 60).is_ok());
    }

    #[test]
    fn counts_gaps_and_caps_the_length() {
        let mut u = Utterance::start(&start(8_000, "pcm16"), 1).unwrap();
        u.push(header(0), &[0; 640]);
        u.push(header(1), &[0; 640]);
        u.push(header(4), &[0; 640]);
        assert_eq!(u.gaps, 2);
        for seq in 5..40 {
            u.push(header(seq), &[0; 640]);
        }
        assert_eq!(u.duration(), Duration::from_secs(1));
        assert_eq!(u.dropped, 38 * 640 - 16_000);
        // Sequence numbers wrap.
        let mut u = Utterance::start(&start(8_000, "pcm16"), 1).unwrap();
        u.push(header(u16::MAX), &[0; 2]);
        u.push(header(0), &[0; 2]);
        assert_eq!(u.gaps, 0);
    }
}
