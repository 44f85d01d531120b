//! A gadget's connection ([`crate::shell::Connection`]) reads as the gadget protocol's
//! messages: what each WebSocket read is to the gadget's session.

use herald_gadget_proto::{limits, DeviceMessage};
use herald_port::Platform;
use herald_session::io::Close;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::debug;

use crate::metrics::Metrics;
use crate::shell::{self, Transport};

/// The gadget's transport: its connection reads as [`Read`]s.
pub(crate) enum Gadget {}

/// A gadget's connection, as its session owns it.
pub(crate) type Connection = shell::Connection<Gadget>;

/// What the device did, as its session hears it.
pub(crate) enum Read {
    Frame(Box<DeviceMessage>),
    /// A frame that is not a message; with `close`, the connection cannot go on after
    /// it (a frame over the limit, text that is not UTF-8).
    Bad {
        reason: String,
        close: Option<Close>,
    },
    Binary(Vec<u8>),
    /// A control frame: proof of life only.
    Alive,
    /// The device closed: the close reply is the library's, sent as the goodbye reads on.
    Closed,
    /// The connection broke.
    Lost,
}

impl Transport for Gadget {
    type Read = Read;
    const PLATFORM: Platform = Platform::Gadget;

    fn decode(read: Option<Result<Message, tungstenite::Error>>, metrics: &Metrics) -> Read {
        match read {
            Some(Ok(Message::Text(text))) => {
                metrics.gadget.inbound(text.len());
                match DeviceMessage::decode(&text) {
                    Ok(msg) => Read::Frame(Box::new(msg)),
                    Err(err) => Read::Bad {
                        reason: err.to_string(),
                        close: None,
                    },
                }
            }
            Some(Ok(Message::Binary(data))) => {
                metrics.gadget.inbound(data.len());
                Read::Binary(data.into())
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Read::Alive,
            Some(Ok(Message::Close(_))) => Read::Closed,
            // The stream cannot go on after these; the device hears why, with the
            // close code RFC 6455 gives for each.
            Some(Err(tungstenite::Error::Capacity(_))) => Read::Bad {
                reason: format!("frames are limited to {} bytes", limits::MAX_INBOUND_FRAME),
                close: Some(Close::TooBig),
            },
            Some(Err(tungstenite::Error::Utf8(_))) => Read::Bad {
                reason: "a text frame that is not UTF-8".into(),
                close: Some(Close::Invalid),
            },
            Some(Err(err)) => {
                debug!(%err, "gadget read failed");
                Read::Lost
            }
            None => Read::Lost,
        }
    }
}
