//! What Herald's command-line tools (`herald`, the simulator, the bench) share on the
//! machine they run on:
//!
//! - [`AdminClient`]: the admin API of the server that runs on a data directory, found
//!   through the endpoint file it writes there;
//! - [`print_table`]: rows under headers, with device-supplied cells kept from the
//!   terminal;
//! - [`raise_fd_limit`]: one descriptor per device, so the soft limit goes up to the hard
//!   one.
//!
//! Where the configuration and the data directory are is the CLI's business (its flags
//! and environment); what is here takes them resolved.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod admin_client;
mod table;

pub use admin_client::{AdminClient, AdminError};
pub use table::print_table;

/// Lift the soft descriptor limit to the hard one and return the limit now in force;
/// children inherit it.
pub fn raise_fd_limit() -> u64 {
    match rlimit::Resource::NOFILE.get() {
        Ok((soft, hard)) => {
            if soft < hard && rlimit::Resource::NOFILE.set(hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 1024,
    }
}
