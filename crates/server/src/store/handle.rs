//! The store as the async server uses it: a [`StoreHandle`] owns a thread, and every
//! call runs there, in turn, so SQLite never stalls the async threads.
//!
//! One thread is enough and is the fastest choice: the SQLite store is one connection
//! behind a lock, so its work runs one at a time anyway, and handing it to a thread that
//! is already awake costs far less than waking a blocking-pool thread per call that then
//! queues on the lock (`herald bench connect`: about a third more first-contact and a
//! fifth more returning-device handshakes per second). A store that is asynchronous at
//! heart (a shared database) would take this handle's place behind the same `run`.

use std::sync::{mpsc, Arc};

use tokio::sync::oneshot;

use super::{Store, StoreError};

type Work = Box<dyn FnOnce(&dyn Store) + Send>;

/// A store and the thread its calls run on; clones share both. The thread ends when
/// the last clone is dropped.
#[derive(Clone)]
pub struct StoreHandle {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    /// `None` if the thread could not be started: calls then use the blocking pool.
    thread: Option<mpsc::Sender<Work>>,
}

impl StoreHandle {
    pub fn new(store: Arc<dyn Store>) -> StoreHandle {
        let (tx, rx) = mpsc::channel::<Work>();
        let on_thread = store.clone();
        let thread = std::thread::Builder::new()
            .name("herald-store".into())
            .spawn(move || {
                for work in rx {
                    // A panic fails that call (its answer is dropped), not the thread.
                    let run = std::panic::AssertUnwindSafe(|| work(&*on_thread));
                    let _ = std::panic::catch_unwind(run);
                }
            })
            .ok()
            .map(|_| tx);
        StoreHandle {
            inner: Arc::new(Inner { store, thread }),
        }
    }

    /// Run `work` with the store on the store's thread and wait for its result.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Some(thread) = &self.inner.thread else {
            let store = self.inner.store.clone();
            return tokio::task::spawn_blocking(move || work(&*store))
                .await
                .map_err(|_| StoreError::Interrupted)?;
        };
        let (reply, answer) = oneshot::channel();
        let work: Work = Box::new(move |store| {
            let _ = reply.send(work(store));
        });
        thread.send(work).map_err(|_| StoreError::Interrupted)?;
        answer.await.map_err(|_| StoreError::Interrupted)?
    }

    /// The store itself, for start-up work where blocking is fine.
    pub fn blocking(&self) -> &dyn Store {
        &*self.inner.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn calls_run_in_turn_and_a_panic_fails_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
        let handle = StoreHandle::new(Arc::new(store));
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
}
