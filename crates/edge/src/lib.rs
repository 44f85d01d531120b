//! The network edge: where bytes from the network become device connections.
//!
//! - [`listener`] accepts TCP (and [`tls`]) connections on each device port, reads the
//!   HTTP request itself ([`http`]): health checks and pages get a plain answer, an
//!   upgrade on the endpoint's path becomes a WebSocket handed to the platform's
//!   handshake;
//! - [`connection`] is an admitted device's connection as its session holds it: the
//!   socket, reads decoded by the platform's [`connection::Transport`], and the outbox
//!   other tasks write into;
//! - [`socket`] writes to a client through that bounded outbox, so a slow client makes
//!   its writers wait instead of growing a buffer;
//! - [`queue`] is the bounded queue under the outbox and the sessions' mailboxes,
//!   [`places`] the caps on what one source address may hold at once, and [`throttle`]
//!   how many wrong secrets it may offer.
//!
//! Nothing here knows a protocol's frames or a session's rules; the platforms and the
//! session loop (in `herald-server`) sit on it. A crate of its own, so what touches the
//! network can be read, and is rebuilt, apart from the rest of the server.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod connection;
pub mod http;
pub mod listener;
pub mod places;
pub mod queue;
pub mod socket;
pub mod throttle;
pub mod tls;
