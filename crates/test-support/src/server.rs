//! A real server on loopback in the test's process, with the demo agent or one that
//! records what reaches it, and calls to its admin API. The clients that talk to it are
//! in [`crate::gadget`] and [`crate::phone`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use herald_admin_api::{AdminClient, Method};
use herald_agents::DemoAgent;
use herald_config::Config;
use herald_port::{Agent, AgentFactory, Backend, Outbound};
use herald_server::Server;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// How long a client waits for the next frame before the test fails.
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
    config.mobile.token = Some(herald_config::Secret(APP_TOKEN.into()));
    config.admin.port = 0;
    // Herald's own speaker cues stay out of the tests of what the agent says; the tests
    // of the cues turn them on.
    config.gadget.cue_after_s = 0;
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
    let client = AdminClient::connect(dir).unwrap();
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let path = path.to_owned();
    let reply = tokio::task::spawn_blocking(move || client.request(method, &path, body.as_ref()))
        .await
        .unwrap()
        .unwrap();
    (reply.status, reply.body)
}

/// Wait (at most `within`) for the server to close `ws`; returns its close frame.
pub(crate) async fn close_frame<S>(
    ws: &mut WebSocketStream<S>,
    within: Duration,
) -> Option<CloseFrame>
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
