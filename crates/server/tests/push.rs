//! Notifications when the app is closed, end to end: a phone subscribes over the mobile
//! protocol, a push service on 127.0.0.1 receives what Herald sends, checks its VAPID
//! token against the key the phone subscribed with, and decrypts the payload with the
//! phone's own keys. (The TypeScript suite checks the same with an implementation of
//! its own, in node's crypto.)

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64_simd::URL_SAFE_NO_PAD;
use herald_gadget_proto::ServerMessage;
use herald_mobile_proto::ServerFrame;
use herald_test_support::{Gadget, Harness, Phone, APP_TOKEN};
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use serde_json::{json, Value};
use web_push_native::p256::SecretKey;

/// What the push service was sent, and what it answers.
#[derive(Default)]
struct Service {
    received: Mutex<Vec<(HeaderMap, Vec<u8>)>>,
    answer: Mutex<Option<StatusCode>>,
}

async fn receive(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    service
        .received
        .lock()
        .unwrap()
        .push((headers, body.to_vec()));
    service
        .answer
        .lock()
        .unwrap()
        .unwrap_or(StatusCode::CREATED)
}

/// A push service on a free loopback port; its base URL.
async fn push_service() -> (Arc<Service>, String) {
    let service = Arc::new(Service::default());
    let app = axum::Router::new()
        .route("/push/{id}", post(receive))
        .with_state(service.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (service, url)
}

/// A subscription's keys, as a browser makes them.
struct Keys {
    secret: SecretKey,
    auth: [u8; 16],
}

impl Keys {
    fn new() -> Keys {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).unwrap();
        let mut auth = [0u8; 16];
        getrandom::fill(&mut auth).unwrap();
        Keys {
            secret: SecretKey::from_slice(&bytes).unwrap(),
            auth,
        }
    }

    fn subscribe(&self, endpoint: &str) -> Value {
        let public = self.secret.public_key().to_sec1_bytes();
        json!({"t": "push_subscribe", "endpoint": endpoint, "keys": {
            "p256dh": URL_SAFE_NO_PAD.encode_to_string(&public),
            "auth": URL_SAFE_NO_PAD.encode_to_string(self.auth),
        }})
    }
}

/// The `n`th push the service received, checked and decrypted: its payload.
async fn nth_push(
    service: &Service,
    n: usize,
    keys: &Keys,
    vapid_key: &str,
    origin: &str,
) -> Value {
    let (headers, body) =
        herald_test_support::wait::until(|| service.received.lock().unwrap().get(n).cloned()).await;
    assert_eq!(headers["content-encoding"], "aes128gcm");
    assert!(headers["ttl"].to_str().unwrap().parse::<u64>().unwrap() > 0);
    // VAPID: a token for this service's origin, signed by the key the app subscribed with.
    let authorization = headers["authorization"].to_str().unwrap();
    let (token, k) = authorization
        .strip_prefix("vapid t=")
        .and_then(|rest| rest.split_once(", k="))
        .unwrap();
    assert_eq!(k, vapid_key);
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let claims = signed.split_once('.').unwrap().1;
    let claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode_to_vec(claims).unwrap()).unwrap();
    assert_eq!(claims["aud"], origin);
    assert!(claims["sub"].as_str().unwrap().starts_with("mailto:"));
    let verifying =
        VerifyingKey::from_sec1_bytes(&URL_SAFE_NO_PAD.decode_to_vec(k).unwrap()).unwrap();
    let signature =
        Signature::from_slice(&URL_SAFE_NO_PAD.decode_to_vec(signature).unwrap()).unwrap();
    verifying.verify(signed.as_bytes(), &signature).unwrap();
    assert!(body.len() <= 4096, "a push service takes 4 KiB");
    let auth = web_push_native::Auth::clone_from_slice(&keys.auth);
    let plain = web_push_native::decrypt(body, &keys.secret, &auth).unwrap();
    serde_json::from_slice(&plain).unwrap()
}

async fn start() -> Harness {
    Harness::start_with(|c| {
        c.gadget.allow_all_users = true;
        c.mobile.allow_all_users = true;
        c.push.allow_private_endpoints = true;
    })
    .await
}

/// Phone tel-1 of the app token's user, subscribed to `origin`'s push service: the
/// phone, its keys and the server's VAPID key.
/// `deliver` "Reminder" to tel-1 through the admin API; its status.
async fn remind(h: &Harness) -> u16 {
    let chat = json!({"platform": "mobile", "id": "tel-1"});
    let (status, _) = h
        .admin(
            "POST",
            "/v1/deliver",
            Some(json!({"chat": chat, "text": "Reminder"})),
        )
        .await;
    status
}

async fn subscribed(h: &Harness, origin: &str) -> (Phone, Keys, String) {
    let (mut phone, ready) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let keys = Keys::new();
    phone
        .send(keys.subscribe(&format!("{origin}/push/tel-1")))
        .await;
    assert!(matches!(phone.recv().await, ServerFrame::PushSubscribed));
    (phone, keys, vapid_key(&ready))
}

fn vapid_key(ready: &ServerFrame) -> String {
    let ServerFrame::Ready { capabilities, .. } = ready else {
        panic!("not ready: {ready:?}")
    };
    capabilities
        .push
        .as_ref()
        .expect("push offered")
        .vapid_key
        .clone()
}

#[tokio::test]
async fn a_question_reaches_a_phone_out_of_sight_as_a_push_it_alone_can_read() {
    let (service, origin) = push_service().await;
    let h = start().await;
    let (mut phone, keys, key) = subscribed(&h, &origin).await;
    phone
        .send(json!({"t": "visibility", "visible": false}))
        .await;

    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.text("/approve ls -la").await;
    let question = conn
        .until(|m| match m {
            ServerMessage::Prompt(p) => Some(p),
            _ => None,
        })
        .await;
    let note = nth_push(&service, 0, &keys, &key, &origin).await;
    assert_eq!(note["v"], 1);
    assert_eq!(note["kind"], "question");
    assert_eq!(note["title"], "Test Gadget asks");
    assert_eq!(note["prompt_id"], question.id.as_str());
    assert!(note["body"].as_str().unwrap().contains("ls -la"), "{note}");
    let options: Vec<&str> = note["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["once", "session", "always", "deny"]);
    let urgency = service.received.lock().unwrap()[0].0["urgency"].clone();
    assert_eq!(urgency, "high");

    // In sight again: the next question is only a card.
    phone
        .send(json!({"t": "visibility", "visible": true}))
        .await;
    conn.send(&herald_gadget_proto::DeviceMessage::PromptReply(
        herald_gadget_proto::PromptReply {
            id: question.id,
            answer: herald_gadget_proto::Answer::No,
        },
    ))
    .await;
    conn.text("/ask Lights off?").await;
    // (The first question's copy, withdrawn since, came before.)
    phone
        .until(|f| match f {
            ServerFrame::Prompt(card) if card.text.contains("Lights off?") => Some(()),
            _ => None,
        })
        .await;
    assert_eq!(
        service.received.lock().unwrap().len(),
        1,
        "no push while in sight"
    );
}

#[tokio::test]
async fn a_subscription_the_push_service_calls_gone_is_dropped() {
    let (service, origin) = push_service().await;
    *service.answer.lock().unwrap() = Some(StatusCode::GONE);
    let h = start().await;
    let (phone, keys, key) = subscribed(&h, &origin).await;
    let db = h.dir.path().join("herald.db");
    let count = || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row("SELECT COUNT(*) FROM push_subscriptions", [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
    };
    assert_eq!(count(), 1);
    drop(phone);

    // A delivery while the app is closed: pushed, answered 410, and the subscription goes.
    let status = remind(&h).await;
    assert_ne!(status, 200, "not delivered: the app is closed");
    let note = nth_push(&service, 0, &keys, &key, &origin).await;
    assert_eq!(
        (note["kind"].as_str(), note["body"].as_str()),
        (Some("deliver"), Some("Reminder"))
    );
    herald_test_support::wait::until(|| (count() == 0).then_some(())).await;
}

#[tokio::test]
async fn a_subscription_is_refused_and_kept_nowhere_unless_it_is_sound_and_allowed() {
    // Endpoints on this machine are refused by default.
    let h = Harness::start_with(|c| c.mobile.allow_all_users = true).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-1").await;
    let keys = Keys::new();
    phone
        .send(keys.subscribe("https://127.0.0.1:9/push/1"))
        .await;
    let ServerFrame::Error { code, message } = phone.recv().await else {
        panic!("not refused")
    };
    assert_eq!(code, herald_mobile_proto::ErrorCode::BadFrame);
    assert!(message.contains("private network"), "{message}");
    let mut bad = keys.subscribe("https://push.example.net/1");
    bad["keys"]["auth"] = json!("c2hvcnQ");
    phone.send(bad).await;
    assert!(matches!(phone.recv().await, ServerFrame::Error { .. }));
    let oversized = keys.subscribe(&format!("https://push.example.net/{}", "a".repeat(2000)));
    phone.send(oversized).await;
    assert!(matches!(phone.recv().await, ServerFrame::Error { .. }));

    // A user who is not paired: refused, nothing stored.
    let h = Harness::start_with(|c| c.push.allow_private_endpoints = true).await;
    let (mut phone, _) = Phone::connect(&h.mobile_url, APP_TOKEN, "tel-2").await;
    phone
        .send(keys.subscribe("https://push.example.net/2"))
        .await;
    let refused = phone
        .until(|f| match f {
            ServerFrame::Error { code, .. } => Some(code),
            _ => None,
        })
        .await;
    assert_eq!(refused, herald_mobile_proto::ErrorCode::Forbidden);
    let db = rusqlite::Connection::open(h.dir.path().join("herald.db")).unwrap();
    let stored: i64 = db
        .query_row("SELECT COUNT(*) FROM push_subscriptions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn a_gadget_s_event_reaches_its_person_when_no_app_is_open() {
    let (service, origin) = push_service().await;
    let h = start().await;
    let (phone, keys, key) = subscribed(&h, &origin).await;
    drop(phone);

    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    conn.send_raw(r#"{"type":"event","name":"doorbell","data":{"door":"front"},"notify":true}"#)
        .await;
    let note = nth_push(&service, 0, &keys, &key, &origin).await;
    assert_eq!(note["kind"], "event");
    // The owner sees which phones take notifications (never the endpoint) and can stop it.
    let (_, phones) = h.admin("GET", "/v1/phones", None).await;
    assert_eq!(phones[0]["notifications"], true);
    let (_, listed) = h.admin("GET", "/v1/push", None).await;
    assert_eq!(listed[0]["device_id"], "tel-1");
    assert_eq!(listed[0]["service"], origin.trim_start_matches("http://"));
    assert!(!listed.to_string().contains("/push/tel-1"), "{listed}");
    let (status, _) = h.admin("DELETE", "/v1/push/tel-1", None).await;
    assert_eq!(status, 200);
    let (status, _) = h.admin("DELETE", "/v1/push/tel-1", None).await;
    assert_eq!(status, 404);
    assert_eq!(note["title"], "Test Gadget");
    assert_eq!(note["body"], r#"doorbell {"door":"front"}"#);
}

/// A push service that takes the connection and never answers holds up nobody: pushes
/// are queued and sent beside the sessions, each call with a timeout of its own.
#[tokio::test]
async fn a_push_service_that_hangs_holds_up_no_session() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", silent.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = silent.accept().await {
            keep.lock().unwrap().push(socket);
        }
    });
    let h = start().await;
    let (mut phone, _keys, _key) = subscribed(&h, &origin).await;
    phone
        .send(json!({"t": "visibility", "visible": false}))
        .await;
    // A delivery to the app out of sight is pushed, and the service takes that push's
    // connection and holds it.
    let status = remind(&h).await;
    assert_eq!(status, 200);
    herald_test_support::wait::until(|| (!held.lock().unwrap().is_empty()).then_some(())).await;
    let (mut conn, _) = Gadget::new().connect(&h.url).await;
    for round in 0..3 {
        conn.text(&format!("/ask Round {round}?")).await;
        let question = conn
            .until(|m| match m {
                ServerMessage::Prompt(p) => Some(p),
                _ => None,
            })
            .await;
        conn.send(&herald_gadget_proto::DeviceMessage::PromptReply(
            herald_gadget_proto::PromptReply {
                id: question.id,
                answer: herald_gadget_proto::Answer::Yes,
            },
        ))
        .await;
        assert_eq!(conn.reply().await, "You answered yes.");
    }
    // The phone's session answers at once too, with its push still stuck in the service.
    phone.send(json!({"t": "ping"})).await;
    phone
        .until(|f| matches!(f, ServerFrame::Pong).then_some(()))
        .await;
}
