//! The console's side of the admin API against a real server on loopback: the login and
//! its cookie, the CSRF rules, the pages and their headers, the live stream, uploads
//! that are no image, QR codes, and the Hermes mode where pairing is not Herald's.
//! (The whole console in a browser is `web/tests/console.test.mjs`.)

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_agents::DemoAgent;
use herald_port::{AgentFactory, Backend, Platform};
use serde_json::{json, Value};

use super::Endpoint;
use crate::config::{Config, Secret};
use crate::fake_authorizer::FakeAuthorizer;
use crate::Server;

struct Running {
    server: Server,
    dir: tempfile::TempDir,
    endpoint: Endpoint,
}

fn config() -> Config {
    let mut config = Config::default();
    config.gadget.host = [127, 0, 0, 1].into();
    config.gadget.port = 0;
    config.mobile.host = [127, 0, 0, 1].into();
    config.mobile.port = 0;
    config.mobile.token = Some(Secret("console-test-app-token-0123456789abcdef".into()));
    config.admin.port = 0;
    config
}

fn demo() -> AgentFactory {
    Box::new(|out| Backend::agent(Arc::new(DemoAgent::new(out))))
}

fn under_hermes() -> AgentFactory {
    Box::new(|out| Backend {
        agent: Arc::new(DemoAgent::new(out)),
        // Says no to everyone and lists no pairings, as Hermes with a plugin older than
        // this herald would: only its authorizer matters.
        authorizer: Some(Arc::new(FakeAuthorizer::saying(false))),
    })
}

async fn start(agent: AgentFactory) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(config(), dir.path(), agent).await.unwrap();
    let endpoint = Endpoint::discover(dir.path()).unwrap();
    Running {
        server,
        dir,
        endpoint,
    }
}

/// One request, as a browser (or the CLI) would send it.
#[derive(Clone, Default)]
struct Req {
    method: &'static str,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    text: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }
}

fn req(method: &'static str, path: &str) -> Req {
    Req {
        method,
        path: path.to_owned(),
        ..Req::default()
    }
}

impl Req {
    fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn json(self, body: Value) -> Req {
        let mut r = self.header("content-type", "application/json");
        r.body = Some(body.to_string().into_bytes());
        r
    }

    /// As the console page sends a change: its session cookie, its CSRF token and the
    /// console's own origin.
    fn sent_by_console(self, cookie: &str, csrf: &str, origin: &str) -> Req {
        self.header("cookie", cookie)
            .header("x-herald-csrf", csrf)
            .header("origin", origin)
    }

    fn bytes(self, body: &[u8]) -> Req {
        let mut r = self.header("content-type", "application/octet-stream");
        r.body = Some(body.to_vec());
        r
    }
}

impl Running {
    async fn send(&self, r: Req) -> Resp {
        let url = format!("{}{}", self.endpoint.url, r.path);
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .build()
                .into();
            let mut builder = ureq::http::Request::builder().method(r.method).uri(&url);
            for (name, value) in &r.headers {
                builder = builder.header(name, value);
            }
            let request = builder.body(r.body.unwrap_or_default()).unwrap();
            let mut response = agent.run(request).unwrap();
            let headers = response
                .headers()
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            Resp {
                status: response.status().as_u16(),
                headers,
                text,
            }
        })
        .await
        .unwrap()
    }

    fn origin(&self) -> String {
        self.endpoint.url.clone()
    }

    /// Log in as the console does: the cookie to send back and the CSRF token.
    async fn login(&self) -> (String, String) {
        let r = req("POST", "/v1/login")
            .header("origin", &self.origin())
            .json(json!({ "token": self.endpoint.token }));
        let answer = self.send(r).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        let set = answer.header("set-cookie").unwrap().to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let csrf = answer.json()["csrf"].as_str().unwrap().to_owned();
        (cookie, csrf)
    }
}

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
    for _ in 0..super::session::MAX_FAILURES {
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
        let logins: Vec<u16> = (0..=super::session::MAX_FAILURES)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_open_with_a_strict_policy_and_the_data_is_not() {
    let h = start(demo()).await;
    let index = h.send(req("GET", "/")).await;
    assert_eq!(index.status, 200);
    assert!(index
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(index.text.contains("/console/console.js"));
    let csp = index.header("content-security-policy").unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(index.header("x-content-type-options"), Some("nosniff"));
    let script = h.send(req("GET", "/console/console.js")).await;
    assert_eq!(script.status, 200);
    assert!(script
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    let gadget = h.send(req("GET", "/gadget/")).await;
    assert_eq!(gadget.status, 200);
    assert!(gadget.text.contains("/gadget/gadget.js"));
    assert!(gadget
        .header("content-security-policy")
        .unwrap()
        .contains("ws:"));
    let bare = h.send(req("GET", "/gadget")).await;
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some("/gadget/"));
    for path in [
        "/v1/server",
        "/v1/events",
        "/v1/stats",
        "/v1/qr?for=gadget",
        "/v1/ota/history",
    ] {
        assert_eq!(h.send(req("GET", path)).await.status, 401, "{path}");
    }
    assert_eq!(h.send(req("GET", "/healthz")).await.status, 200);
    h.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_page_urls_qr_codes_and_figures() {
    let h = start(demo()).await;
    let (cookie, _) = h.login().await;
    let server = h
        .send(req("GET", "/v1/server").header("cookie", &cookie))
        .await
        .json();
    let gadget_url = format!("ws://{}/gadget", h.server.gadget_addr());
    assert_eq!(server["urls"]["gadget"], gadget_url.as_str());
    assert_eq!(
        server["urls"]["chat"],
        format!("http://{}/", h.server.mobile_addr()).as_str()
    );
    let qr = h
        .send(req("GET", "/v1/qr?for=gadget").header("cookie", &cookie))
        .await;
    assert_eq!(qr.status, 200);
    assert_eq!(qr.header("content-type"), Some("image/svg+xml"));
    assert!(qr.text.contains("<svg"));
    assert_eq!(qr.text, super::console::qr_svg(&gadget_url).unwrap());
    let other = h
        .send(req("GET", "/v1/qr?for=token").header("cookie", &cookie))
        .await;
    assert_eq!(other.status, 400);
    let stats = h
        .send(req("GET", "/v1/stats").header("cookie", &cookie))
        .await
        .json();
    assert_eq!(stats["gadget"]["online"], 0);
    assert!(stats["mobile"]["turns"].is_u64(), "{stats}");
    h.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_that_are_no_image_or_for_no_device_say_so() {
    let h = start(demo()).await;
    let (cookie, csrf) = h.login().await;
    let origin = h.origin();
    let upload = |device: &str, body: &[u8]| {
        req("POST", &format!("/v1/ota/uploads?device={device}"))
            .sent_by_console(&cookie, &csrf, &origin)
            .bytes(body)
    };
    let text = h
        .send(upload(
            "hg-0123456789abcdef",
            b"hello, this is a text file\n",
        ))
        .await;
    assert_eq!(text.status, 422, "{}", text.text);
    assert!(
        text.error().contains("not an ESP-IDF application image"),
        "{}",
        text.text
    );
    let empty = h.send(upload("hg-0123456789abcdef", b"")).await;
    assert_eq!(empty.status, 400);
    let bad_id = h.send(upload("nope", b"x")).await;
    assert_eq!(bad_id.status, 400);
    assert!(bad_id.error().contains("not a gadget id"));
    let too_big = vec![0u8; super::firmware::MAX_UPLOAD + 1];
    let big = h.send(upload("hg-0123456789abcdef", &too_big)).await;
    assert_eq!(big.status, 413, "{}", big.text);
    assert!(big.error().contains("larger than"), "{}", big.text);
    let gone = h
        .send(
            req("POST", "/v1/ota/uploads/u-0000/push")
                .header("cookie", &cookie)
                .header("x-herald-csrf", &csrf)
                .header("sec-fetch-site", "same-origin"),
        )
        .await;
    assert_eq!(gone.status, 404);
    assert!(gone.error().contains("upload the image again"));
    // A card or an action for a device that is not there is refused in words.
    let card = h
        .send(
            req("POST", "/v1/display")
                .sent_by_console(&cookie, &csrf, &origin)
                .json(json!({ "chat": {"platform": "gadget", "id": "hg-0123456789abcdef"}, "title": "Hi" })),
        )
        .await;
    assert!(card.status == 404 || card.status == 409, "{}", card.text);
    assert!(!card.error().is_empty());
    let detail = h
        .send(req("GET", "/v1/devices/hg-0123456789abcdef").header("cookie", &cookie))
        .await;
    assert_eq!(detail.status, 404);
    assert!(detail.error().contains("forgotten"), "{}", detail.text);
    h.server.shutdown().await;
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
    fn server_access(&self) -> crate::access::Access {
        let store =
            crate::store::SqliteStore::open(&self.dir.path().join(crate::STORE_FILE)).unwrap();
        let store = crate::store::StoreHandle::new(Arc::new(store));
        crate::access::Access::new(store, Default::default(), Default::default())
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
