//! The default store: one SQLite file under the data directory.
//!
//! WAL journaling keeps every change atomic and readers unblocked; `synchronous=NORMAL`
//! is safe with WAL (a crash loses no committed structure, at worst the last commits on
//! power loss). The file is created with mode 0600 because it holds device keys.
//!
//! This file opens the file, migrates its schema and holds the connection; each [`Store`]
//! method hands the connection to the part that owns its tables:
//! - `devices`: enrolled gadgets, their keys, profiles and sensors;
//! - `pairings`: pending and approved pairings, by platform and user;
//! - `phones`: phones and their owners, and the outbox kept for a phone that is away;
//! - `ota`: the latest firmware update of each gadget.
//!
//! `forget` stays here: it takes one id out of every part at once.

mod devices;
mod ota;
mod pairings;
mod phones;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use herald_port::Platform;
use rusqlite::Connection;
use serde_json::{Map, Value};

use super::{
    DeviceProfile, DeviceRecord, Enrollment, Millis, NewDevice, OtaImage, OtaProgress, OtaUpdate,
    PairingRecord, PhoneClaim, PhoneInfo, PhoneRecord, PushRecord, Store, StoreError,
};

/// Schema migrations, applied in order; `PRAGMA user_version` counts those applied.
const MIGRATIONS: &[&str] = &[
    // 1: devices and pairing.
    "CREATE TABLE devices (
        id          TEXT PRIMARY KEY,
        key         BLOB NOT NULL,
        name        TEXT,
        board       TEXT,
        firmware    TEXT,
        enrolled_at INTEGER NOT NULL,
        last_seen   INTEGER,
        sensors     TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE pairings (
        platform    TEXT NOT NULL,
        user_id     TEXT NOT NULL,
        user_name   TEXT,
        code        TEXT,
        created_at  INTEGER NOT NULL,
        approved_at INTEGER,
        PRIMARY KEY (platform, user_id)
    );
    CREATE UNIQUE INDEX pairings_code ON pairings (platform, code) WHERE code IS NOT NULL;",
    // 2: phones, owned by the first user that connected with the device id.
    "CREATE TABLE mobile_devices (
        id          TEXT PRIMARY KEY,
        user_id     TEXT NOT NULL,
        name        TEXT,
        platform    TEXT,
        first_seen  INTEGER NOT NULL,
        last_seen   INTEGER NOT NULL
    );",
    // 3: the latest firmware update of each gadget, gone with the gadget.
    "CREATE TABLE ota_updates (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        device_id   TEXT NOT NULL UNIQUE REFERENCES devices (id) ON DELETE CASCADE,
        file        TEXT NOT NULL,
        sha256      TEXT NOT NULL,
        size        INTEGER NOT NULL,
        version     TEXT NOT NULL,
        status      TEXT NOT NULL,
        attempts    INTEGER NOT NULL,
        bytes_sent  INTEGER NOT NULL,
        error       TEXT,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    );",
    // 4: a user's phones are counted when a new one connects.
    "CREATE INDEX mobile_devices_user ON mobile_devices (user_id, last_seen);",
    // 5: the frames of a turn kept for a phone that is away, surviving a restart.
    "CREATE TABLE mobile_outbox (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,
        device_id   TEXT NOT NULL,
        frame       TEXT NOT NULL,
        at          INTEGER NOT NULL
    );
    CREATE INDEX mobile_outbox_device ON mobile_outbox (device_id, seq);",
    // 6: a gadget is one entry of one B-tree, keyed by its id, instead of a row plus an
    // index entry: an enrollment writes a third fewer WAL pages. (Run with foreign keys
    // off, so dropping the old table takes no firmware update with it.)
    "CREATE TABLE devices_by_id (
        id          TEXT PRIMARY KEY,
        key         BLOB NOT NULL,
        name        TEXT,
        board       TEXT,
        firmware    TEXT,
        enrolled_at INTEGER NOT NULL,
        last_seen   INTEGER,
        sensors     TEXT NOT NULL DEFAULT '{}'
    ) WITHOUT ROWID;
    INSERT INTO devices_by_id SELECT id, key, name, board, firmware, enrolled_at, last_seen, sensors
        FROM devices;
    DROP TABLE devices;
    ALTER TABLE devices_by_id RENAME TO devices;",
    // 8: the person a gadget belongs to (a phone user's id), set at pairing or later.
    "ALTER TABLE devices ADD COLUMN owner TEXT;",
    // 9: where to send a phone's notifications while its app is closed (Web Push).
    "CREATE TABLE push_subscriptions (
        device_id   TEXT PRIMARY KEY,
        user_id     TEXT NOT NULL,
        endpoint    TEXT NOT NULL,
        p256dh      BLOB NOT NULL,
        auth        BLOB NOT NULL,
        created_at  INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX push_subscriptions_by_user ON push_subscriptions (user_id);",
];

/// Every transaction here writes: taking the write lock at `BEGIN` lets SQLite wait for
/// another writer (a backup or the `sqlite3` shell on the same file) up to the busy
/// timeout, where a read that turns into a write would fail at once.
fn write_transaction(conn: &mut Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
}

pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl SqliteStore {
    /// Open (creating and migrating as needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        herald_files::open_private_append(path).map_err(io)?;
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // Migrations rebuild tables that others refer to (SQLite as bundled turns foreign
        // keys on by default); `migrate` checks every reference holds again after.
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        migrate(&mut conn)?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        Ok(SqliteStore {
            path: path.to_owned(),
            conn: Mutex::new(conn),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // A panic while holding the lock cannot leave SQLite half-written (each call is
        // one transaction), so a poisoned lock is safe to keep using.
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn)
    }
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let known = MIGRATIONS.len() as i64;
    let tx = conn.transaction()?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > known {
        return Err(StoreError::TooNew {
            found: version,
            known,
        });
    }
    for sql in &MIGRATIONS[version as usize..] {
        tx.execute_batch(sql)?;
    }
    let dangling: i64 = tx.query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
        r.get(0)
    })?;
    if dangling > 0 {
        // Dropped unfinished, the transaction leaves the file as it was.
        return Err(StoreError::Dangling(dangling));
    }
    tx.pragma_update(None, "user_version", known)?;
    tx.commit()?;
    Ok(())
}

fn forget(conn: &mut Connection, id: &str) -> Result<bool, StoreError> {
    let tx = write_transaction(conn)?;
    let gadget = tx.execute("DELETE FROM devices WHERE id = ?1", [id])?;
    tx.execute(
        "DELETE FROM pairings WHERE platform = 'gadget' AND user_id = ?1",
        [id],
    )?;
    // A phone's pairing belongs to its user, who keeps it.
    let phone = tx.execute("DELETE FROM mobile_devices WHERE id = ?1", [id])?;
    tx.execute("DELETE FROM mobile_outbox WHERE device_id = ?1", [id])?;
    tx.commit()?;
    Ok(gadget + phone > 0)
}

impl Store for SqliteStore {
    fn device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        self.with(|conn| devices::device(conn, id))
    }

    fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError> {
        self.with(|conn| devices::devices(conn))
    }

    fn enroll(&self, devices: &[NewDevice]) -> Result<Vec<Enrollment>, StoreError> {
        self.with(|conn| devices::enroll(conn, devices))
    }

    fn touch(&self, id: &str, profile: &DeviceProfile, now: Millis) -> Result<bool, StoreError> {
        self.with(|conn| devices::touch(conn, id, profile, now))
    }

    fn set_last_seen(&self, seen: &[(String, Millis)]) -> Result<(), StoreError> {
        self.with(|conn| devices::set_last_seen(conn, seen))
    }

    fn merge_sensors(&self, id: &str, sensors: &Map<String, Value>) -> Result<(), StoreError> {
        self.with(|conn| devices::merge_sensors(conn, id, sensors))
    }

    fn forget(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|conn| forget(conn, id))
    }

    fn set_owner(&self, id: &str, owner: Option<&str>) -> Result<bool, StoreError> {
        self.with(|conn| devices::set_owner(conn, id, owner))
    }

    fn pairing(
        &self,
        platform: Platform,
        user_id: &str,
    ) -> Result<Option<PairingRecord>, StoreError> {
        self.with(|conn| pairings::pairing(conn, platform, user_id))
    }

    fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError> {
        self.with(|conn| pairings::pairings(conn))
    }

    fn put_pending(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
        code: &str,
        now: Millis,
    ) -> Result<(), StoreError> {
        self.with(|conn| pairings::put_pending(conn, platform, user_id, user_name, code, now))
    }

    fn approve_code(
        &self,
        platform: Platform,
        code: &str,
        not_before: Millis,
        now: Millis,
    ) -> Result<Option<PairingRecord>, StoreError> {
        self.with(|conn| pairings::approve_code(conn, platform, code, not_before, now))
    }

    fn approve_user(
        &self,
        platform: Platform,
        user_id: &str,
        now: Millis,
    ) -> Result<PairingRecord, StoreError> {
        self.with(|conn| pairings::approve_user(conn, platform, user_id, now))
    }

    fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, StoreError> {
        self.with(|conn| pairings::revoke(conn, platform, user_id))
    }

    fn claim_phone(
        &self,
        device_id: &str,
        user_id: &str,
        info: &PhoneInfo,
        now: Millis,
    ) -> Result<PhoneClaim, StoreError> {
        self.with(|conn| phones::claim_phone(conn, device_id, user_id, info, now))
    }

    fn phones(&self) -> Result<Vec<PhoneRecord>, StoreError> {
        self.with(|conn| phones::phones(conn))
    }

    fn phone_owner(&self, device_id: &str) -> Result<Option<String>, StoreError> {
        self.with(|conn| Ok(phones::phone_owner(conn, device_id)?))
    }

    fn put_push_subscription(
        &self,
        subscription: &PushRecord,
        now: Millis,
    ) -> Result<(), StoreError> {
        self.with(|conn| phones::put_push_subscription(conn, subscription, now))
    }

    fn remove_push_subscription(&self, device_id: &str) -> Result<bool, StoreError> {
        self.with(|conn| phones::remove_push_subscription(conn, device_id))
    }

    fn push_subscriptions(&self, user_id: Option<&str>) -> Result<Vec<PushRecord>, StoreError> {
        self.with(|conn| phones::push_subscriptions(conn, user_id))
    }

    fn outbox_push(&self, device_id: &str, frame: &str, now: Millis) -> Result<(), StoreError> {
        self.with(|conn| phones::outbox_push(conn, device_id, frame, now))
    }

    fn outbox_take(&self, device_id: &str, since: Millis) -> Result<Vec<String>, StoreError> {
        self.with(|conn| phones::outbox_take(conn, device_id, since))
    }

    fn stage_ota(
        &self,
        device_id: &str,
        image: &OtaImage,
        now: Millis,
    ) -> Result<Option<OtaUpdate>, StoreError> {
        self.with(|conn| ota::stage_ota(conn, device_id, image, now))
    }

    fn ota_update(&self, device_id: &str) -> Result<Option<OtaUpdate>, StoreError> {
        self.with(|conn| ota::ota_update(conn, device_id))
    }

    fn ota_updates(&self) -> Result<Vec<OtaUpdate>, StoreError> {
        self.with(|conn| ota::ota_updates(conn))
    }

    fn save_ota_progress(
        &self,
        id: i64,
        progress: &OtaProgress,
        now: Millis,
    ) -> Result<(), StoreError> {
        self.with(|conn| ota::save_ota_progress(conn, id, progress, now))
    }
}
