//! The admin API's contract, apart from the server that keeps it: how a tool finds a
//! running server ([`Endpoint`]), the JSON the API takes and gives, and one blocking
//! client ([`AdminClient`]).
//!
//! A crate of its own because the tools that drive a server (the CLI's admin commands,
//! the bench, the tests) need the contract, not the server: linking the server would bring
//! its HTTP framework, SQLite and TLS into each of them. The server's handlers take and
//! return these same types, so the two ends cannot drift apart. The client is blocking
//! because its callers are one-shot commands and test threads, and it sits behind the
//! default feature `client` so that the server, which only answers, links no HTTP client.
//!
//! The firmware update records ([`OtaUpdate`]) live here too, as the API shows them:
//! the gadget session core (`herald-session`) and the store keep them in that shape.
//! The console's own endpoints are read by its pages only.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "client")]
mod client;
mod endpoint;
mod messages;
mod ota;

#[cfg(feature = "client")]
pub use client::{AdminClient, AdminError, Method, Reply};
pub use endpoint::{Endpoint, ENDPOINT_FILE, TOKEN_FILE};
pub use herald_port::PairingRecord;
pub use messages::{
    chat_page_url, ApproveRequest, DeliverKind, DeliverMedia, DeliverRequest, Delivered,
    DeviceRecordView, DeviceView, ErrorBody, Info, LoginLink, OtaRequest, OwnerRequest,
    PhoneRecordView, PhoneView, PushView, RevokeRequest,
};
pub use ota::{OtaImage, OtaProgress, OtaStatus, OtaUpdate, OtaView};

/// The most phones (device ids) one user may own at a time. A server refuses another
/// phone at its `hello`, so a tool that connects many phones (the bench) spreads them
/// over users.
pub const MAX_PHONES_PER_USER: usize = 32;
