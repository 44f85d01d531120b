//! A reply waiting in a phone's outbox under a kill.

use std::time::Duration;

use crate::rig::phone::{typing_on, words, Phone};
use crate::rig::seeds::{run_seeds, Rng};
use crate::rig::server::{final_checks, Herald};

/// A phone goes away as soon as its message is answered; the reply goes to its outbox.
/// First a blip with the server alive (the outbox hands the reply over on reconnect, which
/// shows the test's timing holds), then the same with the server killed while the reply
/// waits in the outbox: the reply must still reach the phone after the restart.
#[test]
fn outboxed_reply_survives_a_kill() {
    run_seeds("outboxed_reply_survives_a_kill", outbox_run);
}

/// Send `text` as `id` and wait until the typing indicator comes on for it.
async fn until_answered(phone: &mut Phone, id: &str, text: &str) {
    phone.send_text(id, text).await;
    while !typing_on(&phone.event().await) {}
}

/// Reconnect as `device`, ask something new, and collect every final reply up to the
/// new one's: frames kept for a phone come right after `ready`, before any new turn's.
async fn replies_on_return(herald: &Herald, token: &str, device: &str) -> Vec<String> {
    let mut phone = Phone::spawn(herald, token, device);
    phone.connected().await;
    phone.send_text("probe", "probe").await;
    let mut replies = Vec::new();
    loop {
        let text = phone.final_text().await;
        if text == "You said: probe" {
            return replies;
        }
        replies.push(text);
    }
}

async fn outbox_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let token = herald.mobile_token();
    let device = format!("outbox-{seed}");
    let length = rng.range(3, 10);

    // How long a turn of this length takes here.
    let mut phone = Phone::spawn(&herald, &token, &device);
    phone.connected().await;
    let calibration = words("calibration", length);
    let began = tokio::time::Instant::now();
    until_answered(&mut phone, "c", &calibration).await;
    assert_eq!(phone.final_text().await, format!("You said: {calibration}"));
    // Twice that, and some, from the moment the phone leaves: the reply is in the outbox.
    let in_outbox = began.elapsed() * 2 + Duration::from_millis(200);

    let blip = words("blip", length);
    until_answered(&mut phone, "b", &blip).await;
    drop(phone);
    tokio::time::sleep(in_outbox).await;
    let replies = replies_on_return(&herald, &token, &device).await;
    assert!(
        replies.contains(&format!("You said: {blip}")),
        "the outbox lost a reply without a kill: {replies:?}"
    );

    let kept = words("kept", length);
    let mut phone = Phone::spawn(&herald, &token, &device);
    phone.connected().await;
    until_answered(&mut phone, "k", &kept).await;
    drop(phone);
    tokio::time::sleep(in_outbox + rng.millis(0, 500)).await;
    herald.crash_and_restart();
    let replies = replies_on_return(&herald, &token, &device).await;
    assert!(
        replies.contains(&format!("You said: {kept}")),
        "the reply to {kept:?} waited in the outbox of phone {device} when the server was \
         killed, and was not delivered after the restart (replies on return: {replies:?})"
    );
    final_checks(&herald);
    herald.kills
}
