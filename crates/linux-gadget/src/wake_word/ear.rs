//! The microphone kept open for the wake word.
//!
//! [`Ear`] stands between the sound cards and the rest: it opens the microphone once and
//! keeps it open, giving what it hears to the [`Spotter`] or, while the device records,
//! to the recording instead (so a turn after the word starts without opening the card
//! again, and the word itself is never part of it). While the gadget's own speaker plays
//! (and a moment after, for the card's buffer), the spotter is not listening: the gadget
//! never wakes to its own voice; TALK still interrupts it. A microphone that fails is
//! opened again a little later.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Spotter;
use crate::audio::DEVICE_RATE;
use herald_sim::runner::LiveSound;

/// Mic frames queued for a recording (2.5 s).
const MIC_QUEUE: usize = 64;
/// How long after the speaker's last sound the spotter listens again: the card's own
/// buffer still plays (PulseAudio keeps up to about 2 s).
const ECHO_TAIL: Duration = Duration::from_millis(2000);
/// How long a failed microphone rests before it is opened again.
const REOPEN: Duration = Duration::from_secs(2);

type Frames = mpsc::Sender<Result<Vec<i16>, String>>;

/// What the ear and the cards share.
struct Shared {
    cards: Mutex<Box<dyn LiveSound>>,
    /// The recording going on, if any.
    recording: Mutex<Option<Frames>>,
    /// Until when the speaker is (still) heard.
    speaking_until: Mutex<Instant>,
}

fn locked<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The sound cards, with the microphone always open for the wake word.
pub struct Ear {
    shared: Arc<Shared>,
}

impl Ear {
    /// Opens the microphone of `cards` and listens with `spotter`; each time the word is
    /// heard (and no recording is going on), `woke` is told. Listening stops when `woke`
    /// is dropped.
    pub fn start(cards: Box<dyn LiveSound>, spotter: Spotter, woke: mpsc::Sender<f32>) -> Ear {
        let shared = Arc::new(Shared {
            cards: Mutex::new(cards),
            recording: Mutex::new(None),
            speaking_until: Mutex::new(Instant::now()),
        });
        tokio::spawn(listen(shared.clone(), spotter, woke));
        Ear { shared }
    }
}

async fn listen(shared: Arc<Shared>, mut spotter: Spotter, woke: mpsc::Sender<f32>) {
    while !woke.is_closed() {
        let mut heard = locked(&shared.cards).start_mic(DEVICE_RATE);
        while let Some(frame) = heard.recv().await {
            let recording = locked(&shared.recording).clone();
            if let Some(recording) = recording {
                spotter.reset();
                // A recording that stopped reading is over.
                if recording.send(frame).await.is_err() {
                    locked(&shared.recording).take();
                }
                continue;
            }
            let samples = match frame {
                Ok(samples) => samples,
                Err(why) => {
                    tracing::warn!(
                        "wake word: the microphone failed ({why}); opening it again in {} s",
                        REOPEN.as_secs()
                    );
                    break;
                }
            };
            if Instant::now() < *locked(&shared.speaking_until) {
                spotter.reset();
                continue;
            }
            if let Some(found) = spotter.hear(&samples) {
                tracing::info!(score = found.score, "heard the wake word");
                spotter.reset();
                let _ = woke.try_send(found.score);
            }
        }
        // A recording of a microphone that is gone ends with it.
        locked(&shared.recording).take();
        locked(&shared.cards).stop_mic();
        tokio::time::sleep(REOPEN).await;
    }
}

impl LiveSound for Ear {
    fn start_mic(&mut self, rate: u32) -> mpsc::Receiver<Result<Vec<i16>, String>> {
        let (frames, receiver) = mpsc::channel(MIC_QUEUE);
        if rate != DEVICE_RATE {
            tracing::warn!(rate, "the microphone listens at {DEVICE_RATE} Hz only");
        }
        *locked(&self.shared.recording) = Some(frames);
        receiver
    }

    fn stop_mic(&mut self) {
        locked(&self.shared.recording).take();
    }

    fn play(&mut self, rate: u32, samples: &[i16]) {
        let length = Duration::from_secs_f64(samples.len() as f64 / f64::from(rate.max(1)));
        {
            let mut until = locked(&self.shared.speaking_until);
            // Queued after what plays now, and heard until the card's buffer is out.
            let now = Instant::now();
            let start = until.checked_sub(ECHO_TAIL).unwrap_or(now).max(now);
            *until = start + length + ECHO_TAIL;
        }
        locked(&self.shared.cards).play(rate, samples);
    }

    fn stop_playback(&mut self) {
        let mut until = locked(&self.shared.speaking_until);
        *until = (*until).min(Instant::now() + ECHO_TAIL);
        locked(&self.shared.cards).stop_playback();
    }
}
