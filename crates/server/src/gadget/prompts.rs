//! The per-device question queue: one question shows at a time, the rest wait in order.
//!
//! Pure state (no I/O, time passed in) so every rule is unit-tested: ordering, ttl,
//! withdrawal, and what the device must be shown after each change.

use std::collections::VecDeque;

use herald_port::Prompt;
use tokio::time::Instant;

/// A question waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// 8 hex characters, as devices expect.
    pub id: String,
    pub prompt: Prompt,
    pub ttl_s: Option<u32>,
    /// When the question lapses; `None` waits forever (exec approvals).
    pub expires: Option<Instant>,
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

    /// Take the answered question out; returns it when `id` was waiting.
    pub fn answer(&mut self, id: &str) -> Option<(Question, Show<'_>)> {
        let pos = self.queue.iter().position(|q| q.id == id)?;
        let question = self.queue.remove(pos)?;
        // The device closes an answered question itself; it only needs the next one.
        let show = if pos == 0 {
            self.queue.front().map_or(Show::Nothing, Show::Ask)
        } else {
            Show::Nothing
        };
        Some((question, show))
    }

    /// Withdraw a question; the device is told only if it was showing it.
    pub fn withdraw(&mut self, id: &str) -> Option<Show<'_>> {
        let pos = self.queue.iter().position(|q| q.id == id)?;
        let removed = self.queue.remove(pos)?;
        Some(if pos == 0 {
            Show::Close {
                closed: removed.id,
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
        Question {
            id: id.into(),
            prompt: Prompt::Confirm {
                title: "T".into(),
                text: id.into(),
            },
            ttl_s: None,
            expires,
        }
    }

    #[test]
    fn one_at_a_time_in_order() {
        let mut q = PromptQueue::default();
        assert!(matches!(q.push(question("a", None)), Show::Ask(x) if x.id == "a"));
        assert_eq!(q.push(question("b", None)), Show::Nothing);
        assert_eq!(q.push(question("c", None)), Show::Nothing);
        let (answered, show) = q.answer("a").unwrap();
        assert_eq!(answered.id, "a");
        assert!(matches!(show, Show::Ask(x) if x.id == "b"));
        // Answering a waiting question does not disturb the screen.
        let (_, show) = q.answer("c").unwrap();
        assert_eq!(show, Show::Nothing);
        assert!(q.answer("zz").is_none());
        assert_eq!(q.head().unwrap().id, "b");
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
        let now = Instant::now();
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
