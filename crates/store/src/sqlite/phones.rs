//! Phones in `mobile_devices`, each owned by the first user that connected with its id
//! and bounded per user; and `mobile_outbox`, the frames kept for a phone that is away.

use herald_mobile_proto::limits::{OUTBOX_BYTES, OUTBOX_FRAMES};
use rusqlite::{params, Connection, OptionalExtension};

use super::write_transaction;
use crate::{
    Millis, PhoneClaim, PhoneInfo, PhoneRecord, PushRecord, StoreError, MAX_PHONES_PER_USER,
    STALE_PHONE_DAYS,
};

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

pub(super) fn phone_owner(conn: &Connection, device_id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT user_id FROM mobile_devices WHERE id = ?1")?
        .query_row([device_id], |r| r.get(0))
        .optional()
}

pub(super) fn claim_phone(
    conn: &mut Connection,
    device_id: &str,
    user_id: &str,
    info: &PhoneInfo,
    now: Millis,
) -> Result<PhoneClaim, StoreError> {
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
}

pub(super) fn phones(conn: &Connection) -> Result<Vec<PhoneRecord>, StoreError> {
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
}

pub(super) fn outbox_push(
    conn: &mut Connection,
    device_id: &str,
    frame: &str,
    now: Millis,
) -> Result<(), StoreError> {
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
}

pub(super) fn outbox_take(
    conn: &mut Connection,
    device_id: &str,
    since: Millis,
) -> Result<Vec<String>, StoreError> {
    let tx = write_transaction(conn)?;
    let frames = {
        let mut stmt = tx.prepare_cached(
            "SELECT frame FROM mobile_outbox WHERE device_id = ?1 AND at >= ?2 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![device_id, since], |row| row.get(0))?;
        rows.collect::<Result<Vec<String>, _>>()?
    };
    tx.execute(
        "DELETE FROM mobile_outbox WHERE device_id = ?1",
        [device_id],
    )?;
    tx.commit()?;
    Ok(frames)
}

/// Keep `sub` as its device's one subscription.
pub(super) fn put_push_subscription(
    conn: &Connection,
    sub: &PushRecord,
    now: Millis,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO push_subscriptions (device_id, user_id, endpoint, p256dh, auth, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (device_id) DO UPDATE SET user_id = ?2, endpoint = ?3, p256dh = ?4,
             auth = ?5, created_at = ?6",
    )?
    .execute(params![
        sub.device_id,
        sub.user_id,
        sub.endpoint,
        sub.p256dh,
        sub.auth,
        now
    ])?;
    Ok(())
}

pub(super) fn remove_push_subscription(
    conn: &Connection,
    device_id: &str,
) -> Result<bool, StoreError> {
    let removed = conn
        .prepare_cached("DELETE FROM push_subscriptions WHERE device_id = ?1")?
        .execute([device_id])?;
    Ok(removed > 0)
}

pub(super) fn push_subscriptions(
    conn: &Connection,
    user_id: Option<&str>,
) -> Result<Vec<PushRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT device_id, user_id, endpoint, p256dh, auth FROM push_subscriptions
         WHERE ?1 IS NULL OR user_id = ?1 ORDER BY device_id",
    )?;
    let rows = stmt.query_map([user_id], |row| {
        Ok(PushRecord {
            device_id: row.get(0)?,
            user_id: row.get(1)?,
            endpoint: row.get(2)?,
            p256dh: row.get(3)?,
            auth: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
