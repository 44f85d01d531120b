//! `herald gadget` as a service against `herald serve`, both real processes: the service
//! pairs, answers its control socket, keeps its identity across a restart, refuses a
//! second copy, an exposed token and a damaged key, and stops politely on SIGTERM.
//! (GPIO needs hardware: the buttons, LED and outputs are tested in-process against a
//! double, in herald-sim.)

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{stdout, Lines, Serve, BIN, PATIENCE};

fn gadget(config: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("gadget")
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("HERALD_CONFIG")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

fn failure(output: &Output) -> String {
    assert!(!output.status.success(), "it succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `herald gadget run`; killed on drop.
struct Service {
    child: Child,
    /// What it prints: read on a thread so the pipe never fills.
    _lines: Lines,
}

impl Service {
    fn start(config: &Path) -> Service {
        let mut child = Command::new(BIN)
            .args(["gadget", "run", "--config"])
            .arg(config)
            .env_remove("HERALD_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Lines::of(child.stdout.take().unwrap());
        Service {
            child,
            _lines: lines,
        }
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn terminate(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return;
            }
            assert!(Instant::now() < deadline, "still running after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `status` until `test` holds.
fn status_until(
    config: &Path,
    what: &str,
    test: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let output = gadget(config, &["status", "--json"]);
        if output.status.success() {
            let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            if test(&status) {
                return status;
            }
            assert!(Instant::now() < deadline, "never {what}: {status}");
        } else {
            assert!(
                Instant::now() < deadline,
                "never {what}: {}",
                failure(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_service_pairs_talks_reconnects_and_keeps_its_identity() {
    // Behind a port the test holds, where the restarted server is found again.
    let mut serve = Serve::restartable(&[]);
    let url = serve.gadget_url();
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let config = root.path().join("gadget.toml");
    let text = format!(
        "server = \"{url}\"\nname = \"Pi\"\nstate_dir = \"{}\"\ntoken = \"s3cret\"\n",
        state.display()
    );
    std::fs::write(&config, &text).unwrap();

    // A token others can read is refused, and the error does not repeat it.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = failure(&gadget(&config, &["run"]));
    assert!(err.contains("others can read it"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    // The server has no token, so the service runs without one.
    std::fs::write(&config, text.replace("token = \"s3cret\"\n", "")).unwrap();

    let service = Service::start(&config);
    // The screen says "pairing" as soon as the server does; the code follows.
    let first = status_until(&config, "a pairing code", |s| {
        s["shows"]
            .as_str()
            .is_some_and(|t| t.contains("Pairing code: "))
    });
    let id = first["device_id"].as_str().unwrap().to_owned();
    let shows = first["shows"].as_str().unwrap();
    let code = shows
        .split("Pairing code: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no code in {shows}"))
        .to_owned();
    stdout(&serve.herald(&["pairing", "approve", "gadget", &code]));
    status_until(&config, "paired", |s| {
        s["paired"] == true && s["screen"] == "ready"
    });

    // The control socket is its owner's only.
    let socket = state.join("control.sock");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // A second service on the same state directory is refused.
    let err = failure(&gadget(&config, &["run"]));
    assert!(err.contains("another herald gadget"), "{err}");

    stdout(&gadget(&config, &["say", "hello from the pi"]));
    let replied = status_until(&config, "answered", |s| {
        s["replies"].as_array().is_some_and(|r| !r.is_empty()) && s["screen"] == "ready"
    });
    assert_eq!(replied["replies"][0], "You said: hello from the pi");
    stdout(&gadget(
        &config,
        &[
            "event",
            "doorbell",
            "--notify",
            "--data",
            "{\"door\": \"front\"}",
        ],
    ));
    status_until(&config, "told of the event", |s| {
        s["replies"]
            .as_array()
            .is_some_and(|r| r.len() == 2 && r[1].as_str().unwrap().contains("doorbell"))
    });
    let human = stdout(&gadget(&config, &["status"]));
    assert!(
        human.contains(&id) && human.contains("reply    You said: hello from the pi"),
        "{human}"
    );
    let err = failure(&gadget(&config, &["press", "jump"]));
    assert!(err.contains("no button jump"), "{err}");
    stdout(&gadget(&config, &["press", "cancel"]));

    // The server goes away and comes back: so does the gadget, by itself.
    serve.restart();
    status_until(&config, "offline", |s| s["phase"] != "online");
    let back = status_until(&config, "back online", |s| s["phase"] == "online");
    // What the lost connection noted is gone with it.
    assert!(back["note"].is_null(), "{back}");
    stdout(&gadget(&config, &["say", "after the restart"]));
    status_until(&config, "answered again", |s| {
        s["replies"]
            .as_array()
            .and_then(|r| r.last())
            .is_some_and(|r| r == "You said: after the restart")
    });

    // SIGTERM: a clean exit, the socket gone, the server told.
    service.terminate();
    assert!(!socket.exists());
    let err = failure(&gadget(&config, &["status"]));
    assert!(err.contains("no gadget runs"), "{err}");

    // The same device, still paired, after a restart.
    let service = Service::start(&config);
    let again = status_until(&config, "back", |s| s["screen"] == "ready");
    assert_eq!(again["device_id"], id.as_str());
    service.terminate();

    // A damaged key stops start-up instead of making a new device.
    std::fs::write(state.join("key"), "not a key\n").unwrap();
    let err = failure(&gadget(&config, &["run"]));
    assert!(err.contains("not a device key"), "{err}");
    assert_eq!(
        std::fs::read_to_string(state.join("key")).unwrap(),
        "not a key\n"
    );
}
