//! Gadgets in the `devices` table: enrolment under a key, and the profile and sensors
//! that each handshake and each reading refresh.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{Map, Value};

use super::write_transaction;
use crate::{
    admissible_sensors, DeviceProfile, DeviceRecord, Enrollment, Millis, NewDevice, StoreError,
};

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
            owner: row.get(8)?,
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

const DEVICE_COLUMNS: &str =
    "id, key, name, board, firmware, enrolled_at, last_seen, sensors, owner";

pub(super) fn device(conn: &Connection, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {DEVICE_COLUMNS} FROM devices WHERE id = ?1"
        ))?
        .query_row([id], device_from_row)
        .optional()?;
    row.map(finish_device).transpose()
}

pub(super) fn devices(conn: &Connection) -> Result<Vec<DeviceRecord>, StoreError> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {DEVICE_COLUMNS} FROM devices ORDER BY id"))?;
    let rows = stmt.query_map([], device_from_row)?;
    rows.map(|row| finish_device(row?)).collect()
}

/// Set (or clear) whose gadget `id` is; false when it is not enrolled.
pub(super) fn set_owner(
    conn: &Connection,
    id: &str,
    owner: Option<&str>,
) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached("UPDATE devices SET owner = ?2 WHERE id = ?1")?
        .execute(params![id, owner])?;
    Ok(changed == 1)
}

/// Enroll each device in one transaction: first contacts that arrive together share
/// its cost (the WAL's frames, the locks), which is most of an enrollment's.
pub(super) fn enroll(
    conn: &mut Connection,
    devices: &[NewDevice],
) -> Result<Vec<Enrollment>, StoreError> {
    let tx = write_transaction(conn)?;
    let outcomes = devices
        .iter()
        .map(|device| enroll_one(&tx, device))
        .collect::<Result<_, _>>()?;
    tx.commit()?;
    Ok(outcomes)
}

fn enroll_one(conn: &Connection, device: &NewDevice) -> Result<Enrollment, StoreError> {
    let NewDevice {
        id,
        key,
        profile,
        now,
    } = device;
    // A new device is the common case: insert, and look at the stored key only if there
    // is one already.
    let inserted = conn
        .prepare_cached(
            "INSERT INTO devices (id, key, name, board, firmware, enrolled_at, last_seen, sensors)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7) ON CONFLICT (id) DO NOTHING",
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
    if inserted == 1 {
        return Ok(Enrollment::Enrolled);
    }
    let stored: Vec<u8> = conn
        .prepare_cached("SELECT key FROM devices WHERE id = ?1")?
        .query_row([id], |r| r.get(0))?;
    Ok(if stored.as_slice() == key.as_slice() {
        Enrollment::AlreadyEnrolled
    } else {
        Enrollment::Conflict
    })
}

pub(super) fn touch(
    conn: &mut Connection,
    id: &str,
    profile: &DeviceProfile,
    now: Millis,
) -> Result<bool, StoreError> {
    // Once per handshake: statements come from the cache, not the parser.
    let tx = write_transaction(conn)?;
    let stored: Option<String> = tx
        .prepare_cached("SELECT sensors FROM devices WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    let Some(stored) = stored else {
        return Ok(false);
    };
    let mut sensors = sensors_from_json(id, &stored).unwrap_or_default();
    crate::merge_sensors(&mut sensors, &profile.sensors);
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
    Ok(true)
}

pub(super) fn set_last_seen(
    conn: &mut Connection,
    seen: &[(String, Millis)],
) -> Result<(), StoreError> {
    let tx = write_transaction(conn)?;
    {
        // Noted times are written late, after a handshake may have written a newer one.
        let mut update = tx.prepare_cached(
            "UPDATE devices SET last_seen = MAX(COALESCE(last_seen, ?2), ?2) WHERE id = ?1",
        )?;
        for (id, at) in seen {
            update.execute(params![id, at])?;
        }
    }
    tx.commit()?;
    Ok(())
}

pub(super) fn merge_sensors(
    conn: &mut Connection,
    id: &str,
    sensors: &Map<String, Value>,
) -> Result<(), StoreError> {
    let tx = write_transaction(conn)?;
    let stored: Option<String> = tx
        .query_row("SELECT sensors FROM devices WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?;
    if let Some(stored) = stored {
        let mut merged = sensors_from_json(id, &stored).unwrap_or_default();
        crate::merge_sensors(&mut merged, sensors);
        tx.execute(
            "UPDATE devices SET sensors = ?2 WHERE id = ?1",
            params![id, Value::Object(merged).to_string()],
        )?;
    }
    tx.commit()?;
    Ok(())
}
