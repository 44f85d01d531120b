//! First contacts the server has welcomed and the store's table may not hold yet.
//!
//! The gadget protocol promises that a device's key crosses the network once, so a
//! welcomed first contact must survive a crash. Inserting it into the table before
//! `welcome` costs a B-tree page per device (ids are random, so each lands on a page of
//! its own), about as much as the rest of a first contact; one line appended to a file
//! costs one `write`. So a first contact is appended here and welcomed, and the store's
//! thread writes what was appended into the table later, many in one transaction. A
//! store opened after a crash replays what is here.
//!
//! As durable as the store's own transactions (`synchronous=NORMAL`): a killed server
//! loses nothing; a power cut may lose the last moments, as it may lose the store's
//! last commits. Two files take turns: first contacts are appended to one while the
//! other's are written to the table, and a file is emptied only once the table holds
//! what it held.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{DeviceProfile, Millis, NewDevice, StoreError};

/// The journal: two files beside the store, one appended to at a time.
pub(crate) struct FirstContacts {
    paths: [PathBuf; 2],
    state: Mutex<State>,
}

struct State {
    files: [File; 2],
    /// How much of each file is whole lines.
    lengths: [u64; 2],
    /// The file appended to.
    appending: usize,
    /// What that file holds, for the store's thread to write.
    noted: Vec<NewDevice>,
    /// A line being encoded, kept to save an allocation a device.
    line: Vec<u8>,
}

/// One first contact, one line of JSON: borrowed to write, owned when read.
#[derive(Serialize, Deserialize)]
struct Line<'a> {
    id: Cow<'a, str>,
    key: [u8; 32],
    name: Option<Cow<'a, str>>,
    board: Option<Cow<'a, str>>,
    firmware: Option<Cow<'a, str>>,
    sensors: Cow<'a, Map<String, Value>>,
    at: Millis,
}

impl FirstContacts {
    /// Open the journal of the store at `store_path` (creating its files as needed) and
    /// read what a stopped server left in it.
    pub(crate) fn open(store_path: &Path) -> Result<(FirstContacts, Vec<NewDevice>), StoreError> {
        let paths = ["a", "b"].map(|turn| {
            let mut name = store_path.as_os_str().to_owned();
            name.push(format!("-enrolling-{turn}"));
            PathBuf::from(name)
        });
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| StoreError::Io { path, source }
        };
        let mut left = Vec::new();
        let mut open = |path: &Path| -> Result<File, StoreError> {
            let file = herald_files::open_private_append(path).map_err(io(path))?;
            read_lines(&file, path, &mut left).map_err(io(path))?;
            Ok(file)
        };
        let files = [open(&paths[0])?, open(&paths[1])?];
        let mut lengths = [0; 2];
        for (length, (file, path)) in lengths.iter_mut().zip(files.iter().zip(&paths)) {
            *length = file.metadata().map_err(io(path))?.len();
        }
        let state = State {
            files,
            lengths,
            appending: 0,
            noted: Vec::new(),
            line: Vec::with_capacity(256),
        };
        let journal = FirstContacts {
            paths,
            state: Mutex::new(state),
        };
        Ok((journal, left))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change under the lock is whole before it returns or fails.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record a first contact; once this returns, a crash cannot lose it. True if it is
    /// the first noted since the store's thread last took them.
    pub(crate) fn append(&self, device: NewDevice) -> Result<bool, StoreError> {
        let mut state = self.state();
        let State {
            files,
            lengths,
            appending,
            noted,
            line,
        } = &mut *state;
        let turn = *appending;
        line.clear();
        let profile = &device.profile;
        let record = Line {
            id: Cow::Borrowed(&device.id),
            key: device.key,
            name: profile.name.as_deref().map(Cow::Borrowed),
            board: profile.board.as_deref().map(Cow::Borrowed),
            firmware: profile.firmware.as_deref().map(Cow::Borrowed),
            sensors: Cow::Borrowed(&profile.sensors),
            at: device.now,
        };
        let io = |source| StoreError::Io {
            path: self.paths[turn].display().to_string(),
            source,
        };
        serde_json::to_writer(&mut *line, &record).map_err(|e| io(e.into()))?;
        line.push(b'\n');
        // One `write` of the whole line (the file is opened to append). A line the disk
        // took only part of is cut away, so the next one starts clean.
        if let Err(err) = files[turn].write_all(line) {
            let _ = files[turn].set_len(lengths[turn]);
            return Err(io(err));
        }
        lengths[turn] += line.len() as u64;
        noted.push(device);
        Ok(noted.len() == 1)
    }

    /// What was noted, and the file holding it; first contacts go to the other file from
    /// now on.
    pub(crate) fn take(&self) -> (Vec<NewDevice>, usize) {
        let mut state = self.state();
        let taken = (std::mem::take(&mut state.noted), state.appending);
        if !taken.0.is_empty() {
            state.appending = 1 - state.appending;
        }
        taken
    }

    /// The table holds what file `turn` held (or it held nothing worth keeping): empty it.
    pub(crate) fn written(&self, turn: usize) {
        let mut state = self.state();
        match state.files[turn].set_len(0) {
            Ok(()) => state.lengths[turn] = 0,
            // Kept, it is replayed at the next start: harmless unless a device in it is
            // forgotten meanwhile, which would enroll it again.
            Err(err) => tracing::error!(
                %err,
                path = %self.paths[turn].display(),
                "could not empty the journal of first contacts"
            ),
        }
    }
}

/// Read the first contacts in `file`. A line cut short is a write a crash interrupted,
/// before its device was welcomed; any other damage is reported and skipped.
fn read_lines(file: &File, path: &Path, into: &mut Vec<NewDevice>) -> std::io::Result<()> {
    let mut reader = BufReader::new(file);
    let mut text = Vec::new();
    loop {
        text.clear();
        if reader.read_until(b'\n', &mut text)? == 0 {
            return Ok(());
        }
        if text.last() != Some(&b'\n') {
            tracing::info!(path = %path.display(), "a first contact cut short by a crash is dropped");
            return Ok(());
        }
        match serde_json::from_slice::<Line>(&text) {
            Ok(line) => into.push(NewDevice {
                id: line.id.into_owned(),
                key: line.key,
                profile: DeviceProfile {
                    name: line.name.map(Cow::into_owned),
                    board: line.board.map(Cow::into_owned),
                    firmware: line.firmware.map(Cow::into_owned),
                    sensors: line.sensors.into_owned(),
                },
                now: line.at,
            }),
            Err(err) => {
                tracing::warn!(%err, path = %path.display(), "skipped a damaged first contact");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(id: &str, key: u8) -> NewDevice {
        let sensors = serde_json::json!({"temperature_c": 21.5});
        NewDevice {
            id: id.into(),
            key: [key; 32],
            profile: DeviceProfile {
                name: Some(format!("{id}'s name")),
                board: Some("esp32-s3".into()),
                firmware: None,
                sensors: sensors.as_object().cloned().unwrap_or_default(),
            },
            now: 1_700_000_000_000 + i64::from(key),
        }
    }

    /// A directory, and where a store in it would be.
    fn store_in_tempdir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("herald.db");
        (dir, store)
    }

    fn summary(devices: &[NewDevice]) -> Vec<(String, [u8; 32], DeviceProfile, Millis)> {
        let each = |d: &NewDevice| (d.id.clone(), d.key, d.profile.clone(), d.now);
        devices.iter().map(each).collect()
    }

    #[test]
    fn what_was_appended_and_not_written_is_read_back_whole_after_a_crash() {
        let (_dir, store) = store_in_tempdir();
        let appended = [device("hg-1", 1), device("hg-2", 2), device("hg-3", 3)];
        {
            let (journal, left) = FirstContacts::open(&store).unwrap();
            assert!(left.is_empty());
            let firsts = [1, 2, 3].map(|n| journal.append(device(&format!("hg-{n}"), n)).unwrap());
            assert_eq!(firsts, [true, false, false], "the thread is told once");
        }
        let (_journal, left) = FirstContacts::open(&store).unwrap();
        assert_eq!(summary(&left), summary(&appended));
    }

    #[test]
    fn a_file_is_emptied_only_once_the_table_holds_it_and_the_other_takes_its_turn() {
        let (_dir, store) = store_in_tempdir();
        let (journal, _) = FirstContacts::open(&store).unwrap();
        journal.append(device("hg-1", 1)).unwrap();
        journal.append(device("hg-2", 2)).unwrap();
        let (taken, turn) = journal.take();
        assert_eq!(taken.len(), 2);
        // Appended while the store's thread writes the two.
        assert!(journal.append(device("hg-3", 3)).unwrap(), "a new turn");

        // A crash now: all three are read back.
        let (_, left) = FirstContacts::open(&store).unwrap();
        assert_eq!(left.len(), 3);

        journal.written(turn);
        let (_, left) = FirstContacts::open(&store).unwrap();
        assert_eq!(summary(&left), summary(&[device("hg-3", 3)]));
        let (taken, next) = journal.take();
        assert_eq!((taken.len(), next), (1, 1 - turn));
        journal.written(next);
        // Nothing noted: nothing taken, and the turn stays.
        assert_eq!(journal.take().1, turn);
        journal.append(device("hg-4", 4)).unwrap();
        let (_, left) = FirstContacts::open(&store).unwrap();
        assert_eq!(summary(&left), summary(&[device("hg-4", 4)]));
    }

    #[test]
    fn a_line_cut_short_is_dropped_and_a_damaged_one_skipped() {
        let (dir, store) = store_in_tempdir();
        {
            let (journal, _) = FirstContacts::open(&store).unwrap();
            journal.append(device("hg-1", 1)).unwrap();
        }
        let file = dir.path().join("herald.db-enrolling-a");
        let mut text = std::fs::read(&file).unwrap();
        let whole = text.clone();
        text.extend_from_slice(b"{\"id\": 7, \"key\": \"not a key\"}\n");
        text.extend_from_slice(&whole);
        text.extend_from_slice(&whole[..whole.len() / 2]);
        std::fs::write(&file, &text).unwrap();

        let (_, left) = FirstContacts::open(&store).unwrap();
        assert_eq!(left.len(), 2, "the whole lines around the damaged one");
    }

    #[cfg(unix)]
    #[test]
    fn only_the_owner_may_read_the_keys() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, store) = store_in_tempdir();
        let loose = dir.path().join("herald.db-enrolling-b");
        std::fs::write(&loose, b"").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        FirstContacts::open(&store).unwrap();
        for turn in ["a", "b"] {
            let path = dir.path().join(format!("herald.db-enrolling-{turn}"));
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "file {turn}");
        }
    }
}
