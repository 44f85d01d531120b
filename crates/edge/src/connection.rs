//! A device's connection, as its session holds it. A connected device is one task: its
//! session (`crate::session`) owns the device's [`Connection`] (with the one it
//! replaced, until that has its close), reads the device's frames and hands it the
//! frames its core sends. A transport says only how a read from its socket reads to its
//! session ([`Transport`]); the gadget's is in `gadget/socket.rs`, the phone's in
//! `mobile/socket.rs`.
//!
//! Every frame to a device leaves by one path, in order: written at once when nothing
//! waits and the socket takes it, else queued in the connection's outbox (by the session,
//! or by a task that writes beside it: a gadget's speech, pictures and firmware). The
//! outbox is written while the session waits for its next event ([`Connection::next`]),
//! so a device that stops reading never makes its session wait: the session goes on
//! serving its calls, and the device is let go once it falls too far behind
//! (`socket::SLOW_READER_BYTES`) or reads nothing for `socket::SEND_TIMEOUT`.

use std::future::{poll_fn, Future};
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures_util::{Sink, Stream};
use herald_port::Platform;
use herald_session::io::{Close, Frame};
use herald_session::SessionCore;
use tokio::time::Sleep;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::{debug, info};

use crate::socket::{self, Outgoing, SendQueue, SendQueueReader, SEND_TIMEOUT};
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
    /// The connection broke, or takes no more of what is written to it.
    Lost,
}

/// An admitted device's connection: its socket, and the outbox of what waits for it.
pub struct Connection<T> {
    /// The hub's id of this connection.
    pub id: u64,
    ws: Pin<Box<dyn Socket>>,
    /// Frames waiting for the device: other tasks', and the session's own behind them
    /// while any wait. Made when a frame first has to wait (or a task asks for it) and
    /// given up once it is empty and no task holds it, so an idle device keeps none.
    outbox: Option<(SendQueue, SendQueueReader)>,
    writing: Writing,
    pub peer: SocketAddr,
    transport: PhantomData<fn() -> T>,
}

/// Where writing to the device stands.
#[derive(Default)]
struct Writing {
    /// A frame handed to the socket is not yet flushed.
    unflushed: bool,
    /// A close was handed to the socket: nothing is taken after it.
    closing: bool,
    /// The connection takes no more: its close is out, a write failed, or the device
    /// stopped reading.
    ended: bool,
    /// Armed while writing waits for the device; when it fires, the device is let go.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T: Transport> Connection<T> {
    pub fn new(id: u64, ws: impl Socket + 'static, peer: SocketAddr) -> Box<Self> {
        let mut ws = Box::pin(ws);
        // The socket keeps the waker of the last task that wrote to it: the handshake's,
        // whose whole future (some 10 KiB) it would keep alive until this connection
        // first writes, which for an idle phone may be minutes. A flush with no waker
        // (the handshake left nothing unflushed) lets it go now; the session's own
        // writes register the session's.
        let _ = ws
            .as_mut()
            .poll_flush(&mut Context::from_waker(Waker::noop()));
        Box::new(Connection {
            id,
            ws,
            outbox: None,
            writing: Writing::default(),
            peer,
            transport: PhantomData,
        })
    }

    /// The outbox, for a task that writes to the device beside the session.
    pub fn queue(&mut self) -> SendQueue {
        let (queue, _) = self.outbox.get_or_insert_with(socket::send_queue);
        queue.clone()
    }

    /// What the device does next, while what waits for it is written: a read (when
    /// `reading`; else only writing goes on), or [`Read::Lost`] once the connection
    /// takes no more. Safe to cancel: nothing is lost.
    pub async fn next(&mut self, reading: bool, metrics: &Metrics) -> Read<T::Message> {
        poll_fn(|cx| {
            if let Poll::Ready(false) = self.poll_write(cx, metrics) {
                return Poll::Ready(Read::Lost);
            }
            if !reading {
                return Poll::Pending;
            }
            self.ws
                .as_mut()
                .poll_next(cx)
                .map(|read| decode::<T>(read, metrics))
        })
        .await
    }

    /// Write what waits, until all of it is out; false once the connection takes no
    /// more.
    pub async fn written(&mut self, metrics: &Metrics) -> bool {
        poll_fn(|cx| self.poll_write(cx, metrics)).await
    }

    /// Keep writing what is queued, for as long as the connection takes it: done only
    /// when it takes no more.
    pub async fn keep_writing(&mut self, metrics: &Metrics) {
        poll_fn(|cx| match self.poll_write(cx, metrics) {
            Poll::Ready(false) => Poll::Ready(()),
            _ => Poll::Pending,
        })
        .await
    }

    /// Send the session's `out`: written now when nothing waits and the socket takes
    /// it, else queued behind what waits (past the outbox's bound: the session never
    /// waits). False once the connection takes no more, this frame too much for a
    /// device that has stopped reading among the reasons.
    pub fn send(&mut self, out: Outgoing, metrics: &Metrics) -> bool {
        // The session's next wait polls again with its own waker.
        let mut cx = Context::from_waker(Waker::noop());
        if self.outbox.is_none() {
            match self.poll_write(&mut cx, metrics) {
                Poll::Ready(false) => return false,
                Poll::Ready(true) => match self.ws.as_mut().poll_ready(&mut cx) {
                    Poll::Ready(Ok(())) => {
                        self.start(out, metrics);
                        return !matches!(self.poll_write(&mut cx, metrics), Poll::Ready(false));
                    }
                    Poll::Ready(Err(err)) => {
                        let _ = self.failed(&err);
                        return false;
                    }
                    Poll::Pending => {}
                },
                Poll::Pending => {}
            }
        } else if self.writing.ended || self.writing.closing {
            return false;
        }
        let (queue, _) = self.outbox.get_or_insert_with(socket::send_queue);
        if queue.push_over(out).is_err() {
            debug!(
                platform = T::PLATFORM.as_str(),
                "the peer fell too far behind: connection dropped"
            );
            metrics.error(T::PLATFORM, "slow_reader");
            self.writing.ended = true;
            return false;
        }
        !matches!(self.poll_write(&mut cx, metrics), Poll::Ready(false))
    }

    /// Write what is queued as far as the socket takes it now, one frame flushed before
    /// the next is taken (so the outbox, not the socket's buffer, holds what waits):
    /// `Ready(true)` once all of it is out (`cx` is woken when more is queued),
    /// `Ready(false)` once the connection takes no more, `Pending` while the device has
    /// not read enough.
    fn poll_write(&mut self, cx: &mut Context<'_>, metrics: &Metrics) -> Poll<bool> {
        loop {
            if self.writing.ended {
                return Poll::Ready(false);
            }
            if self.writing.unflushed {
                match self.ws.as_mut().poll_flush(cx) {
                    Poll::Ready(Ok(())) => self.writing.unflushed = false,
                    Poll::Ready(Err(err)) => return self.failed(&err),
                    Poll::Pending => return self.stalled(cx, metrics),
                }
            }
            if self.writing.closing {
                self.writing.ended = true;
                return Poll::Ready(false);
            }
            let Some((_, outbox)) = &mut self.outbox else {
                break;
            };
            match self.ws.as_mut().poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(err)) => return self.failed(&err),
                Poll::Pending => return self.stalled(cx, metrics),
            }
            let Poll::Ready(Some(out)) = outbox.poll_recv(cx) else {
                break;
            };
            outbox.sent(out.len());
            self.start(out, metrics);
        }
        self.writing.stalled = None;
        // An outbox left empty that no task holds any more is given up.
        self.outbox
            .take_if(|(queue, outbox)| outbox.is_empty() && queue.is_unshared());
        Poll::Ready(true)
    }

    /// Hand `out` to the socket, which has said it is ready.
    fn start(&mut self, out: Outgoing, metrics: &Metrics) {
        let closing = matches!(out, Outgoing::Close(..));
        let message = out.into_message(metrics.traffic(T::PLATFORM));
        match self.ws.as_mut().start_send(message) {
            Ok(()) => {
                self.writing.unflushed = true;
                self.writing.closing = closing;
                // The device is reading: the wait starts again.
                self.writing.stalled = None;
            }
            Err(err) => {
                let _ = self.failed(&err);
            }
        }
    }

    /// A write failed: the connection takes no more.
    fn failed(&mut self, err: &tungstenite::Error) -> Poll<bool> {
        debug!(%err, platform = T::PLATFORM.as_str(), "write failed");
        self.writing.ended = true;
        Poll::Ready(false)
    }

    /// Writing waits for the device: `Pending`, until it has waited [`SEND_TIMEOUT`]
    /// with nothing taken, which ends the connection.
    fn stalled(&mut self, cx: &mut Context<'_>, metrics: &Metrics) -> Poll<bool> {
        let stalled = self
            .writing
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(SEND_TIMEOUT)));
        if stalled.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        debug!(
            platform = T::PLATFORM.as_str(),
            "the peer stopped reading: connection dropped"
        );
        metrics.error(T::PLATFORM, "send_timeout");
        self.writing.ended = true;
        Poll::Ready(false)
    }

    /// The end of the connection: write what is left for it (its close among it), then
    /// give the device a grace to close in turn. Run on a task of its own, so the
    /// session goes on meanwhile.
    pub async fn goodbye(mut self: Box<Self>, metrics: Arc<Metrics>) {
        self.written(&metrics).await;
        socket::await_close_reply(&mut self.ws).await;
        self.disconnected();
    }

    /// Say the device is gone; the connection goes with its owner.
    pub fn disconnected(&self) {
        let platform = T::PLATFORM.as_str();
        info!(peer = %self.peer, conn = self.id, platform, "device disconnected");
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

    /// What the current device does next, while what waits for it is written (see
    /// [`Connection::next`]); never, without a connection.
    pub async fn next(&mut self, reading: bool, metrics: &Metrics) -> Read<T::Message> {
        match &mut self.current {
            Some(conn) => conn.next(reading, metrics).await,
            None => std::future::pending().await,
        }
    }

    /// Send `out` to connection `id`; dropped when that connection is gone. False once
    /// the current connection `id` takes no more.
    pub fn send(&mut self, id: u64, out: Outgoing, metrics: &Metrics) -> bool {
        if let Some(old) = self.replaced.as_mut().filter(|c| c.id == id) {
            old.send(out, metrics);
            return true;
        }
        match self.current.as_mut().filter(|c| c.id == id) {
            Some(conn) => conn.send(out, metrics),
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

    use futures_util::{SinkExt, StreamExt};
    use tokio::io::DuplexStream;
    use tokio::time::timeout;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    use super::*;
    use crate::socket::{OUTBOX, SLOW_READER_BYTES};

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
    /// Once one does, they share the outbox, in order; the session's frames never wait,
    /// going past the bound the tasks wait at. Drained and let go by the tasks, the
    /// outbox is given up.
    #[tokio::test]
    async fn frames_leave_in_order_by_one_outbox_that_exists_only_while_needed() {
        let (mut conn, mut device) = connected(1024 * 1024).await;
        let metrics = Metrics::default();
        let text = |t: &str| Outgoing::Text(t.into());

        assert!(conn.send(text("first"), &metrics));
        assert!(conn.outbox.is_none(), "written, not queued");

        // Another task's frames fill the outbox.
        let task = conn.queue();
        for n in 0..OUTBOX {
            task.try_send(text(&n.to_string())).unwrap();
        }
        assert!(task.try_send(text("over")).is_err());
        assert!(
            conn.send(text("session"), &metrics),
            "queued past the bound"
        );
        drop(task);
        assert!(timeout(WAIT, conn.written(&metrics)).await.unwrap());
        assert!(conn.outbox.is_none(), "given up once empty");

        let mut heard = Vec::new();
        for _ in 0..OUTBOX + 2 {
            heard.push(text_of(timeout(WAIT, device.next()).await.unwrap()));
        }
        let mut expected = vec!["first".to_owned()];
        expected.extend((0..OUTBOX).map(|n| n.to_string()));
        expected.push("session".into());
        assert_eq!(heard, expected);

        // The device closes: the session hears it, and the goodbye sends the reply.
        device.close(None).await.unwrap();
        assert!(matches!(conn.next(true, &metrics).await, Read::Closed));
        timeout(WAIT, conn.goodbye(Arc::new(metrics)))
            .await
            .unwrap();
        assert!(matches!(
            timeout(WAIT, device.next()).await.unwrap(),
            None | Some(Ok(Message::Close(_)))
        ));
    }

    /// Tasks can hold every slot of the outbox as reserved room with nothing queued yet:
    /// the session's frame still goes out at once.
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
        assert!(conn.send(Outgoing::Text("session".into()), &metrics));
        let heard = text_of(timeout(WAIT, device.next()).await.unwrap());
        assert_eq!(heard, "session", "written without the session's next wait");
        drop(promised);
    }

    /// A device that stops reading makes no send wait: the session's frames queue, and
    /// once the device reads again they all arrive, in order, written while the
    /// session waits for what the device says.
    #[tokio::test]
    async fn a_device_that_stops_reading_holds_up_no_send() {
        const FRAMES: usize = 64;
        let (mut conn, mut device) = connected(4 * 1024).await;
        let metrics = Metrics::default();
        let frame = |n: usize| format!("{n:04}{}", "x".repeat(1000));
        for n in 0..FRAMES {
            assert!(conn.send(Outgoing::Text(frame(n)), &metrics), "frame {n}");
        }
        assert!(
            conn.outbox.is_some(),
            "most of it waits: the device reads nothing"
        );

        let reader = tokio::spawn(async move {
            let mut heard = Vec::new();
            for _ in 0..FRAMES {
                heard.push(text_of(device.next().await));
            }
            (heard, device)
        });
        let session = async {
            // The device says nothing; its session waits and the outbox drains.
            let _ = conn.next(true, &metrics).await;
        };
        let (heard, _device) = tokio::select! {
            heard = reader => heard.unwrap(),
            () = session => panic!("the connection ended"),
            () = tokio::time::sleep(WAIT) => panic!("the queued frames were not written"),
        };
        assert_eq!(heard, (0..FRAMES).map(frame).collect::<Vec<_>>());
        assert!(timeout(WAIT, conn.written(&metrics)).await.unwrap());
        assert!(conn.outbox.is_none());
    }

    /// A device that reads nothing is let go: at once when the session's frames pile up
    /// past the slow-reader bound, else when writing has waited `SEND_TIMEOUT`.
    #[tokio::test(start_paused = true)]
    async fn a_device_that_reads_nothing_is_let_go() {
        let metrics = Metrics::default();
        let big = || Outgoing::Binary(vec![0; 64 * 1024]);

        let (mut conn, _device) = connected(4 * 1024).await;
        let started = tokio::time::Instant::now();
        let sent = (0..2 * SLOW_READER_BYTES / (64 * 1024))
            .take_while(|_| conn.send(big(), &metrics))
            .count();
        assert!(
            sent >= SLOW_READER_BYTES / (64 * 1024),
            "refused after {sent}"
        );
        assert!(sent < 2 * SLOW_READER_BYTES / (64 * 1024), "never refused");
        assert!(matches!(conn.next(true, &metrics).await, Read::Lost));
        assert_eq!(started.elapsed(), Duration::ZERO, "let go at once");

        let (mut conn, _device) = connected(4 * 1024).await;
        assert!(conn.send(big(), &metrics));
        assert!(matches!(conn.next(true, &metrics).await, Read::Lost));
        assert_eq!(started.elapsed(), SEND_TIMEOUT);
        let gauges = herald_metrics::Gauges {
            gadgets_online: 0,
            phones_online: 0,
            ota: Vec::new(),
            ota_bytes_sent: 0,
        };
        let text = metrics.render(&gauges);
        for code in ["slow_reader", "send_timeout"] {
            assert!(text.contains(code), "{code} is not counted: {text}");
        }
    }

    /// While its session reads nothing (a phone's push is out), the device's frames
    /// wait, and what waits for the device is still written.
    #[tokio::test]
    async fn not_reading_leaves_the_device_s_frames_but_still_writes() {
        let (mut conn, mut device) = connected(64 * 1024).await;
        let metrics = Metrics::default();
        device.send(Message::Text("said".into())).await.unwrap();
        let task = conn.queue();
        task.send(Outgoing::Text("queued".into())).await.unwrap();

        let waited = timeout(Duration::from_millis(100), conn.next(false, &metrics)).await;
        assert!(waited.is_err(), "a frame was read");
        let heard = text_of(timeout(WAIT, device.next()).await.unwrap());
        assert_eq!(heard, "queued", "written while not reading");
        let Read::Message(said) = timeout(WAIT, conn.next(true, &metrics)).await.unwrap() else {
            panic!("the device's frame is gone");
        };
        assert_eq!(said, "said");
    }

    /// The handshake's task writes to the socket before the session holds it, leaving
    /// its waker there; a connection lets that waker go at once, or the whole finished
    /// handshake (its task's memory) would live on until the device's next write.
    #[tokio::test]
    async fn a_connection_lets_go_of_the_waker_its_handshake_left() {
        use std::task::Wake;

        struct Handshake;
        impl Wake for Handshake {
            fn wake(self: Arc<Self>) {}
        }

        let (server, _device) = tokio::io::duplex(1024);
        let mut ws = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        ws.send(Message::Text("ready".into())).await.unwrap();
        let handshake = Arc::new(Handshake);
        let waker = std::task::Waker::from(handshake.clone());
        let flushed = Pin::new(&mut ws).poll_flush(&mut Context::from_waker(&waker));
        assert!(flushed.is_ready());
        drop(waker);
        assert!(
            Arc::strong_count(&handshake) > 1,
            "the socket holds the waker"
        );

        let conn = Connection::<Raw>::new(7, ws, "127.0.0.1:9".parse().unwrap());
        assert_eq!(Arc::strong_count(&handshake), 1, "the connection let it go");
        drop(conn);
    }

    fn text_of(read: Option<Result<Message, tungstenite::Error>>) -> String {
        match read {
            Some(Ok(Message::Text(text))) => text.to_string(),
            other => panic!("{other:?}"),
        }
    }
}
