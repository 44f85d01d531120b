//! An admitted gadget's connection, as its session owns it: the socket (plain or TLS,
//! behind one type), and the outbox every frame to the device leaves through, in
//! order: the core's frames, the speech the playback task paces and the pictures.
//!
//! The session's task reads the socket and writes the outbox, beside its mailbox and
//! timers, so a connected gadget is one task. The writing of a frame is shared with
//! the phones' writer ([`crate::socket::write_frame`]).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Sink, Stream, StreamExt};
use herald_gadget_proto::{limits, DeviceMessage};
use herald_port::Platform;
use herald_session::io::Close;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info};

use crate::metrics::Metrics;
use crate::socket::{self, Outgoing, SendQueue, SendQueueReader};

/// A WebSocket, whatever carries it.
pub(crate) trait Socket:
    Stream<Item = Result<Message, tungstenite::Error>>
    + Sink<Message, Error = tungstenite::Error>
    + Send
    + Unpin
{
}

impl<T> Socket for T where
    T: Stream<Item = Result<Message, tungstenite::Error>>
        + Sink<Message, Error = tungstenite::Error>
        + Send
        + Unpin
{
}

pub(crate) struct Connection {
    /// The hub's id of this connection.
    pub(crate) id: u64,
    ws: Pin<Box<dyn Socket>>,
    /// Frames other tasks queue for the device (speech, pictures, firmware), and the
    /// session's own behind them while any wait. Made when a task first asks for it and
    /// given up once it is empty and no task holds it, so an idle gadget keeps none.
    outbox: Option<(SendQueue, SendQueueReader)>,
    peer: SocketAddr,
}

/// What a connection has for its session.
pub(crate) enum Next {
    Read(Read),
    Write(Outgoing),
}

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

impl Connection {
    pub(crate) fn new(id: u64, ws: impl Socket + 'static, peer: SocketAddr) -> Box<Connection> {
        Box::new(Connection {
            id,
            ws: Box::pin(ws),
            outbox: None,
            peer,
        })
    }

    /// The outbox, for a task that writes to the device beside the session.
    pub(crate) fn queue(&mut self) -> SendQueue {
        let (queue, _) = self.outbox.get_or_insert_with(socket::send_queue);
        queue.clone()
    }

    /// What the connection has next for the session: a frame from the device, or one
    /// from the outbox to write. Safe to cancel: nothing is lost.
    pub(crate) async fn next(&mut self, metrics: &Metrics) -> Next {
        tokio::select! {
            read = self.ws.next() => Next::Read(decode(read, metrics)),
            Some(out) = queued(&mut self.outbox) => Next::Write(out),
        }
    }

    /// The outbox's next frame; never, without an outbox. Safe to cancel.
    pub(crate) async fn next_queued(&mut self) -> Outgoing {
        match queued(&mut self.outbox).await {
            Some(out) => out,
            None => std::future::pending().await,
        }
    }

    /// Write `out`, taken from the outbox; false once the connection takes no more.
    /// An outbox left empty that no task holds any more is given up.
    pub(crate) async fn write_queued(&mut self, out: Outgoing, metrics: &Metrics) -> bool {
        let outbox = self.outbox.as_ref().map(|(_, outbox)| outbox);
        let open = socket::write_frame(&mut self.ws, out, outbox, metrics, Platform::Gadget).await;
        self.outbox
            .take_if(|(queue, outbox)| outbox.is_empty() && queue.is_unshared());
        open
    }

    /// Write `out` now, with nothing queued ahead of it.
    async fn write_now(&mut self, out: Outgoing, metrics: &Metrics) -> bool {
        socket::write_frame(&mut self.ws, out, None, metrics, Platform::Gadget).await
    }

    /// Send the session's `out`: written now when nothing waits, else queued behind
    /// what does. A full outbox is made room in by writing from its head, as nobody
    /// else drains it while the session is here. False once the connection takes no
    /// more.
    pub(crate) async fn send(&mut self, mut out: Outgoing, metrics: &Metrics) -> bool {
        loop {
            let Some((queue, outbox)) = &mut self.outbox else {
                return self.write_now(out, metrics).await;
            };
            match queue.try_send(out) {
                Ok(()) => return true,
                Err(back) => out = back,
            }
            // Full, yet nothing queued: its room is promised to tasks still to send.
            let Some(head) = outbox.try_recv() else {
                return self.write_now(out, metrics).await;
            };
            if !self.write_queued(head, metrics).await {
                return false;
            }
        }
    }

    /// The end of the connection: write what is left for it (its close among it), then
    /// give the device a grace to close in turn. Run on a task of its own, so the
    /// session goes on meanwhile.
    pub(crate) async fn goodbye(mut self: Box<Self>, metrics: Arc<Metrics>) {
        while let Some(out) = self
            .outbox
            .as_mut()
            .and_then(|(_, outbox)| outbox.try_recv())
        {
            if !self.write_queued(out, &metrics).await {
                break;
            }
        }
        socket::await_close_reply(&mut self.ws).await;
        self.disconnected();
    }

    /// Say the device is gone; the connection goes with its owner.
    pub(crate) fn disconnected(&self) {
        info!(peer = %self.peer, conn = self.id, "gadget disconnected");
    }
}

/// The next frame of `outbox`; never, without one. `None` never comes either: the
/// connection holds a sender itself. (One await point: this future is part of every
/// idle session's, so its size is what each connected device costs.)
async fn queued(outbox: &mut Option<(SendQueue, SendQueueReader)>) -> Option<Outgoing> {
    match outbox {
        Some((_, outbox)) => outbox.recv().await,
        None => std::future::pending().await,
    }
}

/// A read from the socket, as the session hears it.
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::timeout;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    use super::*;
    use crate::socket::OUTBOX;

    const WAIT: Duration = Duration::from_secs(5);

    /// The session writes its frames at once while no other task writes to the device.
    /// Once one does, they share the outbox, in order; the session is its only drainer,
    /// so a frame that finds it full writes from its head first. Drained and let go by
    /// the tasks, the outbox is given up.
    #[tokio::test]
    async fn frames_leave_in_order_by_one_outbox_that_exists_only_while_needed() {
        let (server, device) = tokio::io::duplex(1024 * 1024);
        let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let mut device = WebSocketStream::from_raw_socket(device, Role::Client, None).await;
        let peer = "127.0.0.1:9".parse().unwrap();
        let metrics = Metrics::default();
        let mut conn = Connection::new(7, server, peer);
        let text = |t: &str| Outgoing::Text(t.into());

        assert!(conn.send(text("first"), &metrics).await);
        assert!(conn.outbox.is_none(), "written, not queued");

        // Another task's frames fill the outbox.
        let task = conn.queue();
        for n in 0..OUTBOX {
            task.try_send(text(&n.to_string())).unwrap();
        }
        assert!(task.try_send(text("over")).is_err());
        let queued = timeout(WAIT, conn.send(text("session"), &metrics));
        assert!(queued.await.unwrap(), "queued, by making room");
        drop(task);
        while conn.outbox.is_some() {
            let Next::Write(out) = timeout(WAIT, conn.next(&metrics)).await.unwrap() else {
                panic!("the device sent nothing");
            };
            assert!(conn.write_queued(out, &metrics).await);
        }

        let mut heard = Vec::new();
        for _ in 0..OUTBOX + 2 {
            match timeout(WAIT, device.next()).await.unwrap() {
                Some(Ok(Message::Text(text))) => heard.push(text.to_string()),
                other => panic!("{other:?}"),
            }
        }
        let mut expected = vec!["first".to_owned()];
        expected.extend((0..OUTBOX).map(|n| n.to_string()));
        expected.push("session".into());
        assert_eq!(heard, expected);

        // The device closes: the session hears it, and the goodbye sends the reply.
        device.close(None).await.unwrap();
        assert!(matches!(
            conn.next(&metrics).await,
            Next::Read(Read::Closed)
        ));
        timeout(WAIT, conn.goodbye(Arc::new(metrics)))
            .await
            .unwrap();
        assert!(matches!(
            timeout(WAIT, device.next()).await.unwrap(),
            None | Some(Ok(Message::Close(_)))
        ));
    }

    /// Tasks can hold every slot of the outbox as reserved room with nothing queued yet:
    /// the session's frame then goes straight out rather than counting as a dead
    /// connection.
    #[tokio::test]
    async fn an_outbox_full_of_promised_room_lets_the_session_write_at_once() {
        let (server, device) = tokio::io::duplex(64 * 1024);
        let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let mut device = WebSocketStream::from_raw_socket(device, Role::Client, None).await;
        let peer = "127.0.0.1:9".parse().unwrap();
        let metrics = Metrics::default();
        let mut conn = Connection::new(7, server, peer);

        let mut promised = Vec::new();
        for _ in 0..OUTBOX {
            promised.push(
                timeout(WAIT, conn.queue().reserve())
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        assert!(conn
            .queue()
            .try_send(Outgoing::Text("over".into()))
            .is_err());
        let sent = timeout(WAIT, conn.send(Outgoing::Text("session".into()), &metrics));
        assert!(sent.await.unwrap(), "written, not refused");
        match timeout(WAIT, device.next()).await.unwrap() {
            Some(Ok(Message::Text(text))) => assert_eq!(text.as_str(), "session"),
            other => panic!("{other:?}"),
        }
        drop(promised);
    }
}
