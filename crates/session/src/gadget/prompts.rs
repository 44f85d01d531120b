//! The per-device question queue: one question shows at a time, the rest wait in order.
//!
//! A gadget answers only yes or no, so a clarify with choices is asked one choice at a
//! time ("Red?", "Green?"): the first yes settles a single choice, a multi-select one
//! collects every yes. Each step is a new prompt on the device, under an id of its own.
//!
//! Pure state (no I/O, time passed in) so every rule is unit-tested: ordering, ttl,
//! withdrawal, the steps of a clarify, and what the device must be shown after each change.

use std::collections::VecDeque;
use std::time::Instant;

use herald_port::{Choice, Prompt};

/// A question waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The agent's name for the question: 8 hex characters, as devices expect.
    pub id: String,
    /// The id the device knows the step on screen by: `id` at first, a new one for each
    /// further choice of a clarify.
    pub shown: String,
    pub prompt: Prompt,
    pub ttl_s: Option<u32>,
    /// When the question lapses; `None` waits forever (exec approvals).
    pub expires: Option<Instant>,
    /// A clarify's progress through its choices.
    pub step: Step,
}

/// Where a clarify asked choice by choice stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The choice on screen.
    pub at: usize,
    /// The choices answered yes so far (multi-select).
    pub chosen: Vec<usize>,
}

impl Question {
    pub fn new(id: String, prompt: Prompt, ttl_s: Option<u32>, expires: Option<Instant>) -> Self {
        Question {
            shown: id.clone(),
            id,
            prompt,
            ttl_s,
            expires,
            step: Step::default(),
        }
    }

    /// The choice a clarify puts to the user now, if this is one asked choice by choice.
    pub fn choice_on_screen(&self) -> Option<(&str, usize, usize)> {
        match &self.prompt {
            Prompt::Clarify { choices, .. } => choices
                .get(self.step.at)
                .map(|choice| (choice.as_str(), self.step.at, choices.len())),
            _ => None,
        }
    }
}

/// What a yes or no did to the question on screen.
#[derive(Debug, PartialEq)]
pub enum Replied<'a> {
    /// The question (the agent's id) is settled with this choice; the device may have a
    /// next one to show.
    Settled {
        id: String,
        choice: Choice,
        show: Show<'a>,
    },
    /// A clarify moves on to its next choice, to be shown under its new id.
    Next(&'a Question),
}

/// What one answer means for the question it answers.
enum Verdict {
    Settle(Choice),
    NextChoice,
}

fn verdict(question: &Question, yes: bool) -> Verdict {
    match (&question.prompt, yes) {
        (Prompt::ExecApproval { .. } | Prompt::Confirm { .. }, true) => {
            Verdict::Settle(Choice::Once)
        }
        (Prompt::ExecApproval { .. }, false) => Verdict::Settle(Choice::Deny),
        (Prompt::Confirm { .. }, false) => Verdict::Settle(Choice::Cancel),
        (
            Prompt::Clarify {
                choices,
                multi_select,
                ..
            },
            yes,
        ) => {
            let at = question.step.at;
            if yes && !multi_select {
                return Verdict::Settle(Choice::Option(at));
            }
            if at + 1 < choices.len() {
                return Verdict::NextChoice;
            }
            if !multi_select {
                // Every choice turned down: the question stands unanswered.
                return Verdict::Settle(Choice::Cancel);
            }
            let mut chosen = question.step.chosen.clone();
            if yes {
                chosen.push(at);
            }
            Verdict::Settle(Choice::Options(chosen))
        }
    }
}

/// What the device should be told after a change to the queue.
#[derive(Debug, PartialEq)]
pub enum Show<'a> {
    /// Nothing changed on screen.
    Nothing,
    /// Close the shown question (it was withdrawn) and show the next, if any.
    Close {
        closed: String,
        next: Option<&'a Question>,
    },
    /// A new question is at the head.
    Ask(&'a Question),
}

#[derive(Debug, Default)]
pub struct PromptQueue {
    queue: VecDeque<Question>,
}

impl PromptQueue {
    pub fn head(&self) -> Option<&Question> {
        self.queue.front()
    }

    /// Queue a question; it shows at once when nothing else is waiting.
    pub fn push(&mut self, question: Question) -> Show<'_> {
        self.queue.push_back(question);
        if self.queue.len() == 1 {
            self.queue.front().map_or(Show::Nothing, Show::Ask)
        } else {
            Show::Nothing
        }
    }

    /// The device's yes or no to the step it shows as `shown`; `None` when no such step
    /// waits. `fresh_id` names the next step of a clarify that goes on.
    pub fn reply(
        &mut self,
        shown: &str,
        yes: bool,
        fresh_id: impl FnOnce() -> String,
    ) -> Option<Replied<'_>> {
        let pos = self.queue.iter().position(|q| q.shown == shown)?;
        match verdict(&self.queue[pos], yes) {
            Verdict::NextChoice => {
                let question = &mut self.queue[pos];
                if yes {
                    question.step.chosen.push(question.step.at);
                }
                question.step.at += 1;
                question.shown = fresh_id();
                Some(Replied::Next(&self.queue[pos]))
            }
            Verdict::Settle(choice) => {
                let question = self.queue.remove(pos)?;
                // The device closes an answered question itself; it only needs the next one.
                let show = if pos == 0 {
                    self.queue.front().map_or(Show::Nothing, Show::Ask)
                } else {
                    Show::Nothing
                };
                Some(Replied::Settled {
                    id: question.id,
                    choice,
                    show,
                })
            }
        }
    }

    /// Withdraw a question by the agent's id; the device is told only if it was showing it.
    pub fn withdraw(&mut self, id: &str) -> Option<Show<'_>> {
        let pos = self.queue.iter().position(|q| q.id == id)?;
        let removed = self.queue.remove(pos)?;
        Some(if pos == 0 {
            Show::Close {
                closed: removed.shown,
                next: self.queue.front(),
            }
        } else {
            Show::Nothing
        })
    }

    /// Drop every question whose time is up; returns the dropped ids and, when the
    /// head changed, the question to show next.
    pub fn expire(&mut self, now: Instant) -> (Vec<String>, Option<&Question>) {
        let head_before = self.queue.front().map(|q| q.id.clone());
        let mut expired = Vec::new();
        self.queue.retain(|q| {
            let keep = q.expires.is_none_or(|at| at > now);
            if !keep {
                expired.push(q.id.clone());
            }
            keep
        });
        let head_changed = self.queue.front().map(|q| &q.id) != head_before.as_ref();
        let next = if head_changed {
            self.queue.front()
        } else {
            None
        };
        (expired, next)
    }

    /// The earliest expiry, for the session's timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.iter().filter_map(|q| q.expires).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn question(id: &str, expires: Option<Instant>) -> Question {
        let prompt = Prompt::Confirm {
            title: "T".into(),
            text: id.into(),
        };
        Question::new(id.into(), prompt, None, expires)
    }

    fn clarify(id: &str, choices: &[&str], multi_select: bool) -> Question {
        let prompt = Prompt::Clarify {
            question: "Which?".into(),
            choices: choices.iter().map(|c| (*c).to_owned()).collect(),
            multi_select,
        };
        Question::new(id.into(), prompt, None, None)
    }

    fn settled(replied: Option<Replied<'_>>) -> (String, Choice) {
        match replied {
            Some(Replied::Settled { id, choice, .. }) => (id, choice),
            other => panic!("not settled: {other:?}"),
        }
    }

    /// Step through a clarify with these answers; the ids each step was shown under.
    fn next_step(q: &mut PromptQueue, shown: &str, yes: bool, fresh: &str) -> String {
        match q.reply(shown, yes, || fresh.to_owned()) {
            Some(Replied::Next(next)) => next.shown.clone(),
            other => panic!("no next step: {other:?}"),
        }
    }

    #[test]
    fn one_at_a_time_in_order() {
        let mut q = PromptQueue::default();
        assert!(matches!(q.push(question("a", None)), Show::Ask(x) if x.id == "a"));
        assert_eq!(q.push(question("b", None)), Show::Nothing);
        assert_eq!(q.push(question("c", None)), Show::Nothing);
        match q.reply("a", true, String::new) {
            Some(Replied::Settled { id, choice, show }) => {
                assert_eq!((id.as_str(), choice), ("a", Choice::Once));
                assert!(matches!(show, Show::Ask(x) if x.id == "b"));
            }
            other => panic!("{other:?}"),
        }
        // Answering a waiting question does not disturb the screen.
        assert!(matches!(
            q.reply("c", false, String::new),
            Some(Replied::Settled {
                show: Show::Nothing,
                choice: Choice::Cancel,
                ..
            })
        ));
        assert!(q.reply("zz", true, String::new).is_none());
        assert_eq!(q.head().unwrap().id, "b");
    }

    #[test]
    fn a_clarify_is_asked_choice_by_choice_until_a_yes() {
        let mut q = PromptQueue::default();
        q.push(clarify("a", &["red", "green", "blue"], false));
        assert_eq!(q.head().unwrap().choice_on_screen(), Some(("red", 0, 3)));
        let second = next_step(&mut q, "a", false, "b");
        assert_eq!(second, "b");
        assert_eq!(q.head().unwrap().choice_on_screen(), Some(("green", 1, 3)));
        // The first step's id is spent: a late answer to it is not the second step's.
        assert!(q.reply("a", true, String::new).is_none());
        assert_eq!(
            settled(q.reply("b", true, String::new)),
            ("a".into(), Choice::Option(1))
        );
        assert!(q.head().is_none());
    }

    #[test]
    fn a_clarify_turned_down_throughout_is_cancelled() {
        let mut q = PromptQueue::default();
        q.push(clarify("a", &["red", "green"], false));
        let second = next_step(&mut q, "a", false, "b");
        assert_eq!(
            settled(q.reply(&second, false, String::new)),
            ("a".into(), Choice::Cancel)
        );
    }

    #[test]
    fn a_multi_select_clarify_collects_every_yes() {
        let mut q = PromptQueue::default();
        q.push(clarify("a", &["hall", "den", "attic"], true));
        let second = next_step(&mut q, "a", true, "b");
        let third = next_step(&mut q, &second, false, "c");
        assert_eq!(
            settled(q.reply(&third, true, String::new)),
            ("a".into(), Choice::Options(vec![0, 2]))
        );
        q.push(clarify("d", &["hall"], true));
        assert_eq!(
            settled(q.reply("d", false, String::new)),
            ("d".into(), Choice::Options(Vec::new()))
        );
    }

    #[test]
    fn withdrawing_a_clarify_closes_the_step_on_screen() {
        let mut q = PromptQueue::default();
        q.push(clarify("a", &["red", "green"], false));
        next_step(&mut q, "a", false, "b");
        assert!(
            matches!(q.withdraw("a"), Some(Show::Close { closed, next: None }) if closed == "b")
        );
    }

    #[test]
    fn withdrawal_closes_only_the_shown_question() {
        let mut q = PromptQueue::default();
        q.push(question("a", None));
        q.push(question("b", None));
        q.push(question("c", None));
        assert_eq!(q.withdraw("b"), Some(Show::Nothing));
        match q.withdraw("a") {
            Some(Show::Close { closed, next }) => {
                assert_eq!(closed, "a");
                assert_eq!(next.unwrap().id, "c");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(q.withdraw("a"), None);
    }

    #[test]
    fn expiry_drops_lapsed_questions_and_shows_the_next() {
        let now = crate::testing::start();
        let mut q = PromptQueue::default();
        q.push(question("a", Some(now + Duration::from_secs(10))));
        q.push(question("b", None));
        q.push(question("c", Some(now + Duration::from_secs(5))));
        assert_eq!(q.next_deadline(), Some(now + Duration::from_secs(5)));
        let (expired, next) = q.expire(now + Duration::from_secs(6));
        assert_eq!(expired, ["c"]);
        assert!(next.is_none());
        let (expired, next) = q.expire(now + Duration::from_secs(10));
        assert_eq!(expired, ["a"]);
        assert_eq!(next.unwrap().id, "b");
        assert_eq!(q.next_deadline(), None);
    }
}
