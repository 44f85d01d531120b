//! What Herald's command-line tools (`herald`, the bench) share on the machine they run
//! on:
//!
//! - [`print_table`]: rows under headers, with device-supplied cells kept from the
//!   terminal;
//! - [`raise_fd_limit`]: one descriptor per device, so the soft limit goes up to the hard
//!   one.
//!
//! The admin API's client lives with the API's contract, in `herald-admin-api`.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod table;

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
