//! The key of every enrolled gadget, in memory, so a returning device's handshake needs
//! no store read: with the time it was seen written in batches, it costs the store
//! nothing at all.
//!
//! The store stays the truth. The memory is filled from it at start-up, and entries
//! change only on the store's thread, in the same call as the write they mirror (an
//! enrollment, a changed profile, a `forget`), so it holds every enrolled device and
//! never a key the store no longer holds. A device missing here is taken for a new one:
//! it is asked for its key, and the enrollment's transaction compares that key with
//! the store's (a device enrolled behind the server's back, with the `sqlite3` shell,
//! still gets in, by its key). About 60–110 bytes a device: its id as the 8 bytes it encodes,
//! its key and a fingerprint of the profile the store holds.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use herald_gadget_proto::is_valid_device_id;
use herald_gadget_proto::limits::KEY_LEN;
use herald_session::gadget::handshake::{fingerprint, Known};

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

    /// A device enrolled, or its profile changed in the store.
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
    use herald_store::SqliteStore;

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
        store.enroll(id, &[3; KEY_LEN], &profile, 1).unwrap();

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
}
