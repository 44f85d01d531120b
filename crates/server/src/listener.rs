//! Accepts TCP (and TLS) connections and upgrades them to WebSocket on one path, for
//! any transport: the gadget hub and the mobile adapter differ only in their
//! [`Handler`] and [`Endpoint`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{self, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, warn};

/// Time allowed for TLS plus the HTTP upgrade.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a transport accepts.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub path: String,
    /// Echoed when the client offers it; clients that offer none are still accepted.
    pub subprotocol: Option<&'static str>,
    pub ws: WebSocketConfig,
    /// Refuse upgrades that carry `?token=`: a secret in a URL ends up in logs.
    pub refuse_url_token: bool,
}

/// A transport's side of an upgraded connection.
pub(crate) trait Handler: Send + Sync + 'static {
    fn handle<S>(
        self: Arc<Self>,
        ws: WebSocketStream<S>,
        peer: SocketAddr,
    ) -> impl Future<Output = ()> + Send
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static;
}

pub(crate) async fn run<H: Handler>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    endpoint: Endpoint,
    handler: Arc<H>,
) {
    let endpoint = Arc::new(endpoint);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(err) => {
                // Usually descriptor exhaustion: back off instead of spinning.
                warn!(%err, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (handler, endpoint, tls) = (handler.clone(), endpoint.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                None => upgrade(tcp, peer, &endpoint, handler).await,
                Some(tls) => match tokio::time::timeout(UPGRADE_TIMEOUT, tls.accept(tcp)).await {
                    Ok(Ok(stream)) => upgrade(stream, peer, &endpoint, handler).await,
                    Ok(Err(err)) => debug!(%peer, %err, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                },
            }
        });
    }
}

// tungstenite's callback type fixes the error type; it is built only on refusal.
#[allow(clippy::result_large_err)]
async fn upgrade<S, H>(stream: S, peer: SocketAddr, endpoint: &Endpoint, handler: Arc<H>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let callback =
        |request: &Request, response: Response| check_request(endpoint, request, response);
    let accepted = tokio::time::timeout(
        UPGRADE_TIMEOUT,
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(endpoint.ws)),
    )
    .await;
    match accepted {
        Ok(Ok(ws)) => handler.handle(ws, peer).await,
        Ok(Err(err)) => debug!(%peer, %err, "WebSocket upgrade refused"),
        Err(_) => debug!(%peer, "WebSocket upgrade timed out"),
    }
}

/// 404 for any other path; echo the subprotocol when the client offers it.
#[allow(clippy::result_large_err)]
fn check_request(
    endpoint: &Endpoint,
    request: &Request,
    mut response: Response,
) -> Result<Response, ErrorResponse> {
    let refuse = |status: StatusCode, text: &str| {
        let mut refusal = ErrorResponse::new(Some(text.into()));
        *refusal.status_mut() = status;
        refusal
    };
    if request.uri().path() != endpoint.path {
        return Err(refuse(StatusCode::NOT_FOUND, "not found"));
    }
    let url_token = request.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.split('=').next() == Some("token"))
    });
    if endpoint.refuse_url_token && url_token {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "tokens are not accepted in the URL; send it in hello",
        ));
    }
    if let Some(subprotocol) = endpoint.subprotocol {
        let offered = request
            .headers()
            .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|p| p.trim() == subprotocol);
        if offered {
            response.headers_mut().insert(
                http::header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_static(subprotocol),
            );
        }
    }
    Ok(response)
}
