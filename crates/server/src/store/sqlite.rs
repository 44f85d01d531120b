//! The default store: one SQLite file under the data directory.
//!
//! WAL journaling keeps every change atomic and readers unblocked; `synchronous=NORMAL`
//! is safe with WAL (a crash loses no committed structure, at worst the last commits on
//! power loss). The file is created with mode 0600 because it holds device keys.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use herald_mobile_proto::limits::{OUTBOX_BYTES, OUTBOX_FRAMES};
use herald_port::Platform;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{Map, Value};

use super::{
    admissible_sensors, merge_sensors, DeviceProfile, DeviceRecord, Enrollment, Millis, OtaImage,
    OtaProgress, OtaStatus, OtaUpdate, PairingRecord, PhoneClaim, PhoneInfo, PhoneRecord, Store,
    StoreError, MAX_PHONES_PER_USER, STALE_PHONE_DAYS,
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
        create_private(path).map_err(io)?;
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&mut conn)?;
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

#[cfg(unix)]
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    // An existing file may have been created with looser permissions.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn create_private(_path: &Path) -> std::io::Result<()> {
    Ok(())
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
    tx.pragma_update(None, "user_version", known)?;
    tx.commit()?;
    Ok(())
}

/// Whether `user_id` may add a phone: under [`MAX_PHONES_PER_USER`], after forgetting
/// its phones unseen for [`STALE_PHONE_DAYS`] (a reinstalled app comes back with a new id).
fn make_room_for_phone(conn: &Connection, user_id: &str, now: Millis) -> rusqlite::Result<bool> {
    let owned: usize = conn.query_row(
        "SELECT COUNT(*) FROM mobile_devices WHERE user_id = ?1",
        params![user_id],
        |row| row.get(0),
    )?;
    if owned < MAX_PHONES_PER_USER {
        return Ok(true);
    }
    let stale_before = now - STALE_PHONE_DAYS * 86_400_000;
    let forgotten = conn.execute(
        "DELETE FROM mobile_devices WHERE user_id = ?1 AND last_seen < ?2",
        params![user_id, stale_before],
    )?;
    Ok(owned - forgotten < MAX_PHONES_PER_USER)
}

fn phone_owner(conn: &Connection, device_id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT user_id FROM mobile_devices WHERE id = ?1")?
        .query_row([device_id], |r| r.get(0))
        .optional()
}

fn sensors_from_json(id: &str, text: &str) -> Result<Map<String, Value>, StoreError> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(StoreError::Corrupt(id.to_owned())),
    }
}

fn device_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(DeviceRecord, String)> {
    let id: String = row.get(0)?;
    let key: Vec<u8> = row.get(1)?;
    let sensors: String = row.get(7)?;
    let mut fixed = [0u8; 32];
    // A wrong-length key cannot be written by `enroll`; treat it as no key at all.
    if key.len() == 32 {
        fixed.copy_from_slice(&key);
    }
    Ok((
        DeviceRecord {
            id,
            key: fixed,
            name: row.get(2)?,
            board: row.get(3)?,
            firmware: row.get(4)?,
            enrolled_at: row.get(5)?,
            last_seen: row.get(6)?,
            sensors: Map::new(),
        },
        sensors,
    ))
}

fn finish_device(
    (mut record, sensors): (DeviceRecord, String),
) -> Result<DeviceRecord, StoreError> {
    record.sensors = sensors_from_json(&record.id, &sensors)?;
    Ok(record)
}

const DEVICE_COLUMNS: &str = "id, key, name, board, firmware, enrolled_at, last_seen, sensors";
const PAIRING_COLUMNS: &str = "platform, user_id, user_name, code, created_at, approved_at";

fn platform_from_str(s: &str) -> Option<Platform> {
    match s {
        "gadget" => Some(Platform::Gadget),
        "mobile" => Some(Platform::Mobile),
        _ => None,
    }
}

fn pairing_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Option<PairingRecord>> {
    let platform: String = row.get(0)?;
    let Some(platform) = platform_from_str(&platform) else {
        return Ok(None);
    };
    Ok(Some(PairingRecord {
        platform,
        user_id: row.get(1)?,
        user_name: row.get(2)?,
        code: row.get(3)?,
        created_at: row.get(4)?,
        approved_at: row.get(5)?,
    }))
}

const OTA_COLUMNS: &str = "id, device_id, file, sha256, size, version, status, attempts, \
                           bytes_sent, error, created_at, updated_at";

/// SQLite integers are signed; sizes beyond `i64::MAX` cannot occur in practice.
fn to_sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn ota_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<OtaUpdate, StoreError>> {
    let device_id: String = row.get(1)?;
    let file: String = row.get(2)?;
    let size: i64 = row.get(4)?;
    let status: String = row.get(6)?;
    let attempts: i64 = row.get(7)?;
    let bytes_sent: i64 = row.get(8)?;
    let (Some(status), Ok(size), Ok(attempts), Ok(bytes_sent)) = (
        OtaStatus::parse(&status),
        u64::try_from(size),
        u32::try_from(attempts),
        u64::try_from(bytes_sent),
    ) else {
        return Ok(Err(StoreError::Corrupt(device_id)));
    };
    Ok(Ok(OtaUpdate {
        id: row.get(0)?,
        device_id,
        image: OtaImage {
            file: file.into(),
            sha256: row.get(3)?,
            size,
            version: row.get(5)?,
        },
        progress: OtaProgress {
            status,
            attempts,
            bytes_sent,
            error: row.get(9)?,
        },
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
    }))
}

impl Store for SqliteStore {
    fn device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        self.with(|conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {DEVICE_COLUMNS} FROM devices WHERE id = ?1"
                ))?
                .query_row([id], device_from_row)
                .optional()?;
            row.map(finish_device).transpose()
        })
    }

    fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt =
                conn.prepare_cached(&format!("SELECT {DEVICE_COLUMNS} FROM devices ORDER BY id"))?;
            let rows = stmt.query_map([], device_from_row)?;
            rows.map(|row| finish_device(row?)).collect()
        })
    }

    fn enroll(
        &self,
        id: &str,
        key: &[u8; 32],
        profile: &DeviceProfile,
        now: Millis,
    ) -> Result<Enrollment, StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let existing: Option<Vec<u8>> = tx
                .prepare_cached("SELECT key FROM devices WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?;
            let outcome = match existing {
                Some(stored) if stored.as_slice() == key.as_slice() => Enrollment::AlreadyEnrolled,
                Some(_) => Enrollment::Conflict,
                None => {
                    tx.prepare_cached(
                        "INSERT INTO devices (id, key, name, board, firmware, enrolled_at, last_seen, sensors)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
                    )?
                    .execute(params![
                        id,
                        key.as_slice(),
                        profile.name,
                        profile.board,
                        profile.firmware,
                        now,
                        Value::Object(admissible_sensors(&profile.sensors)).to_string()
                    ])?;
                    Enrollment::Enrolled
                }
            };
            tx.commit()?;
            Ok(outcome)
        })
    }

    fn touch(&self, id: &str, profile: &DeviceProfile, now: Millis) -> Result<(), StoreError> {
        // Once per handshake: statements come from the cache, not the parser.
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let stored: Option<String> = tx
                .prepare_cached("SELECT sensors FROM devices WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?;
            let Some(stored) = stored else {
                return Ok(());
            };
            let mut sensors = sensors_from_json(id, &stored).unwrap_or_default();
            merge_sensors(&mut sensors, &profile.sensors);
            tx.prepare_cached(
                "UPDATE devices SET name = ?2, board = ?3, firmware = ?4, last_seen = ?5, sensors = ?6
                 WHERE id = ?1",
            )?
            .execute(params![
                id,
                profile.name,
                profile.board,
                profile.firmware,
                now,
                Value::Object(sensors).to_string()
            ])?;
            tx.commit()?;
            Ok(())
        })
    }

    fn set_last_seen(&self, id: &str, now: Millis) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.prepare_cached("UPDATE devices SET last_seen = ?2 WHERE id = ?1")?
                .execute(params![id, now])?;
            Ok(())
        })
    }

    fn merge_sensors(&self, id: &str, sensors: &Map<String, Value>) -> Result<(), StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let stored: Option<String> = tx
                .query_row("SELECT sensors FROM devices WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()?;
            if let Some(stored) = stored {
                let mut merged = sensors_from_json(id, &stored).unwrap_or_default();
                merge_sensors(&mut merged, sensors);
                tx.execute(
                    "UPDATE devices SET sensors = ?2 WHERE id = ?1",
                    params![id, Value::Object(merged).to_string()],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn forget(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
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
        })
    }

    fn pairing(
        &self,
        platform: Platform,
        user_id: &str,
    ) -> Result<Option<PairingRecord>, StoreError> {
        self.with(|conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {PAIRING_COLUMNS} FROM pairings WHERE platform = ?1 AND user_id = ?2"
                ))?
                .query_row(params![platform.as_str(), user_id], pairing_from_row)
                .optional()?;
            Ok(row.flatten())
        })
    }

    fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {PAIRING_COLUMNS} FROM pairings ORDER BY platform, created_at"
            ))?;
            let rows = stmt.query_map([], pairing_from_row)?;
            let mut out = Vec::new();
            for row in rows {
                out.extend(row?);
            }
            Ok(out)
        })
    }

    fn put_pending(
        &self,
        platform: Platform,
        user_id: &str,
        user_name: Option<&str>,
        code: &str,
        now: Millis,
    ) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.prepare_cached(
                "INSERT INTO pairings (platform, user_id, user_name, code, created_at, approved_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, NULL)
                 ON CONFLICT (platform, user_id) DO UPDATE SET
                    user_name = excluded.user_name, code = excluded.code,
                    created_at = excluded.created_at, approved_at = NULL",
            )?
            .execute(params![platform.as_str(), user_id, user_name, code, now])?;
            Ok(())
        })
    }

    fn approve_code(
        &self,
        platform: Platform,
        code: &str,
        not_before: Millis,
        now: Millis,
    ) -> Result<Option<PairingRecord>, StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let user: Option<String> = tx
                .query_row(
                    "SELECT user_id FROM pairings
                     WHERE platform = ?1 AND code = ?2 AND approved_at IS NULL AND created_at >= ?3",
                    params![platform.as_str(), code, not_before],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(user) = user else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE pairings SET code = NULL, approved_at = ?3 WHERE platform = ?1 AND user_id = ?2",
                params![platform.as_str(), user, now],
            )?;
            let record = tx
                .query_row(
                    &format!(
                        "SELECT {PAIRING_COLUMNS} FROM pairings WHERE platform = ?1 AND user_id = ?2"
                    ),
                    params![platform.as_str(), user],
                    pairing_from_row,
                )?
                .ok_or_else(|| StoreError::Corrupt(user.clone()))?;
            tx.commit()?;
            Ok(Some(record))
        })
    }

    fn approve_user(
        &self,
        platform: Platform,
        user_id: &str,
        now: Millis,
    ) -> Result<PairingRecord, StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            tx.execute(
                "INSERT INTO pairings (platform, user_id, user_name, code, created_at, approved_at)
                 VALUES (?1, ?2, NULL, NULL, ?3, ?3)
                 ON CONFLICT (platform, user_id) DO UPDATE SET
                    code = NULL, approved_at = COALESCE(pairings.approved_at, excluded.approved_at)",
                params![platform.as_str(), user_id, now],
            )?;
            let record = tx
                .query_row(
                    &format!(
                        "SELECT {PAIRING_COLUMNS} FROM pairings WHERE platform = ?1 AND user_id = ?2"
                    ),
                    params![platform.as_str(), user_id],
                    pairing_from_row,
                )?
                .ok_or_else(|| StoreError::Corrupt(user_id.to_owned()))?;
            tx.commit()?;
            Ok(record)
        })
    }

    fn revoke(&self, platform: Platform, user_id: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            let removed = conn
                .prepare_cached("DELETE FROM pairings WHERE platform = ?1 AND user_id = ?2")?
                .execute(params![platform.as_str(), user_id])?;
            Ok(removed > 0)
        })
    }

    fn claim_phone(
        &self,
        device_id: &str,
        user_id: &str,
        info: &PhoneInfo,
        now: Millis,
    ) -> Result<PhoneClaim, StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let owner = phone_owner(&tx, device_id)?;
            let claim = match owner {
                Some(owner) if owner != user_id => PhoneClaim::OwnedBy(owner),
                Some(_) => {
                    tx.execute(
                        "UPDATE mobile_devices SET name = ?2, platform = ?3, last_seen = ?4 WHERE id = ?1",
                        params![device_id, info.name, info.platform, now],
                    )?;
                    PhoneClaim::Mine
                }
                None if !make_room_for_phone(&tx, user_id, now)? => PhoneClaim::TooMany,
                None => {
                    tx.execute(
                        "INSERT INTO mobile_devices (id, user_id, name, platform, first_seen, last_seen)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                        params![device_id, user_id, info.name, info.platform, now],
                    )?;
                    PhoneClaim::Mine
                }
            };
            tx.commit()?;
            Ok(claim)
        })
    }

    fn phones(&self) -> Result<Vec<PhoneRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, user_id, name, platform, first_seen, last_seen
                 FROM mobile_devices ORDER BY id",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(PhoneRecord {
                    id: row.get(0)?,
                    user_id: row.get(1)?,
                    info: PhoneInfo {
                        name: row.get(2)?,
                        platform: row.get(3)?,
                    },
                    first_seen: row.get(4)?,
                    last_seen: row.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
    }

    fn phone_owner(&self, device_id: &str) -> Result<Option<String>, StoreError> {
        self.with(|conn| Ok(phone_owner(conn, device_id)?))
    }

    fn outbox_push(&self, device_id: &str, frame: &str, now: Millis) -> Result<(), StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            tx.execute(
                "INSERT INTO mobile_outbox (device_id, frame, at) VALUES (?1, ?2, ?3)",
                params![device_id, frame, now],
            )?;
            // Newest first, the running totals tell where the bounds are crossed.
            let oldest_kept: Option<i64> = tx.query_row(
                "SELECT MIN(seq) FROM (
                     SELECT seq, SUM(length(CAST(frame AS BLOB))) OVER (ORDER BY seq DESC) AS bytes,
                            ROW_NUMBER() OVER (ORDER BY seq DESC) AS n
                     FROM mobile_outbox WHERE device_id = ?1)
                 WHERE bytes <= ?2 AND n <= ?3",
                params![device_id, OUTBOX_BYTES as i64, OUTBOX_FRAMES as i64],
                |row| row.get(0),
            )?;
            tx.execute(
                "DELETE FROM mobile_outbox WHERE device_id = ?1 AND seq < ?2",
                params![device_id, oldest_kept.unwrap_or(i64::MAX)],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    fn outbox_take(&self, device_id: &str, since: Millis) -> Result<Vec<String>, StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let frames = {
                let mut stmt = tx.prepare_cached(
                    "SELECT frame FROM mobile_outbox WHERE device_id = ?1 AND at >= ?2 ORDER BY seq",
                )?;
                let rows = stmt.query_map(params![device_id, since], |row| row.get(0))?;
                rows.collect::<Result<Vec<String>, _>>()?
            };
            tx.execute("DELETE FROM mobile_outbox WHERE device_id = ?1", [device_id])?;
            tx.commit()?;
            Ok(frames)
        })
    }

    fn stage_ota(
        &self,
        device_id: &str,
        image: &OtaImage,
        now: Millis,
    ) -> Result<Option<OtaUpdate>, StoreError> {
        self.with(|conn| {
            let tx = write_transaction(conn)?;
            let status: Option<String> = tx
                .query_row(
                    "SELECT status FROM ota_updates WHERE device_id = ?1",
                    [device_id],
                    |r| r.get(0),
                )
                .optional()?;
            if status
                .as_deref()
                .and_then(OtaStatus::parse)
                .is_some_and(OtaStatus::is_active)
            {
                return Ok(None);
            }
            let progress = OtaProgress {
                status: OtaStatus::Sending,
                attempts: 0,
                bytes_sent: 0,
                error: None,
            };
            tx.execute("DELETE FROM ota_updates WHERE device_id = ?1", [device_id])?;
            tx.execute(
                "INSERT INTO ota_updates (device_id, file, sha256, size, version, status,
                    attempts, bytes_sent, error, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0, NULL, ?7, ?7)",
                params![
                    device_id,
                    image.file.to_string_lossy(),
                    image.sha256,
                    to_sql_int(image.size),
                    image.version,
                    progress.status.as_str(),
                    now
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(Some(OtaUpdate {
                id,
                device_id: device_id.to_owned(),
                image: image.clone(),
                progress,
                created_at: now,
                updated_at: now,
            }))
        })
    }

    fn ota_update(&self, device_id: &str) -> Result<Option<OtaUpdate>, StoreError> {
        self.with(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {OTA_COLUMNS} FROM ota_updates WHERE device_id = ?1"
            ))?
            .query_row([device_id], ota_from_row)
            .optional()?
            .transpose()
        })
    }

    fn ota_updates(&self) -> Result<Vec<OtaUpdate>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {OTA_COLUMNS} FROM ota_updates ORDER BY device_id"
            ))?;
            let rows = stmt.query_map([], ota_from_row)?;
            rows.map(|row| row?).collect()
        })
    }

    fn save_ota_progress(
        &self,
        id: i64,
        progress: &OtaProgress,
        now: Millis,
    ) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.prepare_cached(
                "UPDATE ota_updates
                 SET status = ?2, attempts = ?3, bytes_sent = ?4, error = ?5, updated_at = ?6
                 WHERE id = ?1",
            )?
            .execute(params![
                id,
                progress.status.as_str(),
                progress.attempts,
                to_sql_int(progress.bytes_sent),
                progress.error,
                now
            ])?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
        (dir, store)
    }

    fn profile(name: &str) -> DeviceProfile {
        DeviceProfile {
            name: Some(name.into()),
            board: Some("esp32s3".into()),
            firmware: Some("0.1.0".into()),
            sensors: serde_json::from_str(r#"{"battery_pct": 80}"#).unwrap(),
        }
    }

    #[test]
    fn enrollment_is_idempotent_and_refuses_other_keys() {
        let (_dir, store) = open();
        let key = [7u8; 32];
        assert_eq!(
            store.enroll("hg-1", &key, &profile("a"), 1).unwrap(),
            Enrollment::Enrolled
        );
        assert_eq!(
            store.enroll("hg-1", &key, &profile("a"), 2).unwrap(),
            Enrollment::AlreadyEnrolled
        );
        assert_eq!(
            store.enroll("hg-1", &[8u8; 32], &profile("a"), 3).unwrap(),
            Enrollment::Conflict
        );
        let record = store.device("hg-1").unwrap().unwrap();
        assert_eq!(record.key, key);
        assert_eq!(record.enrolled_at, 1);
    }

    #[test]
    fn sensors_merge_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("herald.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store.enroll("hg-1", &[1u8; 32], &profile("a"), 1).unwrap();
            let more = serde_json::from_str(r#"{"temperature_c": 21.5}"#).unwrap();
            store.merge_sensors("hg-1", &more).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let record = store.device("hg-1").unwrap().unwrap();
        assert_eq!(record.sensors["battery_pct"], 80);
        assert_eq!(record.sensors["temperature_c"], 21.5);
    }

    #[cfg(unix)]
    #[test]
    fn file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, store) = open();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn pairing_codes_expire_and_approve_once() {
        let (_dir, store) = open();
        store
            .put_pending(Platform::Gadget, "hg-1", Some("Kitchen"), "ABCD2345", 1_000)
            .unwrap();
        assert!(store
            .approve_code(Platform::Gadget, "ABCD2345", 2_000, 3_000)
            .unwrap()
            .is_none());
        assert!(store
            .approve_code(Platform::Mobile, "ABCD2345", 0, 3_000)
            .unwrap()
            .is_none());
        let approved = store
            .approve_code(Platform::Gadget, "ABCD2345", 0, 3_000)
            .unwrap()
            .unwrap();
        assert_eq!(approved.approved_at, Some(3_000));
        assert_eq!(approved.code, None);
        assert!(store
            .approve_code(Platform::Gadget, "ABCD2345", 0, 4_000)
            .unwrap()
            .is_none());
        assert!(store.revoke(Platform::Gadget, "hg-1").unwrap());
        assert!(store.pairing(Platform::Gadget, "hg-1").unwrap().is_none());
    }

    #[test]
    fn forget_removes_device_and_pairing() {
        let (_dir, store) = open();
        store.enroll("hg-1", &[1u8; 32], &profile("a"), 1).unwrap();
        store.approve_user(Platform::Gadget, "hg-1", 2).unwrap();
        assert!(store.forget("hg-1").unwrap());
        assert!(store.device("hg-1").unwrap().is_none());
        assert!(store.pairing(Platform::Gadget, "hg-1").unwrap().is_none());
        assert!(!store.forget("hg-1").unwrap());
    }

    #[test]
    fn a_phone_belongs_to_its_first_user() {
        let (_dir, store) = open();
        let info = PhoneInfo {
            name: Some("Phone".into()),
            platform: Some("android".into()),
        };
        assert_eq!(
            store.claim_phone("tel-1", "u1", &info, 1).unwrap(),
            PhoneClaim::Mine
        );
        assert_eq!(
            store.claim_phone("tel-1", "u1", &info, 2).unwrap(),
            PhoneClaim::Mine
        );
        assert_eq!(
            store.claim_phone("tel-1", "u2", &info, 3).unwrap(),
            PhoneClaim::OwnedBy("u1".into())
        );
        let phones = store.phones().unwrap();
        assert_eq!(phones.len(), 1);
        assert_eq!((phones[0].first_seen, phones[0].last_seen), (1, 2));
        assert!(store.forget("tel-1").unwrap(), "a phone can be forgotten");
        assert!(store.phones().unwrap().is_empty());
    }

    #[test]
    fn a_user_owns_a_bounded_number_of_phones_and_stale_ones_make_room() {
        let (_dir, store) = open();
        let info = PhoneInfo::default();
        let day = 86_400_000;
        // The first phone was last seen long ago; the rest are recent.
        assert_eq!(
            store.claim_phone("tel-0", "u1", &info, 0).unwrap(),
            PhoneClaim::Mine
        );
        let now = (STALE_PHONE_DAYS + 1) * day;
        for i in 1..MAX_PHONES_PER_USER {
            let id = format!("tel-{i}");
            assert_eq!(
                store.claim_phone(&id, "u1", &info, now).unwrap(),
                PhoneClaim::Mine
            );
        }
        // Full: the stale one gives its place to the new one.
        assert_eq!(
            store.claim_phone("tel-new", "u1", &info, now).unwrap(),
            PhoneClaim::Mine
        );
        assert_eq!(store.phone_owner("tel-0").unwrap(), None);
        // Full of recent phones: a new id is refused, known ones still connect, and
        // another user is not affected.
        assert_eq!(
            store.claim_phone("tel-more", "u1", &info, now).unwrap(),
            PhoneClaim::TooMany
        );
        assert_eq!(
            store.phone_owner("tel-more").unwrap(),
            None,
            "nothing stored"
        );
        assert_eq!(
            store.claim_phone("tel-5", "u1", &info, now).unwrap(),
            PhoneClaim::Mine
        );
        assert_eq!(
            store.claim_phone("tel-x", "u2", &info, now).unwrap(),
            PhoneClaim::Mine
        );
        assert_eq!(store.phones().unwrap().len(), MAX_PHONES_PER_USER + 1);
    }

    #[test]
    fn the_outbox_keeps_the_newest_within_bounds_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("herald.db");
        let store = SqliteStore::open(&path).unwrap();
        for i in 0..300 {
            store.outbox_push("tel-1", &format!("f{i}"), 1_000).unwrap();
        }
        store.outbox_push("tel-2", "other", 1_000).unwrap();
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        let kept = store.outbox_take("tel-1", 0).unwrap();
        assert_eq!(kept.len(), OUTBOX_FRAMES);
        assert_eq!(kept[0], "f44");
        assert!(
            store.outbox_take("tel-1", 0).unwrap().is_empty(),
            "taken once"
        );
        assert_eq!(store.outbox_take("tel-2", 0).unwrap(), ["other"]);

        store
            .outbox_push("tel-1", &"x".repeat(OUTBOX_BYTES - 10), 1)
            .unwrap();
        store.outbox_push("tel-1", &"y".repeat(20), 1).unwrap();
        assert_eq!(store.outbox_take("tel-1", 0).unwrap(), ["y".repeat(20)]);

        store.outbox_push("tel-1", "old", 1_000).unwrap();
        store.outbox_push("tel-1", "new", 300_000).unwrap();
        assert_eq!(store.outbox_take("tel-1", 100_000).unwrap(), ["new"]);
        store.outbox_push("tel-1", "forgotten", 1).unwrap();
        store.forget("tel-1").unwrap();
        assert!(store.outbox_take("tel-1", 0).unwrap().is_empty());
    }

    fn staged_image() -> OtaImage {
        OtaImage {
            file: "/data/ota/hg-1-abc.bin".into(),
            sha256: "ab".repeat(32),
            size: 300_000,
            version: "0.2.0".into(),
        }
    }

    #[test]
    fn one_active_ota_update_per_device_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("herald.db");
        let store = SqliteStore::open(&path).unwrap();
        store.enroll("hg-1", &[1u8; 32], &profile("a"), 1).unwrap();
        let staged = store
            .stage_ota("hg-1", &staged_image(), 10)
            .unwrap()
            .unwrap();
        assert_eq!(staged.progress.status, OtaStatus::Sending);
        assert_eq!(staged.progress.attempts, 0);
        // Busy while sending, and while retrying.
        assert!(store
            .stage_ota("hg-1", &staged_image(), 11)
            .unwrap()
            .is_none());
        let retrying = OtaProgress {
            status: OtaStatus::Retrying,
            attempts: 1,
            bytes_sent: 16_384,
            error: Some("disconnected".into()),
        };
        store.save_ota_progress(staged.id, &retrying, 12).unwrap();
        assert!(store
            .stage_ota("hg-1", &staged_image(), 13)
            .unwrap()
            .is_none());
        drop(store);

        let store = SqliteStore::open(&path).unwrap();
        let found = store.ota_update("hg-1").unwrap().unwrap();
        assert_eq!(found.progress, retrying);
        assert_eq!(found.image, staged_image());
        assert_eq!((found.created_at, found.updated_at), (10, 12));

        // A finished update is replaced by the next, and progress saved for the old id
        // no longer lands anywhere.
        let failed = OtaProgress {
            status: OtaStatus::Failed,
            ..retrying
        };
        store.save_ota_progress(staged.id, &failed, 14).unwrap();
        let next = store
            .stage_ota("hg-1", &staged_image(), 15)
            .unwrap()
            .unwrap();
        assert_ne!(next.id, staged.id);
        store.save_ota_progress(staged.id, &failed, 16).unwrap();
        assert_eq!(store.ota_updates().unwrap(), [next]);

        // Forgetting the device drops its update.
        store.forget("hg-1").unwrap();
        assert!(store.ota_update("hg-1").unwrap().is_none());
        assert!(store.stage_ota("hg-9", &staged_image(), 17).is_err());
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("herald.db");
        drop(SqliteStore::open(&path).unwrap());
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        assert!(matches!(
            SqliteStore::open(&path),
            Err(StoreError::TooNew { found: 99, .. })
        ));
    }
}
