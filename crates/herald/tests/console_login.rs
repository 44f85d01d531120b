//! `herald console` against a real `herald serve`: the link it prints logs in once, and
//! only once, to the same session the token login makes; an expired, a used, a made-up
//! or a pushed-out code is refused in words and counts toward the login's lock; `$BROWSER`
//! is handed the link; and the server's logs, at their most talkative, never hold a code.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{herald_in, serve_command, stdout, wait_started, Lines, BIN};
use serde_json::{json, Value};

/// `herald serve` on free ports, every log level on, its stderr read line by line.
fn serve(dir: &Path) -> (Child, Lines) {
    let mut child = serve_command(dir)
        .env("RUST_LOG", "trace")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let logs = Lines::of(child.stderr.take().unwrap());
    wait_started(dir);
    (child, logs)
}

struct Answer {
    status: u16,
    set_cookie: Option<String>,
    body: Value,
}

impl Answer {
    fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or_default()
    }
}

fn call(method: &str, url: &str, headers: &[(&str, &str)], body: Option<Value>) -> Answer {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = ureq::http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    if !body.is_empty() {
        request = request.header("content-type", "application/json");
    }
    let mut response = agent.run(request.body(body).unwrap()).unwrap();
    let set_cookie = response
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = response.body_mut().read_to_string().unwrap_or_default();
    Answer {
        status: response.status().as_u16(),
        set_cookie,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
    }
}

/// The link `herald console` printed, split into the console's address and the code.
fn printed_link(output: &str) -> (String, String) {
    let link = output
        .split_whitespace()
        .find(|w| w.contains("/#login="))
        .unwrap_or_else(|| panic!("no link in {output}"));
    let (base, code) = link.split_once("/#login=").unwrap();
    (base.to_owned(), code.to_owned())
}

/// Log in with a code as the console page does (its origin, the code in the body).
fn redeem(base: &str, code: &str) -> Answer {
    call(
        "POST",
        &format!("{base}/v1/login"),
        &[("origin", base)],
        Some(json!({ "code": code })),
    )
}

#[test]
fn a_login_link_logs_in_once_and_its_code_is_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, mut logs) = serve(dir.path());
    let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let mut codes = Vec::new();

    // `herald info` says how to log in.
    let info = stdout(&herald_in(dir.path(), &["info"]));
    assert!(info.contains("herald console"), "{info}");

    // The link, printed; nothing opened.
    let printed = herald_in(dir.path(), &["console", "--no-open"]);
    let printed = stdout(&printed);
    let (base, code) = printed_link(&printed);
    assert!(base.starts_with("http://127.0.0.1:"), "{printed}");
    assert!(code.len() >= 32, "128 bits at least: {code}");
    assert!(!printed.contains("Opened"), "{printed}");
    codes.push(code.clone());

    // Redeemed once: the same session the token login makes.
    let first = redeem(&base, &code);
    assert_eq!(first.status, 200, "{:?}", first.body);
    let set = first.set_cookie.clone().expect("a session cookie");
    for part in [
        "herald_console=",
        "HttpOnly",
        "SameSite=Strict",
        "Max-Age=43200",
        "Path=/",
    ] {
        assert!(set.contains(part), "{part} in {set}");
    }
    let cookie = set.split(';').next().unwrap().to_owned();
    let devices = call(
        "GET",
        &format!("{base}/v1/devices"),
        &[("cookie", &cookie)],
        None,
    );
    assert_eq!(devices.status, 200, "{:?}", devices.body);
    let session = call(
        "GET",
        &format!("{base}/v1/session"),
        &[("cookie", &cookie)],
        None,
    );
    let csrf = session.body["csrf"]
        .as_str()
        .expect("a live session")
        .to_owned();
    assert_eq!(first.body["csrf"], csrf.as_str());

    // Twice: refused, in words.
    let again = redeem(&base, &code);
    assert_eq!(again.status, 401);
    assert!(again.error().contains("used already"), "{:?}", again.body);
    assert!(again.set_cookie.is_none());

    // A made-up code.
    let made_up = redeem(&base, "0123456789abcdef0123456789abcdef");
    assert_eq!(made_up.status, 401);
    assert!(made_up.error().contains("not valid"), "{:?}", made_up.body);

    // A session cannot mint its own successor; the token can, with a shorter life.
    let from_session = call(
        "POST",
        &format!("{base}/v1/console/link"),
        &[
            ("cookie", &cookie),
            ("x-herald-csrf", &csrf),
            ("origin", &base),
        ],
        Some(json!({})),
    );
    assert_eq!(from_session.status, 403, "{:?}", from_session.body);
    let mint = |ttl_ms: u64| {
        let answer = call(
            "POST",
            &format!("{base}/v1/console/link"),
            &[("authorization", &bearer)],
            Some(json!({ "ttl_ms": ttl_ms })),
        );
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        answer.body["code"].as_str().unwrap().to_owned()
    };

    // Expired: a code minted to live 1 ms, redeemed well after.
    let short = mint(1);
    codes.push(short.clone());
    std::thread::sleep(Duration::from_millis(20));
    let expired = redeem(&base, &short);
    assert_eq!(expired.status, 401);
    assert!(expired.error().contains("expired"), "{:?}", expired.body);

    // Nine outstanding: the oldest is dropped, the newer eight still work.
    let nine: Vec<String> = (0..9).map(|_| mint(120_000)).collect();
    codes.extend(nine.iter().cloned());
    let dropped = redeem(&base, &nine[0]);
    assert_eq!(dropped.status, 401, "the oldest made room");
    assert!(dropped.error().contains("not valid"), "{:?}", dropped.body);
    for code in &nine[1..] {
        assert_eq!(redeem(&base, code).status, 200);
    }

    // `$BROWSER` gets the link (no display needed), and that link works too.
    let opened = dir.path().join("opened");
    let browser = dir.path().join("browser.sh");
    std::fs::write(
        &browser,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", opened.display()),
    )
    .unwrap();
    make_executable(&browser);
    let output = Command::new(BIN)
        .args(["console", "--data-dir"])
        .arg(dir.path())
        .env("BROWSER", &browser)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("HERALD_CONFIG")
        .env("XDG_CONFIG_HOME", dir.path().join("no-config"))
        .output()
        .unwrap();
    let said = stdout(&output);
    assert!(said.contains("Opened it with"), "{said}");
    let handed = std::fs::read_to_string(&opened).unwrap();
    let (opened_base, opened_code) = printed_link(&handed);
    assert_eq!(
        printed_link(&said),
        (opened_base.clone(), opened_code.clone())
    );
    codes.push(opened_code.clone());
    assert_eq!(redeem(&opened_base, &opened_code).status, 200);

    // Refused codes count toward the login's lock: 4 so far, 6 more make 10, and then
    // even a good code waits out the minute.
    for _ in 0..6 {
        assert_eq!(
            redeem(&base, "ffffffffffffffffffffffffffffffff").status,
            401
        );
    }
    let locked = redeem(&base, &mint(120_000));
    assert_eq!(locked.status, 429, "{:?}", locked.body);

    // The logs, to their end: the logins are there, no code is.
    let _ = server.kill();
    let _ = server.wait();
    logs.drain(Duration::from_secs(5));
    let text = logs.seen.join("\n");
    assert!(text.contains("console login with a login link"), "{text}");
    assert!(
        text.contains("console login with a refused login link"),
        "{text}"
    );
    for code in &codes {
        assert!(!text.contains(code.as_str()), "a code in the logs: {code}");
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[cfg(not(unix))]
fn make_executable(_: &Path) {}

#[test]
fn without_a_server_it_says_how_to_start_one() {
    let dir = tempfile::tempdir().unwrap();
    let output = herald_in(dir.path(), &["console", "--no-open"]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("herald serve"), "{said}");
}
