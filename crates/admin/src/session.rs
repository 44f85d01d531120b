//! Who may call the admin API: the bearer token, or a console session.
//!
//! The CLI sends `Authorization: Bearer <admin token>` as it always has. A browser
//! cannot keep that token safe in a page, so the console trades it once
//! (`POST /v1/login`) for a session: a random id in a cookie that scripts cannot read
//! (`HttpOnly`), that no other site's request carries (`SameSite=Strict`), and that
//! expires after [`SESSION_TTL`] (the server forgets sessions sooner on restart).
//!
//! A cookie is sent by the browser on its own, so a request authorized by one must also
//! prove it comes from the console itself before it may change anything (CSRF): every
//! method but `GET`/`HEAD` needs the session's CSRF token in [`CSRF_HEADER`], which only
//! a page of this origin can read (it is in the login answer and `GET /v1/session`,
//! and a custom header forces a CORS preflight that herald never grants), and an
//! `Origin` or `Sec-Fetch-Site` header, when the browser sends one, must name this same
//! origin. `SameSite` alone would not do: another port of the same host (the phone
//! listener) is the same site. Bearer requests carry no ambient credential and skip
//! these checks, so the API is unchanged for the CLI.
//!
//! A live event stream (`GET /v1/events`) is tied to the session that opened it: it
//! ends within a second of that session's end (logout, expiry, or a newer login making
//! room), so a page logged out elsewhere stops receiving device data.
//!
//! The login takes the admin token, or the code of a login link that `herald console`
//! printed (`link.rs`); both make the same session. Wrong tokens and refused codes at the
//! login are counted together: after [`MAX_FAILURES`] in a minute, the login refuses
//! every try until the minute is over (the bearer API is not affected).
//!
//! Every request but `/healthz` must name this machine in `Host`: an IP address or
//! `localhost`. The admin listener is for this machine only, and a web page whose own
//! name was made to resolve to 127.0.0.1 (DNS rebinding) reaches it with that name in
//! `Host`; refused, it can neither read the pages nor keep the login locked.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use herald_gadget_proto::auth::ct_eq;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{AdminState, ApiError, App, Console};
use herald_metrics::clock::now_ms;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "herald_console";
/// The header that carries the session's CSRF token.
pub(crate) const CSRF_HEADER: &str = "x-herald-csrf";
/// How long a session lasts from its login.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most; a new login past it ends the oldest.
const MAX_SESSIONS: usize = 32;
/// Wrong tokens the login takes in [`FAILURE_WINDOW`].
pub const MAX_FAILURES: u32 = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

struct Session {
    csrf: String,
    expires: Instant,
    /// The same moment as wall-clock milliseconds, for the page.
    expires_at: i64,
}

/// The console's live sessions, by the SHA-256 of their id (a lookup then tells an
/// attacker timing nothing about real ids).
#[derive(Default)]
pub(crate) struct Sessions {
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    failures: Mutex<Option<(Instant, u32)>>,
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// The console session a request was authorized by (a request extension set by
/// [`authorize`]; absent for a bearer token), so a long-lived response such as the event
/// stream can end with its session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionKey([u8; 32]);

/// What the page learns of its session.
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionView {
    /// Send it back in `X-Herald-CSRF` with every change; `None` for a bearer token.
    pub csrf: Option<String>,
    /// When the session ends, in milliseconds since the Unix epoch.
    pub expires_at: Option<i64>,
    /// Whether Herald approves pairings itself; `false` when Hermes does.
    pub pairing: bool,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start a session: its id (for the cookie) and its view.
    fn start(&self, now: Instant) -> (String, String, i64) {
        let id = herald_files::secret::random_hex(64);
        let csrf = herald_files::secret::random_hex(64);
        let expires_at = now_ms().saturating_add(SESSION_TTL.as_millis() as i64);
        let mut sessions = self.lock();
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            digest(&id),
            Session {
                csrf: csrf.clone(),
                expires: now + SESSION_TTL,
                expires_at,
            },
        );
        (id, csrf, expires_at)
    }

    /// The CSRF token and end of a live session.
    fn find(&self, id: &str, now: Instant) -> Option<(String, i64)> {
        let key = digest(id);
        let mut sessions = self.lock();
        match sessions.get(&key) {
            Some(s) if s.expires > now => Some((s.csrf.clone(), s.expires_at)),
            Some(_) => {
                sessions.remove(&key);
                None
            }
            None => None,
        }
    }

    fn end(&self, id: &str) {
        self.lock().remove(&digest(id));
    }

    /// Whether the session a request was authorized by is still live.
    pub(crate) fn alive(&self, key: &SessionKey, now: Instant) -> bool {
        self.lock().get(&key.0).is_some_and(|s| s.expires > now)
    }

    fn throttled(&self, now: Instant) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        matches!(*failures, Some((since, n)) if now.duration_since(since) < FAILURE_WINDOW && n >= MAX_FAILURES)
    }

    fn failed(&self, now: Instant) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        *failures = match *failures {
            Some((since, n)) if now.duration_since(since) < FAILURE_WINDOW => {
                Some((since, n.saturating_add(1)))
            }
            _ => Some((now, 1)),
        };
    }
}

/// The session id in the request's cookies, if any.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(""))
}

/// Whether the browser's own headers say the request comes from this origin.
///
/// Every browser the console supports sends `Origin` (and `Sec-Fetch-Site`) with a
/// `POST` or `DELETE` from `fetch`, so when `required`, a request with neither is
/// refused: a cookie-authorized change must show where it comes from. The login is not
/// `required` (a script on this machine may log in without them; it needs the token).
fn same_origin(headers: &HeaderMap, required: bool) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if required && text("sec-fetch-site").is_none() && text("origin").is_none() {
        return false;
    }
    if let Some(site) = text("sec-fetch-site") {
        if site != "same-origin" && site != "none" {
            return false;
        }
    }
    match (text("origin"), text("host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|o| o.eq_ignore_ascii_case(host)),
        (Some(_), None) => false,
    }
}

/// Whether `Host` names this machine by address or as `localhost` (port optional).
fn names_this_machine(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        // Only a client that is not a browser leaves it out.
        return true;
    };
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed
            .split_once(']')
            .is_some_and(|(ip, _)| ip.parse::<Ipv6Addr>().is_ok());
    }
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let name = name.to_ascii_lowercase();
    name.parse::<Ipv4Addr>().is_ok() || name == "localhost" || name.ends_with(".localhost")
}

/// The check in front of every route; see the module docs.
pub(crate) async fn local_host(request: Request, next: Next) -> Response {
    if names_this_machine(request.headers()) {
        next.run(request).await
    } else {
        ApiError(
            StatusCode::MISDIRECTED_REQUEST,
            "the admin API answers only at this machine's address or localhost".into(),
        )
        .into_response()
    }
}

fn unauthorized(message: &str) -> Response {
    ApiError(StatusCode::UNAUTHORIZED, message.into()).into_response()
}

fn forbidden(message: &str) -> Response {
    ApiError(StatusCode::FORBIDDEN, message.into()).into_response()
}

/// The check in front of every API route but `/healthz` and `/v1/login`.
pub(crate) async fn authorize(
    State(app): State<App>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    // An Authorization header decides alone: a wrong token is not rescued by a cookie.
    if let Some(offered) = bearer(headers) {
        return if ct_eq(offered.as_bytes(), app.api.token.as_bytes()) {
            next.run(request).await
        } else {
            unauthorized("missing or wrong admin token")
        };
    }
    let Some(id) = session_cookie(headers) else {
        return unauthorized("missing or wrong admin token");
    };
    let Some((csrf, _)) = app.console.sessions.find(id, Instant::now()) else {
        return unauthorized("the console session ended; log in again");
    };
    let key = SessionKey(digest(id));
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    if !safe {
        let offered = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !ct_eq(offered.as_bytes(), csrf.as_bytes()) || !same_origin(headers, true) {
            return forbidden("this change did not come from the console page; reload it");
        }
    }
    request.extensions_mut().insert(key);
    next.run(request).await
}

/// What the page sends to log in: the admin token, or the code of a login link
/// (`link.rs`).
#[derive(Deserialize)]
pub(crate) struct Login {
    token: Option<String>,
    code: Option<String>,
}

fn cookie(value: &str, max_age: u64) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"
    ))
    .ok()
}

enum Credential {
    Token(String),
    Code(String),
}

/// `POST /v1/login {"token": …}` or `{"code": …}`: the admin token, or a login link's
/// code, for a session cookie.
pub(crate) async fn login(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    body: Result<Json<Login>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let now = Instant::now();
    if !same_origin(&headers, false) {
        return forbidden("log in from the console page itself");
    }
    let login = match body {
        Ok(Json(Login {
            token: Some(token),
            code: None,
        })) => Credential::Token(token),
        Ok(Json(Login {
            token: None,
            code: Some(code),
        })) => Credential::Code(code),
        _ => {
            return ApiError::bad_request("send {\"token\": \"…\"} or {\"code\": \"…\"} as JSON")
                .into_response()
        }
    };
    let sessions = &console.sessions;
    if sessions.throttled(now) {
        return ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            "too many wrong tokens or links: wait a minute, then try again".into(),
        )
        .into_response();
    }
    match login {
        Credential::Token(token) => {
            if !ct_eq(token.trim().as_bytes(), state.token.as_bytes()) {
                sessions.failed(now);
                tracing::warn!("console login with a wrong admin token");
                return unauthorized(
                    "that is not the admin token: it is in the file admin.token in herald's \
                     data directory (`herald info` names the directory)",
                );
            }
        }
        // Never the code itself in a log line: only why it was refused.
        Credential::Code(code) => match console.links.redeem(&code, now) {
            Ok(()) => tracing::info!("console login with a login link"),
            Err(refused) => {
                sessions.failed(now);
                tracing::warn!(?refused, "console login with a refused login link");
                return unauthorized(&refused.to_string());
            }
        },
    }
    let (id, csrf, expires_at) = sessions.start(now);
    let view = SessionView {
        csrf: Some(csrf),
        expires_at: Some(expires_at),
        pairing: state.access.is_some(),
    };
    let mut response = Json(view).into_response();
    if let Some(value) = cookie(&id, SESSION_TTL.as_secs()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `GET /v1/session`: the page's CSRF token, after a reload.
pub(crate) async fn current(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Json<SessionView> {
    let found = match bearer(&headers) {
        Some(_) => None,
        None => session_cookie(&headers).and_then(|id| console.sessions.find(id, Instant::now())),
    };
    Json(SessionView {
        csrf: found.as_ref().map(|(csrf, _)| csrf.clone()),
        expires_at: found.map(|(_, at)| at),
        pairing: state.access.is_some(),
    })
}

/// `DELETE /v1/session`: log out; the session's event streams end with it.
pub(crate) async fn logout(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    if let Some(id) = session_cookie(&headers) {
        console.sessions.end(id);
        // The streams look again at once, and find their session gone.
        state.metrics.activity.changed();
    }
    let mut response = Json(serde_json::json!({ "logged_out": true })).into_response();
    if let Some(value) = cookie("", 0) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn sessions_expire_and_end() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let (id, csrf, _) = sessions.start(now);
        assert_eq!(sessions.find(&id, now).map(|f| f.0), Some(csrf));
        assert!(sessions.find("not-a-session", now).is_none());
        assert!(sessions.find(&id, now + SESSION_TTL).is_none());
        let (id, _, _) = sessions.start(now);
        sessions.end(&id);
        assert!(sessions.find(&id, now).is_none());
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let (first, _, _) = sessions.start(now);
        for i in 1..=MAX_SESSIONS {
            sessions.start(now + Duration::from_millis(i as u64));
        }
        assert_eq!(sessions.lock().len(), MAX_SESSIONS);
        assert!(sessions.find(&first, now).is_none(), "the oldest made room");
    }

    #[test]
    fn only_an_address_or_localhost_names_this_machine() {
        let with_host = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            names_this_machine(&headers)
        };
        for host in [
            "127.0.0.1:8766",
            "127.0.0.1",
            "192.168.1.20:8766",
            "[::1]:8766",
            "[::1]",
            "localhost:8766",
            "LocalHost",
            "console.localhost:8766",
        ] {
            assert!(with_host(host), "{host}");
        }
        for host in [
            "evil.example:8766",
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "[evil]:8766",
            "[::1",
            "",
        ] {
            assert!(!with_host(host), "{host}");
        }
        assert!(names_this_machine(&HeaderMap::new()));
    }

    #[test]
    fn wrong_tokens_lock_the_login_for_a_minute() {
        let sessions = Sessions::default();
        let now = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            sessions.failed(now);
        }
        assert!(!sessions.throttled(now));
        sessions.failed(now);
        assert!(sessions.throttled(now + Duration::from_secs(59)));
        assert!(!sessions.throttled(now + FAILURE_WINDOW));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; herald_console=abc ; b=2")]);
        assert_eq!(session_cookie(&h), Some("abc"));
        let h = headers(&[("cookie", "a=1"), ("cookie", "herald_console=xyz")]);
        assert_eq!(session_cookie(&h), Some("xyz"));
        assert_eq!(
            session_cookie(&headers(&[("cookie", "herald_consolex=1")])),
            None
        );
    }

    #[test]
    fn only_this_origin_is_the_same_origin() {
        let host = ("host", "127.0.0.1:8766");
        assert!(same_origin(&headers(&[host]), false));
        // A cookie-authorized change must say where it comes from.
        assert!(!same_origin(&headers(&[host]), true));
        assert!(!same_origin(
            &headers(&[host, ("sec-fetch-site", "cross-site")]),
            true
        ));
        for required in [false, true] {
            assert!(same_origin(
                &headers(&[host, ("origin", "http://127.0.0.1:8766")]),
                required
            ));
            assert!(!same_origin(
                &headers(&[host, ("origin", "http://127.0.0.1:8787")]),
                required
            ));
            assert!(!same_origin(
                &headers(&[host, ("origin", "null")]),
                required
            ));
            assert!(!same_origin(
                &headers(&[host, ("sec-fetch-site", "same-site")]),
                required
            ));
            assert!(same_origin(
                &headers(&[host, ("sec-fetch-site", "same-origin")]),
                required
            ));
        }
    }
}
