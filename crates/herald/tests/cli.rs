//! The `herald` binary as a user runs it: `serve` in one process, the other commands
//! in others, talking through the admin API; a gadget and `herald chat` as clients.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use herald_gadget_proto::{Caps, DeviceMessage, OtaCaps, OtaError, OtaErrorCode, ServerMessage};
use herald_test_support::firmware::firmware_image;
use herald_test_support::{Conn, Gadget};

use common::{chat_in, herald_in, stdout, Serve, BIN};

#[test]
fn help_lists_the_subcommands() {
    let help = stdout(&Command::new(BIN).arg("--help").output().unwrap());
    for command in [
        "serve", "info", "devices", "forget", "pairing", "chat", "phones", "ota", "sim",
    ] {
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
    let serve = Serve::start();
    let url = serve.url("Phones connect to:");
    let (mut chat, mut input, mut output) = chat_in(
        serve.dir.path(),
        &["--url", &url, "--device-id", "cli-test"],
    );
    let mut read_until = |needle: &str| output.line_with(needle);
    read_until("Connected (mobile:cli-test)");
    // A new phone's first message earns a pairing code, which the owner approves.
    input.write_all(b"hello\n").unwrap();
    let line = read_until("Pairing code:");
    let code = line.rsplit(' ').next().unwrap().trim().to_owned();
    stdout(&serve.herald(&["pairing", "approve", "mobile", &code]));
    // Told at once, and the message that got the code is answered after all.
    read_until("< This app is now paired with the agent.");
    read_until("< You said: hello");
    input.write_all(b"hello from the terminal\n").unwrap();
    read_until("< You said: hello from the terminal");
    // A card's answer is told by its label, not its id.
    input.write_all(b"/approve ls -la\n").unwrap();
    read_until("Allow once");
    input.write_all(b"1\n").unwrap();
    read_until("(answered: Allow once)");
    drop(input);
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
    let (id, mut ws) = enroll_gadget(&url, Caps::default()).await;
    let ServerMessage::Pairing(pairing) = ws.recv().await else {
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
    assert!(
        list.contains(&format!("pending {}", pairing.code)),
        "{list}"
    );
    // Owned by the server's one user (the app token's): named by its id.
    let token = std::fs::read_to_string(dir.join("mobile.token")).unwrap();
    let owner = herald_mobile_proto::user_id_for_token(token.trim());
    let approve = |owner: &str| {
        let args = [
            "pairing",
            "approve",
            "gadget",
            &pairing.code,
            "--owner",
            owner,
        ];
        let dir = dir.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            herald_in(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>())
        })
    };
    let refused = approve("dave").await.unwrap();
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("nobody called dave"), "{why}");
    let approved = stdout(&approve(&owner).await.unwrap());
    assert!(approved.contains(&format!("{owner}'s")), "{approved}");
    assert!(matches!(ws.recv().await, ServerMessage::Paired(_)));

    let devices = cli(vec!["devices".into()]).await.unwrap();
    assert!(
        devices.contains(&id) && devices.contains("online"),
        "{devices}"
    );
    assert!(
        devices.contains("esp32s3-cli") && devices.contains("1.2.3"),
        "{devices}"
    );
    assert!(devices.contains(&owner), "the owner column: {devices}");
    let json = cli(vec!["devices".into(), "--json".into()]).await.unwrap();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json[0]["online"], true);
    assert_eq!(json[0]["owner"], owner.as_str());
    let cleared = cli(vec!["owner".into(), id.clone(), "--clear".into()])
        .await
        .unwrap();
    assert!(cleared.contains("nobody in particular"), "{cleared}");
    let json = cli(vec!["devices".into(), "--json".into()]).await.unwrap();
    assert!(json.contains(r#""owner": null"#), "{json}");

    cli(vec![
        "pairing".into(),
        "revoke".into(),
        "gadget".into(),
        id.clone(),
    ])
    .await
    .unwrap();
    assert!(matches!(ws.recv().await, ServerMessage::Unpaired(_)));
    cli(vec!["forget".into(), id.clone()]).await.unwrap();
    let devices = cli(vec!["devices".into()]).await.unwrap();
    assert!(!devices.contains(&id), "{devices}");
}

/// A gadget making first contact (it sends its key), welcomed but not paired: its id
/// and its connection.
async fn enroll_gadget(url: &str, caps: Caps) -> (String, Conn) {
    let mut gadget = Gadget::new();
    gadget.hello.name = Some("CLI gadget".into());
    gadget.hello.board = Some("esp32s3-cli".into());
    gadget.hello.firmware = Some("1.2.3".into());
    gadget.hello.caps = caps;
    let (conn, welcome) = gadget.connect(url).await;
    assert!(!welcome.paired);
    (gadget.id, conn)
}

/// An application image the server accepts, built for `board`.
fn app_image(board: &str) -> Vec<u8> {
    firmware_image(board, "9.9.9", vec![0; 1024])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ota_push_checks_the_image_and_wait_fails_with_the_device() {
    let serve = Serve::start();
    let url = serve.url("Gadgets connect to:");
    let caps = Caps {
        ota: Some(OtaCaps { max_size: 1 << 20 }),
        ..Caps::default()
    };
    let (id, mut ws) = enroll_gadget(&url, caps).await;

    let dir = serve.dir.path().to_owned();
    let wrong = dir.join("wrong.bin");
    std::fs::write(&wrong, app_image("esp32s3-other")).unwrap();
    let refused = serve.herald(&["ota", "push", &id, wrong.to_str().unwrap()]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("refused (wrong_board)"), "{stderr}");

    let good = dir.join("good.bin");
    std::fs::write(&good, app_image("esp32s3-cli")).unwrap();
    let args = ["ota", "push", &id, good.to_str().unwrap(), "--wait"].map(str::to_owned);
    let waiting =
        tokio::task::spawn_blocking(move || herald_in(&dir, &args.each_ref().map(String::as_str)));
    let offer = loop {
        if let ServerMessage::OtaOffer(offer) = ws.recv().await {
            break offer;
        }
    };
    assert_eq!(offer.version, "9.9.9");
    let error = DeviceMessage::OtaError(OtaError {
        code: OtaErrorCode::Flash,
        message: Some("write failed".into()),
    });
    ws.send(&error).await;
    let waited = waiting.await.unwrap();
    assert!(!waited.status.success(), "--wait exits non-zero on failure");
    let stderr = String::from_utf8_lossy(&waited.stderr);
    assert!(stderr.contains("Sending firmware 9.9.9"), "{stderr}");
    assert!(
        stderr.contains("the device reported flash: write failed"),
        "{stderr}"
    );

    let status = stdout(&serve.herald(&["ota", "status"]));
    assert!(
        status.contains(&id) && status.contains("failed") && status.contains("1/3"),
        "{status}"
    );
}
