//! The gadget handshake against a real server on loopback: every refusal code, TOFU
//! enrollment, impostors, replacement, the store across a restart, TLS.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::{auth, limits, Auth, DeviceMessage, ErrorCode, ServerMessage};
use herald_test_support::{demo, promptly, test_config, Conn, Gadget, Harness, WAIT};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// The server must answer `error{code}` and close with 1008 and the code as reason.
async fn expect_refusal<S: AsyncRead + AsyncWrite + Unpin>(conn: &mut Conn<S>, code: ErrorCode) {
    match conn.recv().await {
        ServerMessage::Error(e) => assert_eq!(e.code, code, "{e:?}"),
        other => panic!("expected error {code:?}, got {other:?}"),
    }
    let close = conn.closed(WAIT).await.expect("a close frame");
    assert_eq!(close.code, CloseCode::Policy);
    assert_eq!(close.reason.as_str(), code.as_str());
}

#[tokio::test]
async fn enrolls_then_authenticates_with_a_mac() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    let (conn, welcome) = gadget.connect(&h.url).await;
    assert!(welcome.paired);
    assert_eq!(welcome.proto, 1);
    assert_eq!(welcome.heartbeat_s, 20);
    assert_eq!(welcome.session.len(), 12);
    assert!(welcome.session.bytes().all(|b| b.is_ascii_hexdigit()));
    drop(conn);

    // Second contact: challenge says enrolled, and the MAC is accepted.
    let mut conn = Gadget::open(&h.url).await;
    conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
    let ServerMessage::Challenge(challenge) = conn.recv().await else {
        panic!("no challenge")
    };
    assert!(challenge.enrolled);
    assert_eq!(
        base64_len(&challenge.nonce),
        16,
        "nonce is 16 bytes of base64"
    );
    let mac = auth::auth_mac(&gadget.key, &gadget.id, &challenge.nonce);
    conn.send(&DeviceMessage::Auth(Auth {
        key: None,
        mac: Some(auth::b64(&mac)),
    }))
    .await;
    assert!(matches!(conn.recv().await, ServerMessage::Welcome(_)));
}

fn base64_len(text: &str) -> usize {
    base64_simd::STANDARD.decode_to_vec(text).unwrap().len()
}

#[tokio::test]
async fn subprotocol_is_echoed_and_optional() {
    let h = Harness::start().await;
    let mut request = h.url.as_str().into_client_request().unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "hermes-gadget.v1".parse().unwrap(),
    );
    let (_ws, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(
        response.headers().get("Sec-WebSocket-Protocol").unwrap(),
        "hermes-gadget.v1"
    );
    let (_ws, response) = tokio_tungstenite::connect_async(h.url.as_str())
        .await
        .unwrap();
    assert!(response.headers().get("Sec-WebSocket-Protocol").is_none());
}

#[tokio::test]
async fn other_paths_get_404() {
    let h = Harness::start().await;
    let url = h.url.replace("/gadget", "/elsewhere");
    match tokio_tungstenite::connect_async(url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 404)
        }
        other => panic!("expected 404, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_first_frames_are_protocol_errors() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    let mut bad_proto = serde_json::to_value(DeviceMessage::Hello(gadget.hello.clone())).unwrap();
    bad_proto["proto"] = 2.into();
    let mut bad_id = bad_proto.clone();
    bad_id["proto"] = 1.into();
    bad_id["device_id"] = "hg-NOTHEX".into();
    let mut long_name = bad_id.clone();
    long_name["device_id"] = gadget.id.clone().into();
    long_name["name"] = "x".repeat(65).into();
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let cases = [
        "not json".to_owned(),
        "[1,2]".to_owned(),
        r#"{"no_type": 1}"#.to_owned(),
        r#"{"type": "auth", "key": "AAAA"}"#.to_owned(),
        deep,
        bad_proto.to_string(),
        bad_id.to_string(),
        long_name.to_string(),
    ];
    for case in cases {
        let mut conn = Gadget::open(&h.url).await;
        conn.send_raw(&case).await;
        expect_refusal(&mut conn, ErrorCode::Protocol).await;
    }
    // A binary frame where hello should be.
    let mut conn = Gadget::open(&h.url).await;
    conn.ws
        .send(Message::Binary(vec![1, 2, 3, 4].into()))
        .await
        .unwrap();
    expect_refusal(&mut conn, ErrorCode::Protocol).await;
}

/// Let `quiet` pass, then show the server still waits: a WebSocket ping, which the
/// handshake passes over, is answered before anything else.
async fn still_waiting_after<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<S>,
    quiet: Duration,
) {
    tokio::time::advance(quiet).await;
    conn.ws
        .send(Message::Ping(Default::default()))
        .await
        .unwrap();
    let next = promptly(conn.ws.next()).await;
    assert!(matches!(next, Some(Ok(Message::Pong(_)))), "{next:?}");
}

/// The next text is the timeout error.
async fn timed_out<S: AsyncRead + AsyncWrite + Unpin>(conn: &mut Conn<S>) {
    let msg = ServerMessage::decode(&promptly(conn.ws_text()).await).unwrap();
    assert!(
        matches!(msg, ServerMessage::Error(ref e) if e.code == ErrorCode::Timeout),
        "{msg:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn silence_during_the_handshake_times_out() {
    let step = Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS);
    let tick = Duration::from_millis(1);
    let h = Harness::start().await;
    // Nothing sent: the server gives up after the step, not a tick before.
    let mut conn = Gadget::open(&h.url).await;
    still_waiting_after(&mut conn, step - tick).await;
    tokio::time::advance(tick).await;
    timed_out(&mut conn).await;

    // Silence after hello (no auth) times out too.
    let gadget = Gadget::new();
    let mut conn = Gadget::open(&h.url).await;
    conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
    assert!(matches!(conn.recv().await, ServerMessage::Challenge(_)));
    still_waiting_after(&mut conn, step - tick).await;
    tokio::time::advance(tick).await;
    timed_out(&mut conn).await;
}

#[tokio::test]
async fn access_token_is_checked() {
    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.gadget.access_token = Some(herald_config::Secret("open sesame".into()));
    })
    .await;
    let mut gadget = Gadget::new();
    for token in [None, Some("wrong")] {
        gadget.hello.token = token.map(str::to_owned);
        let mut conn = Gadget::open(&h.url).await;
        conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
        expect_refusal(&mut conn, ErrorCode::BadToken).await;
    }
    gadget.hello.token = Some("open sesame".into());
    gadget.connect(&h.url).await;
}

#[tokio::test]
async fn impostors_are_refused() {
    let h = Harness::start().await;
    let owner = Gadget::new();
    owner.connect(&h.url).await;

    // An impostor claims the owner's id but has another key: it cannot make the MAC.
    let mut impostor = Gadget::new();
    impostor.hello = owner.hello.clone();
    impostor.id = owner.id.clone();
    let mut conn = Gadget::open(&h.url).await;
    let refused = impostor.handshake(&mut conn).await.unwrap_err();
    assert!(matches!(refused, ServerMessage::Error(ref e) if e.code == ErrorCode::AuthFailed));

    // On first contact, a key that does not hash to the claimed id is refused...
    let fresh = Gadget::new();
    let other_key = Gadget::new().key;
    let mut conn = Gadget::open(&h.url).await;
    conn.send(&DeviceMessage::Hello(fresh.hello.clone())).await;
    assert!(matches!(conn.recv().await, ServerMessage::Challenge(c) if !c.enrolled));
    conn.send(&DeviceMessage::Auth(Auth {
        key: Some(auth::b64(&other_key)),
        mac: None,
    }))
    .await;
    expect_refusal(&mut conn, ErrorCode::AuthFailed).await;

    // ...and so are a 16-byte key, bad base64, and a MAC where the key should be.
    for proof in [
        Auth {
            key: Some(auth::b64(&[7u8; 16])),
            mac: None,
        },
        Auth {
            key: Some("not*base64".into()),
            mac: None,
        },
        Auth {
            key: None,
            mac: Some(auth::b64(&[0u8; 32])),
        },
    ] {
        let mut conn = Gadget::open(&h.url).await;
        conn.send(&DeviceMessage::Hello(fresh.hello.clone())).await;
        assert!(matches!(conn.recv().await, ServerMessage::Challenge(_)));
        conn.send(&DeviceMessage::Auth(proof)).await;
        expect_refusal(&mut conn, ErrorCode::AuthFailed).await;
    }
    // None of those attempts enrolled the fresh device.
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    let ids: Vec<&str> = devices
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [owner.id.as_str()]);
}

#[tokio::test]
async fn enrollment_is_rationed_per_address() {
    let h = Harness::start().await;
    let mut waiting = Vec::new();
    for _ in 0..4 {
        let gadget = Gadget::new();
        let mut conn = Gadget::open(&h.url).await;
        conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
        assert!(matches!(conn.recv().await, ServerMessage::Challenge(_)));
        waiting.push((gadget, conn));
    }
    let late = Gadget::new();
    let mut conn = Gadget::open(&h.url).await;
    conn.send(&DeviceMessage::Hello(late.hello.clone())).await;
    expect_refusal(&mut conn, ErrorCode::Busy).await;

    // A known device is not held up by strangers enrolling.
    // Finishing one enrollment frees a place.
    let (gadget, mut conn) = waiting.pop().unwrap();
    conn.send(&DeviceMessage::Auth(Auth {
        key: Some(auth::b64(&gadget.key)),
        mac: None,
    }))
    .await;
    assert!(matches!(conn.recv().await, ServerMessage::Welcome(_)));
    late.connect(&h.url).await;
}

/// A gadget connection from `127.0.0.N`, for tests that count per source address.
async fn open_from(url: &str, addr: std::net::SocketAddr, last_octet: u8) -> Conn<TcpStream> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, last_octet], 0).into()).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(url, tcp).await.unwrap();
    Conn { ws }
}

#[tokio::test]
async fn unpaired_devices_wait_four_per_address_and_sixteen_in_all() {
    let h = Harness::start_with(|_| {}).await;
    let addr = h.server.gadget_addr();
    let mut waiting = Vec::new();
    // One address: four new devices enroll and wait, the fifth and every later one are
    // busy and leave no record.
    for _ in 0..4 {
        let gadget = Gadget::new();
        let mut conn = open_from(&h.url, addr, 2).await;
        let welcome = gadget.handshake(&mut conn).await.unwrap();
        assert!(!welcome.paired);
        waiting.push((gadget, conn));
    }
    for _ in 0..20 {
        let mut conn = open_from(&h.url, addr, 2).await;
        conn.send(&DeviceMessage::Hello(Gadget::new().hello)).await;
        expect_refusal(&mut conn, ErrorCode::Busy).await;
    }
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(devices.as_array().unwrap().len(), 4, "{devices}");

    // A device that waits keeps its place when it comes back, also while others wait.
    let (gadget, conn) = waiting.pop().unwrap();
    drop(conn);
    let mut conn = open_from(&h.url, addr, 2).await;
    assert!(!gadget.handshake(&mut conn).await.unwrap().paired);
    waiting.push((gadget, conn));

    // Sixteen in all: three more addresses of four.
    for octet in 3..6 {
        for _ in 0..4 {
            let gadget = Gadget::new();
            let mut conn = open_from(&h.url, addr, octet).await;
            gadget.handshake(&mut conn).await.unwrap();
            waiting.push((gadget, conn));
        }
    }
    let stranger = Gadget::new();
    let mut conn = open_from(&h.url, addr, 9).await;
    conn.send(&DeviceMessage::Hello(stranger.hello.clone()))
        .await;
    expect_refusal(&mut conn, ErrorCode::Busy).await;

    // Approving one frees its place.
    let (approved, mut approved_conn) = waiting.remove(0);
    let (status, _) = h
        .admin(
            "POST",
            "/v1/pairing/approve",
            Some(serde_json::json!({"platform": "gadget", "user_id": approved.id})),
        )
        .await;
    assert_eq!(status, 200);
    approved_conn
        .until(|m| matches!(m, ServerMessage::Paired(_)).then_some(()))
        .await;
    let mut conn = open_from(&h.url, addr, 9).await;
    assert!(!stranger.handshake(&mut conn).await.unwrap().paired);
    // And forgetting a waiting device frees another.
    let (forgotten, _conn) = waiting.remove(0);
    let (status, _) = h
        .admin("DELETE", &format!("/v1/devices/{}", forgotten.id), None)
        .await;
    assert_eq!(status, 200);
    let mut conn = open_from(&h.url, addr, 10).await;
    assert!(!Gadget::new().handshake(&mut conn).await.unwrap().paired);
}

#[tokio::test]
async fn guessing_the_access_token_is_throttled_per_address() {
    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.gadget.access_token = Some(herald_config::Secret("right-token".into()));
    })
    .await;
    let addr = h.server.gadget_addr();
    let mut gadget = Gadget::new();
    for _ in 0..10 {
        gadget.hello.token = Some("guess".into());
        let mut conn = open_from(&h.url, addr, 30).await;
        conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
        expect_refusal(&mut conn, ErrorCode::BadToken).await;
    }
    // Now even the right token is turned away from that address for a while...
    gadget.hello.token = Some("right-token".into());
    let mut conn = open_from(&h.url, addr, 30).await;
    conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
    expect_refusal(&mut conn, ErrorCode::Busy).await;
    // ...while other addresses are not held up.
    let mut conn = open_from(&h.url, addr, 31).await;
    assert!(gadget.handshake(&mut conn).await.unwrap().paired);
}

#[tokio::test]
async fn a_second_connection_replaces_the_first() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    let (mut first, _) = gadget.connect(&h.url).await;
    let (mut second, _) = gadget.connect(&h.url).await;
    let close = first.closed(WAIT).await.expect("close frame");
    assert_eq!(close.code, CloseCode::Normal);
    // The new connection is the live one.
    second.text("still here").await;
    assert_eq!(second.reply().await, "You said: still here");
}

#[tokio::test]
async fn the_store_survives_a_restart() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    gadget.connect(&h.url).await;
    let h = h.restart().await;
    let mut conn = Gadget::open(&h.url).await;
    let welcome = gadget.handshake(&mut conn).await.unwrap();
    assert!(welcome.paired);
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    assert_eq!(devices[0]["id"], gadget.id.as_str());
    assert_eq!(devices[0]["board"], "esp32s3-test");
    assert_eq!(devices[0]["online"], true);
}

/// Whether the challenge to this gadget's hello says the server knows it.
async fn challenge_says_enrolled(h: &Harness, gadget: &Gadget) -> bool {
    let mut conn = Gadget::open(&h.url).await;
    conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
    match conn.recv().await {
        ServerMessage::Challenge(challenge) => challenge.enrolled,
        other => panic!("no challenge: {other:?}"),
    }
}

#[tokio::test]
async fn enrolled_devices_are_known_after_a_restart_and_not_once_forgotten() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    gadget.connect(&h.url).await;
    assert!(challenge_says_enrolled(&h, &gadget).await);
    let h = h.restart().await;
    assert!(
        challenge_says_enrolled(&h, &gadget).await,
        "after a restart"
    );

    let forget = format!("/v1/devices/{}", gadget.id);
    assert_eq!(h.admin("DELETE", &forget, None).await.0, 200);
    assert!(
        !challenge_says_enrolled(&h, &gadget).await,
        "asked for its key"
    );
    // It enrolls again with its key, and is known from then on.
    gadget.connect(&h.url).await;
    assert!(challenge_says_enrolled(&h, &gadget).await);
}

#[tokio::test]
async fn a_second_server_on_the_same_data_directory_refuses_to_start() {
    let h = Harness::start().await;
    let second = herald_server::Server::start(h.config.clone(), h.dir.path(), demo()).await;
    match second {
        Err(err @ herald_server::StartError::AlreadyRunning(_)) => {
            assert!(err.to_string().contains("already running"), "{err}")
        }
        Err(other) => panic!("refused for the wrong reason: {other}"),
        Ok(_) => panic!("two servers on one data directory"),
    }
    // The first is untouched and still serves; once it stops, the directory is free.
    Gadget::new().connect(&h.url).await;
    let h = h.restart().await;
    Gadget::new().connect(&h.url).await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_data_directory_others_may_write_to_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let started = herald_server::Server::start(test_config(), dir.path(), demo()).await;
    let err = started.err().expect("a shared data directory is refused");
    assert!(err.to_string().contains("chmod 700"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn forget_lets_a_device_enroll_again() {
    let h = Harness::start().await;
    let gadget = Gadget::new();
    let (mut conn, _) = gadget.connect(&h.url).await;
    let (status, _) = h
        .admin("DELETE", &format!("/v1/devices/{}", gadget.id), None)
        .await;
    assert_eq!(status, 200);
    conn.closed(WAIT).await;
    let mut conn = Gadget::open(&h.url).await;
    conn.send(&DeviceMessage::Hello(gadget.hello.clone())).await;
    assert!(matches!(conn.recv().await, ServerMessage::Challenge(c) if !c.enrolled));
    let (status, _) = h
        .admin("DELETE", &format!("/v1/devices/{}", gadget.id), None)
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_forgotten_device_must_pair_again() {
    let h = Harness::start_in(test_config(), tempfile::tempdir().unwrap(), demo()).await;
    let gadget = Gadget::new();
    let (mut conn, welcome) = gadget.connect(&h.url).await;
    assert!(!welcome.paired);
    let pairing = conn
        .until(|m| match m {
            ServerMessage::Pairing(p) => Some(p),
            _ => None,
        })
        .await;
    let approve = serde_json::json!({"platform": "gadget", "code": pairing.code});
    let (status, _) = h.admin("POST", "/v1/pairing/approve", Some(approve)).await;
    assert_eq!(status, 200);
    conn.until(|m| matches!(m, ServerMessage::Paired(_)).then_some(()))
        .await;
    drop(conn);
    let (conn, welcome) = gadget.connect(&h.url).await;
    assert!(welcome.paired, "approved, and remembered");

    let (status, _) = h
        .admin("DELETE", &format!("/v1/devices/{}", gadget.id), None)
        .await;
    assert_eq!(status, 200);
    drop(conn);
    let (_conn, welcome) = gadget.connect(&h.url).await;
    assert!(!welcome.paired, "forgetting a device forgets its pairing");
}

#[tokio::test]
async fn admin_api_needs_the_token() {
    let h = Harness::start().await;
    let endpoint = herald_admin_api::Endpoint::discover(h.dir.path()).unwrap();
    let url = format!("{}/v1/devices", endpoint.url);
    let status = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let no_token = agent.get(&url).call().unwrap().status().as_u16();
        let wrong = agent
            .get(&url)
            .header("Authorization", "Bearer nope")
            .call()
            .unwrap()
            .status()
            .as_u16();
        (no_token, wrong)
    })
    .await
    .unwrap();
    assert_eq!(status, (401, 401));
    assert!(endpoint.url.starts_with("http://127.0.0.1:"));
}

#[tokio::test]
async fn serves_wss_with_a_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();

    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.tls_cert = Some(cert_path.clone());
        c.tls_key = Some(key_path.clone());
    })
    .await;
    assert!(h.server.gadget_url().starts_with("wss://"));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client));
    let tcp = tokio::net::TcpStream::connect(h.server.gadget_addr())
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let url = format!("wss://localhost:{}/gadget", h.server.gadget_addr().port());
    let (ws, _) = tokio_tungstenite::client_async(url, tls).await.unwrap();
    let mut conn = Conn { ws };
    let gadget = Gadget::new();
    let welcome = gadget.handshake(&mut conn).await.unwrap();
    assert!(welcome.paired);

    // Plain text to a TLS port gets nowhere.
    assert!(tokio_tungstenite::connect_async(h.url.clone())
        .await
        .is_err());
}

#[tokio::test]
async fn a_bad_certificate_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bogus.pem");
    std::fs::write(&bogus, "not a certificate").unwrap();
    for (cert, key) in [
        (dir.path().join("missing.pem"), bogus.clone()),
        (bogus.clone(), bogus.clone()),
    ] {
        let mut config = test_config();
        config.tls_cert = Some(cert);
        config.tls_key = Some(key);
        let result = herald_server::Server::start(config, dir.path(), demo()).await;
        let err = result.err().expect("start-up must fail").to_string();
        assert!(err.contains("TLS"), "{err}");
    }
}

/// The store's record of a gadget, as the admin API shows it.
async fn device_record(h: &Harness, id: &str) -> serde_json::Value {
    let (_, devices) = h.admin("GET", "/v1/devices", None).await;
    let found = devices
        .as_array()
        .and_then(|all| all.iter().find(|d| d["id"] == id));
    found
        .cloned()
        .unwrap_or_else(|| panic!("{id} not in {devices}"))
}

/// Waits until the admin API shows the gadget offline (its `last_seen` then written).
async fn offline_record(h: &Harness, id: &str) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let record = device_record(h, id).await;
        if record["online"] == false {
            return record;
        }
        assert!(started.elapsed() < WAIT, "still online: {record}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn each_handshake_records_when_the_device_was_seen_and_what_it_now_says() {
    let h = Harness::start().await;
    let mut gadget = Gadget::new();
    let (conn, _) = gadget.connect(&h.url).await;
    let enrolled = device_record(&h, &gadget.id).await;
    assert_eq!(enrolled["firmware"], "0.1.0");
    assert!(enrolled["last_seen"].as_u64().is_some(), "{enrolled}");
    drop(conn);
    let left = offline_record(&h, &gadget.id).await["last_seen"]
        .as_u64()
        .unwrap();

    // The same profile again: only the time changes.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (conn, _) = gadget.connect(&h.url).await;
    let back = device_record(&h, &gadget.id).await;
    assert!(back["last_seen"].as_u64().unwrap() > left, "{back}");
    assert_eq!(back["name"], "Test Gadget");
    drop(conn);
    offline_record(&h, &gadget.id).await;

    // After a firmware update and a rename, the store learns both at the handshake.
    gadget.hello.firmware = Some("0.2.0".into());
    gadget.hello.name = Some("Hall Gadget".into());
    let (_conn, _) = gadget.connect(&h.url).await;
    let updated = device_record(&h, &gadget.id).await;
    assert_eq!(updated["firmware"], "0.2.0");
    assert_eq!(updated["name"], "Hall Gadget");
}
