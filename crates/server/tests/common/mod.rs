//! A real server on loopback and a scriptable gadget to talk to it.

#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod firmware;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_agents::DemoAgent;
use herald_gadget_proto::{
    auth, Auth, Caps, DeviceMessage, DisplayCaps, Hello, ServerMessage, Welcome,
};
use herald_port::{Agent, AgentFactory, Backend, Outbound};
use herald_server::admin::Endpoint;
use herald_server::config::Config;
use herald_server::Server;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const WAIT: Duration = Duration::from_secs(5);

pub struct Harness {
    pub server: Server,
    pub dir: tempfile::TempDir,
    pub url: String,
    pub mobile_url: String,
    pub config: Config,
    _panics: PanicCheck,
}

/// Threads on which something panicked. Tokio catches a panic in a task the server
/// spawned and the test would pass without noticing; each `#[tokio::test]` runs its
/// server's tasks on the test's own thread, so the harness can tell its own.
static PANICKED: std::sync::Mutex<Vec<std::thread::ThreadId>> = std::sync::Mutex::new(Vec::new());

fn watch_for_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Ok(mut threads) = PANICKED.lock() {
                threads.push(std::thread::current().id());
            }
            report(info);
        }));
    });
}

/// Fails the test, as the harness goes, if a task of the server panicked on its thread.
pub struct PanicCheck;

impl PanicCheck {
    fn new() -> PanicCheck {
        watch_for_panics();
        PanicCheck
    }
}

impl Drop for PanicCheck {
    fn drop(&mut self) {
        let here = std::thread::current().id();
        let panicked = PANICKED.lock().is_ok_and(|t| t.contains(&here));
        if panicked && !std::thread::panicking() {
            panic!("a task of the server panicked during this test (see above)");
        }
    }
}

/// The app token test servers accept.
pub const APP_TOKEN: &str = "test-app-token-0123456789abcdef0123";

pub fn test_config() -> Config {
    let mut config = Config::default();
    config.gadget.host = [127, 0, 0, 1].into();
    config.gadget.port = 0;
    config.mobile.host = [127, 0, 0, 1].into();
    config.mobile.port = 0;
    config.mobile.token = Some(herald_server::config::Secret(APP_TOKEN.into()));
    config.admin.port = 0;
    config
}

impl Harness {
    /// A server with the demo agent where every device is allowed.
    pub async fn start() -> Harness {
        Harness::start_with(|c| c.gadget.allow_all_users = true).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Harness {
        let mut config = test_config();
        adjust(&mut config);
        let dir = tempfile::tempdir().unwrap();
        Harness::start_in(config, dir, demo()).await
    }

    pub async fn start_in(config: Config, dir: tempfile::TempDir, agent: AgentFactory) -> Harness {
        let server = Server::start(config.clone(), dir.path(), agent)
            .await
            .unwrap();
        let url = format!("ws://{}/gadget", server.gadget_addr());
        let mobile_url = format!("ws://{}/ws", server.mobile_addr());
        Harness {
            server,
            dir,
            url,
            mobile_url,
            config,
            _panics: PanicCheck::new(),
        }
    }

    /// Stop and start again on the same data directory.
    pub async fn restart(self) -> Harness {
        let Harness {
            server,
            dir,
            config,
            ..
        } = self;
        server.shutdown().await;
        Harness::start_in(config, dir, demo()).await
    }

    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        admin_call(self.dir.path(), method, path, body).await
    }
}

pub fn demo() -> AgentFactory {
    Box::new(|out| Backend::agent(Arc::new(DemoAgent::new(out))))
}

/// An agent that only records what it receives and exposes the port to the test.
pub fn capture() -> (
    AgentFactory,
    tokio::sync::oneshot::Receiver<Arc<dyn Outbound>>,
    tokio::sync::mpsc::UnboundedReceiver<herald_port::Inbound>,
) {
    struct Recorder(tokio::sync::mpsc::UnboundedSender<herald_port::Inbound>);
    #[async_trait::async_trait]
    impl Agent for Recorder {
        async fn handle(&self, inbound: herald_port::Inbound) {
            let _ = self.0.send(inbound);
        }
    }
    let (port_tx, port_rx) = tokio::sync::oneshot::channel();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let factory: AgentFactory = Box::new(move |out| {
        let _ = port_tx.send(out);
        Backend::agent(Arc::new(Recorder(tx)))
    });
    (factory, port_rx, rx)
}

pub async fn admin_call(dir: &Path, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, text) = admin_text(dir, method, path, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// An admin API call, answered as text.
pub async fn admin_text(
    dir: &Path,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let endpoint = Endpoint::discover(dir).unwrap();
    let method = method.to_owned();
    let url = format!("{}{path}", endpoint.url);
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let auth = format!("Bearer {}", endpoint.token);
        let mut response = match (method.as_str(), body) {
            ("GET", _) => agent.get(&url).header("Authorization", &auth).call(),
            ("DELETE", _) => agent.delete(&url).header("Authorization", &auth).call(),
            (_, Some(body)) => agent
                .post(&url)
                .header("Authorization", &auth)
                .send_json(body),
            (_, None) => agent.post(&url).header("Authorization", &auth).send_empty(),
        }
        .unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        (status, text)
    })
    .await
    .unwrap()
}

/// A gadget: a key and what it says in `hello`.
#[derive(Clone)]
pub struct Gadget {
    pub key: [u8; 32],
    pub id: String,
    pub hello: Hello,
}

impl Gadget {
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
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
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
            let next = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("no message in time");
            match next {
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

    /// Assert nothing but pings arrives for `quiet`.
    pub async fn silent_for(&mut self, quiet: Duration) {
        let deadline = tokio::time::Instant::now() + quiet;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return,
                Ok(Some(Ok(Message::Text(text)))) => {
                    let msg = ServerMessage::decode(&text).unwrap();
                    assert!(matches!(msg, ServerMessage::Ping(_)), "unexpected {msg:?}");
                }
                Ok(other) => panic!("unexpected {other:?}"),
            }
        }
    }
}

/// A phone app speaking the mobile protocol, one frame at a time.
pub struct Phone {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Phone {
    pub async fn open(url: &str) -> Phone {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Phone { ws }
    }

    /// Connect and say hello; panics unless `ready` arrives.
    pub async fn connect(
        url: &str,
        token: &str,
        device: &str,
    ) -> (Phone, herald_mobile_proto::ServerFrame) {
        let mut phone = Phone::open(url).await;
        phone.hello(token, device).await;
        let ready = phone.recv().await;
        assert!(
            matches!(ready, herald_mobile_proto::ServerFrame::Ready { .. }),
            "{ready:?}"
        );
        (phone, ready)
    }

    pub async fn hello(&mut self, token: &str, device: &str) {
        let hello = serde_json::json!({"t": "hello", "token": token,
            "device": {"id": device, "name": "Test Phone", "platform": "test"}});
        self.send(hello).await;
    }

    pub async fn send(&mut self, frame: Value) {
        self.ws
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }

    pub async fn text(&mut self, id: &str, text: &str) {
        self.send(serde_json::json!({"t": "text", "id": id, "text": text}))
            .await;
    }

    pub async fn recv(&mut self) -> herald_mobile_proto::ServerFrame {
        loop {
            let next = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("no frame in time");
            match next {
                Some(Ok(Message::Text(text))) => {
                    return herald_mobile_proto::ServerFrame::decode(&text).unwrap()
                }
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}"),
                Some(Ok(_)) => continue,
                other => panic!("connection ended: {other:?}"),
            }
        }
    }

    pub async fn until<T>(
        &mut self,
        mut pick: impl FnMut(herald_mobile_proto::ServerFrame) -> Option<T>,
    ) -> T {
        for _ in 0..500 {
            if let Some(found) = pick(self.recv().await) {
                return found;
            }
        }
        panic!("never got the expected frame");
    }

    /// The next complete reply (chunks joined, streaming edits applied).
    pub async fn reply(&mut self) -> String {
        let mut text = String::new();
        loop {
            if let herald_mobile_proto::ServerFrame::Message(m) = self.recv().await {
                if m.edit {
                    text = m.text;
                } else {
                    text.push_str(&m.text);
                }
                if m.final_ {
                    return text;
                }
            }
        }
    }

    /// The next complete reply, or the error that came before it.
    pub async fn reply_or_error(
        &mut self,
    ) -> Result<String, (herald_mobile_proto::ErrorCode, String)> {
        let mut text = String::new();
        loop {
            match self.recv().await {
                herald_mobile_proto::ServerFrame::Error { code, message } => {
                    return Err((code, message))
                }
                herald_mobile_proto::ServerFrame::Message(m) => {
                    if m.edit {
                        text = m.text;
                    } else {
                        text.push_str(&m.text);
                    }
                    if m.final_ {
                        return Ok(text);
                    }
                }
                _ => {}
            }
        }
    }

    pub async fn closed(&mut self, within: Duration) -> Option<CloseFrame> {
        close_frame(&mut self.ws, within).await
    }

    /// Assert that no frame arrives for `quiet`.
    pub async fn silent_for(&mut self, quiet: Duration) {
        match tokio::time::timeout(quiet, self.ws.next()).await {
            Err(_) => {}
            Ok(Some(Ok(Message::Text(text)))) => panic!("unexpected {text}"),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Ok(other) => panic!("unexpected {other:?}"),
        }
    }
}

/// Wait (at most `within`) for the server to close `ws`; returns its close frame.
async fn close_frame<S>(ws: &mut WebSocketStream<S>, within: Duration) -> Option<CloseFrame>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let wait = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    };
    tokio::time::timeout(within, wait)
        .await
        .expect("not closed in time")
}
