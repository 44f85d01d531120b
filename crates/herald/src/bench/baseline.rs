//! The bare baseline: a WebSocket server with no protocol work at all. It accepts any
//! path, answers every text frame with one short text frame, and holds connections
//! until the client goes. The bench drives it with the same client code as Herald, in
//! the same run, so Herald's figures read as a ratio of what this machine does with the
//! same library and the same clients, whatever else is running on it.
//!
//! It runs inside the bench process (its memory is the bench's own) on a runtime of the
//! same shape as `herald serve`'s, and uses the same per-connection buffer sizes as
//! Herald's gadget endpoint, so a difference in memory is protocol state, not buffers.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use super::Target;

/// The answer to every request.
const REPLY: &str = r#"{"type":"ok"}"#;
/// Large enough for the mobile scenario's upload chunks.
const MAX_MESSAGE: usize = 32 * 1024 * 1024;

pub(super) struct Baseline {
    // Dropping the runtime stops the server.
    _runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
}

impl Baseline {
    pub fn start() -> anyhow::Result<Baseline> {
        let runtime = tokio::runtime::Runtime::new()?;
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        runtime.spawn(accept(listener));
        Ok(Baseline {
            _runtime: runtime,
            addr,
        })
    }

    pub fn target(&self) -> Target {
        Target {
            url: format!("ws://{}/", self.addr),
            bare: true,
            token: None,
            pid: Some(std::process::id()),
        }
    }
}

async fn accept(listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                let _ = tcp.set_nodelay(true);
                tokio::spawn(serve(tcp));
            }
            // Out of descriptors, most likely: wait instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Accept the first subprotocol offered, as a server must for clients that insist.
// tungstenite's callback type fixes the error type; this one never fails.
#[allow(clippy::result_large_err)]
fn echo_subprotocol(request: &Request, mut response: Response) -> Result<Response, ErrorResponse> {
    let offered = request
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .and_then(|p| HeaderValue::from_str(p.trim()).ok());
    if let Some(protocol) = offered {
        response
            .headers_mut()
            .insert(header::SEC_WEBSOCKET_PROTOCOL, protocol);
    }
    Ok(response)
}

async fn serve(tcp: TcpStream) {
    let config = WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let accepted =
        tokio_tungstenite::accept_hdr_async_with_config(tcp, echo_subprotocol, Some(config));
    let Ok(mut ws) = accepted.await else {
        return;
    };
    while let Some(Ok(message)) = ws.next().await {
        if message.is_text() && ws.send(Message::Text(REPLY.into())).await.is_err() {
            break;
        }
    }
}
