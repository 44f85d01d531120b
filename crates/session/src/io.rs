//! What a core hands back for its connection: [`Transmit`]s, kept in a [`Queue`].

use std::collections::VecDeque;

/// Why a core closes a connection; the shell maps it to the transport's close code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// A normal end: replaced by a new connection, or the device was forgotten.
    Normal,
    /// Going away: the peer went silent, or the server is stopping.
    Away,
    /// The peer sent a message over the size limit.
    TooBig,
    /// The peer sent data that is not what the frame type says (text not UTF-8).
    Invalid,
    /// The peer may not go on: a refused handshake. Clients must not retry at once.
    Policy,
    /// The server failed the peer (1011); a later try may work.
    Error,
    /// Try again later (1013): a throttle that ends soon.
    Again,
}

/// The shell could not do what its core asked (write a file, keep something in the
/// store). The shell logs the cause, which is the owner's to read; the core decides what
/// the device is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server could not do it")]
pub struct Failed;

/// A frame for a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A JSON text message, encoded.
    Text(String),
    /// Close the connection, with a reason.
    Close(Close, String),
    /// A transport-level ping: the peer's pong is proof of life.
    Ping,
}

/// A frame for connection `conn`: the current one, or the one a new connection
/// replaced, for its close.
#[derive(Debug)]
pub struct Transmit {
    /// The shell's id of the connection.
    pub conn: u64,
    /// What to write.
    pub frame: Frame,
}

/// What a core hands back, in order: frames for its connections and effects for its
/// shell. Drained, it holds no buffer.
#[derive(Debug)]
pub struct Output<E> {
    pub(crate) transmits: Queue<Transmit>,
    pub(crate) effects: Queue<E>,
}

impl<E> Default for Output<E> {
    fn default() -> Self {
        Output {
            transmits: Queue::default(),
            effects: Queue::default(),
        }
    }
}

/// A core's queue of frames or effects, first in first out. Drained, it gives its room
/// back, so an idle session holds no buffer.
#[derive(Debug)]
pub struct Queue<T>(VecDeque<T>);

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue(VecDeque::new())
    }
}

impl<T> Queue<T> {
    /// Add `item` at the back.
    pub fn push(&mut self, item: T) {
        self.0.push_back(item);
    }

    /// Take the front item; once empty, the queue frees its room.
    pub fn pop(&mut self) -> Option<T> {
        let next = self.0.pop_front();
        if next.is_none() {
            self.0 = VecDeque::new();
        }
        next
    }
}
