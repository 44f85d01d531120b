//! Fault injection: `herald serve` is killed with SIGKILL at seeded random moments while
//! real clients (the gadget device core over a WebSocket, the phone client library) enroll
//! gadgets, approve pairings, stage and retry firmware updates, hold phone turns and
//! upload files. After every kill, with the server dead, the store must pass SQLite's
//! integrity check and nothing the server had acknowledged may be missing; the restarted
//! server must have swept every temporary file the dead one left.
//!
//! Each scenario runs `HERALD_FAULT_RUNS` times (3 by default) with consecutive seeds from
//! a random base, each printed before its run; `HERALD_FAULT_SEED=N` replays seed N (with
//! `HERALD_FAULT_RUNS`, the seeds from N on). Two tests pin down, without chance, what the
//! random ones ran into: a kill between an update's staged copy and its record, and
//! upload chunks out of order.
//!
//! One binary, one file a scenario: `enrollment`, `pairing`, `ota`, `phone_turns`,
//! `outbox` and `uploads`; `rig` holds what they share (the seeds, the server and its
//! checks, gadgets and phones).

#[path = "../common/mod.rs"]
mod common;
mod rig;

mod enrollment;
mod ota;
mod outbox;
mod pairing;
mod phone_turns;
mod uploads;
