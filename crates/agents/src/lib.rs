//! Agent backends behind Herald's conversation port: the demo agent, the echo agent
//! for load tests, and the bridge to Hermes.
//!
//! Each backend implements [`herald_port::Agent`] and answers through the
//! [`herald_port::Outbound`] it was built with; none of them sees a socket or a frame.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod bridge;
pub mod demo;
pub mod echo;

pub use bridge::Bridge;
pub use demo::DemoAgent;
pub use echo::EchoAgent;
