//! A WebSocket with no network under it, for the tests of what holds a connection: it
//! takes every write until it is broken, then fails them, and has nothing to read.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::{Sink, Stream};
use tokio_tungstenite::tungstenite::{Error, Message};

pub struct BreakingSocket {
    broken: Arc<AtomicBool>,
}

impl BreakingSocket {
    /// The socket, and the switch that breaks it.
    pub fn new() -> (BreakingSocket, Arc<AtomicBool>) {
        let broken = Arc::new(AtomicBool::new(false));
        let socket = BreakingSocket {
            broken: broken.clone(),
        };
        (socket, broken)
    }
}

impl Stream for BreakingSocket {
    type Item = Result<Message, Error>;

    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Pending
    }
}

impl Sink<Message> for BreakingSocket {
    type Error = Error;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, _: Message) -> Result<(), Error> {
        if self.broken.load(Ordering::Relaxed) {
            return Err(Error::ConnectionClosed);
        }
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }
}
