//! A gadget on the wire: a key, its `hello`, and a connection that sends and receives
//! gadget protocol messages one at a time (pings answered), for tests that look at every
//! frame, and send ones no device would.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::{
    auth, Auth, Caps, DeviceMessage, DisplayCaps, Hello, ServerMessage, Welcome,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::server::close_frame;
use crate::wait::promptly;

/// A gadget: a key and what it says in `hello`.
#[derive(Clone)]
pub struct Gadget {
    pub key: [u8; 32],
    pub id: String,
    pub hello: Hello,
}

impl Gadget {
    /// A gadget with a fresh random key: not a default, a new device each call.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Gadget {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).unwrap();
        let id = auth::device_id(&key);
        let hello = Hello {
            proto: 1,
            device_id: id.clone(),
            name: Some("Test Gadget".into()),
            board: Some("esp32s3-test".into()),
            firmware: Some("0.1.0".into()),
            token: None,
            caps: Caps {
                display: Some(DisplayCaps {
                    width: Some(320),
                    height: Some(240),
                    ..Default::default()
                }),
                ..Default::default()
            },
            actions: Vec::new(),
            sensors: Default::default(),
        };
        Gadget { key, id, hello }
    }

    /// Open a WebSocket to `url` without saying anything yet.
    pub async fn open(url: &str) -> Conn {
        let (ws, _) = promptly(tokio_tungstenite::connect_async(url))
            .await
            .unwrap();
        Conn { ws }
    }

    /// Connect and complete the handshake; panics unless `welcome` arrives.
    pub async fn connect(&self, url: &str) -> (Conn, Welcome) {
        let mut conn = Gadget::open(url).await;
        let welcome = self
            .handshake(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        (conn, welcome)
    }

    /// hello → challenge → auth, answering with the key or a MAC as the server asks.
    pub async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        conn: &mut Conn<S>,
    ) -> Result<Welcome, ServerMessage> {
        conn.send(&DeviceMessage::Hello(self.hello.clone())).await;
        let challenge = match conn.recv().await {
            ServerMessage::Challenge(c) => c,
            other => return Err(other),
        };
        let proof = if challenge.enrolled {
            let mac = auth::auth_mac(&self.key, &self.id, &challenge.nonce);
            Auth {
                key: None,
                mac: Some(auth::b64(&mac)),
            }
        } else {
            Auth {
                key: Some(auth::b64(&self.key)),
                mac: None,
            }
        };
        conn.send(&DeviceMessage::Auth(proof)).await;
        match conn.recv().await {
            ServerMessage::Welcome(w) => Ok(w),
            other => Err(other),
        }
    }
}

/// What a gadget receives: a text message or a binary frame.
pub enum Incoming {
    Msg(ServerMessage),
    Frame(Vec<u8>),
}

pub struct Conn<S = MaybeTlsStream<TcpStream>> {
    pub ws: WebSocketStream<S>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub async fn send(&mut self, msg: &DeviceMessage) {
        self.send_raw(&msg.encode()).await;
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.ws.send(Message::Text(text.into())).await.unwrap();
    }

    pub async fn text(&mut self, text: &str) {
        self.send_raw(&serde_json::json!({"type": "text", "id": "t1", "text": text}).to_string())
            .await;
    }

    /// The next server message other than `ping` (answered like a device would);
    /// binary frames are skipped.
    pub async fn recv(&mut self) -> ServerMessage {
        loop {
            if let Incoming::Msg(msg) = self.next().await {
                return msg;
            }
        }
    }

    /// The next server message other than `ping`, or binary frame.
    pub async fn next(&mut self) -> Incoming {
        loop {
            match promptly(self.ws.next()).await {
                Some(Ok(Message::Text(text))) => {
                    let msg = ServerMessage::decode(&text).unwrap();
                    if let ServerMessage::Ping(ping) = &msg {
                        let pong = serde_json::json!({"type": "pong", "ts": ping.ts});
                        self.send_raw(&pong.to_string()).await;
                        continue;
                    }
                    return Incoming::Msg(msg);
                }
                Some(Ok(Message::Binary(data))) => return Incoming::Frame(data.to_vec()),
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}"),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}"),
            }
        }
    }

    /// The next text frame as it came, pings included, without a time limit.
    pub async fn ws_text(&mut self) -> String {
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Text(text))) => return text.to_string(),
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}"),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}"),
            }
        }
    }

    /// Skip messages until one matches `pick`.
    pub async fn until<T>(&mut self, mut pick: impl FnMut(ServerMessage) -> Option<T>) -> T {
        for _ in 0..200 {
            if let Some(found) = pick(self.recv().await) {
                return found;
            }
        }
        panic!("never got the expected message");
    }

    /// The final `reply` of the current turn.
    pub async fn reply(&mut self) -> String {
        self.until(|m| match m {
            ServerMessage::Reply(r) if !r.interim => Some(r.text),
            _ => None,
        })
        .await
    }

    /// Wait for the server to close; returns the close frame.
    pub async fn closed(&mut self, within: Duration) -> Option<CloseFrame> {
        close_frame(&mut self.ws, within).await
    }

    /// On a paused clock: let `quiet` pass, then show nothing came meanwhile
    /// ([`Conn::nothing_before_pong`]).
    pub async fn quiet_for(&mut self, quiet: Duration) {
        tokio::time::advance(quiet).await;
        self.nothing_before_pong().await;
    }

    /// Show that the server sent nothing but heartbeats so far: the answer to the
    /// device's own ping, which the session writes after everything it handled before,
    /// comes first. A marker, not a wait: what arrives late cannot slip past it.
    pub async fn nothing_before_pong(&mut self) {
        self.send_raw(r#"{"type":"ping","ts":1}"#).await;
        loop {
            match promptly(self.ws.next()).await {
                Some(Ok(Message::Text(text))) => match ServerMessage::decode(&text).unwrap() {
                    ServerMessage::Pong(_) => return,
                    ServerMessage::Ping(_) => {}
                    other => panic!("before the pong: {other:?}"),
                },
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("before the pong: {other:?}"),
            }
        }
    }
}
