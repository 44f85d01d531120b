//! The shell: sessions that retire, and calls that meet them on the way out. The core's
//! rules are tested in `herald-session`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use herald_port::Request;
use herald_session::mobile::link::Delivers;

use super::*;

fn hub(dir: &std::path::Path) -> Arc<MobileHub> {
    let token = "test-app-token-0123456789abcdef0123";
    let own = super::super::PhoneParts::new(Default::default(), token, false).unwrap();
    Arc::new(MobileHub::new(crate::hub::Shared::in_dir(dir), own))
}

/// What a test's session sends first, as the handshake's `ready`.
const READY: &str = r#"{"t":"ready","session":"mobile:tel-1"}"#;

/// Phone `tel-1` of alice, handed to its session over a pipe that holds `buffer` bytes:
/// the phone's end, before it has read anything.
async fn attach(
    hub: &Arc<MobileHub>,
    buffer: usize,
) -> tokio_tungstenite::WebSocketStream<tokio::io::DuplexStream> {
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::WebSocketStream;

    let (server, phone) = tokio::io::duplex(buffer);
    let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
    let phone = WebSocketStream::from_raw_socket(phone, Role::Client, None).await;
    let attach = Attach {
        conn: Connection::new(1, server, "127.0.0.1:9".parse().unwrap()),
        ready: READY.to_owned(),
        user_id: "alice".into(),
        user_name: None,
        delivers: Delivers::Nowhere,
    };
    let session = hub.session("tel-1");
    assert!(session.send(Event::Attach(Box::new(attach))).await.is_ok());
    phone
}

/// The next text frame the phone reads.
async fn next_text(
    phone: &mut tokio_tungstenite::WebSocketStream<tokio::io::DuplexStream>,
) -> String {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match phone.next().await {
            Some(Ok(Message::Text(text))) => return text.as_str().to_owned(),
            Some(Ok(Message::Ping(_))) => continue,
            other => panic!("not a text frame: {other:?}"),
        }
    }
}

/// Phone `tel-1` of alice, attached to its session and past its `ready`.
async fn attached_phone(
    hub: &Arc<MobileHub>,
    buffer: usize,
) -> tokio_tungstenite::WebSocketStream<tokio::io::DuplexStream> {
    let mut phone = attach(hub, buffer).await;
    assert_eq!(next_text(&mut phone).await, READY);
    phone
}

/// `ready` is the connection's first frame, sent by the session: a push that reaches the
/// session right behind the attach (as one asked for the moment the phone reads `ready`
/// does) finds the phone there and follows `ready`. (When the handshake wrote `ready`
/// and only then handed the connection over, such a push could come first and be
/// answered `device_offline`.)
#[tokio::test]
async fn ready_comes_first_and_a_push_right_behind_the_attach_reaches_the_phone() {
    use herald_mobile_proto::ServerFrame;

    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let mut phone = attach(&hub, 64 * 1024).await;
    let deliver = Box::new(Deliver {
        to: "tel-1".into(),
        text: Some("Reminder: stand up".into()),
        media: Vec::new(),
    });
    let pushed = hub.call("tel-1", |reply| Command::Deliver { deliver, reply });
    assert!(matches!(pushed.await, Ok(Ok(()))));

    assert_eq!(next_text(&mut phone).await, READY);
    match ServerFrame::decode(&next_text(&mut phone).await).unwrap() {
        ServerFrame::Message(message) => assert_eq!(message.text, "Reminder: stand up"),
        other => panic!("not the push: {other:?}"),
    }
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

/// A download that outlasts the keepalive's 90 s to a phone that reads slowly and says
/// nothing: taking each chunk counts as proof of life, and a ping the phone sent early
/// is answered between chunks, not after the whole file. The phone moves the paused
/// clock itself and waits with no timer: the file is read on the blocking pool, and
/// a pending timer would let the clock jump while it is.
#[tokio::test(start_paused = true)]
async fn a_long_download_keeps_the_phone_and_answers_its_pings_on_the_way() {
    use futures_util::SinkExt;
    use herald_mobile_proto::ServerFrame;
    use tokio_tungstenite::tungstenite::Message;

    const CHUNKS: usize = 16;
    // Half the 15 s a frame may take to leave, so a write that spans two of the phone's
    // steps (the next chunk starts while the phone still reads the last) stays within
    // it on a loaded machine; 16 chunks still take over 90 s.
    const READ_EVERY: Duration = Duration::from_secs(7);

    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let file = dir.path().join("big.bin");
    std::fs::write(&file, vec![7u8; CHUNKS * limits::MEDIA_CHUNK_BYTES]).unwrap();

    let mut phone = attached_phone(&hub, 64 * 1024).await;
    let sent = tokio::spawn({
        let hub = hub.clone();
        async move {
            hub.call("tel-1", |reply| {
                let request = Request::SendDocument {
                    path: file,
                    caption: None,
                };
                Command::Port(Call { request, reply })
            })
            .await
        }
    });

    let mut heard = Vec::new();
    let mut pinged = false;
    while heard.iter().filter(|t| *t == "media").count() < CHUNKS {
        let text = next_text(&mut phone).await;
        match ServerFrame::decode(&text).unwrap() {
            ServerFrame::Media(_) => heard.push("media".to_owned()),
            ServerFrame::Pong => heard.push("pong".to_owned()),
            other => panic!("unexpected {other:?}"),
        }
        if !pinged {
            let ping = Message::Text(r#"{"t":"ping"}"#.into());
            phone.send(ping).await.unwrap();
            pinged = true;
        }
        // The clock moves on only here: reading the file on the blocking pool must not
        // let it jump past the send's deadline.
        tokio::time::advance(READ_EVERY).await;
    }
    let pong = heard.iter().position(|t| t == "pong");
    assert!(
        pong.is_some_and(|at| at < CHUNKS),
        "pong after the file: {heard:?}"
    );
    assert!(matches!(sent.await.unwrap(), Ok(Ok(_))));

    // Still connected, well over 90 s after the phone last said anything.
    phone
        .send(Message::Text(r#"{"t":"ping"}"#.into()))
        .await
        .unwrap();
    assert_eq!(
        ServerFrame::decode(&next_text(&mut phone).await).unwrap(),
        ServerFrame::Pong
    );
}

/// A phone that stops reading holds up none of its session's calls: the agent's replies
/// are taken at once while they wait for the phone, and once it reads again it hears
/// them all, in order. (When the session wrote each frame itself, the call after the
/// socket filled up waited for the phone, up to the 15 s a frame may take.)
#[tokio::test(start_paused = true)]
async fn a_phone_that_stops_reading_holds_up_no_call() {
    use herald_mobile_proto::ServerFrame;

    const REPLIES: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path());
    let mut phone = attached_phone(&hub, 8 * 1024).await;

    // 120 KB of replies (each under the length that is split in chunks) to a phone
    // whose socket holds 8 KiB.
    let reply = |n: usize| format!("{n:03} {}", "x".repeat(3000));
    let started = Instant::now();
    for n in 0..REPLIES {
        let answer = hub
            .call("tel-1", |reply_to| {
                let request = Request::SendText {
                    text: reply(n),
                    options: Default::default(),
                };
                Command::Port(Call {
                    request,
                    reply: reply_to,
                })
            })
            .await;
        assert!(answer.is_ok(), "reply {n}: {answer:?}");
    }
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "a call waited for the phone"
    );

    let mut heard = Vec::new();
    while heard.len() < REPLIES {
        let text = next_text(&mut phone).await;
        if let ServerFrame::Message(message) = ServerFrame::decode(&text).unwrap() {
            assert_eq!(message.text.len(), reply(0).len(), "cut or split");
            heard.push(message.text[..3].to_owned());
        }
    }
    let expected: Vec<_> = (0..REPLIES).map(|n| format!("{n:03}")).collect();
    assert_eq!(heard, expected);
}
