//! The phone side of an admitted connection (`gadget/socket.rs` is the gadget's), after
//! `ready`: reads frames, answers the ones that need no
//! session (`ping`, `deliver`, malformed frames), forwards the rest, and keeps the
//! connection alive with WebSocket pings. When to ping, when a phone is gone and where
//! it may `deliver` are rules of the session crate (`herald_session::mobile::link`).

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::StreamExt;
use herald_mobile_proto::{self as proto, ClientFrame, DecodeError, ErrorCode, ServerFrame};
use herald_port::{DeliveryError, Platform};
use herald_session::mobile::link::{Delivers, Due, Keepalive};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info};

use super::session::{Attach, Command, Event};
use super::{MobileHub, MAX_LABEL};
use crate::labels;
use crate::socket::{self, write, Outgoing, SendQueue, CLOSE_GRACE};

/// What the connection may do, decided by its token at `hello`.
pub(super) enum Role {
    /// An app: a user's phone with a session.
    Phone { user_id: String },
    /// A `MOBILE_DELIVER_TOKENS` holder: it may only `deliver` (and `ping`).
    Deliverer,
}

pub(super) async fn run<S>(
    ws: WebSocketStream<S>,
    peer: SocketAddr,
    hub: Arc<MobileHub>,
    hello: proto::Hello,
    role: Role,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = hub.devices.conn_id();
    let (sink, mut stream) = ws.split();
    let (outbox, outbox_rx) = socket::send_queue();
    let metrics = hub.metrics.clone();
    let mut writer = tokio::spawn(write(sink, outbox_rx, metrics.clone(), Platform::Mobile));
    let session = match &role {
        Role::Phone { user_id } => {
            let session = hub.session(&hello.device.id);
            let attach = Attach {
                conn,
                outbox: outbox.clone(),
                user_id: user_id.clone(),
                user_name: labels::clean_opt(hello.device.name.as_deref(), MAX_LABEL),
            };
            if session.send(Event::Attach(Box::new(attach))).await.is_err() {
                writer.abort();
                return;
            }
            Some(session)
        }
        Role::Deliverer => None,
    };
    // A listener on `::` sees IPv4 loopback as `::ffff:127.0.0.1`, hence `to_canonical`.
    let on_loopback = peer.ip().to_canonical().is_loopback();
    let user = match &role {
        Role::Phone { user_id } => Some(user_id.as_str()),
        Role::Deliverer => None,
    };
    let delivers = Delivers::of(user, on_loopback, hub.config.deliver_from_loopback);
    let reply = |frame: ServerFrame| {
        let outbox = outbox.clone();
        if let ServerFrame::Error { code, .. } = &frame {
            metrics.error(Platform::Mobile, code.as_str());
        }
        async move {
            let _ = outbox.send(Outgoing::Text(frame.encode())).await;
        }
    };

    let mut keepalive = Keepalive::new(Instant::now().into_std());
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = sleep_until(Instant::from_std(keepalive.deadline())) => {
                match keepalive.handle_deadline(Instant::now().into_std()) {
                    Due::Ping => {
                        let _ = outbox.send(Outgoing::Ping).await;
                    }
                    Due::Gone => {
                        debug!(%peer, "phone silent for too long");
                        let close = Outgoing::Close(CloseCode::Away, "keepalive timeout".into());
                        let _ = outbox.send(close).await;
                        break;
                    }
                }
                continue;
            }
            _ = &mut writer => break,
        };
        keepalive.heard(Instant::now().into_std());
        match &next {
            Some(Ok(Message::Text(text))) => metrics.mobile.inbound(text.len()),
            Some(Ok(Message::Binary(data))) => metrics.mobile.inbound(data.len()),
            _ => {}
        }
        let text = match next {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                reply(ServerFrame::error(
                    ErrorCode::BadFrame,
                    "binary frames are not used",
                ))
                .await;
                continue;
            }
            Some(Ok(Message::Close(_))) => {
                let _ = tokio::time::timeout(CLOSE_GRACE, stream.next()).await;
                break;
            }
            Some(Ok(_)) => continue,
            Some(Err(tungstenite::Error::Capacity(_))) => {
                refuse_too_big(&outbox).await;
                break;
            }
            Some(Err(err)) => {
                debug!(%peer, %err, "phone read failed");
                break;
            }
            None => break,
        };
        match ClientFrame::decode(&text) {
            Ok(ClientFrame::Ping) => reply(ServerFrame::Pong).await,
            Ok(ClientFrame::Hello(_)) => {
                reply(ServerFrame::error(
                    ErrorCode::BadFrame,
                    "hello was already accepted",
                ))
                .await;
            }
            Ok(ClientFrame::Deliver(deliver)) if delivers != Delivers::Nowhere => {
                let to = deliver.to.clone();
                if let Delivers::ToDevicesOf(user_id) = &delivers {
                    if !hub.owns(user_id, &to).await {
                        let message = format!("{to} is not a device of yours");
                        reply(ServerFrame::error(ErrorCode::Forbidden, message)).await;
                        continue;
                    }
                }
                let result = hub
                    .call(&to, |reply| Command::Deliver {
                        deliver: Box::new(deliver),
                        reply,
                    })
                    .await
                    .and_then(|r| r);
                match result {
                    Ok(()) => {}
                    Err(DeliveryError::Offline(_)) => {
                        let message = format!("{to} is not connected");
                        reply(ServerFrame::error(ErrorCode::DeviceOffline, message)).await;
                    }
                    Err(err) => {
                        reply(ServerFrame::error(ErrorCode::Internal, err.to_string())).await
                    }
                }
            }
            Ok(ClientFrame::Deliver(_)) => {
                let message = "deliver needs a deliver token (MOBILE_DELIVER_TOKENS)";
                reply(ServerFrame::error(ErrorCode::Forbidden, message)).await;
            }
            Ok(frame) => match &session {
                Some(session) => {
                    let event = Event::Frame {
                        conn,
                        frame: Box::new(frame),
                    };
                    if session.send(event).await.is_err() {
                        break;
                    }
                }
                None => {
                    let message = "this token may only deliver";
                    reply(ServerFrame::error(ErrorCode::Forbidden, message)).await;
                }
            },
            Err(DecodeError::TooBig { .. }) => {
                refuse_too_big(&outbox).await;
                break;
            }
            Err(DecodeError::UnknownFrame(t)) => {
                let message = format!("frame {t:?} is not supported");
                reply(ServerFrame::error(ErrorCode::UnsupportedFrame, message)).await;
            }
            Err(err) => reply(ServerFrame::error(err.code(), err.to_string())).await,
        }
    }
    if let Some(session) = session {
        let _ = session.send(Event::Closed { conn }).await;
    }
    info!(%peer, device = %hello.device.id, "phone disconnected");
    drop(outbox);
    // Let queued frames (a final error, the close) reach the phone, unless the writer
    // is what ended the connection (a finished handle must not be awaited again).
    if !writer.is_finished() {
        let _ = tokio::time::timeout(CLOSE_GRACE, writer).await;
    }
}

/// `too_big`, then close 1009: the protocol's answer to a frame over 16 MiB.
async fn refuse_too_big(outbox: &SendQueue) {
    let error = ServerFrame::error(ErrorCode::TooBig, "frames are limited to 16 MiB");
    let _ = outbox.send(Outgoing::Text(error.encode())).await;
    let _ = outbox
        .send(Outgoing::Close(CloseCode::Size, "too_big".into()))
        .await;
}
