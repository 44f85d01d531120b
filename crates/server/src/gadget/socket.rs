//! The gadget side of an admitted connection: one task reads decoded frames into the
//! device's session and writes its outbox (the writing of a frame is shared, see
//! [`crate::socket`]); and refusals during the handshake.

use futures_util::StreamExt;
use herald_gadget_proto::{limits, DeviceMessage, ErrorCode, ServerMessage};
use herald_port::Platform;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::{self, protocol::frame::coding::CloseCode, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::debug;

use super::session::Event;
use crate::metrics::Metrics;
use crate::queue;
use crate::socket::{self, SendQueueReader, CLOSE_GRACE};

/// Send a protocol error and close with 1008, as the handshake rules require.
pub(crate) async fn reject<S>(ws: &mut WebSocketStream<S>, code: ErrorCode, message: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let error = ServerMessage::Error(herald_gadget_proto::Error {
        code,
        message: message.to_owned(),
    });
    socket::refuse(ws, error.encode(), code.as_str()).await;
}

/// Carry one connection until it ends: frames from the device go to its session,
/// frames from the session's outbox go to the device. One task does both, since an idle
/// gadget's cost is mostly its tasks; while it waits for room in the session's mailbox
/// it keeps writing, so a session waiting for room in the outbox is never stuck on it.
pub(crate) async fn serve<S>(
    mut ws: WebSocketStream<S>,
    conn: u64,
    session: queue::Sender<Event>,
    mut outbox: SendQueueReader,
    metrics: &Metrics,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let traffic = &metrics.gadget;
    // Once the writing side is over, the device gets this long to close in turn.
    let mut closing: Option<Instant> = None;
    // Set when the stream broke in a way the device is told about: the session's error
    // frame and close must get out before the connection goes.
    let mut telling = false;
    loop {
        let next = tokio::select! {
            out = outbox.recv(), if closing.is_none() => {
                let open = match out {
                    Some(out) => socket::write_frame(&mut ws, out, &outbox, metrics, Platform::Gadget).await,
                    None => false,
                };
                if !open {
                    closing = Some(Instant::now() + CLOSE_GRACE);
                }
                continue;
            }
            _ = sleep_until(closing.unwrap_or_else(Instant::now)), if closing.is_some() => break,
            next = ws.next() => next,
        };
        match &next {
            Some(Ok(Message::Text(text))) => traffic.inbound(text.len()),
            Some(Ok(Message::Binary(data))) => traffic.inbound(data.len()),
            _ => {}
        }
        let event = match next {
            Some(Ok(Message::Text(text))) => match DeviceMessage::decode(&text) {
                Ok(msg) => Event::Frame {
                    conn,
                    msg: Box::new(msg),
                },
                Err(err) => Event::BadFrame {
                    conn,
                    reason: err.to_string(),
                    close: None,
                },
            },
            Some(Ok(Message::Binary(data))) => Event::Binary {
                conn,
                data: data.into(),
            },
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
                Event::Alive { conn }
            }
            Some(Ok(Message::Close(_))) => {
                // Reading on lets the library send its close reply.
                let _ = tokio::time::timeout(CLOSE_GRACE, ws.next()).await;
                break;
            }
            None => break,
            // The stream cannot go on after these; the device hears why, with the close
            // code RFC 6455 gives for each.
            Some(Err(tungstenite::Error::Capacity(_))) => {
                let reason = format!("frames are limited to {} bytes", limits::MAX_INBOUND_FRAME);
                telling = true;
                Event::BadFrame {
                    conn,
                    reason,
                    close: Some(CloseCode::Size),
                }
            }
            Some(Err(tungstenite::Error::Utf8(_))) => {
                telling = true;
                Event::BadFrame {
                    conn,
                    reason: "a text frame that is not UTF-8".into(),
                    close: Some(CloseCode::Invalid),
                }
            }
            Some(Err(err)) => {
                debug!(%err, "gadget read failed");
                break;
            }
        };
        if !forward(&session, event, &mut ws, &mut outbox, &mut closing, metrics).await {
            break;
        }
        if telling {
            // The error frame and the close, then the end, within the grace period.
            let _ = tokio::time::timeout(CLOSE_GRACE, async {
                while closing.is_none() {
                    let open = match outbox.recv().await {
                        Some(out) => {
                            socket::write_frame(&mut ws, out, &outbox, metrics, Platform::Gadget)
                                .await
                        }
                        None => false,
                    };
                    if !open {
                        closing = Some(Instant::now());
                    }
                }
            })
            .await;
            break;
        }
    }
    // The session may be waiting for room in the outbox: closing it lets the session
    // go on to read its mailbox, where `Closed` waits.
    drop(outbox);
    let _ = session.send(Event::Closed { conn }).await;
}

/// Hand `event` to the session, writing what the outbox has meanwhile; false when the
/// session is gone.
async fn forward<S>(
    session: &queue::Sender<Event>,
    event: Event,
    ws: &mut WebSocketStream<S>,
    outbox: &mut SendQueueReader,
    closing: &mut Option<Instant>,
    metrics: &Metrics,
) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let send = session.send(event);
    tokio::pin!(send);
    loop {
        tokio::select! {
            sent = &mut send => return sent.is_ok(),
            out = outbox.recv(), if closing.is_none() => {
                let open = match out {
                    Some(out) => socket::write_frame(ws, out, outbox, metrics, Platform::Gadget).await,
                    None => false,
                };
                if !open {
                    *closing = Some(Instant::now() + CLOSE_GRACE);
                }
            }
        }
    }
}
