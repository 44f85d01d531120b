//! Who is connecting: app tokens, the user ids they stand for, and session keys.
//!
//! Tokens identify users, not devices. A token's user id is the first 16 hex characters of
//! its SHA-256 unless `MOBILE_EXTRA_TOKENS` gives it a label; the id is what pairing and
//! `MOBILE_ALLOWED_USERS` refer to, so it must never change for a given token.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

/// The Hermes session key of a device: `mobile:<device.id>`.
pub fn session_key(device_id: &str) -> String {
    format!("mobile:{device_id}")
}

/// The user id of an unlabelled token: `hex(sha256(token))[0..16]`.
pub fn user_id_for_token(token: &str) -> String {
    user_id_from_digest(&digest(token))
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn user_id_from_digest(d: &[u8; 32]) -> String {
    hex::encode(&d[..8])
}

/// A configuration mistake in the token variables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// `label:` with nothing after the colon.
    #[error("MOBILE_EXTRA_TOKENS entry {index} (label {label:?}) has an empty token")]
    EmptyToken {
        /// 0-based position in the comma-separated list.
        index: usize,
        /// The entry's label.
        label: String,
    },
    /// `:token` with nothing before the colon.
    #[error("MOBILE_EXTRA_TOKENS entry {index} has an empty label before ':'")]
    EmptyLabel {
        /// 0-based position in the comma-separated list.
        index: usize,
    },
    /// The same token configured twice; which user it means would be ambiguous.
    #[error("MOBILE_EXTRA_TOKENS entry {index} repeats a token that is already configured")]
    DuplicateToken {
        /// 0-based position in the comma-separated list.
        index: usize,
    },
}

/// One accepted token. Only its digest is kept, so a memory dump or a stray `{:?}` does
/// not leak it, and comparisons are over fixed-length values.
#[derive(Clone)]
struct Entry {
    digest: [u8; 32],
    user_id: String,
}

/// The tokens the server accepts (`MOBILE_TOKEN` and `MOBILE_EXTRA_TOKENS`) and the user
/// each one stands for.
#[derive(Clone, Default)]
pub struct TokenSet {
    entries: Vec<Entry>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field(
                "users",
                &self.entries.iter().map(|e| &e.user_id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl TokenSet {
    /// Builds the set from the two variables.
    ///
    /// A blank `MOBILE_TOKEN` counts as unset (a `.env` template often has `MOBILE_TOKEN=`);
    /// an empty token would otherwise let anyone in. `extra` is `label:token` pairs
    /// separated by commas, whitespace around each part trimmed; a pair without a colon is
    /// a bare token whose user id is its hash, and blank entries (a trailing comma) are
    /// skipped. The label may not contain `:`, the token may.
    pub fn parse(primary: Option<&str>, extra: Option<&str>) -> Result<TokenSet, TokenError> {
        let mut set = TokenSet::default();
        if let Some(token) = primary.map(str::trim).filter(|t| !t.is_empty()) {
            let d = digest(token);
            set.entries.push(Entry {
                user_id: user_id_from_digest(&d),
                digest: d,
            });
        }
        for (index, label, token) in Self::entries(extra.unwrap_or("")) {
            if label == Some("") {
                return Err(TokenError::EmptyLabel { index });
            }
            if token.is_empty() {
                return Err(TokenError::EmptyToken {
                    index,
                    label: label.unwrap_or("").to_owned(),
                });
            }
            let d = digest(token);
            if set.entries.iter().any(|e| e.digest == d) {
                return Err(TokenError::DuplicateToken { index });
            }
            set.entries.push(Entry {
                user_id: label.map_or_else(|| user_id_from_digest(&d), str::to_owned),
                digest: d,
            });
        }
        Ok(set)
    }

    /// The `(index, label, token)` entries of a `label:token,…` list, trimmed, blank
    /// entries skipped, as [`TokenSet::parse`] reads them.
    pub fn entries(extra: &str) -> impl Iterator<Item = (usize, Option<&str>, &str)> {
        extra.split(',').enumerate().filter_map(|(index, entry)| {
            let entry = entry.trim();
            if entry.is_empty() {
                return None;
            }
            Some(match entry.split_once(':') {
                Some((label, token)) => (index, Some(label.trim()), token.trim()),
                None => (index, None, entry),
            })
        })
    }

    /// The user id the token stands for, or `None` if it is not configured.
    ///
    /// The presented token is hashed once and compared with every configured digest in
    /// constant time, with no early exit, so timing reveals neither which token matched
    /// nor how much of one did.
    pub fn authenticate(&self, token: &str) -> Option<&str> {
        let presented = digest(token);
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, entry) in self.entries.iter().enumerate() {
            let hit = entry.digest.ct_eq(&presented);
            index = u64::conditional_select(&index, &(i as u64), hit);
            found |= hit;
        }
        if bool::from(found) {
            let i = usize::try_from(index).ok()?;
            self.entries.get(i).map(|e| e.user_id.as_str())
        } else {
            None
        }
    }

    /// No token is configured: no app can connect.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The user ids, in configuration order (for `MOBILE_ALLOWED_USERS` hints and logs).
    pub fn user_ids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.user_id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_id_is_a_hash_prefix() {
        // sha256("abc") = ba7816bf8f01cfea...
        assert_eq!(user_id_for_token("abc"), "ba7816bf8f01cfea");
        assert_eq!(user_id_for_token("").len(), 16);
    }

    #[test]
    fn parse_and_authenticate() {
        let set = TokenSet::parse(
            Some(" primary-token "),
            Some("alice:tok-a, bob : tok:b ,bare-token,"),
        )
        .unwrap();
        assert_eq!(set.len(), 4);
        assert_eq!(
            set.authenticate("primary-token"),
            Some(user_id_for_token("primary-token").as_str())
        );
        assert_eq!(set.authenticate("tok-a"), Some("alice"));
        assert_eq!(set.authenticate("tok:b"), Some("bob"));
        assert_eq!(
            set.authenticate("bare-token"),
            Some(user_id_for_token("bare-token").as_str())
        );
        assert_eq!(set.authenticate("tok-"), None);
        assert_eq!(set.authenticate(""), None);
        let debug = format!("{set:?}");
        assert!(!debug.contains("tok-a") && debug.contains("alice"));
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            TokenSet::parse(None, Some("a:x,:y")).unwrap_err(),
            TokenError::EmptyLabel { index: 1 }
        );
        assert_eq!(
            TokenSet::parse(None, Some("a:")).unwrap_err(),
            TokenError::EmptyToken {
                index: 0,
                label: "a".into()
            }
        );
        assert_eq!(
            TokenSet::parse(Some("x"), Some("a:x")).unwrap_err(),
            TokenError::DuplicateToken { index: 0 }
        );
        assert!(TokenSet::parse(None, Some("a:x")).is_ok());
    }

    #[test]
    fn blank_configuration_accepts_nobody() {
        let set = TokenSet::parse(Some("  "), Some(" , ")).unwrap();
        assert!(set.is_empty());
        assert_eq!(set.authenticate(""), None);
        assert_eq!(set.authenticate("  "), None);
        assert!(TokenSet::parse(None, None).unwrap().is_empty());
    }

    #[test]
    fn session_keys() {
        assert_eq!(session_key("tel-1"), "mobile:tel-1");
    }
}
