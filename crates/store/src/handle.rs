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
//! Two writes nobody waits for are noted here and written together later, each kind in
//! one transaction, so a handshake costs no transaction and no thread hop of its own:
//! - a first contact's enrollment ([`StoreHandle::enroll`]), within [`ENROLLED_WITHIN`].
//!   It is appended to a journal beside the store first, so it survives a crash (see
//!   [`first_contacts`](crate::first_contacts)); the server's memory of enrolled keys
//!   decides the handshake. A fleet coming online is written a few hundred devices at
//!   a time, many to a page of the table. Noted enrollments are written before any
//!   other call runs, so every call sees them.
//! - when a device was last seen ([`StoreHandle::seen`]), within [`SEEN_EVERY`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{Enrollment, Millis, NewDevice, Store, StoreError};
use crate::first_contacts::FirstContacts;

/// How long a noted time may wait to be written.
pub const SEEN_EVERY: Duration = Duration::from_millis(500);
/// How long a noted enrollment may wait to be written.
pub const ENROLLED_WITHIN: Duration = Duration::from_millis(100);

type Work = Box<dyn FnOnce(&dyn Store) + Send>;

enum Job {
    Work(Work),
    /// The first time was noted since the last write.
    Seen,
    /// The first enrollment was noted since the last write.
    Enrolled,
}

/// A store and the thread its calls run on; clones share both. The thread ends, after
/// writing what is still noted, when the last clone is dropped.
#[derive(Clone)]
pub struct StoreHandle {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    thread: mpsc::Sender<Job>,
    noted: Arc<Noted>,
}

/// What was noted and not yet written.
struct Noted {
    /// Times, one per device: bounded by the devices enrolled.
    seen: Mutex<HashMap<String, Millis>>,
    /// First contacts, each a device the server now holds as enrolled: bounded by them.
    enrolled: FirstContacts,
}

impl Noted {
    /// Note a time; true if it is the first since the last write.
    fn seen(&self, id: &str, at: Millis) -> bool {
        let mut noted = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let first = noted.is_empty();
        // A device seen again keeps its entry: no new key to allocate.
        if let Some(time) = noted.get_mut(id) {
            *time = at;
        } else {
            noted.insert(id.to_owned(), at);
        }
        first
    }

    fn write_seen(&self, store: &dyn Store) -> Result<(), StoreError> {
        let noted = std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()));
        if noted.is_empty() {
            return Ok(());
        }
        let noted: Vec<(String, Millis)> = noted.into_iter().collect();
        store.set_last_seen(&noted)
    }

    /// For the thread, which has no caller to hand a failure to: a failed write loses
    /// only these times, which the devices' next connections replace.
    fn write_seen_or_warn(&self, store: &dyn Store) {
        if let Err(err) = self.write_seen(store) {
            tracing::warn!(%err, "could not record when devices were last seen");
        }
    }

    /// Write the enrollments noted, then let the journal go of them. Those the store
    /// was too busy to take are written to the journal again; when to try them again
    /// (the first contacts noted meanwhile wake the thread themselves).
    fn write_enrolled(&self, store: &dyn Store) -> Option<Instant> {
        let (devices, turn) = self.enrolled.take();
        if devices.is_empty() {
            return None;
        }
        let again = enroll_all(store, devices);
        let retry = (!again.is_empty()).then(|| {
            tracing::warn!(
                devices = again.len(),
                "the store is held by another writer: first contacts wait in the journal"
            );
            Instant::now() + ENROLLED_WITHIN
        });
        let mut kept = true;
        for device in again {
            if let Err(err) = self.enrolled.append(device) {
                tracing::error!(%err, "could not keep a first contact for the next try");
                kept = false;
            }
        }
        // Kept, the file is read again at the next start.
        if kept {
            self.enrolled.written(turn);
        }
        retry
    }
}

/// Enroll first contacts the server welcomed; returns those to try again, the store
/// being held by another writer. Should the transaction fail otherwise, each is tried
/// alone, so one device's trouble is its own; one lost enrolls again (sending its key
/// again) when it returns.
fn enroll_all(store: &dyn Store, devices: Vec<NewDevice>) -> Vec<NewDevice> {
    let outcomes = match store.enroll(&devices) {
        Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
        Err(err) if err.is_busy() => return devices,
        Err(err) if devices.len() == 1 => vec![Err(err)],
        Err(_) => devices
            .iter()
            .map(|device| {
                let outcome = store.enroll(std::slice::from_ref(device))?;
                outcome.first().copied().ok_or(StoreError::Interrupted)
            })
            .collect(),
    };
    let mut again = Vec::new();
    for (device, outcome) in devices.into_iter().zip(outcomes) {
        match outcome {
            Ok(Enrollment::Enrolled | Enrollment::AlreadyEnrolled) => {}
            // Written behind the server's back (the `sqlite3` shell): the store's key
            // stays, and the device is refused when it next proves its key.
            Ok(Enrollment::Conflict) => tracing::warn!(
                device = %device.id,
                "the store holds another key for a device that just enrolled"
            ),
            Err(err) if err.is_busy() => again.push(device),
            Err(err) => tracing::error!(
                %err,
                device = %device.id,
                "could not record an enrollment: the device enrolls again when it returns"
            ),
        }
    }
    again
}

impl StoreHandle {
    /// A handle on `store`, whose file is `path`: the journal of first contacts lives
    /// beside it, and what a stopped server left there is enrolled now.
    pub fn new(store: Arc<dyn Store>, path: &Path) -> Result<StoreHandle, StoreError> {
        let (enrolled, left) = FirstContacts::open(path)?;
        if !left.is_empty() {
            tracing::info!(
                devices = left.len(),
                "enrolling first contacts the last run welcomed"
            );
            // The journal is kept for the next start.
            if !enroll_all(&*store, left).is_empty() {
                return Err(StoreError::Held);
            }
        }
        // What was not a whole line goes too, so that appends start clean.
        enrolled.written(0);
        enrolled.written(1);
        let (tx, rx) = mpsc::channel::<Job>();
        let noted = Arc::new(Noted {
            seen: Mutex::default(),
            enrolled,
        });
        let (on_thread, noted_on_thread) = (store.clone(), noted.clone());
        std::thread::Builder::new()
            .name("herald-store".into())
            .spawn(move || serve(&*on_thread, &noted_on_thread, rx))
            .map_err(StoreError::Thread)?;
        Ok(StoreHandle {
            inner: Arc::new(Inner {
                store,
                thread: tx,
                noted,
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
        let noted = self.inner.noted.clone();
        self.run(move |store| {
            noted.write_seen(store)?;
            work(store)
        })
        .await
    }

    /// Record a first contact the server enrolled: in the journal when this returns, in
    /// the table within [`ENROLLED_WITHIN`] and before any later call.
    pub fn enroll(&self, device: NewDevice) -> Result<(), StoreError> {
        if self.inner.noted.enrolled.append(device)? {
            // Only a thread that has ended refuses, and it wrote what it had.
            let _ = self.inner.thread.send(Job::Enrolled);
        }
        Ok(())
    }

    /// Note that device `id` was seen at `at`, to be written within `SEEN_EVERY`.
    pub fn seen(&self, id: &str, at: Millis) {
        if self.inner.noted.seen(id, at) {
            // As for `enroll`.
            let _ = self.inner.thread.send(Job::Seen);
        }
    }

    /// Write what is still noted now, as a server does when it stops.
    pub async fn write_noted(&self) -> Result<(), StoreError> {
        self.run_fresh(|_| Ok(())).await
    }

    /// The store itself, for start-up work where blocking is fine.
    pub fn blocking(&self) -> &dyn Store {
        &*self.inner.store
    }
}

fn serve(store: &dyn Store, noted: &Noted, jobs: mpsc::Receiver<Job>) {
    let mut seen_at: Option<Instant> = None;
    let mut enrolled_at: Option<Instant> = None;
    loop {
        // Checked before waiting, so a steady stream of work cannot put the writes off.
        let now = Instant::now();
        let seen_due = seen_at.is_some_and(|at| at <= now);
        if seen_due || enrolled_at.is_some_and(|at| at <= now) {
            // Enrollments first: a time is written only for a device the store holds.
            enrolled_at = noted.write_enrolled(store);
        }
        if seen_due {
            noted.write_seen_or_warn(store);
            seen_at = None;
        }
        let job = match enrolled_at.into_iter().chain(seen_at).min() {
            None => jobs
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => jobs.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match job {
            Ok(Job::Work(work)) => {
                // Every call sees the enrollments noted before it.
                enrolled_at = noted.write_enrolled(store);
                // A panic fails that call (its answer is dropped), not the thread.
                let run = std::panic::AssertUnwindSafe(|| work(store));
                let _ = std::panic::catch_unwind(run);
            }
            Ok(Job::Seen) => {
                seen_at.get_or_insert_with(|| Instant::now() + SEEN_EVERY);
            }
            Ok(Job::Enrolled) => {
                enrolled_at.get_or_insert_with(|| Instant::now() + ENROLLED_WITHIN);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                noted.write_enrolled(store);
                noted.write_seen_or_warn(store);
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
        let path = dir.path().join("herald.db");
        let store = SqliteStore::open(&path).unwrap();
        (dir, StoreHandle::new(Arc::new(store), &path).unwrap())
    }

    fn device(id: &str) -> NewDevice {
        NewDevice {
            id: id.into(),
            key: [7; 32],
            profile: DeviceProfile::default(),
            now: 1,
        }
    }

    /// Keeps the store's thread busy until the returned sender is dropped, so that
    /// what is noted meanwhile waits.
    async fn hold_the_thread(handle: &StoreHandle) -> mpsc::Sender<()> {
        let (release, held) = mpsc::channel::<()>();
        let (holding, started) = oneshot::channel();
        let hold = move |_: &dyn Store| {
            let _ = holding.send(());
            let _ = held.recv();
            Ok(())
        };
        let handle = handle.clone();
        tokio::spawn(async move { handle.run(hold).await });
        started.await.unwrap();
        release
    }

    async fn stored_ids(handle: &StoreHandle) -> Vec<String> {
        let devices = handle.run(|store| store.devices()).await.unwrap();
        devices.into_iter().map(|d| d.id).collect()
    }

    /// Frames in the store's write-ahead log: what each transaction wrote, page by page.
    fn wal_frames(dir: &tempfile::TempDir) -> u64 {
        let wal = std::fs::metadata(dir.path().join("herald.db-wal")).unwrap();
        (wal.len() - 32) / (24 + 4096)
    }

    #[tokio::test]
    async fn first_contacts_noted_together_are_written_in_one_transaction() {
        let (dir, handle) = handle();
        let before = wal_frames(&dir);
        handle.enroll(device("hg-first")).unwrap();
        assert_eq!(stored_ids(&handle).await, ["hg-first"]);
        let one = wal_frames(&dir) - before;

        let release = hold_the_thread(&handle).await;
        for i in 0..16 {
            handle.enroll(device(&format!("hg-{i:02}"))).unwrap();
        }
        let before = wal_frames(&dir);
        drop(release);
        assert_eq!(stored_ids(&handle).await.len(), 17);
        let sixteen = wal_frames(&dir) - before;
        assert!(
            sixteen <= 2 * one,
            "16 enrollments wrote {sixteen} pages, one alone {one}"
        );
    }

    #[tokio::test]
    async fn a_noted_enrollment_is_written_before_any_later_call_or_soon_without_one() {
        let (dir, handle) = handle();
        handle.enroll(device("hg-a")).unwrap();
        let forget = handle.run(|store| store.forget("hg-a")).await;
        assert!(
            forget.unwrap(),
            "the call saw the enrollment noted before it"
        );

        handle.enroll(device("hg-b")).unwrap();
        let other = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        let count = || -> i64 {
            let sql = "SELECT count(*) FROM devices WHERE id = 'hg-b'";
            other.query_row(sql, [], |r| r.get(0)).unwrap()
        };
        let started = Instant::now();
        while count() == 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            tokio::time::sleep(ENROLLED_WITHIN / 4).await;
        }
    }

    #[tokio::test]
    async fn first_contacts_a_stopped_server_left_unwritten_are_enrolled_at_start() {
        let (dir, handle) = handle();
        let release = hold_the_thread(&handle).await;
        handle.enroll(device("hg-a")).unwrap();
        handle.enroll(device("hg-b")).unwrap();

        // The server dies with its thread busy; a second handle is the restarted one.
        let path = dir.path().join("herald.db");
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let restarted = StoreHandle::new(store.clone(), &path).unwrap();
        let ids: Vec<_> = store.devices().unwrap().into_iter().map(|d| d.id).collect();
        assert_eq!(ids, ["hg-a", "hg-b"]);
        for turn in ["a", "b"] {
            let journal = dir.path().join(format!("herald.db-enrolling-{turn}"));
            assert_eq!(std::fs::metadata(journal).unwrap().len(), 0, "emptied");
        }
        drop((release, restarted));
    }

    #[tokio::test]
    async fn a_start_the_store_is_held_against_refuses_and_keeps_the_journal() {
        let (dir, handle) = handle();
        let release = hold_the_thread(&handle).await;
        handle.enroll(device("hg-a")).unwrap();
        let path = dir.path().join("herald.db");
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();

        let held = StoreHandle::new(store.clone(), &path);
        assert!(matches!(held, Err(StoreError::Held)));
        other.execute_batch("COMMIT").unwrap();
        let restarted = StoreHandle::new(store.clone(), &path).unwrap();
        assert!(
            store.device("hg-a").unwrap().is_some(),
            "kept for this start"
        );
        drop((release, restarted));
    }

    #[tokio::test]
    async fn a_line_a_crash_cut_short_does_not_spoil_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("herald.db");
        let cut = dir.path().join("herald.db-enrolling-a");
        std::fs::write(cut, br#"{"id":"hg-cut","key":[1,2"#).unwrap();
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let handle = StoreHandle::new(store, &path).unwrap();
        let release = hold_the_thread(&handle).await;
        handle.enroll(device("hg-a")).unwrap();

        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let restarted = StoreHandle::new(store.clone(), &path).unwrap();
        assert!(store.device("hg-a").unwrap().is_some());
        drop((release, restarted));
    }

    #[tokio::test]
    async fn first_contacts_wait_in_the_journal_while_another_writer_holds_the_store() {
        let (dir, handle) = handle();
        let journal = |dir: &tempfile::TempDir| -> u64 {
            let len = |turn| {
                let path = dir.path().join(format!("herald.db-enrolling-{turn}"));
                std::fs::metadata(path).unwrap().len()
            };
            len("a") + len("b")
        };
        let other = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        handle.enroll(device("hg-a")).unwrap();
        // Past the store's busy timeout (5 s): the first try has given up.
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(journal(&dir) > 0, "still in the journal");

        // Tried again by the thread itself: no call to the store wakes it.
        other.execute_batch("COMMIT").unwrap();
        let started = Instant::now();
        while journal(&dir) > 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "never emptied");
            tokio::time::sleep(ENROLLED_WITHIN).await;
        }
        assert_eq!(stored_ids(&handle).await, ["hg-a"]);
    }

    #[tokio::test]
    async fn a_first_contact_the_store_refuses_is_lost_alone() {
        let (dir, handle) = handle();
        let other = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
        other
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON devices WHEN NEW.id = 'hg-bad'
                 BEGIN SELECT RAISE(ABORT, 'refused'); END",
            )
            .unwrap();
        let release = hold_the_thread(&handle).await;
        for id in ["hg-a", "hg-bad", "hg-c"] {
            handle.enroll(device(id)).unwrap();
        }
        drop(release);
        assert_eq!(stored_ids(&handle).await, ["hg-a", "hg-c"]);
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
            handle.enroll(device(id)).unwrap();
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
        handle.enroll(device("a")).unwrap();
        assert_eq!(last_seen(&handle, "a").await, Some(1));
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
        store.enroll(&[device("a")]).unwrap();
        let handle = StoreHandle::new(store.clone(), &path).unwrap();
        handle.seen("a", 99);
        handle.enroll(device("b")).unwrap();
        handle.seen("b", 98);
        drop(handle);
        let last_seen = |id| store.device(id).unwrap().and_then(|d| d.last_seen);
        let started = Instant::now();
        while (last_seen("a"), last_seen("b")) != (Some(99), Some(98)) {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
