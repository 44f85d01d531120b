//! Plain HTTP on the device listeners and the admin API, as supervisors, proxies,
//! browsers and devices typing a URL send it: health, `426` on the WebSocket paths,
//! `404` elsewhere, and paths with a trailing slash.

use herald_test_support::{Gadget, Harness, Phone, APP_TOKEN, WAIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Send `request` as is and read the whole answer (the server closes after it).
async fn exchange(addr: std::net::SocketAddr, request: &str) -> (u16, String, String) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut answer))
        .await
        .expect("the server closes after answering")
        .unwrap();
    // Lossy: a picture's body is not text, and only its head is looked at.
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a complete response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

#[tokio::test]
async fn health_is_answered_on_every_listener_without_a_token() {
    let h = Harness::start().await;
    let admin = h.server.admin_addr();
    for addr in [h.server.gadget_addr(), h.server.mobile_addr(), admin] {
        let (status, head, body) = exchange(addr, &get("/healthz")).await;
        assert_eq!(status, 200, "{addr}: {head}");
        let health: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            health,
            serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}),
            "health reveals nothing else"
        );
    }
    // The rest of the admin API still wants the token.
    let (status, _, _) = exchange(admin, &get("/v1/info")).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn plain_requests_to_a_websocket_path_get_426_with_a_line_of_explanation() {
    let h = Harness::start().await;
    for (addr, path, what) in [
        (h.server.gadget_addr(), "/gadget", "gadget"),
        (h.server.gadget_addr(), "/gadget/", "gadget"),
        (h.server.mobile_addr(), "/ws", "phone"),
        (h.server.mobile_addr(), "/ws/", "phone"),
    ] {
        let (status, head, body) = exchange(addr, &get(path)).await;
        assert_eq!(status, 426, "{path}: {head}");
        assert!(head.contains("Upgrade: websocket"), "{head}");
        assert!(head.contains("Content-Type: text/plain"), "{head}");
        assert_eq!(body.lines().count(), 1, "one line: {body:?}");
        assert!(body.contains(what) && body.contains("WebSocket"), "{body}");
    }
}

#[tokio::test]
async fn other_paths_and_methods_are_refused_plainly() {
    let h = Harness::start().await;
    let gadgets = h.server.gadget_addr();
    let (status, _, body) = exchange(gadgets, &get("/favicon.ico")).await;
    assert_eq!((status, body.as_str()), (404, "not found\n"));
    let (status, _, _) = exchange(gadgets, &get("/gadget/x")).await;
    assert_eq!(status, 404);
    let post = "POST /elsewhere HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
    let (status, head, _) = exchange(gadgets, post).await;
    assert_eq!(status, 405);
    assert!(head.contains("Allow: GET, HEAD"));
    // HEAD: the same head, no body.
    let (status, head, body) = exchange(gadgets, "HEAD /healthz HTTP/1.1\r\n\r\n").await;
    assert_eq!(status, 200);
    assert!(head.contains("Content-Length: "));
    assert_eq!(body, "");
    // Not HTTP at all (a TLS hello to a plain port, say).
    let (status, _, _) = exchange(gadgets, "\x16\x03\x01\x02\x00\x01\r\n\r\n").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn an_upgrade_with_a_bad_websocket_version_gets_426_and_the_version() {
    let h = Harness::start().await;
    let request =
        "GET /gadget HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n";
    let (status, head, _) = exchange(h.server.gadget_addr(), request).await;
    assert_eq!(status, 426);
    assert!(head.contains("Sec-WebSocket-Version: 13"), "{head}");
}

#[tokio::test]
async fn devices_connect_on_paths_with_a_trailing_slash() {
    let h = Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.mobile.allow_all_users = true;
    })
    .await;
    let gadget = Gadget::new();
    let (mut conn, welcome) = gadget.connect(&format!("{}/", h.url)).await;
    assert!(welcome.paired);
    conn.text("hello").await;
    assert_eq!(conn.reply().await, "You said: hello");

    let (mut phone, _) =
        Phone::connect(&format!("{}/", h.mobile_url), APP_TOKEN, "slash-phone").await;
    phone.text("m1", "hi").await;
    assert_eq!(phone.reply().await, "You said: hi");
}

/// A connection to `to` from 127.0.0.`octet`: each octet is a host of its own.
async fn connect_from(octet: u8, to: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(([127, 0, 0, octet], 0).into())?;
    socket.connect(to).await
}

#[tokio::test]
async fn silent_connections_are_shed_per_address_while_devices_still_connect() {
    let h = Harness::start().await;
    let addr = h.server.gadget_addr();
    let from = |octet: u8| connect_from(octet, addr);
    // A host that opens sockets and never says a word.
    let mut silent = Vec::new();
    for _ in 0..64 {
        silent.push(from(7).await.unwrap());
    }
    // Wait until the server has taken every one of them: a marker connection from
    // another address that it answers was accepted after them.
    let (status, _, _) = exchange(addr, &get("/healthz")).await;
    assert_eq!(status, 200);
    let mut shed = from(7).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, shed.read(&mut byte))
        .await
        .expect("the 65th is closed at once, not left waiting");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    // A device elsewhere connects during the flood.
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("during the flood").await;
    assert_eq!(conn.reply().await, "You said: during the flood");

    // Once the silent ones go (the server notices each close on its own time), their
    // address may connect again.
    drop(silent);
    for attempt in 0.. {
        let socket = from(7).await.unwrap();
        match tokio_tungstenite::client_async(h.url.as_str(), socket).await {
            Ok(_) => break,
            Err(err) if attempt < 100 => {
                let _ = err;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(err) => panic!("still shed after the flood: {err}"),
        }
    }
}

#[tokio::test]
async fn upgraded_sockets_that_never_say_hello_count_against_the_cap() {
    let h = Harness::start().await;
    let addr = h.server.gadget_addr();
    let from = |octet: u8| connect_from(octet, addr);
    // Sixty-four WebSockets from one host, upgraded and then silent.
    let mut silent = Vec::new();
    for _ in 0..64 {
        let socket = from(9).await.unwrap();
        let (ws, _) = tokio_tungstenite::client_async(h.url.as_str(), socket)
            .await
            .unwrap();
        silent.push(ws);
    }
    // The next from that host is shed before its upgrade.
    let socket = from(9).await.unwrap();
    let refused = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::client_async(h.url.as_str(), socket),
    )
    .await
    .expect("shed at once, not left waiting");
    assert!(
        refused.is_err(),
        "a 65th connection in the handshake was let in"
    );
    // Elsewhere, a device still connects.
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("still here").await;
    assert_eq!(conn.reply().await, "You said: still here");
}

#[tokio::test]
async fn the_chat_app_files_are_served_with_their_types_and_never_cached_unchecked() {
    let h = Harness::start().await;
    let phones = h.server.mobile_addr();
    for (path, content_type) in [
        ("/manifest.webmanifest", "application/manifest+json"),
        ("/sw.js", "text/javascript; charset=utf-8"),
        ("/icons/icon-192.png", "image/png"),
        ("/icons/icon-512.png", "image/png"),
        ("/icons/icon-maskable-512.png", "image/png"),
        ("/icons/apple-touch-icon.png", "image/png"),
    ] {
        let (status, head, _) = exchange(phones, &get(path)).await;
        assert_eq!(status, 200, "{path}: {head}");
        assert!(
            head.contains(&format!("Content-Type: {content_type}\r\n")),
            "{path}: {head}"
        );
        // The browser checks the worker's script for an update on every visit only if
        // nothing lets it keep an old copy.
        assert!(
            head.contains("Cache-Control: no-cache\r\n"),
            "{path}: {head}"
        );
        // Its scope is the directory it is served from, `/`: no header widens it.
        assert!(!head.contains("Service-Worker-Allowed"), "{path}: {head}");
    }
    // Only the phone listener serves them.
    let (status, _, _) = exchange(h.server.gadget_addr(), &get("/sw.js")).await;
    assert_eq!(status, 404);
}
