//! Hands-free turns: after a tap on TALK the gadget records until the speaker stops.
//!
//! [`Attentive`] stands between the sound cards and the runner and runs
//! [`SpeechEnd`] on everything the microphone hears; once the panel has armed
//! [`HandsFree`] (a tap instead of a hold), it says when that turn is over, and the panel
//! lets TALK go (or cancels a turn in which nobody spoke). The server and the agent see
//! an ordinary utterance.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_device::Button;
use herald_media::cue::Cue;
use tokio::sync::mpsc;

use crate::audio::speech_end::{EndRules, Ended, SpeechEnd};
use crate::audio::{pcm16_samples, DEVICE_RATE};
use herald_sim::runner::{Command, LiveSound};

/// Mic frames passed on to the runner (2.5 s), as the cards queue them.
const MIC_QUEUE: usize = 64;
/// A press of TALK shorter than this is a tap.
const TAP: Duration = Duration::from_millis(400);
/// How long a hands-free turn waits for the first word.
pub const NO_SPEECH: Duration = Duration::from_secs(5);

/// A hands-free turn's end, and its recording.
pub type TurnEnd = (u64, Ended);

/// Whether a hands-free turn is going on, and where its end is said.
pub struct HandsFree {
    rules: EndRules,
    /// Recordings are counted from 1.
    recordings: AtomicU64,
    /// The recording going on, or 0.
    recording: AtomicU64,
    /// The recording that is a hands-free turn, or 0.
    armed: AtomicU64,
    ended: mpsc::Sender<TurnEnd>,
}

impl HandsFree {
    /// With the receiver of the turns' ends.
    pub fn new(rules: EndRules) -> (Arc<HandsFree>, mpsc::Receiver<TurnEnd>) {
        let (ended, receiver) = mpsc::channel(1);
        let hands_free = HandsFree {
            rules,
            recordings: AtomicU64::new(0),
            recording: AtomicU64::new(0),
            armed: AtomicU64::new(0),
            ended,
        };
        (Arc::new(hands_free), receiver)
    }

    /// The recording going on is a hands-free turn from now on; false if there is none.
    pub fn arm(&self) -> bool {
        let recording = self.recording.load(Ordering::SeqCst);
        if recording == 0 {
            return false;
        }
        self.armed.store(recording, Ordering::SeqCst);
        // It may have ended meanwhile, its last disarm before this arm: undo it.
        if self.recording.load(Ordering::SeqCst) != recording {
            self.disarm_recording(recording);
            return false;
        }
        true
    }

    fn is_recording(&self, id: u64) -> bool {
        self.recording.load(Ordering::SeqCst) == id
    }

    /// No hands-free turn is going on (any more); returns whether one was.
    pub fn disarm(&self) -> bool {
        self.armed.swap(0, Ordering::SeqCst) != 0
    }

    /// Recording `id` is not (any more), whatever a later one is; returns whether it was.
    fn disarm_recording(&self, id: u64) -> bool {
        self.armed
            .compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

/// The sound cards, with the microphone listened to for the end of speech.
pub struct Attentive {
    cards: Arc<Mutex<Box<dyn LiveSound>>>,
    hands_free: Arc<HandsFree>,
    /// Cue a hands-free turn's start (the server cues its end as it cues every
    /// spoken turn), and a turn dropped because nobody spoke.
    earcons: bool,
}

impl Attentive {
    pub fn new(cards: Box<dyn LiveSound>, hands_free: Arc<HandsFree>, earcons: bool) -> Attentive {
        Attentive {
            cards: Arc::new(Mutex::new(cards)),
            hands_free,
            earcons,
        }
    }

    fn cards(&self) -> std::sync::MutexGuard<'_, Box<dyn LiveSound>> {
        locked(&self.cards)
    }
}

fn locked<T: ?Sized>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl LiveSound for Attentive {
    fn start_mic(&mut self, rate: u32) -> mpsc::Receiver<Result<Vec<i16>, String>> {
        let mut heard = self.cards().start_mic(rate);
        let (frames, receiver) = mpsc::channel(MIC_QUEUE);
        let hands_free = self.hands_free.clone();
        let cards = self.earcons.then(|| self.cards.clone());
        let cue = move |cue: Cue| {
            if let Some(cards) = &cards {
                let samples: Vec<i16> = pcm16_samples(&cue.render(DEVICE_RATE)).collect();
                locked(cards).play(DEVICE_RATE, &samples);
            }
        };
        let id = hands_free.recordings.fetch_add(1, Ordering::SeqCst) + 1;
        hands_free.recording.store(id, Ordering::SeqCst);
        // The detector works at the device's rate, which is the only one configured.
        let mut end = (rate == DEVICE_RATE).then(|| SpeechEnd::new(hands_free.rules));
        tokio::spawn(async move {
            let mut cued = false;
            while let Some(frame) = heard.recv().await {
                if !cued && hands_free.armed.load(Ordering::SeqCst) == id {
                    cued = true;
                    cue(Cue::Listening);
                    // The turn starts here: what came before (the tap) is not its speech.
                    end = end.map(|_| SpeechEnd::new(hands_free.rules));
                }
                if let (Ok(samples), Some(end)) = (&frame, end.as_mut()) {
                    if let Some(ended) = end.push(samples) {
                        if hands_free.disarm_recording(id) {
                            if ended == Ended::NothingSaid {
                                cue(Cue::Failed);
                            }
                            let _ = hands_free.ended.try_send((id, ended));
                        }
                    }
                }
                if frames.send(frame).await.is_err() {
                    break;
                }
            }
            // The recording is over, whatever ended it: a later TALK is a new one.
            let _ =
                (hands_free.recording).compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst);
            hands_free.disarm_recording(id);
        });
        receiver
    }

    fn stop_mic(&mut self) {
        self.cards().stop_mic();
    }

    fn play(&mut self, rate: u32, samples: &[i16]) {
        self.cards().play(rate, samples);
    }

    fn stop_playback(&mut self) {
        self.cards().stop_playback();
    }
}

/// What TALK's presses and releases tell the device. Held, TALK records while held, as
/// on a board. With hands-free turns, a tap records until the speaker stops (unless
/// taps are off: then only the wake word starts such turns), and a press during such a
/// turn takes it back: its release ends the turn.
pub struct Talk {
    hands_free: Option<(Arc<HandsFree>, mpsc::Receiver<TurnEnd>)>,
    /// A tap starts a hands-free turn.
    taps: bool,
    /// When TALK went down, while it is down.
    since: Option<Duration>,
    /// This press took a hands-free turn back.
    took_back: bool,
}

impl Talk {
    pub fn new(hands_free: Option<(Arc<HandsFree>, mpsc::Receiver<TurnEnd>)>) -> Talk {
        Talk {
            hands_free,
            taps: true,
            since: None,
            took_back: false,
        }
    }

    /// Whether a tap starts a hands-free turn (it does unless told otherwise).
    pub fn taps(mut self, taps: bool) -> Talk {
        self.taps = taps;
        self
    }

    /// `button` went down or up at `now`.
    pub fn button(&mut self, button: Button, down: bool, now: Duration) -> Vec<Command> {
        let plain = vec![if down {
            Command::Press(button)
        } else {
            Command::Release(button)
        }];
        let Some((hands_free, ends)) = &mut self.hands_free else {
            return plain;
        };
        if button != Button::Talk {
            return plain;
        }
        if down {
            self.since = Some(now);
            // The device still holds TALK from the tap: nothing to tell it yet.
            self.took_back = hands_free.disarm();
            if self.took_back {
                return Vec::new();
            }
            // A turn that ended just now is let go first, or this press would be lost
            // in it.
            let mut commands = Vec::new();
            while let Ok((id, ended)) = ends.try_recv() {
                if hands_free.is_recording(id) {
                    commands.extend(Talk::end(ended));
                }
            }
            commands.extend(plain);
            return commands;
        }
        let held = self.since.take().map(|at| now.saturating_sub(at));
        let tapped = !std::mem::take(&mut self.took_back) && held.is_some_and(|h| h < TAP);
        let tapped = tapped && self.taps;
        if tapped && hands_free.arm() {
            return Vec::new();
        }
        plain
    }

    /// What the device is told when the hands-free turn going on ends; never, without
    /// hands-free turns. The end of a recording that is over by now (the device's own
    /// limit, a failed microphone) is dropped.
    pub async fn ended(&mut self) -> Vec<Command> {
        if let Some((hands_free, ends)) = &mut self.hands_free {
            while let Some((id, ended)) = ends.recv().await {
                if hands_free.is_recording(id) {
                    return Talk::end(ended);
                }
            }
        }
        std::future::pending().await
    }

    fn end(ended: Ended) -> Vec<Command> {
        match ended {
            Ended::Silence | Ended::Limit => vec![Command::Release(Button::Talk)],
            // Cancelled while recording: what was heard is not sent.
            Ended::NothingSaid => vec![
                Command::Press(Button::Cancel),
                Command::Release(Button::Cancel),
                Command::Release(Button::Talk),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: EndRules = EndRules {
        end_silence: Duration::from_millis(700),
        max: Duration::from_secs(30),
        no_speech: NO_SPEECH,
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn names(commands: &[Command]) -> Vec<String> {
        commands.iter().map(|c| format!("{c:?}")).collect()
    }

    #[test]
    fn a_tap_is_a_turn_only_while_recording_and_a_press_takes_it_back() {
        let (hands_free, ends) = HandsFree::new(RULES);
        let mut talk = Talk::new(Some((hands_free.clone(), ends)));
        let press = names(&[Command::Press(Button::Talk)]);
        let release = names(&[Command::Release(Button::Talk)]);
        // Not recording (offline, say): the tap is an ordinary press and release.
        assert_eq!(names(&talk.button(Button::Talk, true, ms(0))), press);
        assert_eq!(names(&talk.button(Button::Talk, false, ms(100))), release);

        // Recording: the tap keeps TALK held for the device.
        hands_free.recording.store(7, Ordering::SeqCst);
        assert_eq!(names(&talk.button(Button::Talk, true, ms(1000))), press);
        assert!(talk.button(Button::Talk, false, ms(1100)).is_empty());
        assert_eq!(hands_free.armed.load(Ordering::SeqCst), 7);
        // A press during the turn takes it back; its release, short or not, ends it.
        assert!(talk.button(Button::Talk, true, ms(2000)).is_empty());
        assert_eq!(names(&talk.button(Button::Talk, false, ms(2050))), release);
        assert_eq!(hands_free.armed.load(Ordering::SeqCst), 0);

        // A hold is a hold; other buttons pass.
        assert_eq!(names(&talk.button(Button::Talk, true, ms(3000))), press);
        assert_eq!(names(&talk.button(Button::Talk, false, ms(3500))), release);
        assert_eq!(
            names(&talk.button(Button::Cancel, true, ms(4000))),
            names(&[Command::Press(Button::Cancel)])
        );
        // An end still queued when TALK goes down again is let go first; the end of a
        // recording that is over is dropped.
        hands_free.recording.store(8, Ordering::SeqCst);
        hands_free.ended.try_send((8, Ended::Silence)).unwrap();
        assert_eq!(
            names(&talk.button(Button::Talk, true, ms(5000))),
            [release.clone(), press.clone()].concat()
        );
        assert_eq!(names(&talk.button(Button::Talk, false, ms(5600))), release);
        hands_free.ended.try_send((7, Ended::NothingSaid)).unwrap();
        assert_eq!(names(&talk.button(Button::Talk, true, ms(6000))), press);
        // Taps off (the wake word alone starts hands-free turns): a tap is a tap.
        let (hands_free, ends) = HandsFree::new(RULES);
        let mut plain = Talk::new(Some((hands_free.clone(), ends))).taps(false);
        hands_free.recording.store(9, Ordering::SeqCst);
        assert_eq!(names(&plain.button(Button::Talk, true, ms(0))), press);
        assert_eq!(names(&plain.button(Button::Talk, false, ms(100))), release);
        assert_eq!(hands_free.armed.load(Ordering::SeqCst), 0);
        // A turn in which nobody spoke is cancelled before TALK is let go.
        assert_eq!(
            names(&Talk::end(Ended::NothingSaid)),
            names(&[
                Command::Press(Button::Cancel),
                Command::Release(Button::Cancel),
                Command::Release(Button::Talk),
            ])
        );
    }
}
