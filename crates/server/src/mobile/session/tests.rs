//! The shell: sessions that retire, and calls that meet them on the way out. The core's
//! rules are tested in `herald-session`.

use std::time::Duration;

use futures_util::FutureExt;
use herald_port::Request;

use super::*;

fn hub(dir: &std::path::Path) -> Arc<MobileHub> {
    let store = crate::store::SqliteStore::open(&dir.join("herald.db")).unwrap();
    let inbox = crate::inbox::Inbox::open(dir.join("inbox"), &Default::default()).unwrap();
    let hub = MobileHub::new(
        Default::default(),
        "test-app-token-0123456789abcdef0123",
        crate::store::StoreHandle::new(Arc::new(store)).unwrap(),
        inbox,
        Default::default(),
    );
    Arc::new(hub.unwrap())
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_retires_when_its_ids_expire_and_a_new_one_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let first = hub.session("tel-1");
    tokio::time::sleep(RETIRE_AFTER - Duration::from_secs(1)).await;
    assert!(
        hub.devices.session("tel-1").is_some(),
        "kept while its ids count"
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(hub.devices.session("tel-1").is_none(), "retired");
    assert!(first.closed().now_or_never().is_some(), "closed");

    // The id gets a fresh session, which answers.
    let second = hub.session("tel-1");
    assert!(!second.same_channel(&first));
    let answer = hub
        .call("tel-1", |reply| {
            let request = Request::Actions {};
            Command::Port(Call { request, reply })
        })
        .await;
    assert!(answer.is_ok(), "the new session answered: {answer:?}");
}

#[tokio::test(start_paused = true)]
async fn what_reaches_a_retiring_session_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let mut raced = 0;
    for i in 0..20 {
        let id = format!("tel-{i}");
        let session = hub.session(&id);
        // Due at the very instant the session retires: whichever it sees first,
        // the call is answered, by this session or by the next.
        tokio::time::sleep(RETIRE_AFTER).await;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let request = Request::Actions {};
        let typing = Event::Command(Command::Port(Call { request, reply }));
        // Sent without waiting, or not at all: the session had retired.
        if !matches!(session.send(typing).now_or_never(), Some(Ok(()))) {
            continue;
        }
        raced += 1;
        let answer = tokio::time::timeout(Duration::from_secs(5), answer).await;
        assert!(matches!(answer, Ok(Ok(_))), "dropped: {answer:?}");
    }
    assert!(raced > 0, "no call met a retiring session");
}
