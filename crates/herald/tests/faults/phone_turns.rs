//! A phone's turns under kills.

use herald_mobile_client::Event as PhoneEvent;

use crate::rig::phone::{final_text, typing_on, words, Phone};
use crate::rig::seeds::{run_seeds, Rng};
use crate::rig::server::{admin_get, final_checks, Herald};

/// One message of a phone's conversation.
#[derive(Debug)]
struct Turn {
    id: String,
    text: String,
    sent: bool,
    /// The typing indicator came on for it: the server took it.
    answered: bool,
    replies: usize,
    /// Answered by a server that was killed before the reply came (what arrives between
    /// a kill and the next `ready` is the dead server's); the protocol says not to resend.
    given_up: bool,
}

impl Turn {
    fn reply(&self) -> String {
        format!("You said: {}", self.text)
    }
}

/// A phone talks, one message at a time, resending after a reconnect what was not
/// answered yet, as the protocol asks; the server is killed once or twice in between.
/// Every message unanswered at a kill must be answered after the restart, none twice.
#[test]
fn phone_turns() {
    run_seeds("phone_turns", phone_turns_run);
}

async fn phone_turns_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let token = herald.mobile_token();
    let device = format!("turns-{seed}");
    let mut phone = Phone::spawn(&herald, &token, &device);
    let mut turns: Vec<Turn> = (0..6)
        .map(|n| Turn {
            id: format!("m{n}"),
            text: words(&format!("turn {n} of {seed}"), rng.range(1, 8)),
            sent: false,
            answered: false,
            replies: 0,
            given_up: false,
        })
        .collect();
    let start = tokio::time::Instant::now();
    let mut kills_at: Vec<tokio::time::Instant> = (0..rng.range(1, 3))
        .map(|_| start + rng.millis(0, 2500))
        .collect();
    kills_at.sort();
    let mut killed_since_ready = false;
    let mut current = 0;
    let mut connected = false;
    while current < turns.len() || !kills_at.is_empty() {
        let next_kill = kills_at.first().copied();
        let event = tokio::select! {
            _ = tokio::time::sleep_until(next_kill.unwrap_or(start)), if next_kill.is_some() => {
                kills_at.remove(0);
                herald.crash_and_restart();
                killed_since_ready = true;
                continue;
            }
            event = phone.event() => event,
        };
        match &event {
            PhoneEvent::Connected { .. } => {
                connected = true;
                if let Some(turn) = turns.get_mut(current) {
                    if killed_since_ready && turn.answered && turn.replies == 0 {
                        // Its turn died with the server; the protocol says not to resend.
                        turn.given_up = true;
                        current += 1;
                    }
                }
                killed_since_ready = false;
                if let Some(turn) = turns.get_mut(current) {
                    if !turn.answered {
                        phone.send_text(&turn.id, &turn.text).await;
                        turn.sent = true;
                    }
                }
            }
            PhoneEvent::Disconnected { .. } => connected = false,
            PhoneEvent::Denied { reason } | PhoneEvent::Failed { reason } => {
                panic!("the phone was refused: {reason}")
            }
            _ if typing_on(&event) => {
                if let Some(turn) = turns.get_mut(current) {
                    turn.answered |= turn.sent;
                }
            }
            _ => {
                if let Some(text) = final_text(&event) {
                    let turn = turns.iter_mut().find(|t| t.reply() == text);
                    let turn = turn.unwrap_or_else(|| panic!("a reply to nothing: {text:?}"));
                    turn.replies += 1;
                    if turns.get(current).is_some_and(|t| t.replies > 0) {
                        current += 1;
                        if let Some(turn) = turns.get_mut(current) {
                            if connected {
                                phone.send_text(&turn.id, &turn.text).await;
                                turn.sent = true;
                            }
                        }
                    }
                }
            }
        }
    }
    for turn in &turns {
        assert!(turn.replies <= 1, "answered twice: {turn:?}");
        // Only a reply the server was producing when it died may be missing.
        assert!(
            turn.replies == 1 || turn.given_up,
            "never answered: {turn:?}"
        );
    }
    let lost: Vec<&Turn> = turns.iter().filter(|t| t.given_up).collect();
    assert!(lost.len() <= herald.kills, "{lost:?}");
    let phones = admin_get(&herald, "/v1/phones").await;
    assert!(
        phones
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == device.as_str()),
        "the phone is not listed after the restarts: {phones}"
    );
    eprintln!(
        "faults: phone_turns seed {seed}: {} turns, {} cut off by a kill",
        turns.len(),
        lost.len()
    );
    drop(phone);
    final_checks(&herald);
    herald.kills
}
