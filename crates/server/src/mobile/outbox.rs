//! Bounded memory of what a phone should not miss.
//!
//! [`Outbox`] keeps the frames of a turn that is still running while the phone is away
//! (at most [`limits::OUTBOX_FRAMES`] frames, [`limits::OUTBOX_BYTES`] bytes and
//! [`limits::OUTBOX_TTL_SECS`] old; the oldest go first). [`SeenIds`] remembers the
//! message ids a phone already sent, so a resend after a drop is not answered twice.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use herald_mobile_proto::limits;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(limits::OUTBOX_TTL_SECS);
const SEEN_TTL: Duration = Duration::from_secs(limits::DEDUP_TTL_SECS);

#[derive(Default)]
pub(crate) struct Outbox {
    frames: VecDeque<(String, Instant)>,
    bytes: usize,
}

impl Outbox {
    pub(crate) fn push(&mut self, frame: String, now: Instant) {
        self.bytes += frame.len();
        self.frames.push_back((frame, now));
        while self.frames.len() > limits::OUTBOX_FRAMES || self.bytes > limits::OUTBOX_BYTES {
            self.pop_oldest();
        }
    }

    /// Everything still fresh, oldest first.
    pub(crate) fn drain(&mut self, now: Instant) -> Vec<String> {
        let frames = std::mem::take(&mut self.frames);
        self.bytes = 0;
        frames
            .into_iter()
            .filter(|(_, at)| now.duration_since(*at) < TTL)
            .map(|(frame, _)| frame)
            .collect()
    }

    fn pop_oldest(&mut self) {
        if let Some((frame, _)) = self.frames.pop_front() {
            self.bytes -= frame.len();
        }
    }
}

#[derive(Default)]
pub(crate) struct SeenIds {
    order: VecDeque<(String, Instant)>,
    ids: HashSet<String>,
}

impl SeenIds {
    /// Record `id`; false when it was already seen (a duplicate).
    pub(crate) fn insert(&mut self, id: &str, now: Instant) -> bool {
        while let Some((oldest, at)) = self.order.front() {
            if self.order.len() >= limits::DEDUP_IDS || now.duration_since(*at) >= SEEN_TTL {
                self.ids.remove(oldest);
                self.order.pop_front();
            } else {
                break;
            }
        }
        if self.ids.contains(id) {
            return false;
        }
        self.ids.insert(id.to_owned());
        self.order.push_back((id.to_owned(), now));
        true
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_keeps_the_newest_within_bounds() {
        let now = Instant::now();
        let mut outbox = Outbox::default();
        for i in 0..300 {
            outbox.push(format!("f{i}"), now);
        }
        let kept = outbox.drain(now);
        assert_eq!(kept.len(), limits::OUTBOX_FRAMES);
        assert_eq!(kept[0], "f44");
        assert!(outbox.drain(now).is_empty());

        outbox.push("x".repeat(limits::OUTBOX_BYTES - 10), now);
        outbox.push("y".repeat(20), now);
        assert_eq!(outbox.drain(now), ["y".repeat(20)]);

        outbox.push("old".into(), now);
        outbox.push("new".into(), now + Duration::from_secs(300));
        assert_eq!(outbox.drain(now + Duration::from_secs(650)), ["new"]);
    }

    #[test]
    fn seen_ids_forget_the_oldest_and_the_stale() {
        let now = Instant::now();
        let mut seen = SeenIds::default();
        assert!(seen.insert("a", now));
        assert!(!seen.insert("a", now));
        for i in 0..limits::DEDUP_IDS {
            seen.insert(&format!("id{i}"), now);
        }
        assert!(!seen.contains("a"));
        assert!(seen.contains("id1023"));
        let later = now + SEEN_TTL;
        assert!(seen.insert("fresh", later));
        assert!(!seen.contains("id1023"));
    }
}
