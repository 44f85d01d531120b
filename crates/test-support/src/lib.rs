//! What Herald's tests share, used only as a dev-dependency:
//!
//! - [`firmware`]: the fake ESP-IDF application image every OTA test pushes;
//! - [`relay`]: a port a test holds for its whole life in front of a server it restarts;
//! - [`vectors`]: the shared vectors files (`vectors/` at the repository root), which the
//!   protocol crates, the device core, the plugin and the SDK all check;
//! - with the `server` feature, [`server`]: a real server on loopback in the test's
//!   process ([`Harness`]); and the wire-level [`gadget`] ([`Gadget`], [`Conn`]) and
//!   [`phone`] ([`Phone`]) that talk to it frame by frame, each wait for the server
//!   [`promptly`], so that tests may pause time ([`wait`]); and a [`socket`] with no
//!   network under it, which breaks when told.
//!
//! The wire-level clients are deliberately not `herald-device` or `herald-mobile-client`:
//! the server's tests send what no well-behaved client would (malformed frames, a wrong
//! MAC, a hello without a token) and look at every frame that comes back. Tests that
//! want a real device or app use those crates.
//!
//! Helpers panic instead of returning errors: a failed step is a failed test.

pub mod firmware;
#[cfg(feature = "server")]
pub mod gadget;
#[cfg(feature = "server")]
pub mod phone;
pub mod relay;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod socket;
pub mod vectors;
#[cfg(feature = "server")]
pub mod wait;

#[cfg(feature = "server")]
pub use gadget::{Conn, Gadget, Incoming};
#[cfg(feature = "server")]
pub use phone::Phone;
pub use relay::Relay;
#[cfg(feature = "server")]
pub use server::{admin_call, admin_text, capture, demo, test_config, Harness, APP_TOKEN, WAIT};
#[cfg(feature = "server")]
pub use wait::{promptly, READER_STALL};
