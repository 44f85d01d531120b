//! Buttons and the microphone.
//!
//! TALK records while held; CANCEL acts on release, because holding it 2 s means
//! something else (a new conversation) and a short press must not have done its own
//! thing first. A press is judged by when it went down: one that began in a prompt's
//! first 0.6 s, or while offline, is ignored through its release.

use alloc::format;
use alloc::string::String;

use herald_gadget_proto::limits::SESSION_NEW_HOLD_MS;
use herald_gadget_proto::{Answer, Cancel, SessionNew};

use super::Device;
use crate::config::Button;
use crate::host::Host;
use crate::io::Action;
use crate::mic::{Finish, Recording};
use crate::time::{millis, Instant};
use crate::view::Phase;

/// Reason sent with `audio.cancel` when CANCEL discards a recording.
const CANCELLED: &str = "cancelled";

/// A button held down.
#[derive(Debug, Clone, Copy)]
pub(super) struct Press {
    at: Instant,
    /// Whether the release is to be ignored too.
    ignored: bool,
}

impl<H: Host> Device<H> {
    pub(super) fn button_down(&mut self, button: Button, now: Instant) {
        let guarded = self.prompt.as_ref().is_some_and(|p| now < p.guard_until());
        let ignored = self.phase != Phase::Online || guarded;
        self.presses[button.index()] = Some(Press { at: now, ignored });
        if ignored {
            return;
        }
        match button {
            Button::Talk if self.prompt.is_some() => {
                self.answer_prompt(Answer::Yes);
                // The press is spent: its release must not stop a recording.
                self.presses[button.index()] = Some(Press {
                    at: now,
                    ignored: true,
                });
            }
            Button::Talk => self.start_recording(now),
            Button::Cancel => {
                self.cancel_hold = Some(CancelHold::new(now));
                self.touch();
            }
            Button::Up => self.turn_page(false),
            Button::Down => self.turn_page(true),
        }
    }

    pub(super) fn button_up(&mut self, button: Button, now: Instant) {
        let Some(press) = self.presses[button.index()].take() else {
            return;
        };
        if press.ignored {
            return;
        }
        match button {
            Button::Talk => self.stop_recording(now),
            // No hold deadline left means the hold already started a new conversation.
            Button::Cancel => {
                if self.cancel_hold.take().is_some() {
                    self.touch();
                    self.short_cancel(press.at, now);
                }
            }
            Button::Up | Button::Down => {}
        }
    }

    pub(super) fn input_timers(&mut self, now: Instant) {
        if self.recording.as_ref().is_some_and(|r| r.deadline() <= now) {
            self.stop_recording(now);
        }
        if let Some(hold) = self.cancel_hold.as_mut() {
            if hold.fired(now) {
                self.cancel_hold = None;
                self.new_session(now);
            } else if hold.tick(now) {
                self.touch();
            }
        }
    }

    pub(super) fn mic_samples(&mut self, samples: &[i16]) {
        if let Some(recording) = self.recording.as_mut() {
            let actions = &mut self.actions;
            recording.push(samples, |frame| {
                actions.push_back(Action::SendBinary(frame))
            });
        }
    }

    fn start_recording(&mut self, now: Instant) {
        let Some(rate) = self.config.mic_rate else {
            return;
        };
        if self.recording.is_some() {
            return;
        }
        if !self.paired {
            self.show_notice("Pair this device first", None, now);
            return;
        }
        // Barge-in: talking stops the reply being played.
        if self.player.stop() {
            self.act(Action::StopPlayback);
        }
        let id = self.next_message_id('a');
        self.next_stream = self.next_stream.wrapping_add(1);
        let (recording, start) = Recording::start(id, self.next_stream, rate, now);
        self.recording = Some(recording);
        self.send(start);
        self.act(Action::StartMic);
        self.touch();
    }

    /// Ends the recording on release or at the 30 s cap.
    fn stop_recording(&mut self, now: Instant) {
        let Some(recording) = self.recording.take() else {
            return;
        };
        self.act(Action::StopMic);
        match recording.finish(now) {
            Finish::TooShort(cancel) => self.send(cancel),
            Finish::Ended { last_frame, end } => {
                if let Some(frame) = last_frame {
                    self.act(Action::SendBinary(frame));
                }
                self.send(end);
                self.chat.request("", now);
            }
        }
        self.touch();
    }

    /// CANCEL released before the hold: the first of these that applies.
    fn short_cancel(&mut self, pressed_at: Instant, now: Instant) {
        if let Some(prompt) = &self.prompt {
            if pressed_at >= prompt.guard_until() {
                self.answer_prompt(Answer::No);
            }
            return;
        }
        if let Some(recording) = self.recording.take() {
            self.act(Action::StopMic);
            self.send(recording.cancel(CANCELLED));
            self.touch();
            return;
        }
        if self.dismiss_overlay() {
            return;
        }
        if self.chat.awaiting || self.player.is_active() {
            self.send(Cancel {});
            if self.player.stop() {
                self.act(Action::StopPlayback);
            }
            self.chat.end_turn();
            self.show_notice("Cancelled", None, now);
            return;
        }
        if self.notice.take().is_some() {
            self.touch();
        }
    }

    /// CANCEL held 2 s: a fresh conversation.
    fn new_session(&mut self, now: Instant) {
        if self.phase != Phase::Online {
            return;
        }
        if let Some(recording) = self.recording.take() {
            self.act(Action::StopMic);
            self.send(recording.cancel(CANCELLED));
        }
        if self.player.stop() {
            self.act(Action::StopPlayback);
        }
        self.send(SessionNew {});
        self.chat.end_turn();
        self.chat.text.clear();
        self.show_notice("New conversation", None, now);
    }
}

/// CANCEL held down, counting the seconds to a new conversation on the status line.
#[derive(Debug)]
pub(super) struct CancelHold {
    pressed_at: Instant,
    /// The whole seconds shown, counting down to the new conversation.
    seconds_left: u64,
}

impl CancelHold {
    fn new(now: Instant) -> Self {
        CancelHold {
            pressed_at: now,
            seconds_left: SESSION_NEW_HOLD_MS.div_ceil(1000),
        }
    }

    /// When the seconds shown next change; at the last one, when the hold fires.
    pub(super) fn deadline(&self) -> Instant {
        let shown_ms = (self.seconds_left - 1) * 1000;
        self.pressed_at + millis(SESSION_NEW_HOLD_MS.saturating_sub(shown_ms))
    }

    fn fired(&self, now: Instant) -> bool {
        now >= self.pressed_at + millis(SESSION_NEW_HOLD_MS)
    }

    /// Count down at `now`; whether the seconds shown changed.
    fn tick(&mut self, now: Instant) -> bool {
        let before = self.seconds_left;
        while self.seconds_left > 1 && now >= self.deadline() {
            self.seconds_left -= 1;
        }
        self.seconds_left != before
    }

    pub(super) fn status(&self) -> String {
        format!("New chat in {} s", self.seconds_left)
    }
}
