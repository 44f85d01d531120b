//! Tests of the whole server that reach inside it (a stand-in authorizer, its own
//! pairing store); the rest are in `crates/server/tests`.

mod console;
