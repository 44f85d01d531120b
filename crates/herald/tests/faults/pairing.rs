//! Pairing approvals under a kill.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_gadget_proto::auth;
use serde_json::{json, Value};

use crate::rig::gadget::Gadget;
use crate::rig::phone::Phone;
use crate::rig::seeds::{run_seeds, Rng};
use crate::rig::server::{admin, admin_get, final_checks, Herald};
use crate::rig::PATIENCE;

#[derive(Debug, Clone)]
struct Approval {
    platform: &'static str,
    user_id: String,
    body: Value,
}

/// The owner approves gadgets (by code and by id) and phone users (by code) as fast as
/// the admin API answers; the server is killed after a seeded number of answers. Every
/// approval answered 2xx must hold after the restart: in the store, for a gadget's
/// `welcome`, and for a phone's next message.
#[test]
fn pairing_approval() {
    run_seeds("pairing_approval", pairing_run);
}

async fn pairing_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let users: Vec<(String, String)> = (1..=3).map(|n| (format!("user{n}"), rng.hex(64))).collect();
    let extra: Vec<String> = users.iter().map(|(u, t)| format!("{u}:{t}")).collect();
    let mut herald = Herald::start(&[("MOBILE_EXTRA_TOKENS", &extra.join(","))]);
    let url = herald.gadget_url.clone();

    let mut approvals = Vec::new();
    // Three fit in the waiting room of one address with a place to spare.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let mut gadget = Gadget::spawn(&url, rng.key(), rng.next_u64());
        let seen = gadget
            .wait("pairing code", |s| s.pairing_code.is_some())
            .await;
        let code = seen.pairing_code.unwrap();
        approvals.push(Approval {
            platform: "gadget",
            user_id: gadget.id.clone(),
            body: json!({"platform": "gadget", "code": code}),
        });
        waiting.push(gadget);
    }
    let mut phones = Vec::new();
    for (user, token) in &users {
        let mut phone = Phone::spawn(&herald, token, &format!("phone-{user}"));
        phone.connected().await;
        phone.send_text("first", "hello").await;
        let text = phone.final_text().await;
        let code = text
            .split("Pairing code: ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no pairing code in {text:?}"))
            .to_owned();
        approvals.push(Approval {
            platform: "mobile",
            user_id: user.clone(),
            body: json!({"platform": "mobile", "code": code}),
        });
        phones.push((user.clone(), phone));
    }
    let spare: Vec<[u8; 32]> = (0..6).map(|_| rng.key()).collect();
    for key in &spare {
        let id = auth::device_id(key);
        approvals.push(Approval {
            platform: "gadget",
            user_id: id.clone(),
            body: json!({"platform": "gadget", "user_id": id}),
        });
    }
    rng.shuffle(&mut approvals);

    let answered: Arc<Mutex<Vec<Approval>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let owner = {
        let (dir, approvals) = (herald.data().to_owned(), approvals.clone());
        let (answered, count) = (answered.clone(), count.clone());
        std::thread::spawn(move || {
            for approval in approvals {
                match admin(&dir, "/v1/pairing/approve", Some(&approval.body)) {
                    Ok((status, _)) if (200..300).contains(&status) => {
                        answered.lock().unwrap().push(approval);
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok((status, answer)) => {
                        panic!("approval {approval:?} refused: {status} {answer}")
                    }
                    // Killed.
                    Err(_) => break,
                }
            }
        })
    };
    let kill_after = rng.below(approvals.len() as u64 + 1) as usize;
    let extra_wait = Duration::from_micros(rng.below(3000));
    let deadline = std::time::Instant::now() + PATIENCE;
    while count.load(Ordering::SeqCst) < kill_after {
        assert!(std::time::Instant::now() < deadline, "approvals stalled");
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    tokio::time::sleep(extra_wait).await;
    herald.kill();
    tokio::task::spawn_blocking(move || owner.join().unwrap())
        .await
        .unwrap();
    herald.restart();

    let answered = answered.lock().unwrap().clone();
    let pairings = admin_get(&herald, "/v1/pairing").await;
    for approval in &answered {
        let record = pairings.as_array().unwrap().iter().find(|p| {
            p["platform"] == approval.platform && p["user_id"] == approval.user_id.as_str()
        });
        assert!(
            record.is_some_and(|r| r["approved_at"].is_i64()),
            "approval answered before the kill is gone: {approval:?}; pairings: {pairings}"
        );
    }
    let approved = |platform: &str, user: &str| {
        answered
            .iter()
            .any(|a| a.platform == platform && a.user_id == user)
    };
    // The gadgets that waited come back by themselves.
    for gadget in &mut waiting {
        let seen = gadget
            .wait("welcome after the restart", |s| s.welcomes >= 2)
            .await;
        if approved("gadget", &gadget.id) {
            assert_eq!(
                seen.paired,
                Some(true),
                "gadget {} was approved before the kill, but is not paired after it",
                gadget.id
            );
        }
    }
    for key in &spare {
        let id = auth::device_id(key);
        if !approved("gadget", &id) {
            continue;
        }
        let mut gadget = Gadget::spawn(&url, *key, rng.next_u64());
        let seen = gadget.wait("welcome", |s| s.welcomes > 0).await;
        assert_eq!(
            seen.paired,
            Some(true),
            "gadget {id} was approved by id before the kill, but is not paired after it"
        );
        gadget.stop().await;
    }
    for (user, phone) in &mut phones {
        if !approved("mobile", user) {
            continue;
        }
        phone.connected().await;
        phone.send_text("after", "hi").await;
        let text = phone.final_text().await;
        assert_eq!(
            text, "You said: hi",
            "{user} was approved before the kill, but is not after it"
        );
    }
    eprintln!(
        "faults: pairing_approval seed {seed}: {} of {} approvals answered before the kill",
        answered.len(),
        approvals.len()
    );
    for gadget in waiting {
        gadget.stop().await;
    }
    final_checks(&herald);
    herald.kills
}
