//! The bare baseline: a WebSocket server with no protocol work at all. It accepts any
//! path, answers every text frame with one short text frame, holds connections until
//! the client goes, and after `speak N` paces N frames of silence. The bench drives it with the same client code as Herald, in
//! the same run, so Herald's figures read as a ratio of what this machine does with the
//! same library and the same clients, whatever else is running on it.
//!
//! It runs inside the bench process (its memory is the bench's own) on a runtime of the
//! same shape as `herald serve`'s, and reads with the same per-connection buffer size as
//! the Herald endpoint it stands beside, so a difference in memory is protocol state,
//! not buffers.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use herald_media::pacing::Pacer;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::speak::{FRAME, FRAME_BYTES, LEAD};
use super::Target;

/// The answer to every request.
const REPLY: &str = r#"{"type":"ok"}"#;
/// Large enough for the mobile scenario's upload chunks.
const MAX_MESSAGE: usize = 32 * 1024 * 1024;

/// Read buffer sizes of Herald's endpoints (`herald_server`'s gadget and mobile
/// `endpoint()`).
pub(super) const GADGET_READ_BUFFER: usize = 1024;
pub(super) const MOBILE_READ_BUFFER: usize = 1024;

pub(super) struct Baseline {
    // Dropping the runtime stops the server.
    _runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
}

impl Baseline {
    pub fn start(read_buffer: usize) -> anyhow::Result<Baseline> {
        let runtime = tokio::runtime::Runtime::new()?;
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        runtime.spawn(accept(listener, read_buffer));
        Ok(Baseline {
            _runtime: runtime,
            addr,
        })
    }

    pub fn target(&self) -> Target {
        Target {
            url: format!("ws://{}/", self.addr),
            bare: true,
            tokens: Vec::new(),
            pid: Some(std::process::id()),
            admin: None,
        }
    }
}

async fn accept(listener: TcpListener, read_buffer: usize) {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                let _ = tcp.set_nodelay(true);
                tokio::spawn(serve(tcp, read_buffer));
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

async fn serve(tcp: TcpStream, read_buffer: usize) {
    let config = WebSocketConfig::default()
        .read_buffer_size(read_buffer)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let accepted =
        tokio_tungstenite::accept_hdr_async_with_config(tcp, echo_subprotocol, Some(config));
    let Ok(mut ws) = accepted.await else {
        return;
    };
    while let Some(Ok(message)) = ws.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        if ws.send(Message::Text(REPLY.into())).await.is_err() {
            break;
        }
        let speech = text.strip_prefix("speak ").and_then(|n| n.parse().ok());
        if let Some(frames) = speech {
            if speak(&mut ws, frames).await.is_err() {
                break;
            }
        }
    }
}

/// Send `frames` frames of silence on the protocol's pacing schedule (see
/// [`super::speak`]): the least a server streaming speech must do.
async fn speak(
    ws: &mut WebSocketStream<TcpStream>,
    frames: u64,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    let frame = vec![0u8; FRAME_BYTES + herald_gadget_proto::HEADER_LEN];
    let mut pacer = Pacer::new(Instant::now(), FRAME, LEAD);
    for _ in 0..frames {
        tokio::time::sleep_until(pacer.next_send_at().into()).await;
        ws.send(Message::Binary(frame.clone().into())).await?;
        pacer.frame_sent(Instant::now());
    }
    Ok(())
}
