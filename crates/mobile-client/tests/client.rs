//! The client against a real `herald-server` on loopback: a conversation, a refusal
//! that stops it, and reconnection after the server comes back.

use std::sync::Arc;
use std::time::Duration;

use herald_agents::DemoAgent;
use herald_config::{Config, Secret};
use herald_mobile_client::{Backoff, Client, ClientConfig, Event};
use herald_mobile_proto::{ClientFrame, DeviceInfo, ServerFrame, Text};
use herald_port::Backend;
use herald_server::Server;
use herald_test_support::Relay;

const TOKEN: &str = "client-test-token-0123456789abcdef01";
const WAIT: Duration = Duration::from_secs(10);

/// A server on free ports, and the phone port a relay (if any) should lead to.
async fn server(dir: &std::path::Path, relay: Option<&Relay>) -> Server {
    let mut config = Config::default();
    config.gadget.host = [127, 0, 0, 1].into();
    config.gadget.port = 0;
    config.admin.port = 0;
    config.mobile.host = [127, 0, 0, 1].into();
    config.mobile.port = 0;
    config.mobile.token = Some(Secret(TOKEN.into()));
    config.mobile.allow_all_users = true;
    let agent = Box::new(|out| Backend::agent(Arc::new(DemoAgent::new(out))));
    let server = Server::start(config, dir, agent).await.unwrap();
    if let Some(relay) = relay {
        relay.point_to(server.mobile_addr().port());
    }
    server
}

fn config(url: String, token: &str) -> ClientConfig {
    ClientConfig {
        url,
        token: token.into(),
        device: DeviceInfo {
            id: "rust-client".into(),
            name: Some("Test".into()),
            platform: None,
        },
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(400),
        },
    }
}

async fn next(client: &mut Client) -> Event {
    tokio::time::timeout(WAIT, client.next_event())
        .await
        .expect("an event in time")
        .expect("the client is running")
}

async fn reply(client: &mut Client) -> String {
    loop {
        if let Event::Frame(ServerFrame::Message(m)) = next(client).await {
            if m.final_ {
                return m.text;
            }
        }
    }
}

fn text(id: &str, text: &str) -> ClientFrame {
    ClientFrame::Text(Text {
        id: id.into(),
        text: text.into(),
        reply_to: None,
    })
}

#[tokio::test]
async fn talks_and_reconnects_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // The port the client reconnects to is held by the test across the restart.
    let relay = Relay::start();
    let first = server(dir.path(), Some(&relay)).await;
    let url = format!("ws://127.0.0.1:{}/ws", relay.port());
    let mut client = Client::spawn(config(url, TOKEN));
    assert_eq!(
        next(&mut client).await,
        Event::Connected {
            session: "mobile:rust-client".into()
        }
    );
    client.send(text("m1", "hi")).await.unwrap();
    assert_eq!(reply(&mut client).await, "You said: hi");

    relay.point_to(0);
    first.shutdown().await;
    let retry = loop {
        if let Event::Disconnected { retry_in, .. } = next(&mut client).await {
            break retry_in;
        }
    };
    assert!(retry <= Duration::from_millis(400));
    // Sent while away: delivered once the server is back.
    client.send(text("m2", "are you back")).await.unwrap();
    let _second = server(dir.path(), Some(&relay)).await;
    loop {
        if let Event::Connected { .. } = next(&mut client).await {
            break;
        }
    }
    assert_eq!(reply(&mut client).await, "You said: are you back");
}

#[tokio::test]
async fn a_refusal_stops_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path(), None).await;
    let url = format!("ws://{}/ws", server.mobile_addr());
    let mut client = Client::spawn(config(url, "wrong-token"));
    match next(&mut client).await {
        Event::Denied { reason } => assert!(reason.contains("auth_failed"), "{reason}"),
        other => panic!("expected Denied, got {other:?}"),
    }
    let end = tokio::time::timeout(WAIT, client.next_event())
        .await
        .unwrap();
    assert_eq!(end, None, "no retry after close 1008");
}
