//! The writer half every transport shares: it drains a session's bounded outbox to
//! the socket, so a slow client makes its session wait instead of growing a buffer.

use futures_util::stream::SplitSink;
use futures_util::SinkExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::debug;

/// Frames waiting for a slow client before the session has to wait too.
pub(crate) const OUTBOX: usize = 32;

/// What a session asks the writer to do.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Text(String),
    /// Close with this code and reason; nothing is written after it.
    Close(CloseCode, String),
}

pub(crate) async fn write<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    mut outbox: mpsc::Receiver<Outgoing>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(out) = outbox.recv().await {
        let result = match out {
            Outgoing::Text(text) => sink.send(Message::Text(text.into())).await,
            Outgoing::Close(code, reason) => {
                let frame = CloseFrame {
                    code,
                    reason: reason.into(),
                };
                let _ = sink.send(Message::Close(Some(frame))).await;
                break;
            }
        };
        if let Err(err) = result {
            debug!(%err, "write failed");
            break;
        }
    }
}
