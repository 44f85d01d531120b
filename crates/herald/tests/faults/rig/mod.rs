//! What the scenarios share: seeded randomness and runs ([`seeds`]), the server and the
//! checks made on it after a kill ([`server`]), and the clients: gadgets ([`gadget`]) and
//! phones ([`phone`]).

pub mod gadget;
pub mod phone;
pub mod seeds;
pub mod server;

use std::time::Duration;

/// How long a test waits for something that must happen.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Poll `probe` until it gives a value.
pub async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {what} in time");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
