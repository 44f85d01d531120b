//! `herald serve` killed and restarted on one data directory, the checks made on the
//! store and the data directory after each kill, and the admin API.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herald_admin_api::{AdminClient, Method};
use serde_json::Value;

use herald_test_support::Relay;

use super::PATIENCE;
use crate::common::{port_of, BIN};

/// Temporary files killed servers left, all scenarios together.
pub static SWEPT: AtomicUsize = AtomicUsize::new(0);

/// `herald serve` on loopback behind gadget and phone ports the test holds for its
/// whole life ([`Relay`]), so clients reconnect to the restarted server by themselves and
/// no other test can take those ports while it is down.
pub struct Herald {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// Server logs, outside the data directory.
    logs: tempfile::TempDir,
    gadgets: Relay,
    phones: Relay,
    env: Vec<(String, String)>,
    starts: usize,
    pub kills: usize,
    pub gadget_url: String,
    pub mobile_url: String,
}

impl Herald {
    pub fn start(env: &[(&str, &str)]) -> Herald {
        let mut herald = Herald {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            logs: tempfile::tempdir().unwrap(),
            gadgets: Relay::start(),
            phones: Relay::start(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            starts: 0,
            kills: 0,
            gadget_url: String::new(),
            mobile_url: String::new(),
        };
        herald.gadget_url = format!("ws://127.0.0.1:{}/gadget", herald.gadgets.port());
        herald.mobile_url = format!("ws://127.0.0.1:{}/ws", herald.phones.port());
        herald.spawn();
        herald
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }

    pub fn store(&self) -> PathBuf {
        self.data().join(herald_server::STORE_FILE)
    }

    pub fn mobile_token(&self) -> String {
        let path = self.data().join(herald_server::MOBILE_TOKEN_FILE);
        std::fs::read_to_string(path).unwrap().trim().to_owned()
    }

    /// Start the server on the data directory; returns once its admin API is published.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "herald is already running");
        let dir = self.data().to_owned();
        // The dead server's endpoint file stays behind; the new one writes its own.
        let _ = std::fs::remove_file(dir.join("admin.json"));
        self.starts += 1;
        let log =
            std::fs::File::create(self.logs.path().join(format!("serve-{}.log", self.starts)))
                .unwrap();
        let mut child = Command::new(BIN)
            .args(["serve", "--host", "127.0.0.1", "--gadget-port", "0"])
            .args(["--mobile-port", "0", "--admin-port", "0", "--data-dir"])
            .arg(&dir)
            .env("RUST_LOG", "info")
            .env("RUST_BACKTRACE", "1")
            .env_remove("MOBILE_TOKEN")
            .env_remove("HERALD_CONFIG")
            .env("XDG_CONFIG_HOME", self.logs.path().join("no-config"))
            .env_remove("GADGET_ACCESS_TOKEN")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !dir.join("admin.json").exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("herald serve exited ({status}):\n{}", self.log_text());
            }
            assert!(
                started.elapsed() < PATIENCE,
                "herald serve did not start:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = Some(child);
        let (status, info) = admin(self.data(), "/v1/info", None).unwrap();
        assert_eq!(status, 200, "{info}");
        let port = |url: &Value| port_of(url.as_str().unwrap());
        self.gadgets.point_to(port(&info["gadget_url"]));
        self.phones.point_to(port(&info["mobile_url"]));
    }

    /// SIGKILL, and wait until the process is gone.
    pub fn kill(&mut self) {
        // Its ports are free for anyone now: the relays must not lead there.
        self.gadgets.point_to(0);
        self.phones.point_to(0);
        let mut child = self.child.take().expect("herald is running");
        child.kill().unwrap();
        child.wait().unwrap();
        self.kills += 1;
    }

    /// With the server killed: check the store and note the temporary files left, start
    /// the server again, and check that they were swept.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "herald is still running");
        check_store(&self.store());
        let partial = temporary_files(self.data());
        SWEPT.fetch_add(partial.len(), Ordering::Relaxed);
        self.spawn();
        // Only the dead server's: the new one may be writing some for its clients.
        let left: Vec<&PathBuf> = partial.iter().filter(|p| p.exists()).collect();
        assert!(
            left.is_empty(),
            "temporary files the killed server left survive the restart: {left:?}"
        );
    }

    pub fn crash_and_restart(&mut self) {
        self.kill();
        self.restart();
    }

    /// No server of this data directory panicked (a panic in a connection's task is
    /// caught by the runtime and only logged, so nothing else would tell).
    pub fn assert_no_panics(&self) {
        let logs = self.log_text();
        let lines: Vec<&str> = logs.lines().collect();
        if let Some(at) = lines.iter().position(|l| l.contains("panicked at")) {
            // The message, and the frames of Herald's own code.
            let head = (at + 2).min(lines.len());
            let end = (at + 60).min(lines.len());
            let ours = lines[head..end]
                .iter()
                .filter(|l| l.contains("herald") || l.contains("/crates/"));
            let shown: Vec<&str> = lines[at..head].iter().chain(ours).copied().collect();
            panic!("herald serve panicked:\n{}", shown.join("\n"));
        }
    }

    pub fn log_text(&self) -> String {
        let mut text = String::new();
        for start in 1..=self.starts {
            let path = self.logs.path().join(format!("serve-{start}.log"));
            let log = std::fs::read_to_string(path).unwrap_or_default();
            text.push_str(&format!("--- serve start {start} ---\n{log}"));
        }
        text
    }
}

impl Drop for Herald {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_text());
        }
    }
}

/// `PRAGMA integrity_check` and `foreign_key_check` on the store, opened read-only.
pub fn check_store(path: &Path) {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    let rows = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt
            .query_map([], |row| {
                let value: rusqlite::types::Value = row.get(0)?;
                Ok(format!("{value:?}"))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let integrity = rows("PRAGMA integrity_check");
    assert_eq!(
        integrity,
        [r#"Text("ok")"#],
        "integrity_check of {} failed",
        path.display()
    );
    let dangling = rows("PRAGMA foreign_key_check");
    assert!(
        dangling.is_empty(),
        "foreign_key_check of {}: {dangling:?}",
        path.display()
    );
}

/// Whether `path` is named as temporary files are: the `.NAME.….part` of every atomic
/// write, and SQLite's rollback journal.
pub fn is_temporary(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.ends_with(".part") || name.ends_with(".tmp") || name.ends_with("-journal")
}

/// The temporary files under `dir`.
pub fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
                continue;
            }
            if is_temporary(&path) {
                found.push(path);
            }
        }
    }
    found
}

/// At the end of a run, everything quiet: the store is sound, nothing temporary is left
/// anywhere in the data directory, and no server panicked.
pub fn final_checks(herald: &Herald) {
    check_store(&herald.store());
    let found = temporary_files(herald.data());
    assert!(found.is_empty(), "temporary files left: {found:?}");
    herald.assert_no_panics();
}

/// A GET (no body) or POST to the admin API of the server running on `dir`: the status
/// and the JSON answer. An error means the server could not be reached.
pub fn admin(dir: &Path, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
    let method = if body.is_some() {
        Method::POST
    } else {
        Method::GET
    };
    let reply = AdminClient::connect(dir)
        .and_then(|client| client.request(method, path, body))
        .map_err(|e| e.to_string())?;
    let value = serde_json::from_str(&reply.body).unwrap_or(Value::String(reply.body));
    Ok((reply.status, value))
}

pub async fn admin_async(
    dir: &Path,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let (dir, path) = (dir.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || admin(&dir, &path, body.as_ref()))
        .await
        .unwrap()
}

/// A GET that must succeed.
pub async fn admin_get(herald: &Herald, path: &str) -> Value {
    let (status, value) = admin_async(herald.data(), path, None).await.unwrap();
    assert_eq!(status, 200, "GET {path}: {value}");
    value
}
