//! A stand-in authorizer for tests: Hermes as a plugin older than this herald
//! would answer (a pairing code of its own, no pairing list), saying yes or no as told
//! and counting the questions; with `hold`, an answer waits until notified.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use herald_port::{AccessError, Authorizer, PairingCode, PairingRecord, Platform};
use tokio::sync::Notify;

pub struct FakeAuthorizer {
    pub says: AtomicBool,
    asked: AtomicUsize,
    hold: Option<Notify>,
}

impl FakeAuthorizer {
    pub fn saying(yes: bool) -> FakeAuthorizer {
        FakeAuthorizer {
            says: AtomicBool::new(yes),
            asked: AtomicUsize::new(0),
            hold: None,
        }
    }

    /// One whose answers wait for [`Self::release`].
    pub fn holding(yes: bool) -> FakeAuthorizer {
        FakeAuthorizer {
            hold: Some(Notify::new()),
            ..FakeAuthorizer::saying(yes)
        }
    }

    /// Lets one held answer go.
    pub fn release(&self) {
        if let Some(hold) = &self.hold {
            hold.notify_one();
        }
    }

    /// How many times `is_authorized` was asked.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Authorizer for FakeAuthorizer {
    async fn is_authorized(&self, _: Platform, _: &str) -> Result<bool, AccessError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if let Some(hold) = &self.hold {
            hold.notified().await;
        }
        Ok(self.says.load(Ordering::SeqCst))
    }

    async fn pairing_code(
        &self,
        _: Platform,
        _: &str,
        _: Option<&str>,
    ) -> Result<PairingCode, AccessError> {
        Ok(PairingCode {
            code: "HERMES23".into(),
            command: "hermes pairing approve gadget HERMES23".into(),
        })
    }

    async fn pairings(&self) -> Result<Vec<PairingRecord>, AccessError> {
        Err(AccessError("unknown request 'pairings'".into()))
    }

    async fn approve_code(
        &self,
        _: Platform,
        _: &str,
    ) -> Result<Option<PairingRecord>, AccessError> {
        Ok(None)
    }

    async fn revoke(&self, _: Platform, _: &str) -> Result<bool, AccessError> {
        Ok(false)
    }
}
