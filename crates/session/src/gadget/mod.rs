//! A gadget's conversation as a state machine: [`Core`].
//!
//! [`Core`] is told what happens, with the time passed in: a connection attached or
//! gone, a frame, a port call, a deadline reached, the result of an effect. It hands
//! back frames for the device ([`crate::SessionCore::poll_transmit`]), effects for its
//! shell to carry out ([`crate::SessionCore::poll_effect`]: the store, files, the
//! authorizer, speech, pictures, the agent, answers to calls, firmware updates) and its
//! next deadline ([`crate::SessionCore::poll_timeout`]).
//!
//! Before a connection reaches its session, [`handshake::Handshake`] admits it: the
//! device proves its key, is enrolled on first contact, and is found paired or not.
//!
//! The sub-machines it drives are pure too: the question queue ([`prompts`]), the
//! utterance being received ([`utterance`]), the sensor write window ([`sensors`]),
//! the firmware updates ([`ota`]) and the cues that keep a voice turn from going silent
//! (`cues`).

mod calls;
mod core;
mod cues;
mod firmware;
pub mod handshake;
mod inbound;
pub mod ota;
mod peer;
pub mod prompts;
pub mod sensors;
mod speech;
pub mod utterance;

pub use self::calls::PictureNotSent;
pub use self::core::{Core, Effect, ImageJob, Rules};
pub use self::cues::CueTiming;
pub use self::peer::Peer;
pub use self::speech::SpeechChunk;

#[cfg(test)]
mod tests;
