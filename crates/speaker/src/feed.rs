//! What a speech stream is still to play: PCM chunks and decoded files as the agent
//! hands them over, in order, in a bounded queue between the session (which offers)
//! and the playback's producer (which takes as the device needs).
//!
//! The bound is the backpressure: an offer that does not fit waits, with its answer,
//! until the producer has taken enough; the agent hears "accepted" only then. Waiting
//! offers are bounded too, so an agent that does not wait for its answers is refused
//! instead of growing a queue.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use herald_media::audio::Decoder;
use herald_port::{DeliveryError, PcmFormat, RequestError, Response};
use tokio::sync::{oneshot, Notify};

/// Where an offer's answer goes: "accepted" once it fits, or why it was refused.
pub type Reply = oneshot::Sender<Result<Response, RequestError>>;

/// Seconds of PCM queued (not yet taken by the producer) before offers wait.
const BUFFER_SECONDS: usize = 3;
/// Files queued before offers wait: a sentence each, a few seconds of speech.
const QUEUED_FILES: usize = 2;
/// Offers waiting for room before more are refused.
const WAITING_OFFERS: usize = 4;
/// A stream that gets nothing for this long (and no end) ends with what it had, so a
/// writer that died cannot hold the turn's end back for ever.
pub(crate) const IDLE: Duration = Duration::from_secs(30);

pub enum SpeechInput {
    /// Interleaved PCM16 LE in the stream's format, any number of bytes.
    Pcm(Vec<u8>),
    File(Decoder),
}

impl SpeechInput {
    fn pcm_len(&self) -> usize {
        match self {
            SpeechInput::Pcm(bytes) => bytes.len(),
            SpeechInput::File(_) => 0,
        }
    }
}

pub struct Feed {
    /// The format of the PCM offered.
    pub format: PcmFormat,
    /// [`BUFFER_SECONDS`] of that PCM, in bytes.
    capacity: usize,
    state: Mutex<State>,
    /// Wakes the producer: input arrived, or the feed ended or closed.
    arrived: Notify,
}

#[derive(Default)]
struct State {
    queue: VecDeque<SpeechInput>,
    pcm_bytes: usize,
    files: usize,
    waiting: VecDeque<(SpeechInput, Reply)>,
    ended: bool,
    /// The playback is gone: everything is dropped.
    closed: bool,
}

/// What the producer takes next.
pub(crate) enum Taken {
    Input(SpeechInput),
    /// The feed ended (or closed, or stayed idle for [`IDLE`]): play out what is left.
    End,
}

impl Feed {
    pub fn new(format: PcmFormat) -> Feed {
        let bytes_per_second = format.sample_rate as usize * 2 * usize::from(format.channels);
        Feed {
            format,
            capacity: BUFFER_SECONDS * bytes_per_second,
            state: Mutex::default(),
            arrived: Notify::new(),
        }
    }

    /// A feed of one short clip of mono PCM16 at `rate` Hz, ended: a cue.
    pub fn clip(pcm: Vec<u8>, rate: u32) -> Feed {
        let feed = Feed::new(PcmFormat {
            sample_rate: rate,
            channels: 1,
        });
        {
            let mut state = feed.state();
            state.pcm_bytes = pcm.len();
            state.queue.push_back(SpeechInput::Pcm(pcm));
            state.ended = true;
        }
        feed
    }

    /// A feed of one whole file, ended: what `send_voice` plays.
    pub fn file(decoder: Decoder) -> Feed {
        let feed = Feed::new(PcmFormat {
            sample_rate: herald_port::MIN_SPEECH_RATE,
            channels: 1,
        });
        {
            let mut state = feed.state();
            state.queue.push_back(SpeechInput::File(decoder));
            state.files = 1;
            state.ended = true;
        }
        feed
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change is a push or a pop: a poisoned lock holds nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `input`, answering `reply` once it is queued: at once when it fits.
    pub fn offer(&self, input: SpeechInput, reply: Reply) {
        let mut state = self.state();
        if state.closed || state.ended {
            drop(state);
            let _ = reply.send(Ok(Response::Dropped { dropped: true }));
        } else if state.waiting.is_empty() && state.fits(&input, self.capacity) {
            state.push(input);
            drop(state);
            self.arrived.notify_one();
            let _ = reply.send(Ok(Response::Done {}));
        } else if state.waiting.len() < WAITING_OFFERS {
            state.waiting.push_back((input, reply));
        } else {
            drop(state);
            let busy = format!("{WAITING_OFFERS} speech writes already wait for room");
            let _ = reply.send(Err(RequestError::Delivery(DeliveryError::Failed(busy))));
        }
    }

    /// Nothing more will be offered: the stream plays out what is queued and ends.
    pub fn end(&self) {
        self.state().ended = true;
        self.arrived.notify_one();
    }

    /// The playback stopped: drop what waits (offers waiting for room hear they were
    /// dropped) and let the producer go.
    pub fn close(&self) {
        let waiting = {
            let mut state = self.state();
            state.closed = true;
            state.queue.clear();
            std::mem::take(&mut state.waiting)
        };
        for (_, reply) in waiting {
            let _ = reply.send(Ok(Response::Dropped { dropped: true }));
        }
        self.arrived.notify_one();
    }

    /// The next input, once there is one; offers that now fit are queued and answered.
    pub(crate) async fn take(&self) -> Taken {
        loop {
            let admitted = {
                let mut state = self.state();
                if state.closed {
                    return Taken::End;
                }
                match state.queue.pop_front() {
                    Some(input) => {
                        state.pcm_bytes -= input.pcm_len();
                        if matches!(input, SpeechInput::File(_)) {
                            state.files -= 1;
                        }
                        let admitted = state.admit(self.capacity);
                        Some((input, admitted))
                    }
                    None if state.ended && state.waiting.is_empty() => return Taken::End,
                    None => None,
                }
            };
            if let Some((input, admitted)) = admitted {
                for reply in admitted {
                    let _ = reply.send(Ok(Response::Done {}));
                }
                return Taken::Input(input);
            }
            // `notify_one` keeps a wake-up that comes before this wait.
            if tokio::time::timeout(IDLE, self.arrived.notified())
                .await
                .is_err()
            {
                tracing::debug!("speech stream idle; ending it");
                return Taken::End;
            }
        }
    }
}

impl State {
    fn fits(&self, input: &SpeechInput, capacity: usize) -> bool {
        match input {
            // One chunk always fits an empty queue, so any chunk size goes through.
            SpeechInput::Pcm(bytes) => {
                self.pcm_bytes == 0 || self.pcm_bytes + bytes.len() <= capacity
            }
            SpeechInput::File(_) => self.files < QUEUED_FILES,
        }
    }

    fn push(&mut self, input: SpeechInput) {
        self.pcm_bytes += input.pcm_len();
        if matches!(input, SpeechInput::File(_)) {
            self.files += 1;
        }
        self.queue.push_back(input);
    }

    /// Queue the waiting offers that fit now, in order; their answers.
    fn admit(&mut self, capacity: usize) -> Vec<Reply> {
        let mut admitted = Vec::new();
        while let Some((input, _)) = self.waiting.front() {
            if !self.fits(input, capacity) {
                break;
            }
            if let Some((input, reply)) = self.waiting.pop_front() {
                self.push(input);
                admitted.push(reply);
            }
        }
        admitted
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn offer(feed: &Feed, bytes: usize) -> oneshot::Receiver<Result<Response, RequestError>> {
        let (reply, answer) = oneshot::channel();
        feed.offer(SpeechInput::Pcm(vec![0; bytes]), reply);
        answer
    }

    #[tokio::test]
    async fn offers_wait_for_room_in_order_and_are_bounded() {
        let feed = Feed::new(PcmFormat {
            sample_rate: 8_000,
            channels: 1,
        });
        // Three seconds at 8 kHz mono: 48 000 bytes.
        let mut first = offer(&feed, 40_000);
        assert!(matches!(first.try_recv(), Ok(Ok(Response::Done {}))));
        let mut second = offer(&feed, 10_000);
        let mut third = offer(&feed, 100);
        assert!(second.try_recv().is_err(), "no room yet");
        assert!(
            third.try_recv().is_err(),
            "behind the second, though it would fit"
        );
        let _more: Vec<_> = (0..2).map(|_| offer(&feed, 1)).collect();
        let mut refused = offer(&feed, 1);
        assert!(
            matches!(refused.try_recv(), Ok(Err(_))),
            "a fifth waiting offer"
        );
        assert!(
            matches!(feed.take().now_or_never(), Some(Taken::Input(SpeechInput::Pcm(b))) if b.len() == 40_000)
        );
        assert!(matches!(second.try_recv(), Ok(Ok(Response::Done {}))));
        assert!(matches!(third.try_recv(), Ok(Ok(Response::Done {}))));
        feed.end();
        let mut taken = 0;
        while let Some(Taken::Input(_)) = feed.take().now_or_never() {
            taken += 1;
        }
        assert_eq!(taken, 4);
        assert!(matches!(feed.take().now_or_never(), Some(Taken::End)));
    }

    #[tokio::test]
    async fn closing_drops_what_waits() {
        let feed = Feed::new(PcmFormat {
            sample_rate: 8_000,
            channels: 1,
        });
        let _full = offer(&feed, 48_000);
        let mut waiting = offer(&feed, 10);
        feed.close();
        assert!(matches!(
            waiting.try_recv(),
            Ok(Ok(Response::Dropped { dropped: true }))
        ));
        assert!(matches!(feed.take().now_or_never(), Some(Taken::End)));
        let mut late = offer(&feed, 10);
        assert!(matches!(
            late.try_recv(),
            Ok(Ok(Response::Dropped { dropped: true }))
        ));
    }
}
