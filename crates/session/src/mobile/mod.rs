//! A phone's conversation as a state machine: [`Core`].
//!
//! [`Core`] is told what happens, with the time passed in: a connection attached or
//! gone, a frame, a port call, a deadline reached, the result of an effect. It hands
//! back frames for the phone ([`crate::SessionCore::poll_transmit`]), effects for its
//! shell to carry out ([`crate::SessionCore::poll_effect`]: the store, files, the
//! authorizer, the hub's cards and upload budget, answers to calls, the agent's queue)
//! and its next deadline ([`crate::SessionCore::poll_timeout`]: cards lapsing, the
//! avatar going idle).
//!
//! A phone connection's keepalive and its right to `deliver` are rules too
//! ([`link`]): the core holds each connection's right and answers `ping` and `hello`
//! itself; the shell keeps the connection alive.
//!
//! What phones share (who may reach the agent, which device a card was shown to, the
//! bytes of unfinished uploads) is the hub's: a core asks for it in an effect and hears
//! the answer, so no core's state changes another's.

pub mod admission;
mod calls;
mod core;
mod inbound;
pub mod link;
mod media;
pub mod push;
mod seen;
pub mod uploads;

pub use self::calls::card_for;
pub use self::core::{Core, Effect, SaveFile, Saved};
pub use self::media::FileDown;

#[cfg(test)]
mod tests;
