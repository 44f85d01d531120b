//! A phone's connection ([`crate::edge::connection::Connection`]) reads as the mobile protocol's
//! frames: what each WebSocket read is to the phone's session. A connection with a
//! deliver token has no session: [`deliver_only`] serves it.

use std::sync::Arc;

use herald_mobile_proto::{ClientFrame, DecodeError, ErrorCode, ServerFrame};
use herald_port::Platform;
use herald_session::io::Close;
use herald_session::mobile::link::{Due, Keepalive};
use tokio::time::{sleep_until, Instant};

use super::MobileHub;
use crate::edge::connection::{self, close_code, Transport};
use crate::edge::socket::Outgoing;
use crate::metrics::Metrics;

/// The phone's transport: what a phone sends reads as [`Incoming`] messages.
pub(crate) enum Phone {}

/// A phone's connection, as its session owns it.
pub(crate) type Connection = connection::Connection<Phone>;

/// What the phone did, as its session hears it.
pub(crate) type Read = connection::Read<Incoming>;

/// A message from the phone.
pub(crate) enum Incoming {
    Frame(Box<ClientFrame>),
    /// No frame the phone may send: it hears `code` and `message`; with `close`, the
    /// connection cannot go on after it (a frame over the limit, text not UTF-8).
    Bad {
        code: ErrorCode,
        message: String,
        close: Option<Close>,
    },
}

impl Transport for Phone {
    type Message = Incoming;
    const PLATFORM: Platform = Platform::Mobile;

    fn text(text: &str) -> Incoming {
        let bad = |code, message| Incoming::Bad {
            code,
            message,
            close: None,
        };
        match ClientFrame::decode(text) {
            Ok(frame) => Incoming::Frame(Box::new(frame)),
            Err(DecodeError::TooBig { .. }) => Phone::too_big(),
            Err(DecodeError::UnknownFrame(t)) => bad(
                ErrorCode::UnsupportedFrame,
                format!("frame {t:?} is not supported"),
            ),
            Err(err) => bad(err.code(), err.to_string()),
        }
    }

    fn binary(_: Vec<u8>) -> Incoming {
        Incoming::Bad {
            code: ErrorCode::BadFrame,
            message: "binary frames are not used".into(),
            close: None,
        }
    }

    /// `too_big`, then close 1009: the protocol's answer to a frame over 16 MiB.
    fn too_big() -> Incoming {
        Incoming::Bad {
            code: ErrorCode::TooBig,
            message: "frames are limited to 16 MiB".into(),
            close: Some(Close::TooBig),
        }
    }

    fn not_utf8() -> Incoming {
        Incoming::Bad {
            code: ErrorCode::BadFrame,
            message: "a text frame that is not UTF-8".into(),
            close: Some(Close::Invalid),
        }
    }
}

/// A connection that may only `deliver` (and `ping`), to any phone: it has no
/// session, so this loop reads it, keeps it alive and says goodbye.
pub(super) async fn deliver_only(mut conn: Box<Connection>, hub: Arc<MobileHub>) {
    let metrics = hub.shared.metrics.clone();
    let mut keepalive = Keepalive::new(Instant::now().into_std());
    let close = loop {
        let read = tokio::select! {
            read = conn.next(true, &metrics) => read,
            _ = sleep_until(Instant::from_std(keepalive.deadline())) => {
                match keepalive.handle_deadline(Instant::now().into_std()) {
                    Due::Ping if conn.send(Outgoing::Ping, &metrics) => continue,
                    Due::Ping => break None,
                    Due::Gone => break Some((Close::Away, "keepalive timeout")),
                }
            }
        };
        keepalive.heard(Instant::now().into_std());
        let (answer, close) = match read {
            Read::Message(Incoming::Frame(frame)) => (answer(*frame, &hub).await, None),
            Read::Message(Incoming::Bad {
                code,
                message,
                close,
            }) => (
                Some(error(&metrics, code, message)),
                close.map(|close| (close, code.as_str())),
            ),
            Read::Alive => (None, None),
            Read::Closed | Read::Lost => break None,
        };
        if let Some(answer) = answer {
            if !conn.send(Outgoing::Text(answer.encode()), &metrics) {
                break None;
            }
        }
        if close.is_some() {
            break close;
        }
    };
    if let Some((close, reason)) = close {
        let close = Outgoing::Close(close_code(close), reason.into());
        conn.send(close, &metrics);
    }
    conn.goodbye(metrics).await;
}

/// A deliver-only connection's answer to `frame`, if it has one.
async fn answer(frame: ClientFrame, hub: &MobileHub) -> Option<ServerFrame> {
    match frame {
        ClientFrame::Ping => Some(ServerFrame::Pong),
        ClientFrame::Hello(_) => {
            let message = "hello was already accepted".into();
            Some(error(&hub.shared.metrics, ErrorCode::BadFrame, message))
        }
        ClientFrame::Deliver(deliver) => {
            let to = deliver.to.clone();
            let (code, message) = hub.deliver(deliver, None).await.refusal(&to)?;
            Some(error(&hub.shared.metrics, code, message))
        }
        _ => {
            let message = "this token may only deliver".into();
            Some(error(&hub.shared.metrics, ErrorCode::Forbidden, message))
        }
    }
}

/// An error frame for the phone, counted.
fn error(metrics: &Metrics, code: ErrorCode, message: String) -> ServerFrame {
    metrics.error(Platform::Mobile, code.as_str());
    ServerFrame::error(code, message)
}
