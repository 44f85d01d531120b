//! hello → challenge → auth: proves a device holds the key its id is derived from,
//! enrolls it on first contact (trust on first use), then hands the connection to
//! the device's session.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::{
    auth, limits, limits::KEY_LEN, Auth, Challenge, DeviceMessage, ErrorCode, Hello, ServerMessage,
};
use herald_port::Platform;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info};

use super::known::{profile_fingerprint, Known};
use super::session::{Attach, Event};
use super::socket::{self, Link};
use super::GadgetHub;
use crate::clock::now_ms;
use crate::ids;
use crate::labels;
use crate::metrics::Traffic;
use crate::socket::send_queue;
use crate::store::{DeviceProfile, Enrollment, Store, StoreError};

const STEP_TIMEOUT: Duration = Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS);

/// Why a handshake ended without admitting the device.
enum Refusal {
    /// Tell the device (error frame, close 1008).
    Tell(ErrorCode, String),
    /// The connection is already gone.
    Gone,
}

impl Refusal {
    fn protocol(message: impl Into<String>) -> Self {
        Refusal::Tell(ErrorCode::Protocol, message.into())
    }
}

impl From<StoreError> for Refusal {
    fn from(err: StoreError) -> Self {
        tracing::error!(%err, "store failed during a handshake");
        // No code fits a server fault exactly; `busy` makes devices retry later.
        Refusal::Tell(
            ErrorCode::Busy,
            "the server could not check this device".into(),
        )
    }
}

/// A device that proved its identity.
struct Admitted {
    hello: Hello,
    paired: bool,
}

pub(super) async fn run<S>(mut ws: WebSocketStream<S>, peer: SocketAddr, hub: Arc<GadgetHub>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let admitted = match admit(&mut ws, peer, &hub).await {
        Ok(admitted) => admitted,
        Err(Refusal::Tell(code, message)) => {
            if matches!(code, ErrorCode::BadToken | ErrorCode::AuthFailed) {
                hub.failures.failed(peer.ip(), Instant::now());
            }
            hub.metrics.handshake(Platform::Gadget, code.as_str());
            debug!(%peer, code = code.as_str(), %message, "gadget refused");
            socket::reject(&mut ws, code, &message).await;
            return;
        }
        Err(Refusal::Gone) => return,
    };
    hub.metrics.handshake(Platform::Gadget, "ok");
    let device_id = admitted.hello.device_id.clone();
    info!(%peer, device = %device_id, paired = admitted.paired, "gadget connected");

    let conn = hub.devices.conn_id();
    let (outbox_tx, outbox_rx) = send_queue();
    let session = hub.session(&device_id);
    let mut hello = admitted.hello;
    // The session, which keeps the hello as long as the connection, needs neither: the
    // token was checked and the first readings are in the store.
    hello.token = None;
    hello.sensors = Default::default();
    let attach = Attach {
        conn,
        outbox: outbox_tx,
        hello,
        paired: admitted.paired,
        session_id: ids::random_hex(12),
    };
    if session.send(Event::Attach(Box::new(attach))).await.is_err() {
        return;
    }
    // The connection gets a task of its own: the handshake's state, many times the
    // connection's, is freed now instead of living as long as it.
    let link = Link::new(
        ws,
        conn,
        session,
        outbox_rx,
        hub.metrics.clone(),
        peer,
        device_id,
    );
    tokio::spawn(link.serve());
}

async fn admit<S>(
    ws: &mut WebSocketStream<S>,
    peer: SocketAddr,
    hub: &Arc<GadgetHub>,
) -> Result<Admitted, Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut hello = match receive(ws, "hello", &hub.metrics.gadget).await? {
        DeviceMessage::Hello(hello) => hello,
        _ => return Err(Refusal::protocol("the first message must be hello")),
    };
    hello
        .validate()
        .map_err(|err| Refusal::Tell(err.code(), err.to_string()))?;
    clean_labels(&mut hello);
    if hub.failures.blocked(peer.ip(), Instant::now()) {
        return Err(Refusal::Tell(
            ErrorCode::Busy,
            "too many failed attempts from this address; try again in a minute".into(),
        ));
    }
    if let Some(expected) = &hub.config.access_token {
        let offered = hello.token.as_deref().unwrap_or("");
        if !auth::ct_eq(offered.as_bytes(), expected.expose().as_bytes()) {
            return Err(Refusal::Tell(
                ErrorCode::BadToken,
                "wrong access token".into(),
            ));
        }
    }

    // Memory holds every enrolled device (see `known`); one it lacks is asked for its
    // key, and the enrollment's transaction checks that key against the store.
    let known = hub.known.get(&hello.device_id);
    // A new device needs a place among those waiting for pairing; it holds it until
    // `admit` returns, by then paired or waiting.
    let _reservation = match known {
        Some(_) => None,
        None => {
            let (reservation, expired) = hub.waiting.reserve(peer.ip(), Instant::now());
            if !expired.is_empty() {
                // Off this handshake: asking the authorizer may take a round trip each.
                tokio::spawn(forget_expired(hub.clone(), expired));
            }
            Some(reservation.ok_or_else(|| {
                Refusal::Tell(
                    ErrorCode::Busy,
                    "too many devices are waiting for pairing; approve or forget some".into(),
                )
            })?)
        }
    };

    let mut nonce = [0u8; 16];
    ids::fill_random(&mut nonce);
    let nonce = auth::b64(&nonce);
    let challenge = ServerMessage::Challenge(Challenge {
        nonce: nonce.clone(),
        enrolled: known.is_some(),
    });
    let challenge = challenge.encode();
    hub.metrics.gadget.outbound(challenge.len());
    ws.send(Message::Text(challenge.into()))
        .await
        .map_err(|_| Refusal::Gone)?;

    let proof = match receive(ws, "auth", &hub.metrics.gadget).await? {
        DeviceMessage::Auth(proof) => proof,
        _ => return Err(Refusal::protocol("expected auth")),
    };
    let profile = profile_of(&hello);
    // What the store must learn of this connection: nothing after a fresh enrollment
    // (it wrote the profile), only the time when the profile is the one it holds.
    let update = match known {
        Some(known) => {
            let valid = proof.mac.as_deref().is_some_and(|mac| {
                auth::verify_auth_mac(&known.key, &hello.device_id, &nonce, mac)
            });
            if !valid {
                return Err(auth_failed());
            }
            if profile.sensors.is_empty() && known.profile == profile_fingerprint(&profile) {
                Update::LastSeen
            } else {
                Update::Profile(known.key)
            }
        }
        None => {
            let (enrolled, key) = enroll(hub, &hello.device_id, &proof, profile.clone()).await?;
            match enrolled {
                Enrollment::Enrolled => Update::Nothing,
                _ => Update::Profile(key),
            }
        }
    };

    let device_id = hello.device_id.clone();
    match update {
        Update::Nothing => {}
        Update::LastSeen => hub.store.seen(&device_id, now_ms()),
        Update::Profile(key) => {
            let (known, entry) = (hub.known.clone(), Known::new(key, &profile));
            // On the store's thread, in turn with a `forget`, so memory follows the store.
            let touch = move |store: &dyn Store| {
                if store.touch(&device_id, &profile, now_ms())? {
                    known.insert(&device_id, entry);
                }
                Ok(())
            };
            hub.store.run(touch).await?
        }
    }
    let authorizer = hub.devices.authorizer().ok_or(Refusal::Gone)?;
    let paired = hub
        .authorized
        .check(authorizer.as_ref(), Platform::Gadget, &hello.device_id)
        .await
        .map_err(|err| {
            tracing::error!(%err, "authorization failed during a handshake");
            Refusal::Tell(
                ErrorCode::Busy,
                "the server could not check this device".into(),
            )
        })?;
    if !paired {
        hub.waiting.connected(&hello.device_id, peer.ip());
    }
    Ok(Admitted { hello, paired })
}

/// Forget devices whose wait for pairing expired, unless approved meanwhile.
async fn forget_expired(hub: Arc<GadgetHub>, expired: Vec<String>) {
    let Some(authorizer) = hub.devices.authorizer() else {
        return;
    };
    for id in expired {
        if !matches!(
            authorizer.is_authorized(Platform::Gadget, &id).await,
            Ok(false)
        ) {
            continue;
        }
        match hub.forget(&id).await {
            Ok(_) => info!(device = %id, "forgot a device that waited for pairing too long"),
            Err(err) => tracing::warn!(%err, device = %id, "could not forget a device"),
        }
    }
}

/// First contact: the key must hash to the claimed id, and nobody else may hold it.
async fn enroll(
    hub: &GadgetHub,
    device_id: &str,
    proof: &Auth,
    profile: DeviceProfile,
) -> Result<(Enrollment, [u8; KEY_LEN]), Refusal> {
    let key = proof
        .key
        .as_deref()
        .and_then(|k| auth::decode_key(k).ok())
        .ok_or_else(auth_failed)?;
    if auth::device_id(&key) != device_id {
        return Err(auth_failed());
    }
    let (id, known) = (device_id.to_owned(), hub.known.clone());
    let enroll = move |store: &dyn Store| {
        let enrolled = store.enroll(&id, &key, &profile, now_ms())?;
        if enrolled == Enrollment::Enrolled {
            known.insert(&id, Known::new(key, &profile));
        }
        Ok(enrolled)
    };
    match hub.store.run(enroll).await? {
        Enrollment::Conflict => Err(auth_failed()),
        enrolled => Ok((enrolled, key)),
    }
}

/// The store write a handshake ends with.
enum Update {
    Nothing,
    LastSeen,
    /// The profile changed; the device holds this key.
    Profile([u8; KEY_LEN]),
}

fn auth_failed() -> Refusal {
    Refusal::Tell(ErrorCode::AuthFailed, "authentication failed".into())
}

/// What the device calls itself goes to the store, pairing requests, the agent and
/// the owner's terminal: cleaned once, here, for all of them.
fn clean_labels(hello: &mut Hello) {
    hello.name = labels::clean_opt(hello.name.as_deref(), limits::MAX_NAME);
    hello.board = labels::clean_opt(hello.board.as_deref(), limits::MAX_BOARD);
    hello.firmware = labels::clean_opt(hello.firmware.as_deref(), limits::MAX_FIRMWARE);
}

pub(crate) fn profile_of(hello: &Hello) -> DeviceProfile {
    DeviceProfile {
        name: hello.name.clone(),
        board: hello.board.clone(),
        firmware: hello.firmware.clone(),
        sensors: hello.sensors.clone(),
    }
}

/// The next text message of the handshake, within the step timeout.
async fn receive<S>(
    ws: &mut WebSocketStream<S>,
    what: &str,
    traffic: &Traffic,
) -> Result<DeviceMessage, Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let wait = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => {
                    traffic.inbound(text.len());
                    return DeviceMessage::decode(&text)
                        .map_err(|err| Refusal::protocol(err.to_string()));
                }
                Some(Ok(Message::Binary(_))) => {
                    return Err(Refusal::protocol(format!(
                        "expected {what}, got a binary frame"
                    )))
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return Err(Refusal::Gone),
            }
        }
    };
    tokio::time::timeout(STEP_TIMEOUT, wait)
        .await
        .unwrap_or_else(|_| {
            Err(Refusal::Tell(
                ErrorCode::Timeout,
                format!("no {what} in time"),
            ))
        })
}
