//! The login and what it opens: the session cookie, the CSRF token and origin every
//! change needs, the bearer API beside it, logging out, the lock after wrong tokens, a
//! page that rebound its name to this machine, and the token kept out of the logs.

use std::io::Read;

use serde_json::json;

use super::{demo, req, start};
use herald_admin::MAX_FAILURES;
use herald_admin_api::Endpoint;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_a_cookie_and_changes_need_its_csrf_token_from_this_origin() {
    let h = start(demo()).await;

    // A wrong token says where the right one is, and sets no cookie.
    let wrong = h
        .send(req("POST", "/v1/login").json(json!({ "token": "nope" })))
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.error().contains("admin.token"), "{}", wrong.text);
    assert!(wrong.header("set-cookie").is_none());
    // Nor from another origin, whatever the token.
    let foreign = h
        .send(
            req("POST", "/v1/login")
                .header("origin", "http://evil.example")
                .json(json!({ "token": h.endpoint.token })),
        )
        .await;
    assert_eq!(foreign.status, 403, "{}", foreign.text);

    let answer = h
        .send(req("POST", "/v1/login").json(json!({ "token": h.endpoint.token })))
        .await;
    let set = answer.header("set-cookie").unwrap().to_owned();
    for part in [
        "herald_console=",
        "HttpOnly",
        "SameSite=Strict",
        "Max-Age=43200",
        "Path=/",
    ] {
        assert!(set.contains(part), "{part} in {set}");
    }
    let (cookie, csrf) = h.login().await;
    assert_ne!(csrf, h.endpoint.token);

    // Reading needs the cookie only.
    let devices = h
        .send(req("GET", "/v1/devices").header("cookie", &cookie))
        .await;
    assert_eq!(devices.status, 200, "{}", devices.text);
    assert_eq!(devices.json(), json!([]));
    let session = h
        .send(req("GET", "/v1/session").header("cookie", &cookie))
        .await;
    assert_eq!(session.json()["csrf"], csrf.as_str());
    assert_eq!(session.json()["pairing"], true);
    let none = h.send(req("GET", "/v1/devices")).await;
    assert_eq!(none.status, 401);
    let made_up = h
        .send(req("GET", "/v1/devices").header("cookie", "herald_console=0123"))
        .await;
    assert_eq!(made_up.status, 401);

    // A change without the CSRF token, with a wrong one, or from another origin is
    // refused before it happens; with both it goes through (here: a code nobody has).
    let approve = || {
        req("POST", "/v1/pairing/approve")
            .header("cookie", &cookie)
            .json(json!({ "platform": "gadget", "code": "ABCDEFGH" }))
    };
    assert_eq!(
        h.send(approve().header("origin", &h.origin())).await.status,
        403
    );
    assert_eq!(
        h.send(
            approve()
                .header("x-herald-csrf", "wrong")
                .header("origin", &h.origin())
        )
        .await
        .status,
        403
    );
    // The right token but neither Origin nor Sec-Fetch-Site: no browser sends that.
    let unsourced = h.send(approve().header("x-herald-csrf", &csrf)).await;
    assert_eq!(unsourced.status, 403, "{}", unsourced.text);
    let cross = approve()
        .header("x-herald-csrf", &csrf)
        .header("origin", "http://127.0.0.1:1");
    assert_eq!(h.send(cross).await.status, 403);
    let sibling = approve()
        .header("x-herald-csrf", &csrf)
        .header("sec-fetch-site", "same-site");
    assert_eq!(h.send(sibling).await.status, 403);
    let good = h
        .send(
            approve()
                .header("x-herald-csrf", &csrf)
                .header("origin", &h.origin())
                .header("sec-fetch-site", "same-origin"),
        )
        .await;
    assert_eq!(good.status, 404, "{}", good.text);
    assert!(good.error().contains("no pending pairing"), "{}", good.text);

    // The bearer API is as it was: no CSRF token, and a wrong bearer is not saved by a
    // good cookie.
    let bearer = format!("Bearer {}", h.endpoint.token);
    let cli = h
        .send(
            req("POST", "/v1/pairing/approve")
                .header("authorization", &bearer)
                .json(json!({ "platform": "gadget", "code": "ABCDEFGH" })),
        )
        .await;
    assert_eq!(cli.status, 404);
    let mixed = h
        .send(
            req("GET", "/v1/devices")
                .header("authorization", "Bearer wrong")
                .header("cookie", &cookie),
        )
        .await;
    assert_eq!(mixed.status, 401);

    // Logging out ends the session.
    let out = h
        .send(req("DELETE", "/v1/session").sent_by_console(&cookie, &csrf, &h.origin()))
        .await;
    assert_eq!(out.status, 200);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let after = h
        .send(req("GET", "/v1/devices").header("cookie", &cookie))
        .await;
    assert_eq!(after.status, 401);
    assert!(after.error().contains("log in again"), "{}", after.text);
    h.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_lock_the_login_but_not_the_bearer_api() {
    let h = start(demo()).await;
    for _ in 0..MAX_FAILURES {
        let wrong = h
            .send(req("POST", "/v1/login").json(json!({ "token": "guess" })))
            .await;
        assert_eq!(wrong.status, 401);
    }
    let locked = h
        .send(req("POST", "/v1/login").json(json!({ "token": h.endpoint.token })))
        .await;
    assert_eq!(locked.status, 429);
    assert!(locked.error().contains("wait a minute"), "{}", locked.text);
    let bearer = format!("Bearer {}", h.endpoint.token);
    let cli = h
        .send(req("GET", "/v1/info").header("authorization", &bearer))
        .await;
    assert_eq!(cli.status, 200);
    h.server.shutdown().await;
}

/// One raw HTTP/1.1 request with `host` as its Host header (ureq sets its own); the
/// status line's code.
fn status_with_host(url: &str, request: &str, host: &str) -> u16 {
    use std::io::Write;
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let (line, body) = request.split_once('\n').unwrap_or((request, ""));
    write!(
        stream,
        "{line} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split(' ').nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_rebound_its_name_to_this_machine_gets_nothing() {
    let h = start(demo()).await;
    let url = h.endpoint.url.clone();
    let wrong_login = "POST /v1/login\n{\"token\": \"guess\"}".to_owned();
    let statuses = tokio::task::spawn_blocking(move || {
        let page = status_with_host(&url, "GET /", "rebound.example:8766");
        // Enough wrong tokens to lock the login, were they counted.
        let logins: Vec<u16> = (0..=MAX_FAILURES)
            .map(|_| status_with_host(&url, &wrong_login, "rebound.example"))
            .collect();
        let by_address = status_with_host(&url, "GET /", "127.0.0.1");
        (page, logins, by_address)
    })
    .await
    .unwrap();
    assert_eq!(statuses.0, 421);
    assert!(statuses.1.iter().all(|s| *s == 421), "{:?}", statuses.1);
    assert_eq!(statuses.2, 200);
    // The owner's login still works.
    h.login().await;
    h.server.shutdown().await;
}

#[test]
fn a_logged_endpoint_hides_its_token() {
    let endpoint = Endpoint {
        url: "http://127.0.0.1:8766".into(),
        pid: 7,
        token: "0123456789abcdef0123456789abcdef".into(),
    };
    let shown = format!("{endpoint:?}");
    assert!(!shown.contains("0123456789abcdef"), "{shown}");
    assert!(shown.contains("8766") && shown.contains("<secret>"));
}
