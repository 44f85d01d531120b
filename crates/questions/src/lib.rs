//! One question on every device at hand.
//!
//! When the agent asks a device something (an exec approval, a confirmation, a clarify
//! question), the router shows a copy on every connected phone or browser chat of the
//! same person, and a phone of theirs that connects while the question is open gets one
//! too. The first answer, wherever it is given, wins: it goes to the agent as the
//! asking device's own (so every backend resolves it as it always has), and every other
//! copy is withdrawn with a word on where it was answered. A late answer from another
//! copy is dropped, never a second resolution.
//!
//! This is the ledger of open questions that makes that so; the server's router and
//! session loop act on what it says.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::time::{Duration, Instant};

use dashmap::DashMap;
use herald_port::{Chat, Prompt};

/// Open questions kept at most; past it, the oldest is no longer shared.
const MAX_OPEN: usize = 1024;
/// An answered question is remembered at least this long, so a late answer loses.
const ANSWERED_FOR: Duration = Duration::from_secs(60);

/// A question the agent asked one device, shared with its person's others.
#[derive(Debug, Clone)]
pub struct Question {
    /// The device the agent asked.
    pub origin: Chat,
    /// The user id the asking device's messages come from.
    pub origin_user: String,
    /// Whose devices see it.
    pub person: String,
    /// The asking device, as a card names it.
    pub asked_by: String,
    pub prompt: Prompt,
    pub ttl_s: Option<u32>,
    pub expires: Instant,
    /// The devices showing a copy, with their names.
    pub copies: Vec<(Chat, String)>,
}

/// What an answer to question `prompt_id` from a device means.
#[derive(Debug, PartialEq)]
pub enum Claim {
    /// The question is not shared: the answer goes on as it is.
    NotShared,
    /// The first answer: it goes to the agent as `origin`'s (from `origin_user`), and
    /// the copies on `others` are withdrawn, told it was answered on `answered_on`.
    Won {
        origin: Chat,
        origin_user: String,
        others: Vec<Chat>,
        answered_on: String,
    },
    /// Already answered elsewhere.
    Lost,
}

#[derive(Default)]
pub struct Questions {
    /// Questions are shared at all (`questions.share`).
    share: bool,
    /// People and phones that get no copies (`questions.not_to`).
    not_to: Vec<String>,
    open: DashMap<String, Question>,
    /// Questions answered, kept until they would have lapsed, so a late answer loses.
    answered: DashMap<String, Instant>,
}

impl Questions {
    pub fn new(share: bool, not_to: Vec<String>) -> Self {
        Questions {
            share,
            not_to,
            ..Questions::default()
        }
    }

    /// Whether `person`'s phone `device` gets copies of their questions.
    pub fn shares_with(&self, person: &str, device: &str) -> bool {
        self.share && !self.not_to.iter().any(|id| id == person || id == device)
    }

    /// Share question `prompt_id`, unless it was answered already (sharing runs beside
    /// the agent's call, so an answer on the asking device may come first): whether it
    /// is open now.
    pub fn open(&self, prompt_id: String, question: Question, now: Instant) -> bool {
        self.prune(now);
        if self.answered.contains_key(&prompt_id) {
            return false;
        }
        if self.open.len() >= MAX_OPEN {
            let oldest = self
                .open
                .iter()
                .min_by_key(|entry| entry.expires)
                .map(|entry| entry.key().clone());
            if let Some(oldest) = oldest {
                self.open.remove(&oldest);
            }
        }
        self.open.insert(prompt_id, question);
        true
    }

    /// Whether `prompt_id` is still open (not answered, withdrawn or lapsed).
    pub fn is_open(&self, prompt_id: &str) -> bool {
        self.open.contains_key(prompt_id)
    }

    /// A copy of `prompt_id` is shown on `chat`, called `name`.
    pub fn shown(&self, prompt_id: &str, chat: Chat, name: String) {
        if let Some(mut question) = self.open.get_mut(prompt_id) {
            if !question.copies.iter().any(|(c, _)| *c == chat) {
                question.copies.push((chat, name));
            }
        }
    }

    /// The copy of `prompt_id` meant for `chat` never reached it.
    pub fn not_shown(&self, prompt_id: &str, chat: &Chat) {
        if let Some(mut question) = self.open.get_mut(prompt_id) {
            question.copies.retain(|(c, _)| c != chat);
        }
    }

    /// The questions open for `person` that `chat` does not show yet.
    pub fn open_for(&self, person: &str, chat: &Chat, now: Instant) -> Vec<(String, Question)> {
        if !self.shares_with(person, &chat.id) {
            return Vec::new();
        }
        self.open
            .iter()
            .filter(|q| q.person == person && q.expires > now && q.origin != *chat)
            .filter(|q| !q.copies.iter().any(|(c, _)| c == chat))
            .map(|q| (q.key().clone(), q.value().clone()))
            .collect()
    }

    /// An answer to `prompt_id` came from `from`.
    pub fn claim(&self, prompt_id: &str, from: &Chat, now: Instant) -> Claim {
        if self.answered.contains_key(prompt_id) {
            return Claim::Lost;
        }
        let Some((_, question)) = self.open.remove(prompt_id) else {
            // Remembered a while, in case it is about to be shared.
            self.prune(now);
            self.answered
                .insert(prompt_id.to_owned(), now + ANSWERED_FOR);
            return Claim::NotShared;
        };
        self.answered.insert(
            prompt_id.to_owned(),
            question.expires.max(now + ANSWERED_FOR),
        );
        let answered_on = if *from == question.origin {
            question.asked_by.clone()
        } else {
            let named = question.copies.iter().find(|(c, _)| c == from);
            named.map_or_else(|| from.id.clone(), |(_, name)| name.clone())
        };
        let mut others: Vec<Chat> = question
            .copies
            .into_iter()
            .map(|(chat, _)| chat)
            .filter(|chat| chat != from)
            .collect();
        if *from != question.origin {
            others.push(question.origin.clone());
        }
        Claim::Won {
            origin: question.origin,
            origin_user: question.origin_user,
            others,
            answered_on,
        }
    }

    /// The agent withdrew `prompt_id` (or it lapsed): the devices still showing a copy.
    pub fn close(&self, prompt_id: &str) -> Vec<Chat> {
        match self.open.remove(prompt_id) {
            Some((_, question)) => question.copies.into_iter().map(|(c, _)| c).collect(),
            None => Vec::new(),
        }
    }

    fn prune(&self, now: Instant) {
        self.open.retain(|_, q| q.expires > now);
        self.answered.retain(|_, until| *until > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any instant will do: the ledger only compares the ones it is told.
    #[allow(clippy::disallowed_methods)]
    fn start() -> Instant {
        Instant::now()
    }

    fn question(now: Instant) -> Question {
        Question {
            origin: Chat::gadget("hg-1"),
            origin_user: "hg-1".into(),
            person: "u-alice".into(),
            asked_by: "Kitchen".into(),
            prompt: Prompt::Confirm {
                title: String::new(),
                text: "Go?".into(),
            },
            ttl_s: None,
            expires: now + Duration::from_secs(300),
            copies: Vec::new(),
        }
    }

    #[test]
    fn the_first_answer_wins_and_every_other_copy_is_withdrawn() {
        let now = start();
        let questions = Questions::new(true, Vec::new());
        questions.open("p1".into(), question(now), now);
        let (phone, laptop) = (Chat::mobile("tel-1"), Chat::mobile("web-1"));
        questions.shown("p1", phone.clone(), "Alice's phone".into());
        questions.shown("p1", laptop.clone(), "Browser".into());

        let won = questions.claim("p1", &phone, now);
        assert_eq!(
            won,
            Claim::Won {
                origin: Chat::gadget("hg-1"),
                origin_user: "hg-1".into(),
                others: vec![laptop.clone(), Chat::gadget("hg-1")],
                answered_on: "Alice's phone".into(),
            }
        );
        assert_eq!(questions.claim("p1", &laptop, now), Claim::Lost);
        let origin = Chat::gadget("hg-1");
        assert_eq!(questions.claim("p1", &origin, now), Claim::Lost);
        assert_eq!(
            questions.claim("p2", &laptop, now),
            Claim::NotShared,
            "never shared"
        );
        // Answered before its sharing began: it is not shared after.
        questions.open("p2".into(), question(now), now);
        let asker = Chat::gadget("hg-1");
        assert_eq!(
            questions
                .open_for("u-alice", &Chat::mobile("tel-5"), now)
                .len(),
            0
        );
        assert_eq!(questions.claim("p2", &asker, now), Claim::Lost);
    }

    #[test]
    fn a_device_that_connects_later_gets_what_is_still_open_for_its_person() {
        let now = start();
        let questions = Questions::new(true, Vec::new());
        questions.open("p1".into(), question(now), now);
        let phone = Chat::mobile("tel-1");
        assert_eq!(questions.open_for("u-alice", &phone, now).len(), 1);
        assert!(questions.open_for("u-bob", &phone, now).is_empty());
        questions.shown("p1", phone.clone(), "Phone".into());
        assert!(
            questions.open_for("u-alice", &phone, now).is_empty(),
            "shown"
        );
        let later = now + Duration::from_secs(301);
        let other = Chat::mobile("tel-2");
        assert!(
            questions.open_for("u-alice", &other, later).is_empty(),
            "lapsed"
        );
        assert_eq!(questions.close("p1"), vec![phone]);
        assert!(questions.open_for("u-alice", &other, now).is_empty());
    }
}

#[cfg(test)]
mod settings {
    use super::*;

    #[test]
    fn sharing_is_off_for_who_the_owner_names_or_for_everyone() {
        let questions = Questions::new(true, vec!["u-carol".into(), "tel-9".into()]);
        assert!(questions.shares_with("u-alice", "tel-1"));
        assert!(!questions.shares_with("u-carol", "tel-2"), "a person");
        assert!(!questions.shares_with("u-alice", "tel-9"), "a phone");
        assert!(!Questions::new(false, Vec::new()).shares_with("u-alice", "tel-1"));
    }
}
