//! Who may talk to the agent: allowlists, allow-all, and the standalone pairing flow
//! ([`Access`], [`Standalone`]); and what the authorizer, whichever it is, has let in,
//! remembered per platform ([`Authorized`]).
//!
//! Authentication (is this really device X?) happens in each transport's handshake;
//! this crate answers authorization (may X reach the agent?) for every platform.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod authorized;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use authorized::Authorized;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use herald_gadget_proto::limits;
use herald_port::{AccessError, Authorizer, PairingCode, Platform};

use herald_files as files;
use herald_metrics::clock::now_ms;
use herald_store::{PairingRecord, StoreError, StoreHandle};

/// Pairing codes avoid look-alike characters (no 0/O, 1/I).
const CODE_ALPHABET: &[u8] = limits::PAIRING_CODE_ALPHABET.as_bytes();
/// How long a pairing code stays valid.
const CODE_TTL_MS: i64 = limits::PAIRING_CODE_TTL_SECS as i64 * 1000;

/// Authorization rules of one platform.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub allowed_users: HashSet<String>,
    pub allow_all: bool,
}

pub struct Access {
    store: StoreHandle,
    gadget: Policy,
    mobile: Policy,
    /// What the owner types to approve, e.g. `herald pairing approve`.
    approve_command: String,
}

impl Access {
    pub fn new(store: StoreHandle, gadget: Policy, mobile: Policy) -> Self {
        Access {
            store,
            gadget,
            mobile,
            approve_command: "herald pairing approve".into(),
        }
    }

    fn policy(&self, platform: Platform) -> &Policy {
        match platform {
            Platform::Gadget => &self.gadget,
            Platform::Mobile => &self.mobile,
        }
    }

    /// Whether configuration alone lets the user in, with no store lookup.
    fn allowed_by_policy(&self, platform: Platform, user_id: &str) -> bool {
        let policy = self.policy(platform);
        policy.allow_all || policy.allowed_users.contains(user_id)
    }

    pub async fn is_authorized(
        &self,
        platform: Platform,
        user_id: &str,
    ) -> Result<bool, StoreError> {
        // Every handshake asks; a trip to the store thread for a configuration lookup
        // would cost more than the answer.
        if self.allowed_by_policy(platform, user_id) {
            return Ok(true);
        }
        let user = user_id.to_owned();
        self.store
            .run(move |store| {
                let pairing = store.pairing(platform, &user)?;
                Ok(pairing.is_some_and(|p| p.approved_at.is_some()))
            })
            .await
    }

    /// The code an unpaired user should show: the pending one while it is fresh,
    /// otherwise a new one.
    pub async fn pairing_code(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
    ) -> Result<String, StoreError> {
        let (user, name) = (user_id.to_owned(), user_name.map(str::to_owned));
        self.store
            .run(move |store| {
                let now = now_ms();
                if let Some(PairingRecord {
                    code: Some(code),
                    created_at,
                    approved_at: None,
                    ..
                }) = store.pairing(platform, &user)?
                {
                    if now - created_at < CODE_TTL_MS {
                        return Ok(code);
                    }
                }
                let code = new_code();
                store.put_pending(platform, &user, name.as_deref(), &code, now)?;
                Ok(code)
            })
            .await
    }

    pub fn approve_command(&self, platform: Platform, code: &str) -> String {
        format!("{} {} {code}", self.approve_command, platform.as_str())
    }

    /// Approve by code (case-insensitive, as people type it).
    pub async fn approve_code(
        &self,
        platform: Platform,
        code: &str,
    ) -> Result<Option<PairingRecord>, StoreError> {
        let code = code.trim().to_ascii_uppercase();
        self.store
            .run(move |store| {
                let now = now_ms();
                store.approve_code(platform, &code, now - CODE_TTL_MS, now)
            })
            .await
    }

    pub async fn approve_user(
        &self,
        platform: Platform,
        user_id: &str,
    ) -> Result<PairingRecord, StoreError> {
        let user = user_id.to_owned();
        self.store
            .run(move |store| store.approve_user(platform, &user, now_ms()))
            .await
    }

    pub async fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, StoreError> {
        let user = user_id.to_owned();
        self.store
            .run(move |store| store.revoke(platform, &user))
            .await
    }

    pub async fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError> {
        self.store.run(|store| store.pairings()).await
    }
}

/// Standalone authorization: the allowlists plus Herald's own pairing store.
pub struct Standalone(pub Arc<Access>);

#[async_trait]
impl Authorizer for Standalone {
    async fn is_authorized(&self, platform: Platform, user_id: &str) -> Result<bool, AccessError> {
        self.0
            .is_authorized(platform, user_id)
            .await
            .map_err(unavailable)
    }

    async fn pairing_code(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
    ) -> Result<PairingCode, AccessError> {
        let code = self
            .0
            .pairing_code(platform, user_id, user_name)
            .await
            .map_err(unavailable)?;
        Ok(PairingCode {
            command: self.0.approve_command(platform, &code),
            code,
        })
    }

    async fn pairings(&self) -> Result<Vec<PairingRecord>, AccessError> {
        self.0.pairings().await.map_err(unavailable)
    }

    async fn approve_code(
        &self,
        platform: Platform,
        code: &str,
    ) -> Result<Option<PairingRecord>, AccessError> {
        self.0
            .approve_code(platform, code)
            .await
            .map_err(unavailable)
    }

    async fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, AccessError> {
        self.0.revoke(platform, user_id).await.map_err(unavailable)
    }
}

fn unavailable(err: StoreError) -> AccessError {
    AccessError(err.to_string())
}

fn new_code() -> String {
    let mut bytes = [0u8; limits::PAIRING_CODE_LEN];
    files::secret::fill_random(&mut bytes);
    bytes
        .iter()
        // 256 is a multiple of the alphabet's 32, so every character is equally likely.
        .map(|b| CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_store::SqliteStore;

    fn access(gadget: Policy) -> (tempfile::TempDir, Access) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let store = StoreHandle::new(store, &path).unwrap();
        (dir, Access::new(store, gadget, Policy::default()))
    }

    #[test]
    fn codes_use_the_alphabet() {
        for _ in 0..100 {
            let code = new_code();
            assert_eq!(code.len(), 8);
            assert!(code.bytes().all(|c| CODE_ALPHABET.contains(&c)), "{code}");
        }
    }

    #[tokio::test]
    async fn pairing_flow() {
        let (_dir, access) = access(Policy::default());
        assert!(!access
            .is_authorized(Platform::Gadget, "hg-1")
            .await
            .unwrap());
        let code = access
            .pairing_code(Platform::Gadget, "hg-1", Some("K"))
            .await
            .unwrap();
        assert_eq!(
            access
                .pairing_code(Platform::Gadget, "hg-1", None)
                .await
                .unwrap(),
            code
        );
        assert!(access
            .approve_code(Platform::Gadget, "WRONG234")
            .await
            .unwrap()
            .is_none());
        let approved = access
            .approve_code(Platform::Gadget, &code.to_lowercase())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(approved.user_id, "hg-1");
        assert!(access
            .is_authorized(Platform::Gadget, "hg-1")
            .await
            .unwrap());
        assert!(!access
            .is_authorized(Platform::Mobile, "hg-1")
            .await
            .unwrap());
        assert!(access.revoke(Platform::Gadget, "hg-1").await.unwrap());
        assert!(!access
            .is_authorized(Platform::Gadget, "hg-1")
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn allowlists() {
        let policy = Policy {
            allowed_users: ["hg-ok".to_string()].into(),
            allow_all: false,
        };
        let (_dir, access) = access(policy);
        assert!(access
            .is_authorized(Platform::Gadget, "hg-ok")
            .await
            .unwrap());
        assert!(!access
            .is_authorized(Platform::Gadget, "hg-no")
            .await
            .unwrap());
        let (_dir, access) = super::tests::access(Policy {
            allow_all: true,
            ..Policy::default()
        });
        assert!(access
            .is_authorized(Platform::Gadget, "hg-anyone")
            .await
            .unwrap());
    }
}
