//! A gadget's connection ([`crate::edge::connection::Connection`]) reads as the gadget protocol's
//! messages: what each WebSocket read is to the gadget's session.

use herald_gadget_proto::{limits, DeviceMessage};
use herald_port::Platform;
use herald_session::io::Close;

use crate::edge::connection::{self, Transport};

/// The gadget's transport: what a gadget sends reads as [`Incoming`] messages.
pub(crate) enum Gadget {}

/// A gadget's connection, as its session owns it.
pub(crate) type Connection = connection::Connection<Gadget>;

/// What the device did, as its session hears it.
pub(crate) type Read = connection::Read<Incoming>;

/// A message from the device.
pub(crate) enum Incoming {
    Frame(Box<DeviceMessage>),
    /// A message that is no frame; with `close`, the connection cannot go on after it
    /// (a frame over the limit, text that is not UTF-8).
    Bad {
        reason: String,
        close: Option<Close>,
    },
    Binary(Vec<u8>),
}

impl Transport for Gadget {
    type Message = Incoming;
    const PLATFORM: Platform = Platform::Gadget;

    fn text(text: &str) -> Incoming {
        match DeviceMessage::decode(text) {
            Ok(msg) => Incoming::Frame(Box::new(msg)),
            Err(err) => Incoming::Bad {
                reason: err.to_string(),
                close: None,
            },
        }
    }

    fn binary(data: Vec<u8>) -> Incoming {
        Incoming::Binary(data)
    }

    // With the close code RFC 6455 gives for each.
    fn too_big() -> Incoming {
        Incoming::Bad {
            reason: format!("frames are limited to {} bytes", limits::MAX_INBOUND_FRAME),
            close: Some(Close::TooBig),
        }
    }

    fn not_utf8() -> Incoming {
        Incoming::Bad {
            reason: "a text frame that is not UTF-8".into(),
            close: Some(Close::Invalid),
        }
    }
}
