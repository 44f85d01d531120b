//! The writer half every transport shares: it drains a session's bounded outbox to
//! the socket, so a slow client makes its session wait instead of growing a buffer.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{FutureExt, SinkExt, StreamExt};
use herald_port::Platform;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::debug;

use crate::metrics::Metrics;

/// Frames waiting for a slow client before the session has to wait too.
pub(crate) const OUTBOX: usize = 32;
/// How long a closed connection may take to say goodbye.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Send `error` (an encoded error frame), then close with 1008 and `reason`: "no
/// access", which clients must not retry in a loop.
pub(crate) async fn refuse<S>(ws: &mut WebSocketStream<S>, error: String, reason: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    refuse_with(ws, error, CloseCode::Policy, reason).await;
}

/// [`refuse`] with another close code, for refusals a client should retry later.
pub(crate) async fn refuse_with<S>(
    ws: &mut WebSocketStream<S>,
    error: String,
    code: CloseCode,
    reason: &str,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let close = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = ws.send(Message::Text(error.into())).await;
    let _ = ws.close(Some(close)).await;
    // Let the client's close reply arrive so it sees a clean close, but not forever.
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
}

/// What a session asks the writer to do.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Text(String),
    /// A binary media frame, header included.
    Binary(Vec<u8>),
    /// A WebSocket ping, for clients whose protocol has no heartbeat of its own.
    Ping,
    /// Close with this code and reason; nothing is written after it.
    Close(CloseCode, String),
}

/// The longest one frame may take to leave. A peer that stops reading fills its socket,
/// then this deadline ends the connection: the writer stops, the session's waits on the
/// outbox end with it, and nothing the peer will never read is kept.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(15);

pub(crate) async fn write<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    mut outbox: mpsc::Receiver<Outgoing>,
    metrics: Arc<Metrics>,
    platform: Platform,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(out) = outbox.recv().await {
        let message = match out {
            Outgoing::Text(text) => {
                metrics.traffic(platform).outbound(text.len());
                Message::Text(text.into())
            }
            Outgoing::Binary(frame) => {
                metrics.traffic(platform).outbound(frame.len());
                Message::Binary(frame.into())
            }
            Outgoing::Ping => Message::Ping(Default::default()),
            Outgoing::Close(code, reason) => {
                let frame = CloseFrame {
                    code,
                    reason: reason.into(),
                };
                let _ =
                    tokio::time::timeout(CLOSE_GRACE, sink.send(Message::Close(Some(frame)))).await;
                break;
            }
        };
        // Most frames leave at once; only one that waits is given a deadline, so the
        // hot path arms no timer.
        let send = sink.send(message);
        tokio::pin!(send);
        let sent = match (&mut send).now_or_never() {
            Some(result) => Ok(result),
            None => tokio::time::timeout(SEND_TIMEOUT, &mut send).await,
        };
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                debug!(%err, "write failed");
                break;
            }
            Err(_) => {
                debug!(?platform, "the peer stopped reading: connection dropped");
                metrics.error(platform, "send_timeout");
                break;
            }
        }
    }
}
