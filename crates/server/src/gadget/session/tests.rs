//! The shell: sessions that retire, calls that meet them on the way out, and a device
//! lost while the session waits on other work. The core's rules are tested in
//! `herald-session`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use herald_port::Request;
use herald_test_support::socket::BreakingSocket;
use tokio::sync::oneshot;

use super::*;

fn hub(dir: &std::path::Path) -> Arc<GadgetHub> {
    let own =
        super::super::GadgetParts::new(Default::default(), Default::default(), Default::default());
    Arc::new(GadgetHub::new(crate::hub::Shared::in_dir(dir), own))
}

fn typing(reply: Reply) -> Event {
    let request = Request::Actions {};
    Event::Command(Box::new(Command::Port(Call { request, reply })))
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_retires_and_what_reaches_it_meanwhile_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let first = hub.session("hg-0000000000000001");
    tokio::time::sleep(RETIRE_AFTER - Duration::from_secs(1)).await;
    assert!(hub.devices.session("hg-0000000000000001").is_some());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        hub.devices.session("hg-0000000000000001").is_none(),
        "retired"
    );
    assert!(first.closed().now_or_never().is_some(), "closed");

    // A call due at the very instant a session retires is answered, by it or by
    // the next.
    let mut raced = 0;
    for i in 0..20 {
        let session = hub.session(&format!("hg-{i:016x}"));
        tokio::time::sleep(RETIRE_AFTER).await;
        let (reply, answer) = oneshot::channel();
        // Sent without waiting, or not at all: the session had retired.
        if !matches!(session.send(typing(reply)).now_or_never(), Some(Ok(()))) {
            continue;
        }
        raced += 1;
        let answer = tokio::time::timeout(Duration::from_secs(5), answer).await;
        assert!(matches!(answer, Ok(Ok(_))), "dropped: {answer:?}");
    }
    assert!(raced > 0, "no call met a retiring session");
}

/// A session that starts after the server began to stop (a retiring session's
/// successor, say) is not left running: the stop waits for no one.
#[tokio::test(start_paused = true)]
async fn a_session_started_while_the_server_stops_ends_too() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    hub.session("hg-0000000000000001");
    hub.close_all().await;
    let late = hub.session("hg-0000000000000002");
    assert!(
        hub.devices.ended_within(Duration::from_secs(1)).await,
        "a session outlived the stop"
    );
    assert!(late.closed().now_or_never().is_some());
}

/// While the session waits on other work (a store write, a file opening), it writes
/// what tasks beside it queue for the device; when such a write fails, the device is
/// lost there and then, as the run loop would lose it, and the work still ends.
#[tokio::test(start_paused = true)]
async fn a_write_that_fails_while_the_session_waits_on_other_work_loses_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let (mailbox, _rx) = crate::queue::channel(1);
    let mut session = Session::<Gadgets>::new("hg-0000000000000001".into(), hub, mailbox);
    let (socket, broken) = BreakingSocket::new();
    let conn = Connection::new(7, socket, "127.0.0.1:9".parse().unwrap());
    let hello = serde_json::from_value(serde_json::json!({
        "proto": 1,
        "device_id": "hg-0000000000000001",
        "caps": {"speaker": {"rate": 16000, "format": "pcm16"}},
    }))
    .unwrap();
    let attach = Attach {
        conn,
        hello,
        paired: true,
        session_id: "s-1".into(),
    };
    let now = Instant::now().into_std();
    Gadgets::handle(&mut session, Event::Attach(Box::new(attach)), now);
    session.settle().await;
    assert!(session.core.is_current(7), "attached, its welcome written");

    // Speech another task paces into the outbox, then the device's end breaks.
    let outbox = session.conns.current().unwrap().queue();
    outbox
        .send(Outgoing::Text("{\"type\":\"notice\"}".into()))
        .await
        .unwrap();
    broken.store(true, Ordering::Relaxed);
    let work = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        "written"
    };
    assert_eq!(session.draining(work).await, "written");
    assert!(
        !session.core.is_current(7),
        "the core still holds the device"
    );
    assert!(session.conns.current().is_none(), "the connection is kept");
}
