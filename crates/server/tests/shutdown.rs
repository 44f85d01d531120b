//! A server that stops while it is busy: every device hears "going away", a device that
//! stopped reading cannot hold the stop up for long, and the store is left whole.

use std::time::Duration;

use herald_port::Chat;
use herald_store::{SqliteStore, Store};
use herald_test_support::{
    admin_text, capture, test_config, Gadget, Harness, Phone, APP_TOKEN, WAIT,
};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// Bytes the server has written to phones so far, from `/metrics`.
async fn bytes_to_phones(h: &Harness) -> u64 {
    let (_, text) = admin_text(h.dir.path(), "GET", "/metrics", None).await;
    text.lines()
        .find_map(|l| l.strip_prefix("herald_bytes_total{platform=\"mobile\",direction=\"out\"} "))
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_stops_promptly_and_every_device_hears_going_away() {
    let (factory, port, mut inbox) = capture();
    let mut config = test_config();
    config.gadget.allow_all_users = true;
    config.mobile.allow_all_users = true;
    let h = Harness::start_in(config, tempfile::tempdir().unwrap(), factory).await;
    let port = port.await.unwrap();

    // A turn in flight on a gadget and on a phone: the agent has both, answers neither.
    let (mut gadget, _) = Gadget::new().connect(&h.url).await;
    gadget.text("what is the weather").await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    phone.text("m1", "and tomorrow?").await;
    for _ in 0..2 {
        tokio::time::timeout(WAIT, inbox.recv())
            .await
            .unwrap()
            .unwrap();
    }

    // A phone that stopped reading, with far more on its way than the sockets hold.
    let (_deaf, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-deaf").await;
    let file = h.dir.path().join("big.bin");
    std::fs::write(&file, vec![7u8; 8 * 1024 * 1024]).unwrap();
    let pusher = tokio::spawn(async move {
        let deaf = Chat::mobile("tel-deaf");
        for _ in 0..4 {
            if port.send_document(&deaf, file.clone(), None).await.is_err() {
                break;
            }
        }
    });
    // Under way: megabytes left for it before the stop.
    let started = std::time::Instant::now();
    while bytes_to_phones(&h).await < 2 * 1024 * 1024 {
        assert!(started.elapsed() < WAIT, "the push never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let Harness { server, dir, .. } = h;
    // Bounded by the stop's own grace (3 s) and the write timeout, never the deaf phone.
    tokio::time::timeout(Duration::from_secs(30), server.shutdown())
        .await
        .expect("the stop waited on a phone that does not read");

    let away = gadget.closed(WAIT).await.expect("the gadget's close");
    assert_eq!(away.code, CloseCode::Away, "{away:?}");
    let away = phone.closed(WAIT).await.expect("the phone's close");
    assert_eq!(away.code, CloseCode::Away, "{away:?}");
    pusher.abort();

    // The store is whole, and each device is known in it.
    let store = SqliteStore::open(&dir.path().join(herald_server::STORE_FILE)).unwrap();
    assert_eq!(store.devices().unwrap().len(), 1);
    let conn = rusqlite::Connection::open(dir.path().join(herald_server::STORE_FILE)).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
