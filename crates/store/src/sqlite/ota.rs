//! The `ota_updates` table: the latest firmware update of each gadget, its image and its
//! progress, with at most one active update per gadget.

use rusqlite::{params, Connection, OptionalExtension};

use super::write_transaction;
use crate::{Millis, OtaImage, OtaProgress, OtaStatus, OtaUpdate, StoreError};

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

pub(super) fn stage_ota(
    conn: &mut Connection,
    device_id: &str,
    image: &OtaImage,
    now: Millis,
) -> Result<Option<OtaUpdate>, StoreError> {
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
}

pub(super) fn ota_update(
    conn: &Connection,
    device_id: &str,
) -> Result<Option<OtaUpdate>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {OTA_COLUMNS} FROM ota_updates WHERE device_id = ?1"
    ))?
    .query_row([device_id], ota_from_row)
    .optional()?
    .transpose()
}

pub(super) fn ota_updates(conn: &Connection) -> Result<Vec<OtaUpdate>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {OTA_COLUMNS} FROM ota_updates ORDER BY device_id"
    ))?;
    let rows = stmt.query_map([], ota_from_row)?;
    rows.map(|row| row?).collect()
}

pub(super) fn save_ota_progress(
    conn: &Connection,
    id: i64,
    progress: &OtaProgress,
    now: Millis,
) -> Result<(), StoreError> {
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
}
