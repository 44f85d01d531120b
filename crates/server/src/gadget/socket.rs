//! The gadget side of an admitted connection: the reader feeds decoded frames to the
//! device's session (the writer is shared, see [`crate::socket`]), and refusals during
//! the handshake.

use futures_util::stream::SplitStream;
use futures_util::StreamExt;
use herald_gadget_proto::{limits, DeviceMessage, ErrorCode, ServerMessage};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::{self, protocol::frame::coding::CloseCode, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::debug;

use super::session::Event;
use crate::metrics::Traffic;
use crate::queue;
use crate::socket::{self, CLOSE_GRACE};

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

/// Read until the connection ends (or, once the writer has gone, a short grace period
/// for the device's close), forwarding everything to the session.
pub(crate) async fn read<S>(
    mut stream: SplitStream<WebSocketStream<S>>,
    conn: u64,
    session: queue::Sender<Event>,
    writer: tokio::task::JoinHandle<()>,
    traffic: &Traffic,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut writer = writer;
    let mut writer_done = false;
    // Set when the stream broke in a way the device is told about: the session's error
    // frame and close must get out before the connection goes.
    let mut telling = false;
    loop {
        let next = if writer_done {
            match tokio::time::timeout(CLOSE_GRACE, stream.next()).await {
                Ok(next) => next,
                Err(_) => break,
            }
        } else {
            tokio::select! {
                next = stream.next() => next,
                _ = &mut writer => { writer_done = true; continue; }
            }
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
                let _ = tokio::time::timeout(CLOSE_GRACE, stream.next()).await;
                break;
            }
            None => break,
            // The stream cannot go on after these; the device hears why, with the close
            // code RFC 6455 gives for each.
            Some(Err(tungstenite::Error::Capacity(_))) => {
                let reason = format!("frames are limited to {} bytes", limits::MAX_INBOUND_FRAME);
                let _ = session
                    .send(Event::BadFrame {
                        conn,
                        reason,
                        close: Some(CloseCode::Size),
                    })
                    .await;
                telling = true;
                break;
            }
            Some(Err(tungstenite::Error::Utf8(_))) => {
                let _ = session
                    .send(Event::BadFrame {
                        conn,
                        reason: "a text frame that is not UTF-8".into(),
                        close: Some(CloseCode::Invalid),
                    })
                    .await;
                telling = true;
                break;
            }
            Some(Err(err)) => {
                debug!(%err, "gadget read failed");
                break;
            }
        };
        if session.send(event).await.is_err() {
            break;
        }
    }
    if telling && !writer_done {
        writer_done = tokio::time::timeout(CLOSE_GRACE, &mut writer).await.is_ok();
    }
    let _ = session.send(Event::Closed { conn }).await;
    if !writer_done {
        writer.abort();
    }
}
