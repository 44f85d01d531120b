//! The microphone kept open for the wake word.
//!
//! [`Ear`] stands between the sound cards and the rest: it opens the microphone once and
//! keeps it open, giving what it hears to a [`Spotter`] or, while the device records, to
//! the recording instead (so a turn after the word starts without opening the card
//! again, and the word itself is never part of it). A microphone that fails is opened
//! again a little later.
//!
//! While the gadget speaks, the word still interrupts it (barge-in), but the gadget
//! must not wake to its own voice, which the microphone hears too. It knows what it
//! says: a second spotter listens to the sound it sends to the speaker, and a word heard
//! by the microphone shortly after the gadget itself said it is taken for the echo and
//! ignored. No echo is cancelled: a word the owner says over the gadget's own saying of
//! it is lost, which is rare.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Spotter;
use crate::audio::DEVICE_RATE;
use herald_sim::runner::LiveSound;

/// Mic frames queued for a recording (2.5 s).
const MIC_QUEUE: usize = 64;
/// How long after the gadget said the word a word from the microphone may be its echo:
/// what is queued for the speaker plays up to 0.5 s later (the server's lead) and the
/// card's buffer holds up to about 2 s more (PulseAudio's).
const ECHO_WINDOW: Duration = Duration::from_millis(3000);
/// How long a failed microphone rests before it is opened again.
const REOPEN: Duration = Duration::from_secs(2);

type Frames = mpsc::Sender<Result<Vec<i16>, String>>;

/// What the ear and the cards share.
struct Shared {
    cards: Mutex<Box<dyn LiveSound>>,
    /// The recording going on, if any.
    recording: Mutex<Option<Frames>>,
    /// Listens to what the gadget says, and when it last said the word.
    own_voice: Mutex<(Spotter, Option<Instant>)>,
}

fn locked<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The sound cards, with the microphone always open for the wake word.
pub struct Ear {
    shared: Arc<Shared>,
}

impl Ear {
    /// Opens the microphone of `cards` and listens with `spotter`, and to what the gadget
    /// says with `own_voice` (a spotter for the same word); each time the word is heard
    /// (and no recording is going on) `woke` is told its score. Listening stops when
    /// `woke` is dropped.
    pub fn start(
        cards: Box<dyn LiveSound>,
        spotter: Spotter,
        own_voice: Spotter,
        woke: mpsc::Sender<f32>,
    ) -> Ear {
        let shared = Arc::new(Shared {
            cards: Mutex::new(cards),
            recording: Mutex::new(None),
            own_voice: Mutex::new((own_voice, None)),
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
            let Some(found) = spotter.hear(&samples) else {
                continue;
            };
            spotter.reset();
            let said = locked(&shared.own_voice).1;
            if said.is_some_and(|at| at.elapsed() < ECHO_WINDOW) {
                tracing::debug!(
                    score = found.score,
                    "the wake word in the gadget's own voice: ignored"
                );
                continue;
            }
            tracing::info!(score = found.score, "heard the wake word");
            let _ = woke.try_send(found.score);
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
        // The speaker plays at the device's rate, as the microphone records.
        if rate == DEVICE_RATE {
            let mut own_voice = locked(&self.shared.own_voice);
            if own_voice.0.hear(samples).is_some() {
                own_voice.0.reset();
                own_voice.1 = Some(Instant::now());
            }
        }
        locked(&self.shared.cards).play(rate, samples);
    }

    fn stop_playback(&mut self) {
        locked(&self.shared.cards).stop_playback();
    }
}
