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
//!   its writers wait instead of growing a buffer.
//!
//! Nothing here knows a protocol's frames or a session's rules; the platforms
//! (`crate::gadget`, `crate::mobile`) and the session loop (`crate::session`) sit on it.

pub(crate) mod connection;
pub(crate) mod http;
pub(crate) mod listener;
pub(crate) mod socket;
pub(crate) mod tls;
