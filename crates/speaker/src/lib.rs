//! A gadget's speaker: what the agent says, played to the device as one audio stream.
//!
//! [`Playback`] streams speech, a whole file (`send_voice`) or a reply spoken as it is
//! made (`speech_*`): what its [`Feed`] brings is decoded and resampled in small batches
//! on the blocking pool into a small bounded queue, and a task paces the frames out to
//! the device's outbox, at most half a second ahead of real time. The gadget's session
//! only starts them, feeds them, stops them and waits for their end.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use herald_gadget_proto::{encode_frame, limits, server, Channel, FrameHeader, ServerMessage};
use herald_media::audio::{AudioError, Decoder, Pulled, SpeechStream};
use herald_media::pacing::Pacer;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::debug;

use self::feed::Taken;
pub use self::feed::{Feed, SpeechInput};
use herald_edge::socket::{Outgoing, SendQueue};
use herald_metrics::Metrics;

mod feed;

const FRAME: Duration = Duration::from_millis(limits::AUDIO_FRAME_MS as u64);
const LEAD: Duration = Duration::from_millis(limits::AUDIO_MAX_LEAD_MS as u64);
/// Decoded frames waiting to be paced out: enough to hide a slow decode, small enough
/// that nothing is decoded far ahead of need.
const DECODED_AHEAD: usize = 16;

/// Open an audio file to speak and read its headers, on the blocking pool: the agent may
/// delete the file as soon as its request is answered, and one that is no audio is
/// refused then rather than while it plays.
pub async fn open_speech(path: &Path) -> Result<Decoder, AudioError> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || Decoder::open(&path))
        .await
        .unwrap_or_else(|_| Err(AudioError::Corrupt("the decoder stopped")))
}

/// How far a playback got on the wire; what a stop must still say.
const NOT_STARTED: u8 = 0;
const STARTED: u8 = 1;
const ENDED: u8 = 2;

/// The speech being sent to the device, the one owner of its stream on the wire: it
/// sends `audio.start` with the first frame, the frames paced, and `audio.end` (or
/// `audio.abort` when decoding failed); [`Playback::stop`] cuts it off, and hands
/// back the `audio.abort` the device needs if it heard the start. Its [`Feed`] takes what is still to
/// play. Dropping it stops the stream where it is, silently.
pub struct Playback {
    pub stream: u8,
    /// The connection it plays to; its abort goes there too, not to a newer one.
    pub conn: u64,
    pub feed: Arc<Feed>,
    wire: Arc<AtomicU8>,
    task: JoinHandle<()>,
}

impl Drop for Playback {
    fn drop(&mut self) {
        self.task.abort();
        self.feed.close();
    }
}

impl Playback {
    /// Start streaming what `feed` brings to the device behind `outbox` (connection
    /// `conn`'s) at `rate` Hz.
    pub fn start(
        feed: Feed,
        stream: u8,
        rate: u32,
        turn: Option<String>,
        (conn, outbox): (u64, SendQueue),
        metrics: Arc<Metrics>,
    ) -> Playback {
        let feed = Arc::new(feed);
        let wire = Arc::new(AtomicU8::new(NOT_STARTED));
        let out = Out {
            stream,
            outbox,
            wire: wire.clone(),
        };
        let task = tokio::spawn(stream_out(feed.clone(), out, rate, turn, metrics));
        Playback {
            stream,
            conn,
            feed,
            wire,
            task,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Wait until the stream has played to its end (or failed); once only.
    pub async fn finished(&mut self) {
        let _ = (&mut self.task).await;
    }

    /// Stop now. Once the task can send nothing more, the `audio.abort` to queue behind
    /// its last frame, if `audio.start` went out and the end did not.
    pub async fn stop(mut self) -> Option<Outgoing> {
        self.task.abort();
        let _ = (&mut self.task).await;
        self.feed.close();
        (self.wire.load(Ordering::Acquire) == STARTED).then(|| {
            let abort = ServerMessage::AudioAbort(server::AudioAbort {
                stream: self.stream,
            });
            Outgoing::Text(abort.encode())
        })
    }
}

/// A playback's end of the wire.
struct Out {
    stream: u8,
    outbox: SendQueue,
    wire: Arc<AtomicU8>,
}

impl Out {
    /// Send a control message and record how far the stream got, with no await in
    /// between, so a stop sees either both or neither.
    async fn send(&self, msg: ServerMessage, reached: u8) -> bool {
        match self.outbox.clone().reserve().await {
            Ok(room) => {
                room.send(Outgoing::Text(msg.encode()));
                self.wire.store(reached, Ordering::Release);
                true
            }
            Err(_) => false,
        }
    }
}

async fn stream_out(
    feed: Arc<Feed>,
    out: Out,
    rate: u32,
    turn: Option<String>,
    metrics: Arc<Metrics>,
) {
    let (frames, mut decoded) = mpsc::channel::<Vec<u8>>(DECODED_AHEAD);
    let mut producer = AbortOnDrop(tokio::spawn(produce(feed, rate, frames)));
    let stream = out.stream;
    let mut pacer: Option<(Pacer, Instant)> = None;
    let mut seq = 0u16;
    while let Some(pcm) = decoded.recv().await {
        let received = Instant::now();
        if pacer.is_none() {
            let start = ServerMessage::AudioStart(server::AudioStart {
                stream,
                rate,
                format: "pcm16".into(),
                turn: turn.clone(),
            });
            if !out.send(start, STARTED).await {
                return;
            }
        }
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
        if out
            .outbox
            .send(Outgoing::Binary(encode_frame(header, &pcm)))
            .await
            .is_err()
        {
            return;
        }
        let sent = Instant::now();
        // Frames the lead lets out at once are due when the stream starts, not before,
        // and a frame that was not made yet (a writer slower than real time) is due
        // when it arrives: only the server's own delay counts as late.
        let scheduled = due.max(*started).max(received);
        metrics
            .audio_lateness
            .observe(sent.saturating_duration_since(scheduled));
        pacer.frame_sent(sent.into_std());
        seq = seq.wrapping_add(1);
    }
    if pacer.is_none() {
        // Nothing was played, so nothing was started.
        return;
    }
    let ok = matches!((&mut producer.0).await, Ok(true));
    let end = if ok {
        ServerMessage::AudioEnd(server::AudioEnd { stream })
    } else {
        ServerMessage::AudioAbort(server::AudioAbort { stream })
    };
    out.send(end, ENDED).await;
}

/// A task that stops when its handle goes, as the producer must with its playback.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Frames resampled per trip to the blocking pool.
const BATCH: usize = DECODED_AHEAD / 2;

/// How a batch stopped.
enum Batch {
    Full,
    NeedInput,
    End,
    Failed(AudioError),
}

/// Resample what the feed brings into frames, in batches on the blocking pool, as they
/// are needed. A stream holds a pool thread only while a batch is made, never while its
/// frames wait to be paced out or its input to arrive, so thousands of streams share the
/// pool's threads. False when decoding failed.
async fn produce(feed: Arc<Feed>, rate: u32, frames: mpsc::Sender<Vec<u8>>) -> bool {
    let mut stream = match SpeechStream::new(rate, limits::AUDIO_FRAME_MS) {
        Ok(stream) => stream,
        Err(err) => {
            debug!(%err, "cannot speak at this rate");
            return false;
        }
    };
    loop {
        // Room for a whole batch first: the next one is made while the queue plays out.
        let Ok(permits) = frames.reserve_many(BATCH).await else {
            // Stopped: nobody wants the rest.
            return true;
        };
        let batch = tokio::task::spawn_blocking(move || {
            let mut batch = Vec::with_capacity(BATCH);
            let mut stopped = Batch::Full;
            while batch.len() < BATCH {
                match stream.next_frame() {
                    Ok(Pulled::Frame(frame)) => batch.push(frame.to_vec()),
                    Ok(Pulled::NeedInput) => {
                        stopped = Batch::NeedInput;
                        break;
                    }
                    Ok(Pulled::End) => {
                        stopped = Batch::End;
                        break;
                    }
                    Err(err) => {
                        stopped = Batch::Failed(err);
                        break;
                    }
                }
            }
            (stream, batch, stopped)
        })
        .await;
        let Ok((back, batch, stopped)) = batch else {
            return false;
        };
        stream = back;
        // What was made before a failure still plays.
        for (permit, frame) in permits.zip(batch) {
            permit.send(frame);
        }
        let pushed = match stopped {
            Batch::Full => Ok(()),
            Batch::End => return true,
            Batch::Failed(err) => Err(err),
            Batch::NeedInput => match feed.take().await {
                Taken::Input(SpeechInput::Pcm(bytes)) => {
                    let format = feed.format;
                    stream.push_pcm(format.sample_rate, format.channels, &bytes)
                }
                Taken::Input(SpeechInput::File(decoder)) => stream.push_source(Box::new(decoder)),
                Taken::End => {
                    stream.finish();
                    Ok(())
                }
            },
        };
        if let Err(err) = pushed {
            debug!(%err, "speech decoding failed");
            return false;
        }
    }
}
