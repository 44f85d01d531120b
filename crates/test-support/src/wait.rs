//! Waiting for the server in a test whose time may be paused.
//!
//! Under paused time tokio moves the clock to the next timer whenever no task can run,
//! even while an answer is still on its way through a socket or the store's thread: a
//! deadline, the client's or the server's, would then pass in no time. [`promptly`]
//! holds the clock while it waits (a blocking task in flight stops the jump, as
//! `tokio::time::pause` documents) and keeps its own limit in real time, so time moves
//! only when the test says so (`tokio::time::advance`) or waits on a timer itself.

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

use crate::server::WAIT;

/// How late a loaded machine may read a stream's first frame, so that later ones look
/// early against it: wide enough for a busy 2-core machine, still far below a pacer
/// running a whole lead ahead (the exact pacing is `herald bench speak`'s to measure).
pub const READER_STALL: Duration = Duration::from_millis(250);

/// Await `work`, which the server should finish at once; panics after [`WAIT`] of real
/// time. The clock, when paused, stands still meanwhile.
pub async fn promptly<F: Future>(work: F) -> F::Output {
    // The limit's thread ends early when `_working` is dropped, with this future.
    let (_working, finished) = mpsc::channel::<()>();
    let limit = tokio::task::spawn_blocking(move || finished.recv_timeout(WAIT));
    tokio::select! {
        out = work => out,
        _ = limit => panic!("nothing came within {WAIT:?}"),
    }
}

/// Poll `probe` until it gives a value: for what the server does on a task of its own
/// (a push, a write to its store). Panics after [`WAIT`] of real time.
pub async fn until<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    promptly(async {
        loop {
            if let Some(found) = probe() {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}
