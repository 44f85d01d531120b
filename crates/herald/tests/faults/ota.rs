//! Firmware updates: a push, its staged copy and its transfer under kills.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::rig::eventually;
use crate::rig::gadget::{firmware, Gadget};
use crate::rig::seeds::{run_seeds, Rng};
use crate::rig::server::{admin, admin_async, admin_get, final_checks, is_temporary, Herald};

/// An update is pushed to a gadget and the server killed during the push, or during the
/// transfer, and sometimes again during the retry after the restart. An update the push
/// answered must still be there after each restart and end installed, byte for byte;
/// no staged image may stay behind.
#[test]
fn ota_staging_and_retry() {
    run_seeds("ota_staging_and_retry", ota_run);
}

async fn ota_status(herald: &Herald, id: &str) -> Option<Value> {
    let path = format!("/v1/ota/{id}");
    let (status, update) = admin_async(herald.data(), &path, None).await.unwrap();
    match status {
        200 => Some(update),
        404 => None,
        _ => panic!("GET {path}: {status} {update}"),
    }
}

/// What `staged` still lists once the server has had 5 s to sweep it.
async fn left_after_sweep(staged: impl Fn() -> Vec<PathBuf>) -> Vec<PathBuf> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !staged().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    staged()
}

fn is_active(update: &Value) -> bool {
    matches!(update["status"].as_str(), Some("sending" | "retrying"))
}

async fn ota_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("GADGET_ALLOW_ALL_USERS", "1")]);
    let files = tempfile::tempdir().unwrap();
    let version = format!("9.{}.{}", rng.below(100), rng.below(100));
    let size = rng.range(20_000, 900_000) as usize;
    let image = firmware(&version, size, &mut rng);
    let path = files.path().join("update.bin");
    std::fs::write(&path, &image).unwrap();

    let mut gadget = Gadget::spawn(&herald.gadget_url, rng.key(), rng.next_u64());
    gadget.wait("welcome", |s| s.online).await;
    let id = gadget.id.clone();
    let request = json!({"device_id": id, "image": path});
    let dir = herald.data().to_owned();
    let push = tokio::task::spawn_blocking(move || admin(&dir, "/v1/ota", Some(&request)));
    let during_push = rng.one_in(2);
    let answered = if during_push {
        // A push takes 25 to 70 ms here: the checks, the staged copy, the first offer.
        tokio::time::sleep(rng.millis(0, 80)).await;
        herald.kill();
        matches!(push.await.unwrap(), Ok((200..=299, _)))
    } else {
        let (status, answer) = push.await.unwrap().unwrap();
        assert_eq!(status, 200, "push refused: {answer}");
        // The transfer takes 50 to 150 ms here; now and then the update is done first.
        tokio::time::sleep(rng.millis(0, 40 + size as u64 / 4000)).await;
        herald.kill();
        true
    };
    // Offers the dead server made; the restarted one's retry makes the next.
    let offers = gadget.seen().offers;
    herald.restart();

    let mut update = ota_status(&herald, &id).await;
    if answered {
        assert!(
            update.is_some(),
            "the push of {id} was answered before the kill, but no update is recorded after it"
        );
    }
    // Again while the restarted server retries.
    if update.as_ref().is_some_and(is_active) && rng.one_in(2) {
        gadget
            .wait("the retry's offer", |s| s.offers > offers)
            .await;
        tokio::time::sleep(rng.millis(0, 400)).await;
        herald.crash_and_restart();
        update = ota_status(&herald, &id).await;
        assert!(
            update.is_some(),
            "the update of {id} is gone after a kill during its retry"
        );
    }
    if update.is_some() {
        update = Some(
            eventually("end of the update", async || {
                ota_status(&herald, &id).await.filter(|u| !is_active(u))
            })
            .await,
        );
        let update = update.as_ref().unwrap();
        assert_eq!(update["status"], "done", "{update}");
        let seen = gadget
            .wait("the new firmware", |s| s.firmware == version && s.online)
            .await;
        assert!(
            seen.installed.as_ref().is_some_and(|i| *i.0 == image),
            "the installed image differs from the pushed one: {seen:?}"
        );
        assert_eq!(seen.rollbacks, 0);
    }
    // The staged copy goes with the update's end (removed just after it is recorded); a
    // push the kill cut short leaves none.
    let staging = herald.data().join("ota");
    let staged = || {
        std::fs::read_dir(&staging)
            .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let left = left_after_sweep(staged).await;
    assert!(
        left.is_empty(),
        "staged images left behind in {} (the push {} answered; the update now: {update:?}): \
         {left:?}",
        staging.display(),
        if answered { "was" } else { "was not" },
    );
    eprintln!(
        "faults: ota_staging_and_retry seed {seed}: {size} bytes, killed {} the push, \
         push answered: {answered}, update: {}",
        if during_push { "during" } else { "after" },
        update.map_or("none".into(), |u| format!("{} attempts", u["attempts"]))
    );
    gadget.stop().await;
    final_checks(&herald);
    herald.kills
}

/// The kill lands between the staged copy and its record every time: the test holds the
/// store's write lock, so the push waits there (the server gives up after 5 s). Nothing
/// refers to that copy after the restart, so it must not stay either.
#[test]
fn ota_push_killed_between_staging_and_record() {
    run_seeds("ota_push_killed_between_staging_and_record", staging_run);
}

async fn staging_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("GADGET_ALLOW_ALL_USERS", "1")]);
    let files = tempfile::tempdir().unwrap();
    let size = rng.range(20_000, 900_000) as usize;
    let image = firmware("9.0.1", size, &mut rng);
    let path = files.path().join("update.bin");
    std::fs::write(&path, &image).unwrap();
    let mut gadget = Gadget::spawn(&herald.gadget_url, rng.key(), rng.next_u64());
    gadget.wait("welcome", |s| s.online).await;
    let id = gadget.id.clone();
    // A first contact is written to the table behind its `welcome`: a listing waits for
    // it, so the lock below holds up the push alone.
    admin_get(&herald, "/v1/devices").await;

    let lock = rusqlite::Connection::open(herald.store()).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let request = json!({"device_id": id, "image": path});
    let dir = herald.data().to_owned();
    let push = tokio::task::spawn_blocking(move || admin(&dir, "/v1/ota", Some(&request)));
    let staging = herald.data().join("ota");
    let staged = || {
        std::fs::read_dir(&staging)
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| !is_temporary(p))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while staged().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the push staged nothing"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    herald.kill();
    drop(lock);
    let answer = push.await.unwrap();
    assert!(answer.is_err(), "the push was answered: {answer:?}");
    herald.restart();
    gadget
        .wait("welcome after the restart", |s| s.welcomes >= 2)
        .await;
    let update = ota_status(&herald, &id).await;
    assert!(update.is_none(), "an update was recorded: {update:?}");
    let left = left_after_sweep(staged).await;
    assert!(
        left.is_empty(),
        "a push killed after staging its image and before recording the update leaves \
         the staged copy behind for good, with no update referring to it: {left:?}"
    );
    gadget.stop().await;
    final_checks(&herald);
    herald.kills
}
