//! Herald's device sessions as state machines that cannot do I/O.
//!
//! A session core is told what happened (a frame, an agent's call, an answer to one of
//! its effects, a deadline reached), always with the time, and hands back frames for
//! the device, effects for its shell and its next deadline. It owns nothing that waits:
//! no sockets, no channels, no clock, no store, no OS randomness. That is why the
//! crate's dependencies stop at the protocol, media and port crates; the compiler
//! keeps the promise that a core's behaviour is a function of its inputs.
//!
//! Why this shape (after quinn-proto): the rules of a conversation (who may speak, what
//! a timeout means, which question is on screen) are the part worth testing
//! exhaustively, and they are tested here in virtual time with seeded ids, without a
//! runtime. The server crate's shells are thin: they own the connection, the
//! mailboxes and the pending answers, and carry the effects out.
//!
//! - [`gadget`]: a gadget's conversation, its questions, utterances, speech bookkeeping
//!   and firmware updates.
//! - [`mobile`]: a phone's conversation, its cards, uploads and the avatar, and the rules
//!   of its connection (keepalive, who may `deliver`).
//! - [`SessionCore`]: what a shell needs of any core; [`io`]: what every core hands back,
//!   frames for a connection and effects for its shell.
//! - [`Ids`]: the ids a core mints, from entropy its shell injects.
//! - [`CallId`]: how an agent's call and its answer are matched, without a channel.

pub mod gadget;
mod ids;
pub mod io;
pub mod mobile;
pub mod note;
#[cfg(test)]
mod testing;

pub use ids::{Entropy, Ids};

/// What a device shows (and a speaker or an app's voice says) when a turn fails.
pub const FAILED_NOTICE: &str = "Sorry, that did not work.";

use std::time::Instant;

use herald_port::{DeliveryError, Response};

use crate::io::{Close, Frame, Output, Transmit};

/// What a shell needs of any session core, whatever its device: the frames and effects
/// it handed back, when it next has work, and whether it may end.
pub trait SessionCore {
    /// The work this core hands its shell.
    type Effect;

    /// The device this session is for.
    fn device_id(&self) -> &str;

    /// What the core has handed back and not yet been taken.
    fn output(&mut self) -> &mut Output<Self::Effect>;

    /// The next frame for a connection.
    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.output().transmits.pop()
    }

    /// The next effect for the shell.
    fn poll_effect(&mut self) -> Option<Self::Effect> {
        self.output().effects.pop()
    }

    /// The earliest instant the core's timers have work.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Nothing open that a retired session would lose.
    fn is_idle(&self) -> bool;

    /// Whether events of connection `conn` still count: a replaced or timed-out
    /// connection's last frames are dropped.
    fn is_current(&self, conn: u64) -> bool;

    /// The current connection ended on its own (closed, failed or timed out).
    fn handle_closed(&mut self);

    /// The id of the current connection, if there is one.
    fn current_conn(&self) -> Option<u64>;

    /// Close the current connection, if any, and forget it.
    fn close(&mut self, code: Close, reason: &str) {
        if let Some(conn) = self.current_conn() {
            let frame = Frame::Close(code, reason.to_owned());
            self.output().transmits.push(Transmit { conn, frame });
        }
        self.handle_closed();
    }

    /// The agent's queue was full: the device is told to slow down.
    fn handle_agent_full(&mut self);
}

/// What the server's metrics count of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// A turn started.
    Turn,
    /// An error of this code reached the device.
    Error(&'static str),
}

/// The shell's name for an agent's call (or an admin request) that a core answers
/// later, in an effect: the core holds the id, the shell the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId(pub u64);

/// The answer of a request with nothing to say but whether it went through.
pub fn done(sent: Result<(), DeliveryError>) -> Result<Response, DeliveryError> {
    sent.map(|()| Response::Done {})
}
