//! Accepts gadget connections and upgrades them to WebSocket on the configured path.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use herald_gadget_proto::{limits, SUBPROTOCOL};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{self, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tracing::{debug, warn};

use super::{handshake, GadgetHub};

/// Time allowed for TLS plus the HTTP upgrade, like each handshake message.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS);

/// Buffers are sized for gadget traffic on purpose: the library defaults (128 KiB read
/// buffer, unbounded write buffer) would cost more per idle device than the rest of
/// its session together.
pub(crate) fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(2 * limits::MAX_INBOUND_FRAME)
        .max_message_size(Some(limits::MAX_INBOUND_FRAME))
        .max_frame_size(Some(limits::MAX_INBOUND_FRAME))
}

pub(crate) async fn run(listener: TcpListener, tls: Option<TlsAcceptor>, hub: Arc<GadgetHub>) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(err) => {
                // Usually descriptor exhaustion: back off instead of spinning.
                warn!(%err, "gadget accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let hub = hub.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => upgrade(tcp, peer, hub).await,
                Some(tls) => match tokio::time::timeout(UPGRADE_TIMEOUT, tls.accept(tcp)).await {
                    Ok(Ok(stream)) => upgrade(stream, peer, hub).await,
                    Ok(Err(err)) => debug!(%peer, %err, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                },
            }
        });
    }
}

// tungstenite's callback type fixes the error type; it is built only on refusal.
#[allow(clippy::result_large_err)]
async fn upgrade<S>(stream: S, peer: SocketAddr, hub: Arc<GadgetHub>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let path = hub.config.path.clone();
    let callback =
        move |request: &Request, response: Response| check_request(&path, request, response);
    let accepted = tokio::time::timeout(
        UPGRADE_TIMEOUT,
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(ws_config())),
    )
    .await;
    match accepted {
        Ok(Ok(ws)) => handshake::run(ws, peer, hub).await,
        Ok(Err(err)) => debug!(%peer, %err, "WebSocket upgrade refused"),
        Err(_) => debug!(%peer, "WebSocket upgrade timed out"),
    }
}

/// 404 for any other path; echo the subprotocol when the device offers it.
#[allow(clippy::result_large_err)]
fn check_request(
    path: &str,
    request: &Request,
    mut response: Response,
) -> Result<Response, ErrorResponse> {
    if request.uri().path() != path {
        let mut not_found = ErrorResponse::new(Some("not found".into()));
        *not_found.status_mut() = StatusCode::NOT_FOUND;
        return Err(not_found);
    }
    let offered = request
        .headers()
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == SUBPROTOCOL);
    if offered {
        response.headers_mut().insert(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(SUBPROTOCOL),
        );
    }
    Ok(response)
}
