//! The pages the phone listener serves to browsers (the browser chat and the avatar).

pub(crate) use crate::http::Page;

/// Served by exact path on the phone listener, beside its WebSocket path.
pub(crate) static MOBILE_PAGES: &[Page] = &[];
