//! The `herald` binary as a user runs it: `serve` in one process, the other commands
//! in others, talking through the admin API; a gadget and `herald chat` as clients.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::{auth, Auth, Caps, DeviceMessage, Hello, ServerMessage};
use tokio_tungstenite::tungstenite::Message;

const BIN: &str = env!("CARGO_BIN_EXE_herald");

/// `herald serve` on loopback with free ports; killed on drop.
struct Serve {
    child: Child,
    dir: tempfile::TempDir,
}

impl Serve {
    fn start() -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(BIN)
            .args(["serve", "--host", "127.0.0.1", "--gadget-port", "0"])
            .args(["--mobile-port", "0", "--admin-port", "0", "--data-dir"])
            .arg(dir.path())
            .env("RUST_LOG", "warn")
            .env_remove("MOBILE_TOKEN")
            .env_remove("HERALD_CONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !dir.path().join("admin.json").exists() {
            assert!(started.elapsed() < Duration::from_secs(20), "serve did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Serve { child, dir }
    }

    fn herald(&self, args: &[&str]) -> Output {
        herald_in(self.dir.path(), args)
    }

    /// The URL `herald info` prints after `label`.
    fn url(&self, label: &str) -> String {
        let info = stdout(&self.herald(&["info"]));
        info.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|u| u.trim().to_owned())
            .unwrap_or_else(|| panic!("no {label} in {info}"))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn herald_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("MOBILE_TOKEN")
        .env_remove("HERALD_CONFIG")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn help_lists_the_subcommands() {
    let help = stdout(&Command::new(BIN).arg("--help").output().unwrap());
    for command in ["serve", "info", "devices", "forget", "pairing", "chat", "phones", "ota"] {
        assert!(help.contains(command), "{command} missing from\n{help}");
    }
}

#[test]
fn info_without_a_server_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let info = stdout(&herald_in(dir.path(), &["info"]));
    assert!(info.contains("not running"), "{info}");
    assert!(info.contains(":8765/gadget"), "{info}");
    let devices = herald_in(dir.path(), &["devices"]);
    assert!(!devices.status.success());
    assert!(String::from_utf8_lossy(&devices.stderr).contains("not running"));
}

#[test]
fn chat_pairs_and_talks_to_the_demo_agent() {
    use std::io::BufRead;
    let serve = Serve::start();
    let url = serve.url("Phones connect to:");
    let mut chat = Command::new(BIN)
        .args(["chat", "--url", &url, "--device-id", "cli-test", "--data-dir"])
        .arg(serve.dir.path())
        .env_remove("MOBILE_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = chat.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(chat.stdout.take().unwrap()).lines();
    let mut read_until = |needle: &str| -> String {
        for line in output.by_ref() {
            let line = line.unwrap();
            if line.contains(needle) {
                return line;
            }
        }
        panic!("chat ended without {needle:?}");
    };
    read_until("Connected (mobile:cli-test)");
    // A new phone's first message earns a pairing code, which the owner approves.
    input.write_all(b"hello\n").unwrap();
    let line = read_until("Pairing code:");
    let code = line.rsplit(' ').next().unwrap().trim().to_owned();
    stdout(&serve.herald(&["pairing", "approve", "mobile", &code]));
    input.write_all(b"hello from the terminal\n").unwrap();
    drop(input);
    read_until("< You said: hello from the terminal");
    assert!(chat.wait().unwrap().success());

    let phones = stdout(&serve.herald(&["phones", "--json"]));
    let phones: serde_json::Value = serde_json::from_str(&phones).unwrap();
    assert_eq!(phones[0]["id"], "cli-test");
}

#[test]
fn chat_with_a_wrong_token_stops_with_an_error() {
    let serve = Serve::start();
    let url = serve.url("Phones connect to:");
    let output = Command::new(BIN)
        .args(["chat", "--url", &url, "--token", "nope"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("access denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gadget_pairing_through_the_cli() {
    let serve = Serve::start();
    let url = serve.url("Gadgets connect to:");
    let mut key = [0u8; 32];
    key[0] = 42;
    let id = auth::device_id(&key);
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str()).await.unwrap();
    let hello = DeviceMessage::Hello(Hello {
        proto: 1,
        device_id: id.clone(),
        name: Some("CLI gadget".into()),
        board: Some("esp32s3-cli".into()),
        firmware: Some("1.2.3".into()),
        token: None,
        caps: Caps::default(),
        actions: Vec::new(),
        sensors: Default::default(),
    });
    ws.send(Message::Text(hello.encode().into())).await.unwrap();
    let _challenge = next(&mut ws).await;
    let auth = DeviceMessage::Auth(Auth {
        key: Some(auth::b64(&key)),
        mac: None,
    });
    ws.send(Message::Text(auth.encode().into())).await.unwrap();
    assert!(matches!(next(&mut ws).await, ServerMessage::Welcome(w) if !w.paired));
    let ServerMessage::Pairing(pairing) = next(&mut ws).await else {
        panic!("no pairing code")
    };

    let dir = serve.dir.path().to_owned();
    let cli = |args: Vec<String>| {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            stdout(&herald_in(&dir, &args))
        })
    };
    let list = cli(vec!["pairing".into(), "list".into()]).await.unwrap();
    assert!(list.contains(&format!("pending {}", pairing.code)), "{list}");
    cli(vec!["pairing".into(), "approve".into(), "gadget".into(), pairing.code.clone()])
        .await
        .unwrap();
    assert!(matches!(next(&mut ws).await, ServerMessage::Paired(_)));

    let devices = cli(vec!["devices".into()]).await.unwrap();
    assert!(devices.contains(&id) && devices.contains("online"), "{devices}");
    assert!(devices.contains("esp32s3-cli") && devices.contains("1.2.3"), "{devices}");
    let json = cli(vec!["devices".into(), "--json".into()]).await.unwrap();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json[0]["online"], true);

    cli(vec!["pairing".into(), "revoke".into(), "gadget".into(), id.clone()])
        .await
        .unwrap();
    assert!(matches!(next(&mut ws).await, ServerMessage::Unpaired(_)));
    cli(vec!["forget".into(), id.clone()]).await.unwrap();
    let devices = cli(vec!["devices".into()]).await.unwrap();
    assert!(!devices.contains(&id), "{devices}");
}

async fn next<S>(ws: &mut S) -> ServerMessage
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
        + Unpin,
{
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message in time")
            .expect("open")
            .expect("readable");
        if let Message::Text(text) = message {
            let msg = ServerMessage::decode(&text).unwrap();
            if !matches!(msg, ServerMessage::Ping(_)) {
                return msg;
            }
        }
    }
}
