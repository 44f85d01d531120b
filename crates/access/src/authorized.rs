//! The users the authorizer has said may reach the agent, remembered per platform (one
//! for gadgets, one for phones): filled by its answers and kept current by its pushes
//! (`set_authorized`, which Herald's own pairing and the Hermes plugin send on every
//! approval and revocation). A paired gadget's handshake and an authorized phone's
//! message then do not wait for a question whose answer is known; under Hermes that
//! question is a round trip across the bridge. A "no" is not remembered: an approval
//! made in Hermes's terminal reaches the next message even before its push does.

use std::collections::HashSet;
use std::sync::Mutex;

use herald_port::{AccessError, Authorizer, Platform};

/// Users remembered at most; past it the memory starts again (answers are asked anew).
/// Room for the largest fleet one machine holds (about 20,000 gadgets here) and more,
/// at some 100 bytes a user: below it, a fleet that cycles through its connections would
/// empty the memory before each device came back, and every handshake would ask.
const MAX_USERS: usize = 65_536;

#[derive(Default)]
pub struct Authorized {
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    users: HashSet<String>,
    /// Counts pushes, so an answer asked for before a push is not remembered over it.
    pushes: u64,
}

impl Authorized {
    /// Whether `user_id` may reach the agent: remembered, or asked of `authorizer`.
    pub async fn check(
        &self,
        authorizer: &dyn Authorizer,
        platform: Platform,
        user_id: &str,
    ) -> Result<bool, AccessError> {
        let pushes = {
            let known = self.lock();
            if known.users.contains(user_id) {
                return Ok(true);
            }
            known.pushes
        };
        let authorized = authorizer.is_authorized(platform, user_id).await?;
        let mut known = self.lock();
        if authorized && known.pushes == pushes {
            known.remember(user_id);
        }
        Ok(authorized)
    }

    /// Whether `user_id` is remembered as authorized, without asking.
    pub fn knows(&self, user_id: &str) -> bool {
        self.lock().users.contains(user_id)
    }

    /// The authorizer says `user_id` now is (or is no longer) authorized.
    pub fn set(&self, user_id: &str, authorized: bool) {
        let mut known = self.lock();
        known.pushes += 1;
        if authorized {
            known.remember(user_id);
        } else {
            known.users.remove(user_id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        // Every update is whole under the lock; a panic elsewhere leaves it valid.
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Known {
    fn remember(&mut self, user_id: &str) {
        if self.users.len() >= MAX_USERS && !self.users.contains(user_id) {
            self.users.clear();
        }
        self.users.insert(user_id.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::*;
    use crate::testing::FakeAuthorizer;

    async fn check(cache: &Authorized, authorizer: &FakeAuthorizer) -> bool {
        cache
            .check(authorizer, Platform::Mobile, "u")
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_yes_is_remembered_until_a_push_takes_it_back() {
        let (cache, authorizer) = (Authorized::default(), FakeAuthorizer::saying(true));
        for _ in 0..3 {
            assert!(check(&cache, &authorizer).await);
        }
        assert_eq!(authorizer.asked(), 1);
        // Revoked: the authorizer says no from now on, and the push says so at once.
        authorizer.says.store(false, Ordering::SeqCst);
        cache.set("u", false);
        assert!(!check(&cache, &authorizer).await);
        assert_eq!(authorizer.asked(), 2);
        cache.set("u", true);
        assert!(check(&cache, &authorizer).await);
        assert_eq!(authorizer.asked(), 2);
    }

    #[tokio::test]
    async fn a_no_is_asked_again_so_an_approval_counts_before_its_push() {
        let (cache, authorizer) = (Authorized::default(), FakeAuthorizer::saying(false));
        assert!(!check(&cache, &authorizer).await);
        authorizer.says.store(true, Ordering::SeqCst);
        assert!(check(&cache, &authorizer).await);
        assert_eq!(authorizer.asked(), 2);
    }

    #[tokio::test]
    async fn a_yes_older_than_a_push_is_used_once_not_remembered() {
        let cache = Arc::new(Authorized::default());
        let authorizer = Arc::new(FakeAuthorizer::holding(true));
        let asking = {
            let (cache, authorizer) = (cache.clone(), authorizer.clone());
            tokio::spawn(async move { check(&cache, &authorizer).await })
        };
        while authorizer.asked() == 0 {
            tokio::task::yield_now().await;
        }
        // Revoked while the question was on its way: the late "yes" must not stick.
        cache.set("u", false);
        authorizer.release();
        assert!(asking.await.unwrap());
        assert!(!cache.lock().users.contains("u"));
    }

    #[test]
    fn a_fleet_at_the_descriptor_limit_stays_remembered() {
        let cache = Authorized::default();
        let ids: Vec<String> = (0..20_000).map(|i| format!("hg-{i:016x}")).collect();
        for id in &ids {
            cache.set(id, true);
        }
        assert!(ids.iter().all(|id| cache.knows(id)));
    }

    #[test]
    fn memory_is_bounded() {
        let cache = Authorized::default();
        for i in 0..MAX_USERS + 10 {
            cache.set(&format!("u{i}"), true);
        }
        assert!(cache.lock().users.len() <= MAX_USERS);
    }
}
