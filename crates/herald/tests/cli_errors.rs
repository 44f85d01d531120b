//! The command line where it meets mistakes and a real home set-up: which config file
//! it reads, which server `chat` and `sim` find, errors that stop at once in one line,
//! a second server on the same data directory, private downloads, `wss://`.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{chat_in, herald_in, run_with_input, stdout, Serve, BIN};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A failed command's status and its one-line error.
fn failure(output: &Output) -> (i32, String) {
    let text = stderr(output);
    assert_eq!(text.lines().count(), 1, "one line: {text:?}");
    assert!(text.starts_with("error: "), "{text}");
    (output.status.code().unwrap(), text)
}

fn info_json(dir: &Path, env: &[(&str, &Path)]) -> serde_json::Value {
    let output = Command::new(BIN)
        .args(["info", "--json", "--data-dir"])
        .arg(dir)
        .env_remove("HERALD_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    serde_json::from_str(&stdout(&output)).unwrap()
}

#[test]
fn the_config_file_is_found_without_flags_and_info_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let info = info_json(dir.path(), &[]);
    assert_eq!(info["running"], false);
    assert_eq!(info["config"], serde_json::Value::Null);
    assert!(
        info["gadget_url"]
            .as_str()
            .unwrap()
            .ends_with(":8765/gadget"),
        "{info}"
    );
    // The browser chat is the phone port's root; the console says how to log in.
    let chat = info["chat_url"].as_str().unwrap();
    assert!(
        chat.starts_with("http://") && chat.ends_with(":8787/"),
        "{info}"
    );
    assert!(info["console_login"]
        .as_str()
        .unwrap()
        .contains("herald console"));

    let xdg = dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("herald")).unwrap();
    let file = xdg.join("herald/herald.toml");
    std::fs::write(&file, "[gadget]\nport = 9100\n").unwrap();
    let info = info_json(dir.path(), &[("XDG_CONFIG_HOME", &xdg)]);
    assert_eq!(info["config"], file.to_str().unwrap());
    assert!(
        info["gadget_url"]
            .as_str()
            .unwrap()
            .ends_with(":9100/gadget"),
        "{info}"
    );

    // HERALD_CONFIG comes first.
    let other = dir.path().join("other.toml");
    std::fs::write(&other, "[gadget]\nport = 9200\n").unwrap();
    let info = info_json(
        dir.path(),
        &[("XDG_CONFIG_HOME", &xdg), ("HERALD_CONFIG", &other)],
    );
    assert_eq!(info["config"], other.to_str().unwrap());
    assert!(
        info["gadget_url"]
            .as_str()
            .unwrap()
            .ends_with(":9200/gadget"),
        "{info}"
    );

    let text = stdout(&herald_in(dir.path(), &["info"]));
    assert!(text.contains("Config file:         none"), "{text}");
}

#[test]
fn chat_and_sim_connect_to_the_server_of_their_data_directory() {
    let serve = Serve::start_with(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    // No --url: the ports are random, so only the data directory can lead there.
    let (mut chat, mut input, mut lines) = chat_in(serve.dir.path(), &["--device-id", "found-it"]);
    lines.line_with("Connected (mobile:found-it)");
    // A file from the agent lands in the data directory, private.
    input.write_all(b"/media\n").unwrap();
    let saved = lines.line_with("saved to ");
    let path = Path::new(saved.rsplit("saved to ").next().unwrap().trim()).to_owned();
    assert!(path.starts_with(serve.dir.path()), "{}", path.display());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
    drop(input);
    assert!(chat.wait().unwrap().success());

    let mut sim = Command::new(BIN);
    sim.args(["sim", "--headless", "--data-dir"])
        .arg(serve.dir.path());
    let output = run_with_input(&mut sim, "wait pairing|ready 10\n");
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn permanent_errors_stop_at_once_in_one_line() {
    let serve = Serve::start();
    let gadget_url = serve.url("Gadgets connect to:");
    let phone_url = serve.url("Phones connect to:");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .arg("--data-dir")
            .arg(serve.dir.path())
            // Errors are for people: no backtrace even when one is asked for.
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let (status, text) = failure(&run(&["chat", "--url", &gadget_url]));
    assert_eq!(status, 1);
    assert!(text.contains("not a Herald phone endpoint"), "{text}");
    let wrong_path = phone_url.replace("/ws", "/nowhere");
    let (_, text) = failure(&run(&["chat", "--url", &wrong_path]));
    assert!(text.contains("HTTP 404"), "{text}");
    let mut sim = Command::new(BIN);
    sim.args(["sim", "--headless", "--url", &phone_url, "--data-dir"])
        .arg(serve.dir.path());
    let (status, text) = failure(&run_with_input(&mut sim, "wait ready 10\n"));
    assert_eq!(status, 1);
    assert!(text.contains("not a Herald gadget endpoint"), "{text}");
    // Usage errors exit 2.
    let (status, text) = failure(&run(&["chat", "--url", "ftp://example.invalid/"]));
    assert_eq!(status, 2);
    assert!(text.contains("ws:// or wss://"), "{text}");
    let (status, _) = failure(&run(&["pairing", "revoke", "fax", "x"]));
    assert_eq!(status, 2);
    // Access denied stops too.
    let (status, text) = failure(&run(&["chat", "--url", &phone_url, "--token", "wrong"]));
    assert_eq!(status, 1);
    assert!(text.contains("access denied"), "{text}");
}

/// `herald serve` on free loopback ports with `dir` as its data directory.
fn serve_in(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--host", "127.0.0.1", "--gadget-port", "0"])
        .args(["--mobile-port", "0", "--admin-port", "0", "--data-dir"])
        .arg(dir)
        .env("XDG_CONFIG_HOME", dir.join("no-config"));
    command
}

#[test]
fn a_second_serve_on_the_same_data_directory_refuses_to_start() {
    let serve = Serve::start();
    let output = serve_in(serve.dir.path()).output().unwrap();
    let (status, text) = failure(&output);
    assert_eq!(status, 1);
    assert!(text.contains("already running"), "{text}");
    // The first one is still the one the CLI reaches.
    let info = stdout(&serve.herald(&["info"]));
    assert!(info.contains("running (herald"), "{info}");
}

#[test]
fn start_up_errors_say_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let said_once = |text: &str, cause: &str| {
        assert_eq!(text.matches(cause).count(), 1, "{cause:?} once in {text:?}");
    };
    // A port another program holds (for the whole test, so nobody else takes it).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = Command::new(BIN)
        .args(["serve", "--host", "127.0.0.1", "--gadget-port", &port])
        .args(["--mobile-port", "0", "--admin-port", "0", "--data-dir"])
        .arg(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("no-config"))
        .output()
        .unwrap();
    let (_, text) = failure(&output);
    assert!(text.contains(&format!("cannot listen for gadgets on 127.0.0.1:{port}")));
    said_once(&text, "Address already in use");

    // A data directory that cannot be one: a file stands there.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let (_, text) = failure(&serve_in(&file).output().unwrap());
    assert!(text.contains("cannot use the data directory"), "{text}");
    said_once(&text, "(os error");

    // A malformed herald.toml: the parser's report, once, naming the file.
    let config = dir.path().join("herald.toml");
    std::fs::write(&config, "data_dir = \n").unwrap();
    let output = Command::new(BIN)
        .args(["info", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.starts_with(&format!("error: {}", config.display())),
        "{text}"
    );
    said_once(&text, "TOML parse error");
}

#[test]
fn a_damaged_store_stops_start_up_naming_the_file_and_is_left_as_it_was() {
    for damage in [
        // Not a database at all, and one whose header is right and the rest is not.
        vec![0x5a; 8192],
        [b"SQLite format 3\0".as_slice(), &[0xff; 8176]].concat(),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("herald.db");
        std::fs::write(&store, &damage).unwrap();
        let (status, text) = failure(&serve_in(dir.path()).output().unwrap());
        assert_eq!(status, 1);
        assert!(
            text.contains(&format!("cannot open the store {}", store.display())),
            "{text}"
        );
        assert_eq!(
            std::fs::read(&store).unwrap(),
            damage,
            "the store was written"
        );
        assert!(!dir.path().join("admin.json").exists(), "{text}");
    }
}

/// The CLI run by another user than the server's is told whom to run as. It becomes
/// `nobody` with `setpriv`, as root or through passwordless sudo (what scripts/check
/// needs anyway to install packages).
#[cfg(target_os = "linux")]
#[test]
fn the_cli_run_as_another_user_names_the_user_to_run_as() {
    let serve = Serve::start();
    let me = stdout(&Command::new("id").arg("-un").output().unwrap());
    let me = me.trim();
    let mut become_nobody = Command::new("setpriv");
    if me != "root" {
        become_nobody = Command::new("sudo");
        become_nobody.args(["-n", "setpriv"]);
    }
    // The binary and the data directory's name are within `nobody`'s reach, what the
    // directory holds is not (the server keeps it 0700).
    let output = become_nobody
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "devices",
        ])
        .arg("--data-dir")
        .arg(serve.dir.path())
        .output()
        .unwrap();
    let (status, text) = failure(&output);
    assert_eq!(status, 1);
    assert!(
        text.contains(&format!("belongs to {me}: run this as {me}")),
        "{text}"
    );
    assert!(!text.contains("not running"), "{text}");
}

#[test]
fn a_short_mobile_token_is_refused_at_start_up_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let output = serve_in(dir.path())
        .env("MOBILE_TOKEN", "hunter2")
        .output()
        .unwrap();
    let (status, text) = failure(&output);
    assert_eq!(status, 1);
    assert!(
        text.contains("MOBILE_TOKEN is too short") && text.contains("32"),
        "{text}"
    );
    assert!(!dir.path().join("admin.json").exists());
}

#[test]
fn chat_and_sim_speak_wss() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let config = dir.path().join("herald.toml");
    let toml = format!(
        "tls_cert = {:?}\ntls_key = {:?}\n[gadget]\nallow_all_users = true\n[mobile]\nallow_all_users = true\n",
        cert_path, key_path
    );
    std::fs::write(&config, toml).unwrap();
    let serve = Serve::start_with(&[("HERALD_CONFIG", config.to_str().unwrap())]);
    let localhost = |url: String| url.replace("127.0.0.1", "localhost");
    let phone_url = localhost(serve.url("Phones connect to:"));
    let gadget_url = localhost(serve.url("Gadgets connect to:"));
    assert!(phone_url.starts_with("wss://"), "{phone_url}");

    // The clients trust what the system trusts; SSL_CERT_FILE adds this certificate.
    let mut chat = Command::new(BIN);
    chat.args([
        "chat",
        "--url",
        &phone_url,
        "--device-id",
        "tls-phone",
        "--data-dir",
    ])
    .arg(serve.dir.path())
    .env("SSL_CERT_FILE", &cert_path)
    .env_remove("MOBILE_TOKEN");
    let output = run_with_input(&mut chat, "over tls\n");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("< You said: over tls"), "{text}");

    let mut sim = Command::new(BIN);
    sim.args(["sim", "--headless", "--url", &gadget_url, "--data-dir"])
        .arg(serve.dir.path())
        .env("SSL_CERT_FILE", &cert_path);
    let output = run_with_input(
        &mut sim,
        "wait ready 10\ntext hello\nexpect You said: hello\n",
    );
    assert!(output.status.success(), "{}", stderr(&output));

    // Trusting another certificate only, the connection stops at once instead of
    // retrying; stdin stays open, so only the error can end it.
    let stranger = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let stranger_path = dir.path().join("stranger.pem");
    std::fs::write(&stranger_path, stranger.cert.pem()).unwrap();
    // Under `timeout`: were the error retried again, the test fails instead of hanging.
    let mut chat = Command::new("timeout")
        .args(["30", BIN, "chat", "--url", &phone_url, "--data-dir"])
        .arg(serve.dir.path())
        .env("SSL_CERT_FILE", &stranger_path)
        .env_remove("SSL_CERT_DIR")
        .env_remove("MOBILE_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let open_stdin = chat.stdin.take();
    let output = chat.wait_with_output().unwrap();
    drop(open_stdin);
    let (status, text) = failure(&output);
    assert_eq!(status, 1);
    assert!(text.contains("certificate"), "{text}");
}

#[test]
fn a_simulator_the_server_refuses_stops_with_the_fix() {
    let serve = Serve::start_with(&[("GADGET_ACCESS_TOKEN", "the-right-token")]);
    let mut sim = Command::new(BIN);
    sim.args(["sim", "--headless", "--data-dir"])
        .arg(serve.dir.path())
        .env("GADGET_ACCESS_TOKEN", "a-wrong-token");
    let (status, text) = failure(&run_with_input(&mut sim, "wait ready 10\n"));
    assert_eq!(status, 1);
    assert!(
        text.contains("refused the access token") && text.contains("--token"),
        "{text}"
    );
}
