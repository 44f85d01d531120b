//! The live event stream: what it sends first, a pairing request it tells of unasked, its
//! end with the session; and the Hermes mode, where pairing is Hermes's and the stream
//! says so.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_agents::DemoAgent;
use herald_port::{AgentFactory, Backend, Platform};
use serde_json::{json, Value};

use super::{demo, req, start, Running};
use herald_access::testing::FakeAuthorizer;

fn under_hermes() -> AgentFactory {
    Box::new(|out| Backend {
        agent: Arc::new(DemoAgent::new(out)),
        // Says no to everyone and lists no pairings, as Hermes with a plugin older than
        // this herald would: only its authorizer matters.
        authorizer: Some(Arc::new(FakeAuthorizer::saying(false))),
    })
}

/// Read the event stream until `until` has arrived; every event's name and data.
fn read_events(url: &str, cookie: &str, until: &str) -> Vec<(String, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let response = agent.get(url).header("cookie", cookie).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut reader = response.into_body().into_reader();
    let (mut text, mut buf) = (String::new(), [0u8; 4096]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text.contains(&format!("event: {until}\n")) || !text.ends_with("\n\n") {
        assert!(Instant::now() < deadline, "no {until} in {text}");
        let n = reader.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    text.split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_owned(), data.to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_hermes_pairing_is_hermes_and_the_stream_says_so() {
    let h = start(under_hermes()).await;
    let (cookie, csrf) = h.login().await;
    let server = h
        .send(req("GET", "/v1/server").header("cookie", &cookie))
        .await
        .json();
    assert_eq!(server["pairing"], false);
    // A code goes to Hermes, which holds none here; approving by user id is Herald's own.
    let approve = |body: Value| {
        h.send(
            req("POST", "/v1/pairing/approve")
                .sent_by_console(&cookie, &csrf, &h.origin())
                .json(body),
        )
    };
    let by_code = approve(json!({ "platform": "gadget", "code": "HERMES23" })).await;
    assert_eq!(by_code.status, 404, "{}", by_code.text);
    let by_user = approve(json!({ "platform": "gadget", "user_id": "hg-1" })).await;
    assert_eq!(by_user.status, 409);
    assert!(
        by_user.error().contains("hermes gadget pair"),
        "{}",
        by_user.text
    );
    // A backend that cannot list pairings: the stream says `null`, the API says why.
    let listed = h
        .send(req("GET", "/v1/pairing").header("cookie", &cookie))
        .await;
    assert_eq!(listed.status, 502);
    assert!(
        listed.error().contains("unknown request"),
        "{}",
        listed.text
    );
    let url = format!("{}/v1/events", h.endpoint.url);
    let events = tokio::task::spawn_blocking(move || read_events(&url, &cookie, "stats"))
        .await
        .unwrap();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["devices", "phones", "pairing", "ota", "stats"]);
    assert_eq!(events[2].1, "null");
    h.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_tells_of_a_new_pairing_request_unasked() {
    let h = start(demo()).await;
    let (cookie, _) = h.login().await;
    let url = format!("{}/v1/events", h.endpoint.url);
    let first = {
        let (url, cookie) = (url.clone(), cookie.clone());
        tokio::task::spawn_blocking(move || read_events(&url, &cookie, "stats"))
            .await
            .unwrap()
    };
    assert_eq!(first[2], ("pairing".to_owned(), "[]".to_owned()));
    // A pairing request appears without anyone asking for it.
    let reader = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
        let response = agent.get(&url).header("cookie", &cookie).call().unwrap();
        let mut reader = response.into_body().into_reader();
        let (mut text, mut buf) = (String::new(), [0u8; 4096]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !text.contains("\"code\":\"") {
            assert!(Instant::now() < deadline, "no pairing request in {text}");
            let n = reader.read(&mut buf).unwrap();
            assert!(n > 0);
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        text
    });
    let access = h.server_access();
    let code = access
        .pairing_code(Platform::Mobile, "someone", Some("Someone"))
        .await
        .unwrap();
    let text = reader.await.unwrap();
    assert!(text.contains(&code), "{text}");
    h.server.shutdown().await;
}

impl Running {
    /// The server's own pairing store, as a device's first contact would use it.
    fn server_access(&self) -> herald_access::Access {
        let path = self.dir.path().join(crate::STORE_FILE);
        let store = herald_store::SqliteStore::open(&path).unwrap();
        let store = herald_store::StoreHandle::new(Arc::new(store), &path).unwrap();
        herald_access::Access::new(store, Default::default(), Default::default())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ends_with_its_session() {
    let h = start(demo()).await;
    let (cookie, csrf) = h.login().await;
    let url = format!("{}/v1/events", h.endpoint.url);
    let (opened, open) = tokio::sync::oneshot::channel();
    let reader = {
        let cookie = cookie.clone();
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(25)))
                .build()
                .into();
            let response = agent.get(&url).header("cookie", &cookie).call().unwrap();
            let mut reader = response.into_body().into_reader();
            let (mut text, mut buf) = (String::new(), [0u8; 4096]);
            while !text.contains("event: stats\n") {
                let n = reader.read(&mut buf).unwrap();
                assert!(n > 0, "the stream ended early: {text}");
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            let _ = opened.send(());
            // Now read until the server ends the stream (or the agent gives up).
            let since = Instant::now();
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => return Ok(since.elapsed()),
                    Ok(_) => continue,
                    Err(err) => return Err(format!("{err} after {:?}", since.elapsed())),
                }
            }
        })
    };
    open.await.unwrap();
    let out = h
        .send(req("DELETE", "/v1/session").sent_by_console(&cookie, &csrf, &h.origin()))
        .await;
    assert_eq!(out.status, 200, "{}", out.text);
    let ended = reader.await.unwrap();
    assert!(
        matches!(ended, Ok(after) if after < Duration::from_secs(5)),
        "the logged-out session's stream kept going: {ended:?}"
    );
    h.server.shutdown().await;
}
