//! Enrollment under kills.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_gadget_proto::auth;

use crate::rig::gadget::Gadget;
use crate::rig::seeds::{run_seeds, Rng};
use crate::rig::server::{admin_get, final_checks, Herald};

/// A key a gadget enrolled with, and whether it was welcomed.
type Tried = ([u8; 32], bool);

/// Gadgets enroll one after another (three at a time) until the server is killed; every
/// one that got `welcome` must be known by its key to the restarted server, and every
/// one at all (welcomed or caught mid-handshake) must get in afterwards.
#[test]
fn enrollment() {
    run_seeds("enrollment", enrollment_run);
}

async fn enrollment_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("GADGET_ALLOW_ALL_USERS", "1")]);
    let url = herald.gadget_url.clone();
    let mut welcomed = Vec::new();
    for _round in 0..rng.range(1, 3) {
        let stop = Arc::new(AtomicBool::new(false));
        let tried: Arc<Mutex<Vec<Tried>>> = Arc::default();
        let mut enrollers = Vec::new();
        for _ in 0..3 {
            let (url, stop, tried) = (url.clone(), stop.clone(), tried.clone());
            let mut rng = Rng::new(rng.next_u64());
            enrollers.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let key = rng.key();
                    let index = {
                        let mut tried = tried.lock().unwrap();
                        tried.push((key, false));
                        tried.len() - 1
                    };
                    let mut gadget = Gadget::spawn(&url, key, rng.next_u64());
                    let limit = Duration::from_secs(5);
                    if gadget.wait_unless(|s| s.welcomes > 0, &stop, limit).await {
                        tried.lock().unwrap()[index].1 = true;
                    }
                    gadget.stop().await;
                }
            }));
        }
        tokio::time::sleep(rng.millis(10, 400)).await;
        herald.kill();
        stop.store(true, Ordering::SeqCst);
        for enroller in enrollers {
            enroller.await.unwrap();
        }
        herald.restart();

        let tried = std::mem::take(&mut *tried.lock().unwrap());
        for batch in tried.chunks(8) {
            let mut checks = Vec::new();
            for &(key, was_welcomed) in batch {
                let url = url.clone();
                let seed = rng.next_u64();
                checks.push(tokio::spawn(async move {
                    let mut gadget = Gadget::spawn(&url, key, seed);
                    let seen = gadget
                        .wait("welcome after the restart", |s| {
                            s.welcomes > 0 || s.setup_needed
                        })
                        .await;
                    assert!(
                        !seen.setup_needed,
                        "gadget {} is refused after the restart (welcomed before: \
                         {was_welcomed}): {seen:?}",
                        gadget.id
                    );
                    if was_welcomed {
                        assert_eq!(
                            seen.challenges.first(),
                            Some(&true),
                            "gadget {} was welcomed before the kill, but the restarted \
                             server does not hold its key",
                            gadget.id
                        );
                    }
                    gadget.stop().await;
                }));
            }
            for check in checks {
                check.await.unwrap();
            }
        }
        welcomed.extend(
            tried
                .iter()
                .filter(|(_, w)| *w)
                .map(|(k, _)| auth::device_id(k)),
        );
    }
    let devices = admin_get(&herald, "/v1/devices").await;
    let listed: Vec<&str> = devices
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    for id in &welcomed {
        assert!(
            listed.contains(&id.as_str()),
            "{id} is not listed: {listed:?}"
        );
    }
    eprintln!(
        "faults: enrollment seed {seed}: {} gadgets welcomed before kills",
        welcomed.len()
    );
    final_checks(&herald);
    herald.kills
}
