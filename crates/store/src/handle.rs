//! The store as the async server uses it: a [`StoreHandle`] owns a thread, and every
//! call runs there, in turn, so SQLite never stalls the async threads.
//!
//! One thread is enough and is the fastest choice: the SQLite store is one connection
//! behind a lock, so its work runs one at a time anyway, and handing it to a thread that
//! is already awake costs far less than waking a blocking-pool thread per call that then
//! queues on the lock (`herald bench connect`: about a third more first-contact and a
//! fifth more returning-device handshakes per second). A store that is asynchronous at
//! heart (a shared database) would take this handle's place behind the same `run`.
//!
//! When a device was last seen is the one write nobody waits for: [`StoreHandle::seen`]
//! notes it, and the thread writes what was noted in one transaction every
//! [`SEEN_EVERY`], so a handshake or a goodbye costs no write and no thread hop of its
//! own.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{Millis, Store, StoreError};

/// How long a noted time may wait to be written.
pub const SEEN_EVERY: Duration = Duration::from_millis(500);

type Work = Box<dyn FnOnce(&dyn Store) + Send>;

enum Job {
    Work(Work),
    /// The first time was noted since the last write.
    Seen,
}

/// A store and the thread its calls run on; clones share both. The thread ends, after
/// writing the times still noted, when the last clone is dropped.
#[derive(Clone)]
pub struct StoreHandle {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    thread: mpsc::Sender<Job>,
    seen: Arc<Seen>,
}

/// Times noted and not yet written, one per device: bounded by the devices enrolled.
#[derive(Default)]
struct Seen(Mutex<HashMap<String, Millis>>);

impl Seen {
    /// Note a time; true if it is the first since the last write.
    fn note(&self, id: &str, at: Millis) -> bool {
        let mut noted = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let first = noted.is_empty();
        // A device seen again keeps its entry: no new key to allocate.
        if let Some(time) = noted.get_mut(id) {
            *time = at;
        } else {
            noted.insert(id.to_owned(), at);
        }
        first
    }

    fn write(&self, store: &dyn Store) -> Result<(), StoreError> {
        let noted = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        if noted.is_empty() {
            return Ok(());
        }
        let noted: Vec<(String, Millis)> = noted.into_iter().collect();
        store.set_last_seen(&noted)
    }

    /// For the thread, which has no caller to hand a failure to: a failed write loses
    /// only these times, which the devices' next connections replace.
    fn write_or_warn(&self, store: &dyn Store) {
        if let Err(err) = self.write(store) {
            tracing::warn!(%err, "could not record when devices were last seen");
        }
    }
}

impl StoreHandle {
    pub fn new(store: Arc<dyn Store>) -> Result<StoreHandle, StoreError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let seen = Arc::new(Seen::default());
        let (on_thread, seen_on_thread) = (store.clone(), seen.clone());
        std::thread::Builder::new()
            .name("herald-store".into())
            .spawn(move || serve(&*on_thread, &seen_on_thread, rx))
            .map_err(StoreError::Thread)?;
        Ok(StoreHandle {
            inner: Arc::new(Inner {
                store,
                thread: tx,
                seen,
            }),
        })
    }

    /// Run `work` with the store on the store's thread and wait for its result.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let work: Work = Box::new(move |store| {
            let _ = reply.send(work(store));
        });
        self.inner
            .thread
            .send(Job::Work(work))
            .map_err(|_| StoreError::Interrupted)?;
        answer.await.map_err(|_| StoreError::Interrupted)?
    }

    /// Like [`run`](Self::run), once the times still noted are written: for reads that
    /// show when devices were last seen.
    pub async fn run_fresh<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let seen = self.inner.seen.clone();
        self.run(move |store| {
            seen.write(store)?;
            work(store)
        })
        .await
    }

    /// Note that device `id` was seen at `at`, to be written within `SEEN_EVERY`.
    pub fn seen(&self, id: &str, at: Millis) {
        if self.inner.seen.note(id, at) {
            // Only a thread that has ended refuses, and it wrote what it had.
            let _ = self.inner.thread.send(Job::Seen);
        }
    }

    /// Write the times still noted now, as a server does when it stops.
    pub async fn write_seen(&self) -> Result<(), StoreError> {
        self.run_fresh(|_| Ok(())).await
    }

    /// The store itself, for start-up work where blocking is fine.
    pub fn blocking(&self) -> &dyn Store {
        &*self.inner.store
    }
}

fn serve(store: &dyn Store, seen: &Seen, jobs: mpsc::Receiver<Job>) {
    let mut write_at: Option<Instant> = None;
    loop {
        // Checked before waiting, so a steady stream of work cannot put the write off.
        if write_at.is_some_and(|at| at <= Instant::now()) {
            seen.write_or_warn(store);
            write_at = None;
        }
        let job = match write_at {
            None => jobs
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => jobs.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match job {
            Ok(Job::Work(work)) => {
                // A panic fails that call (its answer is dropped), not the thread.
                let run = std::panic::AssertUnwindSafe(|| work(store));
                let _ = std::panic::catch_unwind(run);
            }
            Ok(Job::Seen) => {
                write_at.get_or_insert_with(|| Instant::now() + SEEN_EVERY);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                seen.write_or_warn(store);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeviceProfile, SqliteStore};

    fn handle() -> (tempfile::TempDir, StoreHandle) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
        (dir, StoreHandle::new(Arc::new(store)).unwrap())
    }

    #[tokio::test]
    async fn calls_run_in_turn_and_a_panic_fails_only_its_own() {
        let (_dir, handle) = handle();
        let thread = |_: &dyn Store| Ok(std::thread::current().name().map(str::to_owned));
        assert_eq!(
            handle.run(thread).await.unwrap().as_deref(),
            Some("herald-store")
        );
        let panicked = handle
            .run(|_| -> Result<(), StoreError> { panic!("boom") })
            .await;
        assert!(matches!(panicked, Err(StoreError::Interrupted)));
        let devices = handle.clone().run(|store| store.devices()).await.unwrap();
        assert!(devices.is_empty(), "the thread lives on after a panic");
    }

    async fn last_seen(handle: &StoreHandle, id: &'static str) -> Option<Millis> {
        let device = handle.run(move |store| store.device(id)).await.unwrap();
        device.unwrap().last_seen
    }

    #[tokio::test]
    async fn noted_times_are_written_together_later_or_before_a_fresh_read() {
        let (_dir, handle) = handle();
        for id in ["a", "b"] {
            let enroll =
                move |store: &dyn Store| store.enroll(id, &[7; 32], &DeviceProfile::default(), 1);
            handle.run(enroll).await.unwrap();
        }

        handle.seen("a", 10);
        handle.seen("b", 20);
        handle.seen("a", 30);
        assert_eq!(
            last_seen(&handle, "a").await,
            Some(1),
            "not written at once"
        );
        let started = Instant::now();
        while last_seen(&handle, "b").await != Some(20) {
            assert!(started.elapsed() < SEEN_EVERY * 10, "never written");
            tokio::time::sleep(SEEN_EVERY / 10).await;
        }
        assert_eq!(
            last_seen(&handle, "a").await,
            Some(30),
            "the latest of a device"
        );

        // A fresh read sees a noted time at once; an older one never goes back.
        handle.seen("a", 40);
        handle.seen("b", 5);
        let fresh = handle.run_fresh(|store| store.devices()).await.unwrap();
        let times: Vec<_> = fresh.iter().map(|d| d.last_seen).collect();
        assert_eq!(times, [Some(40), Some(20)]);
    }

    #[tokio::test]
    async fn a_failed_write_of_noted_times_loses_only_those_and_the_thread_goes_on() {
        let (dir, handle) = handle();
        let enroll = |store: &dyn Store| store.enroll("a", &[7; 32], &DeviceProfile::default(), 1);
        handle.run(enroll).await.unwrap();
        // Another connection takes the table away, so the next write of noted times fails.
        let other = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        other
            .execute_batch("ALTER TABLE devices RENAME TO devices_away")
            .unwrap();
        handle.seen("a", 10);
        tokio::time::sleep(SEEN_EVERY * 3).await;
        other
            .execute_batch("ALTER TABLE devices_away RENAME TO devices")
            .unwrap();

        assert_eq!(last_seen(&handle, "a").await, Some(1), "that time is lost");
        handle.seen("a", 20);
        let started = Instant::now();
        while last_seen(&handle, "a").await != Some(20) {
            assert!(
                started.elapsed() < SEEN_EVERY * 10,
                "the next is never written"
            );
            tokio::time::sleep(SEEN_EVERY / 10).await;
        }
    }

    #[test]
    fn the_last_handle_dropped_writes_what_was_noted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("herald.db");
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        store
            .enroll("a", &[7; 32], &DeviceProfile::default(), 1)
            .unwrap();
        let handle = StoreHandle::new(store.clone()).unwrap();
        handle.seen("a", 99);
        drop(handle);
        let started = Instant::now();
        while store.device("a").unwrap().unwrap().last_seen != Some(99) {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
