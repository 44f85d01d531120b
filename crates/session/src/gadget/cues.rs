//! Never silent: what a gadget with a speaker hears from Herald itself while the agent
//! has nothing to say. A voice turn is acknowledged the moment it is taken; a turn that
//! stays quiet gets a soft "still working" cue after a while and again at an interval,
//! until the agent says, shows or asks anything; a turn that fails ends with a cue and a
//! notice; and a turn the agent never ends is ended as failed once it has been silent
//! for the turn timeout (and the agent told), so the device is never left thinking
//! forever.
//!
//! The protocol has no frame for any of this: the cues are short PCM clips on a speech
//! stream (`herald_media::cue`), which the device plays as it plays speech, and which
//! speech from the agent replaces at once.

use std::time::{Duration, Instant};

use herald_media::cue::Cue;
use herald_port::{InboundBody, Outcome, TurnId};
use tracing::warn;

use super::core::{Core, Effect};
use crate::FAILED_NOTICE;

/// When cues play, for every session of a hub.
#[derive(Debug, Clone)]
pub struct CueTiming {
    /// Quiet this long after a turn began: the first "still working" cue.
    pub after: Duration,
    /// Then again at this interval, for as long as the quiet lasts.
    pub every: Duration,
}

impl Core {
    /// A voice turn was taken: acknowledge it now, and wait for the agent.
    pub(super) fn heard(&mut self, now: Instant) {
        self.play_cue(Cue::Heard);
        self.wait_for_agent(now);
    }

    /// A turn began or was taken: the agent's quiet is timed from now.
    pub(super) fn wait_for_agent(&mut self, now: Instant) {
        self.quiet_since = Some(now);
        self.next_cue = self.rules.cues.as_ref().map(|timing| now + timing.after);
    }

    /// The agent called on the device: the turn's silence starts over, and once it has
    /// said, shown or asked something (`said`), "still working" is over.
    pub(super) fn agent_active(&mut self, now: Instant, said: bool) {
        if said {
            self.next_cue = None;
        }
        if self.quiet_since.is_some() {
            self.quiet_since = Some(now);
        }
    }

    /// A question was answered or lapsed. While it was open the turn waited for the
    /// person, not the agent: the agent's silence, and any cue it is due, count from now.
    pub(super) fn question_closed(&mut self, now: Instant) {
        if self.quiet_since.is_some() {
            self.quiet_since = Some(now);
        }
        if let (Some(at), Some(timing)) = (&mut self.next_cue, self.rules.cues.as_ref()) {
            *at = (*at).max(now + timing.after);
        }
    }

    /// The turn is over, however it ended.
    pub(super) fn stop_waiting(&mut self) {
        self.next_cue = None;
        self.quiet_since = None;
    }

    /// The turn ended with `outcome`: a failure is heard and seen.
    pub(super) fn turn_over(&mut self, outcome: Outcome) {
        self.stop_waiting();
        if outcome == Outcome::Failure && self.reachable().is_ok() {
            self.play_cue(Cue::Failed);
            self.notice(FAILED_NOTICE);
        }
    }

    /// When [`Core::cues_due`] has work: none while a question waits for its answer.
    pub(super) fn cues_deadline(&self) -> Option<Instant> {
        if self.prompts.head().is_some() {
            return None;
        }
        let timeout = self
            .quiet_since
            .map(|since| since + self.rules.turn_timeout);
        [self.next_cue, timeout].into_iter().flatten().min()
    }

    pub(super) fn cues_due(&mut self, now: Instant) {
        if self.prompts.head().is_some() {
            return;
        }
        let silent_too_long = self
            .quiet_since
            .is_some_and(|since| now >= since + self.rules.turn_timeout);
        if silent_too_long {
            if let Some(turn) = self.turn.clone() {
                warn!(device = %self.device_id, %turn, "the agent was silent for the turn timeout: ending the turn as failed");
                if let Ok(turn_id) = TurnId::try_from(turn) {
                    let _ = self.end_turn(&turn_id, Outcome::Failure);
                    // The agent hears it too: it may stop, and say the failure aloud.
                    let id = self.ids.hex(12);
                    self.forward(id, InboundBody::TurnTimedOut { turn_id });
                }
            }
            self.stop_waiting();
            return;
        }
        let (Some(at), Some(timing)) = (self.next_cue, self.rules.cues.as_ref()) else {
            return;
        };
        if now >= at {
            self.next_cue = Some(now + timing.every);
            // Something already plays (the acknowledgement, a question): no cue over it.
            if self.speaking.is_none() {
                self.play_cue(Cue::Working);
            }
        }
    }

    /// Play `cue` on the speaker, if cues are on and the device has one.
    fn play_cue(&mut self, cue: Cue) {
        if self.rules.cues.is_none() {
            return;
        }
        if let Ok(rate) = self.speaker() {
            self.effect(Effect::PlayCue { cue, rate });
        }
    }
}
