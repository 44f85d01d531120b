//! Login links for the console: `herald console` prints (and opens) a link that logs the
//! owner in once, so nobody has to find `admin.token` and paste 64 hex characters.
//!
//! The CLI asks for a code with the admin token (`POST /v1/console/link`, bearer only: a
//! console session cannot mint its own successor and so outlive its 12 hours). The link
//! is `http://<admin address>/#login=<code>`: the code sits in the fragment, which a
//! browser never sends, so it reaches herald only in the body of the page's
//! `POST /v1/login {"code": …}`, never in a request line a log or a proxy could keep.
//!
//! A code is 128 random bits. Herald keeps only its SHA-256, in memory, for
//! [`LINK_TTL`] (two minutes), and at most [`MAX_CODES`] of them: minting one more drops
//! the oldest (used and expired ones first), so the newest link always works and memory
//! stays bounded. Redeeming a code once ends it; a used or expired code is remembered a
//! little longer ([`REMEMBER`]) only to say why it was refused. Every refused code counts
//! toward the login's lock (10 failures a minute), though with 2^128 possible codes and
//! at most 8 alive, guessing one is hopeless anyway.
//!
//! Like the sessions, this is a state machine that takes `now`: its tests drive time.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use herald_admin_api::LoginLink;
use herald_gadget_proto::auth::ct_eq;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::session::SessionKey;
use super::ApiError;
use super::Console;

/// How long a login link works.
pub(crate) const LINK_TTL: Duration = Duration::from_secs(120);
/// Codes kept at most, alive or remembered as used or expired.
pub(crate) const MAX_CODES: usize = 8;
/// How long a used or expired code is remembered, to say why it is refused.
const REMEMBER: Duration = Duration::from_secs(600);
/// Hex characters of a code: 128 bits.
const CODE_LEN: usize = 32;

/// What `POST /v1/console/link` may ask for.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct MintRequest {
    /// A shorter life than [`LINK_TTL`], in milliseconds (never a longer one): for
    /// tests, and for a script that opens the link at once.
    pub ttl_ms: Option<u64>,
}

/// Why a code does not log in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("this login link was used already: run `herald console` for a new one")]
    Used,
    #[error("this login link expired (a link works for two minutes): run `herald console` for a new one")]
    Expired,
    #[error(
        "this login link is not valid (a newer one may have replaced it, or herald \
         restarted): run `herald console` for a new one"
    )]
    Unknown,
}

struct Code {
    digest: [u8; 32],
    expires: Instant,
    used: bool,
}

impl Code {
    fn alive(&self, now: Instant) -> bool {
        !self.used && self.expires > now
    }
}

/// The codes minted and not yet forgotten, oldest first.
#[derive(Default)]
pub(crate) struct LoginCodes {
    codes: Mutex<VecDeque<Code>>,
}

fn digest(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

impl LoginCodes {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Code>> {
        self.codes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new code that works once until `now + ttl` (at most [`LINK_TTL`]).
    pub(crate) fn mint(&self, now: Instant, ttl: Duration) -> LoginLink {
        let ttl = ttl.min(LINK_TTL);
        let code = herald_files::secret::random_hex(CODE_LEN);
        let mut codes = self.lock();
        codes.retain(|c| c.expires + REMEMBER > now);
        while codes.len() >= MAX_CODES {
            // Forget a dead one first; else the oldest alive one stops working.
            match codes.iter().position(|c| !c.alive(now)) {
                Some(dead) => codes.remove(dead),
                None => codes.pop_front(),
            };
        }
        codes.push_back(Code {
            digest: digest(&code),
            expires: now + ttl,
            used: false,
        });
        LoginLink {
            code,
            expires_in_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Use `code` up, or say why it does not log in.
    pub(crate) fn redeem(&self, code: &str, now: Instant) -> Result<(), Refused> {
        let offered = digest(code.trim());
        let mut codes = self.lock();
        // Every entry is compared, in constant time each.
        let mut found = None;
        for (i, c) in codes.iter().enumerate() {
            if ct_eq(&c.digest, &offered) {
                found = Some(i);
            }
        }
        let code = found
            .and_then(|i| codes.get_mut(i))
            .ok_or(Refused::Unknown)?;
        if code.used {
            return Err(Refused::Used);
        }
        if code.expires <= now {
            return Err(Refused::Expired);
        }
        code.used = true;
        Ok(())
    }

    /// Codes that would log in now.
    #[cfg(test)]
    pub(crate) fn alive(&self, now: Instant) -> usize {
        self.lock().iter().filter(|c| c.alive(now)).count()
    }
}

/// `POST /v1/console/link`, optionally `{"ttl_ms": …}`: a login link's code, for the
/// bearer token only.
pub(crate) async fn mint(
    State(console): State<Arc<Console>>,
    session: Option<Extension<SessionKey>>,
    body: Bytes,
) -> Response {
    if session.is_some() {
        return ApiError(
            StatusCode::FORBIDDEN,
            "a login link is made with the admin token (`herald console`), not from a console \
             session"
                .into(),
        )
        .into_response();
    }
    let request = if body.iter().all(u8::is_ascii_whitespace) {
        MintRequest::default()
    } else {
        match serde_json::from_slice::<MintRequest>(&body) {
            Ok(request) => request,
            Err(err) => {
                return ApiError::bad_request(format!("send {{}} or {{\"ttl_ms\": …}}: {err}"))
                    .into_response()
            }
        }
    };
    let ttl = request.ttl_ms.map_or(LINK_TTL, Duration::from_millis);
    let link = console.links.mint(Instant::now(), ttl);
    tracing::info!(
        expires_in_ms = link.expires_in_ms,
        "login link made for the console"
    );
    Json(link).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_logs_in_once_within_two_minutes() {
        let codes = LoginCodes::default();
        let now = Instant::now();
        let link = codes.mint(now, LINK_TTL);
        assert_eq!(link.code.len(), CODE_LEN);
        assert_eq!(link.expires_in_ms, 120_000);
        assert_eq!(codes.redeem("0123", now), Err(Refused::Unknown));
        let later = now + LINK_TTL - Duration::from_millis(1);
        assert_eq!(codes.redeem(&link.code, later), Ok(()));
        assert_eq!(codes.redeem(&link.code, later), Err(Refused::Used));

        let link = codes.mint(now, LINK_TTL);
        assert_eq!(
            codes.redeem(&link.code, now + LINK_TTL),
            Err(Refused::Expired)
        );
        // Remembered a while, then forgotten (on the next mint).
        codes.mint(now + LINK_TTL + REMEMBER, LINK_TTL);
        assert_eq!(codes.redeem(&link.code, now), Err(Refused::Unknown));
    }

    #[test]
    fn a_caller_may_shorten_a_life_but_not_lengthen_it() {
        let codes = LoginCodes::default();
        let now = Instant::now();
        let short = codes.mint(now, Duration::from_millis(5));
        assert_eq!(short.expires_in_ms, 5);
        assert_eq!(
            codes.redeem(&short.code, now + Duration::from_millis(5)),
            Err(Refused::Expired)
        );
        let long = codes.mint(now, Duration::from_secs(3600));
        assert_eq!(long.expires_in_ms, 120_000);
        assert_eq!(
            codes.redeem(&long.code, now + LINK_TTL),
            Err(Refused::Expired)
        );
    }

    #[test]
    fn at_most_eight_codes_and_the_oldest_makes_room() {
        let codes = LoginCodes::default();
        let now = Instant::now();
        let first = codes.mint(now, LINK_TTL);
        let rest: Vec<LoginLink> = (0..MAX_CODES).map(|_| codes.mint(now, LINK_TTL)).collect();
        assert_eq!(codes.alive(now), MAX_CODES);
        assert_eq!(codes.redeem(&first.code, now), Err(Refused::Unknown));
        for link in &rest {
            assert_eq!(codes.redeem(&link.code, now), Ok(()));
        }
    }

    #[test]
    fn a_dead_code_makes_room_before_a_live_one() {
        let codes = LoginCodes::default();
        let now = Instant::now();
        let links: Vec<LoginLink> = (0..MAX_CODES).map(|_| codes.mint(now, LINK_TTL)).collect();
        let used = &links[3].code;
        assert_eq!(codes.redeem(used, now), Ok(()));
        codes.mint(now, LINK_TTL);
        assert_eq!(
            codes.redeem(&links[0].code, now),
            Ok(()),
            "the oldest still works"
        );
        assert_eq!(codes.redeem(used, now), Err(Refused::Unknown));
    }

    #[test]
    fn the_debug_form_hides_the_code() {
        let link = LoginCodes::default().mint(Instant::now(), LINK_TTL);
        assert!(!format!("{link:?}").contains(&link.code));
    }
}
