//! The key of every enrolled gadget, in memory, so a handshake needs no store read:
//! with enrollments and the time a device was seen written behind, it waits for the
//! store's thread not at all.
//!
//! The memory is filled from the store at start-up and is what a handshake asks. A
//! first contact is enrolled here once the store's journal holds it (the table follows
//! within a moment, before any later call); a changed profile and a `forget` change it
//! on the store's thread, in the same call as the write they mirror. So it holds every
//! enrolled device and never a key the store let go. A device missing here is taken
//! for a new one and asked for its key (a device enrolled behind the server's back,
//! with the `sqlite3` shell, still gets in, by its key). About 60–110 bytes a device:
//! its id as the 8 bytes it encodes, its key and a fingerprint of the profile the store
//! holds.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use herald_gadget_proto::is_valid_device_id;
use herald_gadget_proto::limits::KEY_LEN;
use herald_session::gadget::handshake::{fingerprint, Enrollment, Known};

use herald_store::{DeviceProfile, DeviceRecord, Store, StoreError};

/// What memory holds of a device whose record is `record`.
fn known_of(record: &DeviceRecord) -> Known {
    Known {
        key: record.key,
        profile: fingerprint(&record.name, &record.board, &record.firmware),
    }
}

/// What memory holds of a device that holds `key` and said `profile` last.
pub(crate) fn known_as(key: [u8; KEY_LEN], profile: &DeviceProfile) -> Known {
    Known {
        key,
        profile: fingerprint(&profile.name, &profile.board, &profile.firmware),
    }
}

/// A device id (`hg-` and 16 hex digits) as the number it spells.
fn id_bits(id: &str) -> Option<u64> {
    if !is_valid_device_id(id) {
        return None;
    }
    u64::from_str_radix(&id[3..], 16).ok()
}

#[derive(Default)]
pub(crate) struct KnownDevices(Mutex<HashMap<u64, Known>>);

impl KnownDevices {
    /// Every device the store holds.
    pub(crate) fn from_store(store: &dyn Store) -> Result<KnownDevices, StoreError> {
        let known = KnownDevices::default();
        for record in store.devices()? {
            known.insert(&record.id, known_of(&record));
        }
        Ok(known)
    }

    fn devices(&self) -> MutexGuard<'_, HashMap<u64, Known>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn get(&self, id: &str) -> Option<Known> {
        self.devices().get(&id_bits(id)?).copied()
    }

    /// A first contact under `known.key`: enrolled now if the id is new and `record`
    /// keeps it, already if it holds the same key.
    pub(crate) fn enroll<E>(
        &self,
        id: &str,
        known: Known,
        record: impl FnOnce() -> Result<(), E>,
    ) -> Result<Enrollment, E> {
        // The handshake let only a valid id this far.
        let Some(bits) = id_bits(id) else {
            return Ok(Enrollment::Conflict);
        };
        let held = |entry: &Known| {
            if entry.key == known.key {
                Enrollment::AlreadyEnrolled
            } else {
                Enrollment::Conflict
            }
        };
        if let Some(entry) = self.devices().get(&bits) {
            return Ok(held(entry));
        }
        // Recorded before memory holds it, so no handshake sees a device a crash could
        // lose, and outside the lock every handshake takes. A device racing itself is
        // recorded twice, harmlessly: an id is a hash of its key, so two keys never
        // race for one.
        record()?;
        Ok(match self.devices().entry(bits) {
            Entry::Vacant(entry) => {
                entry.insert(known);
                Enrollment::Enrolled
            }
            Entry::Occupied(entry) => held(entry.get()),
        })
    }

    /// A device's profile changed in the store.
    pub(crate) fn insert(&self, id: &str, known: Known) {
        if let Some(bits) = id_bits(id) {
            self.devices().insert(bits, known);
        }
    }

    pub(crate) fn remove(&self, id: &str) {
        if let Some(bits) = id_bits(id) {
            self.devices().remove(&bits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_store::{NewDevice, SqliteStore};

    #[test]
    fn devices_in_the_store_are_known_with_their_key_and_profile() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
        let profile = DeviceProfile {
            name: Some("Kitchen".into()),
            firmware: Some("1.0.0".into()),
            ..DeviceProfile::default()
        };
        let id = "hg-00ff00ff00ff00ff";
        let device = NewDevice {
            id: id.into(),
            key: [3; KEY_LEN],
            profile: profile.clone(),
            now: 1,
        };
        store.enroll(&[device]).unwrap();

        let known = KnownDevices::from_store(&store).unwrap();
        let entry = known.get(id).unwrap();
        assert_eq!(entry.key, [3; KEY_LEN]);
        assert_eq!(entry, known_as([3; KEY_LEN], &profile));
        let renamed = DeviceProfile {
            name: Some("Hall".into()),
            ..profile.clone()
        };
        assert_ne!(entry, known_as([3; KEY_LEN], &renamed));
        assert_eq!(known.get("hg-00ff00ff00ff00fe"), None);

        known.remove(id);
        assert_eq!(known.get(id), None);
        // Ids that are not a device's spelling are never stored nor found.
        known.insert("HG-00ff00ff00ff00ff", entry);
        assert_eq!(known.get("HG-00ff00ff00ff00ff"), None);
    }

    #[test]
    fn a_first_contact_is_known_only_once_recorded_and_recorded_only_when_new() {
        let known = KnownDevices::default();
        let id = "hg-00ff00ff00ff00ff";
        let as_key = |key| known_as([key; KEY_LEN], &DeviceProfile::default());
        let mut recorded = 0;

        let failed = known.enroll(id, as_key(1), || Err("disk full"));
        assert_eq!(failed, Err("disk full"));
        assert_eq!(known.get(id), None, "what a crash could lose is not known");

        let mut record = || -> Result<(), &str> {
            recorded += 1;
            Ok(())
        };
        assert_eq!(
            known.enroll(id, as_key(1), &mut record),
            Ok(Enrollment::Enrolled)
        );
        assert_eq!(
            known.enroll(id, as_key(1), &mut record),
            Ok(Enrollment::AlreadyEnrolled)
        );
        assert_eq!(
            known.enroll(id, as_key(2), &mut record),
            Ok(Enrollment::Conflict)
        );
        assert_eq!(recorded, 1);
        assert_eq!(known.get(id), Some(as_key(1)));
    }
}
