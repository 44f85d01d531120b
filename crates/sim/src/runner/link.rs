//! The board's connection to the server: connecting (and telling a refusal retrying cannot
//! mend from one it can), the frames that arrive, sending with a deadline, closing.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::limits::MAX_INBOUND_FRAME;
use herald_gadget_proto::SUBPROTOCOL;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{Error, ProtocolError};
use tokio_tungstenite::tungstenite::handshake::client::Request as WsRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Message, Utf8Bytes};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A send the server does not take within this long means the connection is gone.
const SEND_WAIT: Duration = Duration::from_secs(10);
/// How long a closing handshake may take before the socket is dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The request to open: the URL, offering the gadget subprotocol.
pub fn client_request(url: &str) -> Result<WsRequest, tokio_tungstenite::tungstenite::Error> {
    let mut request = url.into_client_request()?;
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static(SUBPROTOCOL),
    );
    Ok(request)
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
/// A connection attempt: the socket, or why not and, when a retry cannot help, what to
/// tell the user.
type Attempt = Pin<Box<dyn Future<Output = Result<Socket, (String, Option<String>)>> + Send>>;

/// The connection to the server.
pub(super) enum Link {
    Down,
    Connecting(Attempt),
    Up(Box<Socket>),
}

pub(super) enum LinkEvent {
    Connected,
    Text(Utf8Bytes),
    Binary(Bytes),
    Closed {
        code: Option<u16>,
        reason: String,
        /// Why the connection failed, when no close frame said it.
        error: Option<String>,
        /// Set when the attempt failed in a way a retry cannot mend (not a gadget
        /// endpoint, an untrusted certificate): what to tell the user.
        fatal: Option<String>,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Sent {
    Yes,
    /// Not connected: nothing to send on.
    Dropped,
    Broken,
}

/// What to tell the user when a connection attempt shows that retrying cannot help.
fn fatal_connect_error(url: &str, err: &Error) -> Option<String> {
    let not_gadget =
        || format!("{url} is not a Herald gadget endpoint (a phone URL?); `herald info` prints it");
    match err {
        Error::Http(response) if response.status().is_client_error() => {
            Some(format!("{} (HTTP {})", not_gadget(), response.status()))
        }
        Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(_)) => Some(not_gadget()),
        err if herald_mobile_client::certificate_refused(err) => Some(format!(
            "{url}: {err} (a self-signed certificate? trust it with SSL_CERT_FILE=its PEM)"
        )),
        _ => None,
    }
}

impl Link {
    pub(super) fn connect(&mut self, url: &str) {
        let url = url.to_owned();
        // Frames from the server are small (4 KB of media, a reply); a cap keeps a broken
        // server from making the board buffer without bound.
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_INBOUND_FRAME))
            .max_frame_size(Some(MAX_INBOUND_FRAME));
        *self = Link::Connecting(Box::pin(async move {
            let request = client_request(&url).map_err(|e| (e.to_string(), None))?;
            // Nagle off: the board sends small frames that should leave at once.
            let (socket, _) =
                tokio_tungstenite::connect_async_with_config(request, Some(config), true)
                    .await
                    .map_err(|e| {
                        let fatal = fatal_connect_error(&url, &e);
                        (e.to_string(), fatal)
                    })?;
            Ok(socket)
        }));
    }

    /// The next thing from the server. Cancel-safe: a connection attempt goes on.
    pub(super) async fn next(&mut self) -> LinkEvent {
        loop {
            match self {
                Link::Down => std::future::pending::<()>().await,
                Link::Connecting(attempt) => {
                    let result = attempt.as_mut().await;
                    return match result {
                        Ok(socket) => {
                            *self = Link::Up(Box::new(socket));
                            LinkEvent::Connected
                        }
                        Err((error, fatal)) => {
                            *self = Link::Down;
                            LinkEvent::Closed {
                                code: None,
                                reason: String::new(),
                                error: Some(error),
                                fatal,
                            }
                        }
                    };
                }
                Link::Up(socket) => {
                    let event = match socket.next().await {
                        Some(Ok(Message::Text(text))) => return LinkEvent::Text(text),
                        Some(Ok(Message::Binary(bytes))) => return LinkEvent::Binary(bytes),
                        // Pings are answered by the socket itself.
                        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
                            continue
                        }
                        Some(Ok(Message::Close(frame))) => LinkEvent::Closed {
                            code: frame.as_ref().map(|f| u16::from(f.code)),
                            reason: frame.map(|f| f.reason.to_string()).unwrap_or_default(),
                            error: None,
                            fatal: None,
                        },
                        Some(Err(e)) => LinkEvent::Closed {
                            code: None,
                            reason: String::new(),
                            error: Some(e.to_string()),
                            fatal: None,
                        },
                        None => LinkEvent::Closed {
                            code: None,
                            reason: String::new(),
                            error: None,
                            fatal: None,
                        },
                    };
                    *self = Link::Down;
                    return event;
                }
            }
        }
    }

    pub(super) async fn send(&mut self, message: Message) -> Sent {
        let Link::Up(socket) = self else {
            return Sent::Dropped;
        };
        match tokio::time::timeout(SEND_WAIT, socket.send(message)).await {
            Ok(Ok(())) => Sent::Yes,
            _ => {
                *self = Link::Down;
                Sent::Broken
            }
        }
    }

    /// Closes politely if connected; gives up on an attempt.
    pub(super) async fn close(&mut self, code: u16, reason: &str) {
        if let Link::Up(socket) = self {
            let frame = CloseFrame {
                code: CloseCode::from(code),
                reason: reason.into(),
            };
            let _ = tokio::time::timeout(CLOSE_WAIT, socket.close(Some(frame))).await;
        }
        *self = Link::Down;
    }
}
