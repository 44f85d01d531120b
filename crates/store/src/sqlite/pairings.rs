//! The `pairings` table, one row per platform and user: a pending pairing holds a code
//! until it is approved (by its code, or by the user's id) or revoked.

use herald_port::Platform;
use rusqlite::{params, Connection, OptionalExtension};

use super::write_transaction;
use crate::{Millis, PairingRecord, StoreError};

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

pub(super) fn pairing(
    conn: &Connection,
    platform: Platform,
    user_id: &str,
) -> Result<Option<PairingRecord>, StoreError> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {PAIRING_COLUMNS} FROM pairings WHERE platform = ?1 AND user_id = ?2"
        ))?
        .query_row(params![platform.as_str(), user_id], pairing_from_row)
        .optional()?;
    Ok(row.flatten())
}

pub(super) fn pairings(conn: &Connection) -> Result<Vec<PairingRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {PAIRING_COLUMNS} FROM pairings ORDER BY platform, created_at"
    ))?;
    let rows = stmt.query_map([], pairing_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        out.extend(row?);
    }
    Ok(out)
}

pub(super) fn put_pending(
    conn: &Connection,
    platform: Platform,
    user_id: &str,
    user_name: Option<&str>,
    code: &str,
    now: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO pairings (platform, user_id, user_name, code, created_at, approved_at)
         VALUES (?1, ?2, ?3, ?4, ?5, NULL)
         ON CONFLICT (platform, user_id) DO UPDATE SET
            user_name = excluded.user_name, code = excluded.code,
            created_at = excluded.created_at, approved_at = NULL",
    )?
    .execute(params![platform.as_str(), user_id, user_name, code, now])?;
    Ok(())
}

pub(super) fn approve_code(
    conn: &mut Connection,
    platform: Platform,
    code: &str,
    not_before: Millis,
    now: Millis,
) -> Result<Option<PairingRecord>, StoreError> {
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
            &format!("SELECT {PAIRING_COLUMNS} FROM pairings WHERE platform = ?1 AND user_id = ?2"),
            params![platform.as_str(), user],
            pairing_from_row,
        )?
        .ok_or_else(|| StoreError::Corrupt(user.clone()))?;
    tx.commit()?;
    Ok(Some(record))
}

pub(super) fn approve_user(
    conn: &mut Connection,
    platform: Platform,
    user_id: &str,
    now: Millis,
) -> Result<PairingRecord, StoreError> {
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
            &format!("SELECT {PAIRING_COLUMNS} FROM pairings WHERE platform = ?1 AND user_id = ?2"),
            params![platform.as_str(), user_id],
            pairing_from_row,
        )?
        .ok_or_else(|| StoreError::Corrupt(user_id.to_owned()))?;
    tx.commit()?;
    Ok(record)
}

pub(super) fn revoke(
    conn: &Connection,
    platform: Platform,
    user_id: &str,
) -> Result<bool, StoreError> {
    let removed = conn
        .prepare_cached("DELETE FROM pairings WHERE platform = ?1 AND user_id = ?2")?
        .execute(params![platform.as_str(), user_id])?;
    Ok(removed > 0)
}
