//! The inbox: voice recordings and uploads handed to the agent, kept within a quota.
//!
//! Files get names of our own making and are written whole (temporary file, then
//! rename). Before a file is written the inbox makes room for it, oldest files first,
//! so a busy household never fills the disk; files older than the age limit go at
//! start-up and every hour. The agent reads a file within seconds of getting its path,
//! so the oldest are the ones nobody needs.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, SystemTime};

use herald_config::InboxConfig;
use herald_files as files;

/// How often old files are looked for while the server runs.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Over quota, files are removed until this share of it is in use, so the next writes
/// do not each scan the directory again.
const REFILL_PERCENT: u64 = 90;

pub struct Inbox {
    dir: PathBuf,
    max_bytes: Option<u64>,
    max_age: Option<Duration>,
    /// Bytes in the inbox as last counted, plus what was written since.
    used: Mutex<u64>,
    /// Held by the one pruning pass that may run at a time. The byte count is not held
    /// across a pass: scanning and removing hundreds of files must not hold up every
    /// other write.
    pruning: Mutex<()>,
}

/// What one pruning pass removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub files: usize,
    pub bytes: u64,
}

struct Entry {
    path: PathBuf,
    modified: SystemTime,
    bytes: u64,
}

impl Inbox {
    /// Open (creating) `dir`: remove what a crash left half-written, then what is over
    /// the limits.
    pub fn open(dir: PathBuf, config: &InboxConfig) -> std::io::Result<Arc<Inbox>> {
        files::create_private_dir(&dir)?;
        let swept = files::sweep_partial(&dir)?;
        if swept > 0 {
            tracing::info!(dir = %dir.display(), files = swept, "removed files a crash left half-written");
        }
        let inbox = Arc::new(Inbox {
            dir,
            max_bytes: (config.max_mb > 0).then(|| config.max_mb.saturating_mul(1024 * 1024)),
            max_age: (config.max_age_days > 0)
                .then(|| Duration::from_secs(u64::from(config.max_age_days) * 86_400)),
            used: Mutex::new(0),
            pruning: Mutex::new(()),
        });
        inbox.prune(&lock(&inbox.pruning), SystemTime::now(), 0)?;
        Ok(inbox)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Make room for `bytes`, then let `write` create the file at a fresh path with
    /// `extension`. Client ids and names never become paths.
    pub async fn put<T: Send + 'static>(
        self: &Arc<Self>,
        extension: &str,
        bytes: u64,
        write: impl FnOnce(&Path) -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<(PathBuf, T)> {
        let path = self
            .dir
            .join(format!("{}.{extension}", files::secret::random_hex(16)));
        let inbox = self.clone();
        tokio::task::spawn_blocking(move || {
            inbox.make_room(bytes)?;
            match write(&path) {
                Ok(value) => Ok((path, value)),
                Err(err) => {
                    inbox.release(bytes);
                    Err(err)
                }
            }
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Remove what is too old; the hourly pass.
    pub async fn prune_old(self: &Arc<Self>) -> std::io::Result<Pruned> {
        let inbox = self.clone();
        tokio::task::spawn_blocking(move || {
            inbox.prune(&lock(&inbox.pruning), SystemTime::now(), 0)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Count `bytes` as used, pruning first when they would not fit. While another pass
    /// is pruning, the write goes ahead: that pass leaves a tenth of the quota free, room
    /// for the writes it overlaps.
    fn make_room(&self, bytes: u64) -> std::io::Result<()> {
        let fits = {
            let mut used = self.lock_used();
            let fits = self.max_bytes.is_none_or(|max| *used + bytes <= max);
            if fits {
                *used += bytes;
            }
            fits
        };
        if fits {
            return Ok(());
        }
        let pass = match self.pruning.try_lock() {
            Ok(pass) => Some(pass),
            Err(TryLockError::Poisoned(pass)) => Some(pass.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        match pass {
            Some(pass) => self.prune(&pass, SystemTime::now(), bytes).map(drop),
            None => {
                *self.lock_used() += bytes;
                Ok(())
            }
        }
    }

    fn release(&self, bytes: u64) {
        let mut used = self.lock_used();
        *used = used.saturating_sub(bytes);
    }

    fn lock_used(&self) -> MutexGuard<'_, u64> {
        lock(&self.used)
    }

    /// Recount the inbox, removing files older than the age limit and, oldest first,
    /// enough others that `incoming` more bytes fit; `incoming` is then counted as used,
    /// and so is what other writes counted meanwhile. `_pass` is the one pass's turn.
    fn prune(
        &self,
        _pass: &MutexGuard<'_, ()>,
        now: SystemTime,
        incoming: u64,
    ) -> std::io::Result<Pruned> {
        let before = *self.lock_used();
        let mut entries = self.scan()?;
        entries.sort_by_key(|e| e.modified);
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let target = self
            .max_bytes
            .map(|max| (max * REFILL_PERCENT / 100).saturating_sub(incoming));
        let mut pruned = Pruned::default();
        for entry in entries {
            let too_old = self
                .max_age
                .is_some_and(|age| now.duration_since(entry.modified).unwrap_or_default() > age);
            let over = target.is_some_and(|target| total > target);
            if !too_old && !over {
                // Sorted by age: everything after is newer and the quota is met.
                break;
            }
            match std::fs::remove_file(&entry.path) {
                Ok(()) => {
                    total -= entry.bytes;
                    pruned.files += 1;
                    pruned.bytes += entry.bytes;
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => total -= entry.bytes,
                Err(err) => return Err(err),
            }
        }
        // A write counted during the pass may also be among the files it found; counted
        // twice, it only brings the next pass sooner.
        let mut used = self.lock_used();
        let meanwhile = used.saturating_sub(before);
        *used = total + incoming + meanwhile;
        drop(used);
        if pruned.files > 0 {
            tracing::info!(files = pruned.files, bytes = pruned.bytes, "inbox pruned");
        }
        Ok(pruned)
    }

    /// The inbox's finished files; temporary ones being written are not counted.
    fn scan(&self) -> std::io::Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let meta = match entry.metadata() {
                Ok(meta) if meta.is_file() => meta,
                Ok(_) => continue,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            entries.push(Entry {
                path: entry.path(),
                modified: meta.modified()?,
                bytes: meta.len(),
            });
        }
        Ok(entries)
    }
}

/// A panic elsewhere cannot leave the byte count half-updated, nor a pass half-done in a
/// way the next one does not redo.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_mb: u64, max_age_days: u32) -> InboxConfig {
        InboxConfig {
            max_mb,
            max_age_days,
        }
    }

    fn file(dir: &Path, name: &str, bytes: usize, age: Duration) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; bytes]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        path
    }

    const MIB: usize = 1024 * 1024;
    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn opening_removes_old_files_and_crash_leftovers_only() {
        let dir = tempfile::tempdir().unwrap();
        let old = file(dir.path(), "old.wav", 10, 31 * DAY);
        let recent = file(dir.path(), "recent.wav", 10, 29 * DAY);
        let partial = file(dir.path(), ".x.wav.0123abcd.part", 10, Duration::ZERO);
        Inbox::open(dir.path().to_owned(), &config(0, 30)).unwrap();
        assert!(!old.exists());
        assert!(recent.exists());
        assert!(!partial.exists());

        // No age limit: nothing goes for being old.
        let ancient = file(dir.path(), "ancient.wav", 10, 3650 * DAY);
        Inbox::open(dir.path().to_owned(), &config(0, 0)).unwrap();
        assert!(ancient.exists());
    }

    #[tokio::test]
    async fn a_full_inbox_makes_room_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let oldest = file(dir.path(), "a.bin", 3 * MIB, 3 * DAY);
        let older = file(dir.path(), "b.bin", 3 * MIB, 2 * DAY);
        let newer = file(dir.path(), "c.bin", 3 * MIB, DAY);
        let inbox = Inbox::open(dir.path().to_owned(), &config(10, 0)).unwrap();
        assert!(
            oldest.exists() && older.exists() && newer.exists(),
            "9 MiB fit in 10"
        );

        let (path, ()) = inbox
            .put("bin", 3 * MIB as u64, |p| {
                std::fs::write(p, vec![1u8; 3 * MIB])
            })
            .await
            .unwrap();
        // 12 MiB would not fit: the oldest go until 9 MiB (90 %) holds the new one.
        assert!(!oldest.exists());
        assert!(older.exists() && newer.exists() && path.exists());
        assert_eq!(path.parent(), Some(dir.path()));

        // Within the quota nothing is removed, and the count includes the new file.
        inbox
            .put("bin", MIB as u64, |p| std::fs::write(p, vec![1u8; MIB]))
            .await
            .unwrap();
        assert!(older.exists());
        assert_eq!(*inbox.lock_used(), 10 * MIB as u64);
    }

    #[tokio::test]
    async fn a_write_over_quota_goes_ahead_while_another_pass_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let oldest = file(dir.path(), "a.bin", 6 * MIB, 2 * DAY);
        let inbox = Inbox::open(dir.path().to_owned(), &config(10, 0)).unwrap();
        let write = |bytes: usize| {
            let inbox = inbox.clone();
            async move {
                let put = inbox.put("bin", bytes as u64, move |p| {
                    std::fs::write(p, vec![1u8; bytes])
                });
                tokio::time::timeout(Duration::from_secs(5), put).await
            }
        };

        // A pass is running on another thread: the write does not wait for it, and is
        // counted.
        let (started, running) = std::sync::mpsc::channel();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let pass = std::thread::spawn({
            let inbox = inbox.clone();
            move || {
                let _pass = lock(&inbox.pruning);
                started.send(()).unwrap();
                let _ = finished.recv();
            }
        });
        running.recv().unwrap();
        let (during, ()) = write(6 * MIB).await.expect("did not wait").unwrap();
        assert!(during.exists() && oldest.exists());
        assert_eq!(*inbox.lock_used(), 12 * MIB as u64);
        drop(finish);
        pass.join().unwrap();

        // The next write over quota prunes, oldest first, and counts both.
        let (after, ()) = write(MIB).await.unwrap().unwrap();
        assert!(!oldest.exists());
        assert!(during.exists() && after.exists());
        assert_eq!(*inbox.lock_used(), 7 * MIB as u64);
    }

    #[tokio::test]
    async fn a_failed_write_frees_its_room_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(dir.path().to_owned(), &config(10, 0)).unwrap();
        let failed = inbox
            .put("bin", MIB as u64, |_| -> std::io::Result<()> {
                Err(std::io::Error::other("disk full"))
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(*inbox.lock_used(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn the_hourly_pass_removes_what_has_aged() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(dir.path().to_owned(), &config(0, 1)).unwrap();
        let aged = file(dir.path(), "aged.wav", 10, 2 * DAY);
        let fresh = file(dir.path(), "fresh.wav", 10, Duration::ZERO);
        let pruned = inbox.prune_old().await.unwrap();
        assert_eq!(
            pruned,
            Pruned {
                files: 1,
                bytes: 10
            }
        );
        assert!(!aged.exists() && fresh.exists());
    }
}
