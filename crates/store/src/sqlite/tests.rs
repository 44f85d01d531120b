//! The SQLite store on a real file in a temporary directory: what each part keeps and
//! refuses, and what survives closing and reopening the file.

use herald_mobile_proto::limits::{OUTBOX_BYTES, OUTBOX_FRAMES};
use herald_port::Platform;
use rusqlite::Connection;

use super::SqliteStore;
use crate::{
    DeviceProfile, Enrollment, Millis, NewDevice, OtaImage, OtaProgress, OtaStatus, PhoneClaim,
    PhoneInfo, Store, StoreError, MAX_PHONES_PER_USER, STALE_PHONE_DAYS,
};

fn open() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
    (dir, store)
}

fn enroll(
    store: &SqliteStore,
    id: &str,
    key: [u8; 32],
    profile: DeviceProfile,
    now: Millis,
) -> Result<Enrollment, StoreError> {
    let id = id.to_owned();
    let enrolled = store.enroll(&[NewDevice {
        id,
        key,
        profile,
        now,
    }])?;
    Ok(enrolled[0])
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
        enroll(&store, "hg-1", key, profile("a"), 1).unwrap(),
        Enrollment::Enrolled
    );
    assert_eq!(
        enroll(&store, "hg-1", key, profile("a"), 2).unwrap(),
        Enrollment::AlreadyEnrolled
    );
    assert_eq!(
        enroll(&store, "hg-1", [8u8; 32], profile("a"), 3).unwrap(),
        Enrollment::Conflict
    );
    let record = store.device("hg-1").unwrap().unwrap();
    assert_eq!(record.key, key);
    assert_eq!(record.enrolled_at, 1);

    // Several at once: each outcome in its place, each seeing those before it.
    let new = |id: &str, key: [u8; 32]| NewDevice {
        id: id.into(),
        key,
        profile: profile("b"),
        now: 4,
    };
    let together = [
        new("hg-2", key),
        new("hg-2", key),
        new("hg-1", [9u8; 32]),
        new("hg-3", [3u8; 32]),
    ];
    assert_eq!(
        store.enroll(&together).unwrap(),
        [
            Enrollment::Enrolled,
            Enrollment::AlreadyEnrolled,
            Enrollment::Conflict,
            Enrollment::Enrolled
        ]
    );
    let ids: Vec<_> = store.devices().unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(ids, ["hg-1", "hg-2", "hg-3"]);
}

#[test]
fn sensors_merge_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        enroll(&store, "hg-1", [1u8; 32], profile("a"), 1).unwrap();
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
    enroll(&store, "hg-1", [1u8; 32], profile("a"), 1).unwrap();
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
    enroll(&store, "hg-1", [1u8; 32], profile("a"), 1).unwrap();
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

/// A store file as the fifth schema left it, before gadgets became one B-tree.
fn fifth_schema(path: &std::path::Path, foreign_keys: bool) -> Connection {
    let old = Connection::open(path).unwrap();
    old.pragma_update(None, "foreign_keys", foreign_keys)
        .unwrap();
    for sql in &super::MIGRATIONS[..5] {
        old.execute_batch(sql).unwrap();
    }
    old.pragma_update(None, "user_version", 5).unwrap();
    old
}

/// A firmware update of `device_id`, mid-transfer, in a fifth-schema file.
fn insert_update(old: &Connection, device_id: &str) {
    old.execute(
        "INSERT INTO ota_updates (device_id, file, sha256, size, version, status, attempts,
             bytes_sent, created_at, updated_at)
         VALUES (?1, 'fw.bin', 'ab', 4, '2.0', 'sending', 1, 0, 30, 30)",
        [device_id],
    )
    .unwrap();
}

#[test]
fn a_store_of_the_fifth_schema_keeps_its_gadgets_and_their_updates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.db");
    let old = fifth_schema(&path, true);
    old.execute(
        "INSERT INTO devices (id, key, name, enrolled_at, last_seen, sensors)
         VALUES ('hg-1', ?1, 'Kitchen', 10, 20, '{\"battery_pct\":80}')",
        [vec![7u8; 32]],
    )
    .unwrap();
    insert_update(&old, "hg-1");
    drop(old);

    let store = SqliteStore::open(&path).unwrap();
    let device = store.device("hg-1").unwrap().unwrap();
    assert_eq!(device.key, [7; 32]);
    assert_eq!(device.name.as_deref(), Some("Kitchen"));
    assert_eq!((device.enrolled_at, device.last_seen), (10, Some(20)));
    assert_eq!(device.sensors["battery_pct"], 80);
    let update = store.ota_update("hg-1").unwrap().unwrap();
    assert_eq!(update.progress.status, OtaStatus::Sending);
    let schema: String = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'devices'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(schema.ends_with("WITHOUT ROWID"), "{schema}");

    // The update still belongs to its gadget, and goes with it.
    assert!(store.forget("hg-1").unwrap());
    assert!(store.ota_update("hg-1").unwrap().is_none());
    assert!(store.ota_updates().unwrap().is_empty());
}

#[test]
fn a_migration_that_would_leave_dangling_references_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.db");
    let old = fifth_schema(&path, false);
    // An update of a gadget the store does not hold (written with foreign keys off).
    insert_update(&old, "hg-gone");
    drop(old);

    assert!(matches!(
        SqliteStore::open(&path),
        Err(StoreError::Dangling(1))
    ));
    let file = Connection::open(&path).unwrap();
    let version: i64 = file
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5, "not migrated");
    let schema: String = file
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'devices'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        !schema.contains("WITHOUT ROWID"),
        "the old table stays: {schema}"
    );
}

#[test]
fn a_gadget_s_owner_is_kept_changed_and_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
    assert!(
        !store.set_owner("hg-nobody", Some("u-1")).unwrap(),
        "not enrolled"
    );
    enroll(&store, "hg-1", [7; 32], DeviceProfile::default(), 1).unwrap();
    assert_eq!(store.device("hg-1").unwrap().unwrap().owner, None);
    assert!(store.set_owner("hg-1", Some("u-1")).unwrap());
    assert_eq!(
        store.device("hg-1").unwrap().unwrap().owner.as_deref(),
        Some("u-1")
    );
    drop(store);
    let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
    assert_eq!(
        store.devices().unwrap()[0].owner.as_deref(),
        Some("u-1"),
        "kept"
    );
    assert!(store.set_owner("hg-1", None).unwrap());
    assert_eq!(store.device("hg-1").unwrap().unwrap().owner, None);
}

#[test]
fn a_phone_keeps_one_push_subscription_found_by_its_user() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
    let record = |device: &str, user: &str, endpoint: &str| crate::PushRecord {
        device_id: device.into(),
        user_id: user.into(),
        endpoint: endpoint.into(),
        p256dh: vec![4; 65],
        auth: vec![1; 16],
    };
    store
        .put_push_subscription(&record("tel-1", "u-a", "https://push.example/1"), 1)
        .unwrap();
    store
        .put_push_subscription(&record("tel-2", "u-a", "https://push.example/2"), 1)
        .unwrap();
    store
        .put_push_subscription(&record("tel-1", "u-a", "https://push.example/3"), 2)
        .unwrap();
    store
        .put_push_subscription(&record("tel-9", "u-b", "https://push.example/9"), 1)
        .unwrap();
    let mine = store.push_subscriptions(Some("u-a")).unwrap();
    let endpoints: Vec<&str> = mine.iter().map(|s| s.endpoint.as_str()).collect();
    assert_eq!(
        endpoints,
        ["https://push.example/3", "https://push.example/2"]
    );
    assert_eq!(
        store.push_subscriptions(None).unwrap().len(),
        3,
        "everyone's"
    );
    assert!(store.remove_push_subscription("tel-1").unwrap());
    assert!(!store.remove_push_subscription("tel-1").unwrap());
    drop(store);
    let store = SqliteStore::open(&dir.path().join("herald.db")).unwrap();
    assert_eq!(
        store.push_subscriptions(Some("u-a")).unwrap().len(),
        1,
        "kept"
    );
    let shown = format!("{:?}", store.push_subscriptions(Some("u-a")).unwrap());
    assert!(
        !shown.contains("push.example"),
        "no endpoint in a log: {shown}"
    );
}
