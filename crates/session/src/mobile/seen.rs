//! The message ids a phone already sent (at most [`limits::DEDUP_IDS`], for
//! [`limits::DEDUP_TTL_SECS`]), so a resend after a drop is not answered twice.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use herald_mobile_proto::limits;

const SEEN_TTL: Duration = Duration::from_secs(limits::DEDUP_TTL_SECS);

#[derive(Default)]
pub(super) struct SeenIds {
    order: VecDeque<(String, Instant)>,
    ids: HashSet<String>,
}

impl SeenIds {
    /// Record `id`; false when it was already seen (a duplicate).
    pub(super) fn insert(&mut self, id: &str, now: Instant) -> bool {
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

    pub(super) fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_ids_forget_the_oldest_and_the_stale() {
        let now = crate::testing::start();
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
