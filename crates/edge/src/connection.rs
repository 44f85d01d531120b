//! A device's connection, as its session holds it. A connected device is one task: its
//! session (`crate::session`) owns the device's [`Connection`] (with the one it
//! replaced, until that has its close), reads the device's frames and writes the frames
//! its core hands back. A transport says only how a read from its socket reads to its
//! session ([`Transport`]); the gadget's is in `gadget/socket.rs`, the phone's in
//! `mobile/socket.rs`.
//!
//! Every frame to a device leaves by one path: written by its session, or queued in the
//! connection's outbox by a task that writes beside the session (a gadget's speech,
//! pictures and firmware) and written by the session in turn.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Sink, Stream, StreamExt};
use herald_port::Platform;
use herald_session::io::{Close, Frame};
use herald_session::SessionCore;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info};

use crate::socket::{self, Outgoing, SendQueue, SendQueueReader};
use herald_metrics::Metrics;

/// A WebSocket, whatever carries it (plain or TLS).
pub trait Socket:
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

/// How a platform reads what its devices send.
pub trait Transport: 'static {
    /// A message from the device, as its session hears it: a frame, or why it is none.
    type Message;
    const PLATFORM: Platform;

    fn text(text: &str) -> Self::Message;
    fn binary(data: Vec<u8>) -> Self::Message;
    /// A message over the endpoint's size limit: the connection cannot go on after it.
    fn too_big() -> Self::Message;
    /// A text message that is not UTF-8: the connection cannot go on after it.
    fn not_utf8() -> Self::Message;
}

/// What the device did, as its session hears it.
pub enum Read<M> {
    Message(M),
    /// A control frame: proof of life only.
    Alive,
    /// The device closed: the close reply is the library's, sent as the goodbye reads on.
    Closed,
    /// The connection broke.
    Lost,
}

/// An admitted device's connection: its socket, and the outbox tasks beside the session
/// write into.
pub struct Connection<T> {
    /// The hub's id of this connection.
    pub id: u64,
    ws: Pin<Box<dyn Socket>>,
    /// Frames other tasks queue for the device, and the session's own behind them
    /// while any wait. Made when a task first asks for it and given up once it is empty
    /// and no task holds it, so an idle device keeps none.
    outbox: Option<(SendQueue, SendQueueReader)>,
    pub peer: SocketAddr,
    transport: PhantomData<fn() -> T>,
}

/// What a connection has for its session.
pub enum Next<R> {
    Read(R),
    Write(Outgoing),
}

impl<T: Transport> Connection<T> {
    pub fn new(id: u64, ws: impl Socket + 'static, peer: SocketAddr) -> Box<Self> {
        Box::new(Connection {
            id,
            ws: Box::pin(ws),
            outbox: None,
            peer,
            transport: PhantomData,
        })
    }

    /// The outbox, for a task that writes to the device beside the session.
    pub fn queue(&mut self) -> SendQueue {
        let (queue, _) = self.outbox.get_or_insert_with(socket::send_queue);
        queue.clone()
    }

    /// What the connection has next for the session: a read from the device, or a frame
    /// from the outbox to write. Safe to cancel: nothing is lost.
    pub async fn next(&mut self, metrics: &Metrics) -> Next<Read<T::Message>> {
        tokio::select! {
            read = self.ws.next() => Next::Read(decode::<T>(read, metrics)),
            Some(out) = queued(&mut self.outbox) => Next::Write(out),
        }
    }

    /// The outbox's next frame; never, without an outbox. Safe to cancel.
    pub async fn next_queued(&mut self) -> Outgoing {
        match queued(&mut self.outbox).await {
            Some(out) => out,
            None => std::future::pending().await,
        }
    }

    /// Write `out`, taken from the outbox; false once the connection takes no more.
    /// An outbox left empty that no task holds any more is given up.
    pub async fn write_queued(&mut self, out: Outgoing, metrics: &Metrics) -> bool {
        let outbox = self.outbox.as_ref().map(|(_, outbox)| outbox);
        let open = socket::write_frame(&mut self.ws, out, outbox, metrics, T::PLATFORM).await;
        self.outbox
            .take_if(|(queue, outbox)| outbox.is_empty() && queue.is_unshared());
        open
    }

    /// Write `out` now, with nothing queued ahead of it.
    async fn write_now(&mut self, out: Outgoing, metrics: &Metrics) -> bool {
        socket::write_frame(&mut self.ws, out, None, metrics, T::PLATFORM).await
    }

    /// Send the session's `out`: written now when nothing waits, else queued behind
    /// what does. A full outbox is made room in by writing from its head, as nobody
    /// else drains it while the session is here. False once the connection takes no
    /// more.
    pub async fn send(&mut self, mut out: Outgoing, metrics: &Metrics) -> bool {
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
    pub async fn goodbye(mut self: Box<Self>, metrics: Arc<Metrics>) {
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
    pub fn disconnected(&self) {
        let platform = T::PLATFORM.as_str();
        info!(peer = %self.peer, conn = self.id, platform, "device disconnected");
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
fn decode<T: Transport>(
    read: Option<Result<Message, tungstenite::Error>>,
    metrics: &Metrics,
) -> Read<T::Message> {
    let inbound = |len| metrics.traffic(T::PLATFORM).inbound(len);
    match read {
        Some(Ok(Message::Text(text))) => {
            inbound(text.len());
            Read::Message(T::text(&text))
        }
        Some(Ok(Message::Binary(data))) => {
            inbound(data.len());
            Read::Message(T::binary(data.into()))
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Read::Alive,
        Some(Ok(Message::Close(_))) => Read::Closed,
        // The stream cannot go on after these; the device hears why.
        Some(Err(tungstenite::Error::Capacity(_))) => Read::Message(T::too_big()),
        Some(Err(tungstenite::Error::Utf8(_))) => Read::Message(T::not_utf8()),
        Some(Err(err)) => {
            debug!(%err, platform = T::PLATFORM.as_str(), "read failed");
            Read::Lost
        }
        None => Read::Lost,
    }
}

/// A session's connections: the device's, while it has one, and the one a new
/// connection replaced, until the core's close for it is written.
pub struct Connections<T> {
    current: Option<Box<Connection<T>>>,
    replaced: Option<Box<Connection<T>>>,
}

impl<T> Default for Connections<T> {
    fn default() -> Self {
        Connections {
            current: None,
            replaced: None,
        }
    }
}

impl<T: Transport> Connections<T> {
    /// `conn` takes over; the one it replaces is kept until [`Connections::settle`].
    pub fn attach(&mut self, conn: Box<Connection<T>>) {
        self.replaced = self.current.replace(conn);
    }

    pub fn current(&mut self) -> Option<&mut Connection<T>> {
        self.current.as_deref_mut()
    }

    /// What the current connection has next; never, without one.
    pub async fn next(&mut self, metrics: &Metrics) -> Next<Read<T::Message>> {
        match &mut self.current {
            Some(conn) => conn.next(metrics).await,
            None => std::future::pending().await,
        }
    }

    /// Write `out`, from the current connection's outbox; false once it takes no more.
    pub async fn write_queued(&mut self, out: Outgoing, metrics: &Metrics) -> bool {
        match &mut self.current {
            Some(conn) => conn.write_queued(out, metrics).await,
            None => true,
        }
    }

    /// Send `out` to connection `id`; dropped when that connection is gone. False once
    /// the current connection `id` takes no more.
    pub async fn send(&mut self, id: u64, out: Outgoing, metrics: &Metrics) -> bool {
        if let Some(old) = self.replaced.as_mut().filter(|c| c.id == id) {
            old.send(out, metrics).await;
            return true;
        }
        match self.current.as_mut().filter(|c| c.id == id) {
            Some(conn) => conn.send(out, metrics).await,
            None => true,
        }
    }

    /// The current connection broke: it is let go.
    pub fn let_go(&mut self) {
        if let Some(conn) = self.current.take() {
            conn.disconnected();
        }
    }

    /// The core's output is written: the replaced connection, and the current one once
    /// the core is done with it, say goodbye on tasks of their own.
    pub fn settle(&mut self, core: &impl SessionCore, metrics: &Arc<Metrics>) {
        let ended = self.current.take_if(|conn| !core.is_current(conn.id));
        for conn in [self.replaced.take(), ended].into_iter().flatten() {
            tokio::spawn(conn.goodbye(metrics.clone()));
        }
    }
}

/// A core's frame as the WebSocket writes it.
pub fn outgoing(frame: Frame) -> Outgoing {
    match frame {
        Frame::Text(text) => Outgoing::Text(text),
        Frame::Close(close, reason) => Outgoing::Close(close_code(close), reason),
        Frame::Ping => Outgoing::Ping,
    }
}

/// The WebSocket close code for a core's reason to close.
pub fn close_code(close: Close) -> CloseCode {
    match close {
        Close::Normal => CloseCode::Normal,
        Close::Away => CloseCode::Away,
        Close::TooBig => CloseCode::Size,
        Close::Invalid => CloseCode::Invalid,
        Close::Policy => CloseCode::Policy,
        Close::Error => CloseCode::Error,
        Close::Again => CloseCode::Again,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::DuplexStream;
    use tokio::time::timeout;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    use super::*;
    use crate::socket::OUTBOX;

    /// A transport whose messages are the text they came as.
    enum Raw {}

    impl Transport for Raw {
        type Message = String;
        const PLATFORM: Platform = Platform::Gadget;

        fn text(text: &str) -> String {
            text.to_owned()
        }
        fn binary(_: Vec<u8>) -> String {
            "binary".into()
        }
        fn too_big() -> String {
            "too big".into()
        }
        fn not_utf8() -> String {
            "not UTF-8".into()
        }
    }

    const WAIT: Duration = Duration::from_secs(5);

    /// A server's connection and the device at its other end, over `buffer` bytes.
    async fn connected(buffer: usize) -> (Box<Connection<Raw>>, WebSocketStream<DuplexStream>) {
        let (server, device) = tokio::io::duplex(buffer);
        let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let device = WebSocketStream::from_raw_socket(device, Role::Client, None).await;
        let conn = Connection::new(7, server, "127.0.0.1:9".parse().unwrap());
        (conn, device)
    }

    /// The session writes its frames at once while no other task writes to the device.
    /// Once one does, they share the outbox, in order; the session is its only drainer,
    /// so a frame that finds it full writes from its head first. Drained and let go by
    /// the tasks, the outbox is given up.
    #[tokio::test]
    async fn frames_leave_in_order_by_one_outbox_that_exists_only_while_needed() {
        let (mut conn, mut device) = connected(1024 * 1024).await;
        let metrics = Metrics::default();
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
        let (mut conn, mut device) = connected(64 * 1024).await;
        let metrics = Metrics::default();

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
