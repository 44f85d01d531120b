//! Writing to a client, as every transport does it: a connection's bounded outbox is
//! drained to the socket while its session waits (`crate::connection`), so a slow client
//! makes the tasks that write to it wait instead of growing a buffer, and never makes
//! its session wait.
//!
//! The outbox is bounded twice: in frames by its channel and in bytes by
//! [`OUTBOX_BYTES`]. The session's own frames never wait for room; they go past that
//! bound up to [`SLOW_READER_FRAMES`] and [`SLOW_READER_BYTES`], beyond which the client
//! counts as no longer reading. A client that stops reading therefore pins at most
//! that and the socket's buffers, for at most [`SEND_TIMEOUT`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::connection::close_code;
use crate::queue;
use herald_metrics::Traffic;
use herald_session::io::Frame;

/// Frames waiting for a slow client before the session has to wait too.
pub const OUTBOX: usize = 32;
/// Bytes waiting for a slow client before the tasks writing to it have to wait too. The
/// largest frame still goes, one at a time.
pub const OUTBOX_BYTES: usize = 256 * 1024;
/// Frames queued for a client, the session's own past the bound among them, beyond
/// which it counts as no longer reading and its connection is dropped.
pub const SLOW_READER_FRAMES: usize = 8 * OUTBOX;
/// The same, in bytes.
pub const SLOW_READER_BYTES: usize = 4 * OUTBOX_BYTES;
/// How long a closed connection may take to say goodbye.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Send `error` (an encoded error frame), then close with `code` and `reason`.
pub async fn refuse<S>(ws: &mut WebSocketStream<S>, error: String, code: CloseCode, reason: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let close = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = ws.send(Message::Text(error.into())).await;
    let _ = ws.close(Some(close)).await;
    await_close_reply(ws).await;
}

/// What a handshake hears next on a connection no session holds yet.
pub enum Heard {
    Text(tungstenite::Utf8Bytes),
    Binary,
    /// The handshake's deadline passed first.
    Late,
    /// The connection closed or failed.
    Gone,
}

/// The next message for a handshake core (control frames skipped, text counted in
/// `traffic`), or [`Heard::Late`] once its `deadline` (the core's `poll_timeout`) passes.
pub async fn hear<S>(
    ws: &mut WebSocketStream<S>,
    deadline: Option<std::time::Instant>,
    traffic: &Traffic,
) -> Heard
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let late = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at.into()).await,
            None => std::future::pending().await,
        }
    };
    let next = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => {
                    traffic.inbound(text.len());
                    return Heard::Text(text);
                }
                Some(Ok(Message::Binary(_))) => return Heard::Binary,
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => return Heard::Gone,
            }
        }
    };
    tokio::select! {
        heard = next => heard,
        () = late => Heard::Late,
    }
}

/// Write a handshake core's frames (`next` until it has none) to a connection no session
/// holds yet, counting them in `traffic`; false once the connection takes no more.
pub async fn send_frames<S>(
    ws: &mut WebSocketStream<S>,
    mut next: impl FnMut() -> Option<Frame>,
    traffic: &Traffic,
) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(frame) = next() {
        let message = match frame {
            Frame::Text(text) => {
                traffic.outbound(text.len());
                Message::Text(text.into())
            }
            Frame::Close(close, reason) => Message::Close(Some(CloseFrame {
                code: close_code(close),
                reason: reason.into(),
            })),
            Frame::Ping => Message::Ping(Default::default()),
        };
        if ws.send(message).await.is_err() {
            return false;
        }
    }
    true
}

/// After our close, let the client's close reply arrive so it sees a clean close, but
/// not forever.
pub async fn await_close_reply<W>(ws: &mut W)
where
    W: futures_util::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
}

/// A frame for the socket, or what to do with it.
#[derive(Debug)]
pub enum Outgoing {
    Text(String),
    /// A binary media frame, header included.
    Binary(Vec<u8>),
    /// A WebSocket ping, for clients whose protocol has no heartbeat of its own.
    Ping,
    /// Close with this code and reason; nothing is written after it.
    Close(CloseCode, String),
}

impl Outgoing {
    pub(crate) fn len(&self) -> usize {
        match self {
            Outgoing::Text(text) => text.len(),
            Outgoing::Binary(frame) => frame.len(),
            Outgoing::Ping | Outgoing::Close(..) => 0,
        }
    }

    /// The WebSocket message, its bytes counted in `traffic`.
    pub(crate) fn into_message(self, traffic: &Traffic) -> Message {
        match self {
            Outgoing::Text(text) => {
                traffic.outbound(text.len());
                Message::Text(text.into())
            }
            Outgoing::Binary(frame) => {
                traffic.outbound(frame.len());
                Message::Binary(frame.into())
            }
            Outgoing::Ping => Message::Ping(Default::default()),
            Outgoing::Close(code, reason) => Message::Close(Some(CloseFrame {
                code,
                reason: reason.into(),
            })),
        }
    }
}

/// Nobody drains the outbox any more: the connection is over.
#[derive(Debug)]
pub struct Closed;

/// Bytes in the outbox, shared by its two ends.
#[derive(Default)]
struct Queued {
    bytes: AtomicUsize,
    /// Woken when the bytes fall under [`OUTBOX_BYTES`].
    drained: Notify,
}

/// A session's end of a connection's outbox.
#[derive(Clone)]
pub struct SendQueue {
    tx: queue::Sender<Outgoing>,
    queued: Arc<Queued>,
}

/// The end the connection's session drains.
pub struct SendQueueReader {
    rx: queue::Receiver<Outgoing>,
    queued: Arc<Queued>,
}

/// Room for one frame, reserved in advance (firmware frames wait for it beside the
/// session's mailbox).
pub struct Room {
    permit: queue::Permit<Outgoing>,
    queued: Arc<Queued>,
}

pub fn send_queue() -> (SendQueue, SendQueueReader) {
    let (tx, rx) = queue::channel(OUTBOX);
    let queued = Arc::new(Queued::default());
    (
        SendQueue {
            tx,
            queued: queued.clone(),
        },
        SendQueueReader { rx, queued },
    )
}

impl SendQueue {
    /// Queue `out`, waiting while the outbox is full in frames or in bytes. The slot is
    /// taken before the bytes are counted, with no wait between, so a send dropped while
    /// it waits (a stopped speech) leaves the count as it was.
    pub async fn send(&self, out: Outgoing) -> Result<(), Closed> {
        self.clone().reserve().await?.send(out);
        Ok(())
    }

    /// Queue `out` if the outbox has room for it now; it comes back if not (or if the
    /// writer is gone, which the next write finds out).
    pub fn try_send(&self, out: Outgoing) -> Result<(), Outgoing> {
        if self.queued.bytes.load(Ordering::Acquire) >= OUTBOX_BYTES {
            return Err(out);
        }
        let len = out.len();
        self.queued.bytes.fetch_add(len, Ordering::AcqRel);
        self.tx.try_send(out).map_err(|err| {
            self.queued.bytes.fetch_sub(len, Ordering::AcqRel);
            match err {
                queue::TrySendError::Full(out) | queue::TrySendError::Closed(out) => out,
            }
        })
    }

    /// Queue the session's `out` now, past the bound if need be; it comes back when the
    /// client is so far behind ([`SLOW_READER_FRAMES`], [`SLOW_READER_BYTES`]) that it
    /// counts as no longer reading, or when the writer is gone.
    pub fn push_over(&self, out: Outgoing) -> Result<(), Outgoing> {
        let bytes = self.queued.bytes.load(Ordering::Acquire);
        if bytes >= SLOW_READER_BYTES || self.tx.waiting() >= SLOW_READER_FRAMES {
            return Err(out);
        }
        let len = out.len();
        self.queued.bytes.fetch_add(len, Ordering::AcqRel);
        self.tx.push_over(out).map_err(|queue::Closed(out)| {
            self.queued.bytes.fetch_sub(len, Ordering::AcqRel);
            out
        })
    }

    /// No clone of this end is held elsewhere (nor a room reserved with one).
    pub fn is_unshared(&self) -> bool {
        self.tx.is_only_sender()
    }

    /// Room for one frame, once there is some.
    pub async fn reserve(self) -> Result<Room, Closed> {
        self.bytes_room().await?;
        let permit = self.tx.reserve_owned().await.map_err(|_| Closed)?;
        Ok(Room {
            permit,
            queued: self.queued,
        })
    }

    async fn bytes_room(&self) -> Result<(), Closed> {
        let has_room = || self.queued.bytes.load(Ordering::Acquire) < OUTBOX_BYTES;
        // The usual case, a client that keeps up, costs one load.
        if has_room() {
            return Ok(());
        }
        loop {
            // Made before the check, so a wake-up between the two is not missed.
            let drained = self.queued.drained.notified();
            if has_room() {
                return Ok(());
            }
            tokio::select! {
                _ = drained => {}
                _ = self.tx.closed() => return Err(Closed),
            }
        }
    }
}

impl Room {
    pub fn send(self, out: Outgoing) {
        self.queued.bytes.fetch_add(out.len(), Ordering::AcqRel);
        // A closed queue means the connection is over; nothing is waiting for the bytes.
        let _ = self.permit.send(out);
    }
}

impl SendQueueReader {
    /// The next frame; `Pending` wakes `cx` when one is queued.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outgoing>> {
        self.rx.poll_recv(cx)
    }

    pub fn is_empty(&self) -> bool {
        self.queued.bytes.load(Ordering::Acquire) == 0 && self.rx.is_empty()
    }

    /// `len` bytes have left; wake a task waiting for room if that made some.
    pub fn sent(&self, len: usize) {
        let before = self.queued.bytes.fetch_sub(len, Ordering::AcqRel);
        if before >= OUTBOX_BYTES && before - len < OUTBOX_BYTES {
            self.queued.drained.notify_waiters();
        }
    }
}

/// The longest writing may wait for a peer. A peer that stops reading fills its socket,
/// then this deadline ends the connection: its session lets it go, the waits on its
/// outbox end with it, and nothing the peer will never read is kept.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(15);

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn frame(len: usize) -> Outgoing {
        Outgoing::Binary(vec![0; len])
    }

    impl SendQueueReader {
        async fn recv(&mut self) -> Option<Outgoing> {
            std::future::poll_fn(|cx| self.poll_recv(cx)).await
        }

        fn try_recv(&mut self) -> Option<Outgoing> {
            self.recv().now_or_never().flatten()
        }
    }

    #[tokio::test]
    async fn the_queue_is_bounded_in_bytes_and_frees_room_as_frames_leave() {
        let (queue, mut reader) = send_queue();
        // Under the bound, frames go straight in; the one that crosses it still goes.
        queue.send(frame(OUTBOX_BYTES - 1)).await.unwrap();
        queue.send(frame(4 * 1024 * 1024)).await.unwrap();
        // Now full in bytes, though the channel has room: the next waits.
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move { queue.send(frame(10)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "queued past the bound");
        // The writer takes the big frame out: room again.
        for _ in 0..2 {
            let out = reader.recv().await.unwrap();
            reader.sent(out.len());
        }
        waiting.await.unwrap().unwrap();
        assert_eq!(reader.queued.bytes.load(Ordering::Acquire), 10);

        // A send dropped while it waits (a stopped speech) counts nothing.
        let out = reader.recv().await.unwrap();
        reader.sent(out.len());
        for _ in 0..OUTBOX {
            queue.send(frame(1)).await.unwrap();
        }
        assert!(
            queue.send(frame(100)).now_or_never().is_none(),
            "full in frames"
        );
        while let Some(out) = reader.try_recv() {
            reader.sent(out.len());
        }
        assert!(reader.is_empty(), "the dropped send left bytes counted");

        // A writer that is gone ends the wait instead of leaving the session stuck.
        queue.send(frame(OUTBOX_BYTES)).await.unwrap();
        let stuck = tokio::spawn({
            let queue = queue.clone();
            async move { queue.send(frame(1)).await }
        });
        tokio::task::yield_now().await;
        drop(reader);
        assert!(stuck.await.unwrap().is_err());
        assert!(queue.reserve().await.is_err());
    }

    /// The session's frames never wait for room, but a client that lets them pile up
    /// past the slow-reader bound is refused more, in frames or in bytes.
    #[tokio::test]
    async fn the_session_s_frames_pass_the_bound_up_to_the_slow_reader_limit() {
        let (queue, mut reader) = send_queue();
        for _ in 0..OUTBOX {
            queue.send(frame(1)).await.unwrap();
        }
        assert!(queue.try_send(frame(1)).is_err(), "full for the tasks");
        for _ in OUTBOX..SLOW_READER_FRAMES {
            queue.push_over(frame(1)).unwrap();
        }
        assert!(queue.push_over(frame(1)).is_err(), "too many frames");
        while let Some(out) = reader.try_recv() {
            reader.sent(out.len());
        }
        assert!(reader.is_empty());

        queue.push_over(frame(SLOW_READER_BYTES - 1)).unwrap();
        queue.push_over(frame(1)).unwrap();
        assert!(queue.push_over(frame(1)).is_err(), "too many bytes");
        assert!(
            queue.try_send(frame(1)).is_err(),
            "and no room for the tasks"
        );
    }
}
