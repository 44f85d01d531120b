//! Accepts TCP (and TLS) connections and upgrades them to WebSocket on one path, for
//! any transport: the gadget hub and the mobile adapter differ only in their
//! [`Handler`] and [`Endpoint`]. Plain HTTP on the same port gets `/healthz`, the
//! endpoint's pages, `426` on the WebSocket path and `404` elsewhere.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, warn};

use crate::http::{self, Head, HeadError, Page, Response, UpgradeError};
use crate::places::{AddrPlace, AddrPlaces};

/// Time allowed for TLS plus the HTTP upgrade.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a transport accepts.
#[derive(Clone)]
pub struct Endpoint {
    pub path: String,
    /// Echoed when the client offers it; clients that offer none are still accepted.
    pub subprotocol: Option<&'static str>,
    pub ws: WebSocketConfig,
    /// Refuse upgrades that carry `?token=`: a secret in a URL ends up in logs.
    pub refuse_url_token: bool,
    /// The body of `426 Upgrade Required`: one line saying what connects here.
    pub about: &'static str,
    /// Pages served to plain `GET` requests, by exact path.
    pub pages: &'static [Page],
}

/// A transport's side of an upgraded connection: `handle` runs the protocol's
/// handshake and returns once the connection is admitted or refused, leaving the
/// connection's own tasks running.
pub trait Handler: Send + Sync + 'static {
    fn handle<S>(
        self: Arc<Self>,
        ws: WebSocketStream<S>,
        peer: SocketAddr,
    ) -> impl Future<Output = ()> + Send
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static;
}

pub async fn run<H: Handler>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    endpoint: Endpoint,
    handler: Arc<H>,
) {
    // A configured `/gadget/` is the same path as the `/gadget` requests are read as.
    let endpoint = Arc::new(Endpoint {
        path: http::normalize(&endpoint.path).to_owned(),
        ..endpoint
    });
    let upgrading = Arc::new(AddrPlaces::default());
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
        // Shed at once what is over the cap: the descriptor is the scarce thing.
        let Some(permit) = enter(&upgrading, peer.ip()) else {
            debug!(%peer, "too many connections still upgrading: shed");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let task = accepted(
            tcp,
            peer,
            tls.clone(),
            endpoint.clone(),
            handler.clone(),
            permit,
        );
        tokio::spawn(task);
    }
}

/// An accepted connection's task, from TLS to the end of the protocol's handshake.
///
/// A task is as large as its largest state, and it is allocated for every connection
/// beside the small, long-lived state of the device's session: TLS's state, several
/// times a plain connection's, is boxed so that plain connections do not pay for it,
/// and so a burst of handshakes leaves few large holes for the session's small
/// allocations to fragment.
async fn accepted<H: Handler>(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    endpoint: Arc<Endpoint>,
    handler: Arc<H>,
    permit: AddrPlace,
) {
    match tls {
        None => upgrade(tcp, peer, &endpoint, handler, permit).await,
        Some(tls) => Box::pin(upgrade_tls(tls, tcp, peer, &endpoint, handler, permit)).await,
    }
}

async fn upgrade_tls<H: Handler>(
    tls: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    endpoint: &Endpoint,
    handler: Arc<H>,
    permit: AddrPlace,
) {
    match tokio::time::timeout(UPGRADE_TIMEOUT, tls.accept(tcp)).await {
        Ok(Ok(stream)) => upgrade(stream, peer, endpoint, handler, permit).await,
        Ok(Err(err)) => debug!(%peer, %err, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake timed out"),
    }
}

/// Read the request head and either upgrade it for the transport or answer it plainly.
async fn upgrade<S, H>(
    mut stream: S,
    peer: SocketAddr,
    endpoint: &Endpoint,
    handler: Arc<H>,
    permit: AddrPlace,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let opened = tokio::time::timeout(UPGRADE_TIMEOUT, open(&mut stream, endpoint)).await;
    match opened {
        Ok(Some(rest)) => {
            let ws =
                WebSocketStream::from_partially_read(stream, rest, Role::Server, Some(endpoint.ws))
                    .await;
            // The place is kept through the protocol's handshake (which ends on its own
            // deadline): a socket that upgrades and then says nothing counts too.
            handler.handle(ws, peer).await;
            drop(permit);
        }
        Ok(None) => {}
        Err(_) => debug!(%peer, "WebSocket upgrade timed out"),
    }
}

/// Answer the request: `Some(bytes read past the head)` once upgraded, `None` when a
/// plain response was sent or the peer went away.
async fn open<S>(stream: &mut S, endpoint: &Endpoint) -> Option<Vec<u8>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (head, rest) = match http::read_head(stream).await {
        Ok(read) => read,
        Err(HeadError::Bad(status, reason)) => {
            http::respond(stream, Response::text(status, reason), false).await;
            return None;
        }
        Err(HeadError::Gone) => return None,
    };
    let head_only = head.method == "HEAD";
    if !head.websocket {
        http::respond(stream, plain(endpoint, &head), head_only).await;
        return None;
    }
    if head.path != endpoint.path {
        http::respond(stream, Response::text(404, "not found\n"), false).await;
        return None;
    }
    let url_token = head.query.as_deref().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.split('=').next() == Some("token"))
    });
    if endpoint.refuse_url_token && url_token {
        let reason = "tokens are not accepted in the URL; send it in hello\n";
        http::respond(stream, Response::text(400, reason), false).await;
        return None;
    }
    // Echo the subprotocol when the client offers it; clients that offer none are
    // still accepted.
    let subprotocol = endpoint.subprotocol.filter(|p| head.offers(p));
    match http::accept_upgrade(stream, &head, subprotocol).await {
        Ok(()) => Some(rest),
        Err(UpgradeError::Refused(status, reason)) => {
            let mut response = Response::text(status, reason);
            if status == 426 {
                response.header = Some("Sec-WebSocket-Version: 13");
            }
            http::respond(stream, response, false).await;
            None
        }
        Err(UpgradeError::Gone) => None,
    }
}

/// The answer to a request that is not an upgrade.
fn plain<'a>(endpoint: &'a Endpoint, head: &Head) -> Response<'a> {
    if head.path == endpoint.path {
        let mut response = Response::text(426, endpoint.about);
        response.header = Some("Upgrade: websocket");
        return response;
    }
    if head.method != "GET" && head.method != "HEAD" {
        let mut response = Response::text(405, "only GET is served here\n");
        response.header = Some("Allow: GET, HEAD");
        return response;
    }
    if head.path == "/healthz" {
        return Response {
            status: 200,
            content_type: "application/json",
            body: http::HEALTH.as_bytes(),
            header: None,
        };
    }
    match endpoint.pages.iter().find(|page| page.path == head.path) {
        Some(page) => Response {
            status: 200,
            content_type: page.content_type,
            body: page.body,
            header: None,
        },
        None => Response::text(404, "not found\n"),
    }
}

/// Connections upgrading or in the protocol's handshake at once, from everywhere. Each
/// costs a descriptor for up to [`UPGRADE_TIMEOUT`] plus the handshake's own deadline,
/// so a host that opens sockets and says nothing could otherwise starve real devices.
const MAX_UPGRADING: usize = 1024;
/// … and from one address: a reconnecting fleet behind one NAT fits, a flood does not.
const MAX_UPGRADING_PER_ADDR: usize = 64;

/// A place among the connections upgrading, or `None` when `addr` or everyone is at
/// the cap.
fn enter(upgrading: &Arc<AddrPlaces>, addr: IpAddr) -> Option<AddrPlace> {
    AddrPlaces::take(upgrading, addr, |here, total| {
        here < MAX_UPGRADING_PER_ADDR && total < MAX_UPGRADING
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protocol with no handshake of its own: what is left is the edge's.
    struct Admits;

    impl Handler for Admits {
        async fn handle<S>(self: Arc<Self>, _ws: WebSocketStream<S>, _peer: SocketAddr)
        where
            S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        {
        }
    }

    #[tokio::test]
    async fn a_plain_connection_s_task_carries_no_tls_state() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (tcp, peer) = listener.accept().await.unwrap();
        let endpoint = Arc::new(Endpoint {
            path: "/".into(),
            subprotocol: None,
            ws: WebSocketConfig::default(),
            refuse_url_token: false,
            about: "",
            pages: &[],
        });
        let permit = enter(&Arc::new(AddrPlaces::default()), peer.ip()).unwrap();
        let task = accepted(tcp, peer, None, endpoint, Arc::new(Admits), permit);
        // 1.1 KiB in a test build; 8 KiB with TLS's accept and stream inline, 2 KiB
        // with the request head read through a buffer on the stack.
        let size = std::mem::size_of_val(&task);
        assert!(size <= 1536, "a plain connection's task takes {size} bytes");
    }

    #[test]
    fn upgrades_are_capped_per_address_and_in_all() {
        let upgrading = Arc::new(AddrPlaces::default());
        let one = IpAddr::from([10, 0, 0, 1]);
        let held: Vec<_> = (0..MAX_UPGRADING_PER_ADDR)
            .map(|_| enter(&upgrading, one).unwrap())
            .collect();
        assert!(enter(&upgrading, one).is_none());
        drop(held);
        assert!(enter(&upgrading, one).is_some(), "places come back");
        let mut held = Vec::new();
        for i in 0..MAX_UPGRADING {
            let addr = IpAddr::from([10, 1, (i / 256) as u8, (i % 256) as u8]);
            held.push(enter(&upgrading, addr).unwrap());
        }
        assert!(enter(&upgrading, IpAddr::from([10, 2, 0, 1])).is_none());
        held.pop();
        assert!(enter(&upgrading, IpAddr::from([10, 2, 0, 1])).is_some());
        assert!(
            upgrading.addresses() <= MAX_UPGRADING,
            "no entry kept for refused addresses"
        );
    }
}
