//! The shell of a gadget's handshake (hello → challenge → auth, the rules are
//! [`Handshake`] in `herald-session`): it answers the core from the hub's memory (the
//! address lock, the enrolled keys, the waiting room), the store and the authorizer,
//! writes what the core has for the device, then hands an admitted connection to the
//! device's session.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use herald_gadget_proto::{DeviceMessage, Hello};
use herald_port::Platform;
use herald_session::gadget::handshake::{Admitted, Effect, Handshake, Outcome, Refusal, Unchecked};
use herald_session::Ids;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info};

use super::known::known_as;
use super::session::{Attach, Event};
use super::socket::Connection;
use super::GadgetHub;
use crate::clock::now_ms;
use crate::edge::listener;
use crate::edge::socket::{self, Heard};
use crate::ids::OsEntropy;
use crate::places::AddrPlace;
use crate::session::core_now;
use herald_config::Secret;
use herald_store::{DeviceProfile, NewDevice, Store, StoreError};

/// Why a handshake ended without a session.
enum Ended {
    Refused(Refusal),
    /// The connection is gone, or the server has no agent side any more.
    Gone,
}

/// Every connection to the endpoint starts with its handshake.
impl listener::Handler for GadgetHub {
    async fn handle<S>(self: Arc<Self>, ws: WebSocketStream<S>, peer: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        run(ws, peer, self).await;
    }
}

async fn run<S>(mut ws: WebSocketStream<S>, peer: SocketAddr, hub: Arc<GadgetHub>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let access_token = hub.own.config.access_token.as_ref().map(Secret::expose);
    let mut handshake = Handshake::new(access_token, Ids::new(OsEntropy), core_now());
    let admitted = match drive(&mut handshake, &mut ws, peer, &hub).await {
        Ok(admitted) => admitted,
        Err(Ended::Refused(refusal)) => {
            if refusal.counts_as_failed_attempt() {
                hub.failures.failed(peer.ip(), Instant::now());
            }
            let code = refusal.code.as_str();
            hub.shared.metrics.handshake(Platform::Gadget, code);
            debug!(%peer, code, message = %refusal.message, "gadget refused");
            // The error frame and the close; then the device's close reply, within a grace.
            if send_frames(&mut handshake, &mut ws, &hub).await.is_ok() {
                socket::await_close_reply(&mut ws).await;
            }
            return;
        }
        Err(Ended::Gone) => return,
    };
    let Admitted {
        hello,
        paired,
        session_id,
    } = *admitted;
    hub.shared.metrics.handshake(Platform::Gadget, "ok");
    let device_id = hello.device_id.clone();
    // The session takes the connection over: the handshake's state, many times the
    // connection's, is freed now instead of living as long as it.
    let conn = Connection::new(hub.devices.conn_id(), ws, peer);
    // `conn` names the connection in the log's "device disconnected" too.
    info!(%peer, conn = conn.id, device = %device_id, paired, "gadget connected");
    let attach = Attach {
        conn,
        hello,
        paired,
        session_id,
    };
    let _ = hub
        .session(&device_id)
        .send(Event::Attach(Box::new(attach)))
        .await;
}

/// Carry the handshake's effects out and feed it the device's frames until it ends.
async fn drive<S>(
    handshake: &mut Handshake<'_>,
    ws: &mut WebSocketStream<S>,
    peer: SocketAddr,
    hub: &Arc<GadgetHub>,
) -> Result<Box<Admitted>, Ended>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // A first contact's place among those waiting for pairing, held until the
    // handshake returns, by then paired or waiting.
    let mut reservation = None;
    loop {
        while let Some(effect) = handshake.poll_effect() {
            carry_out(effect, handshake, &mut reservation, peer, hub).await?;
        }
        match handshake.outcome() {
            Some(Outcome::Admitted(admitted)) => {
                // Waiting now, before the reservation goes: the room never counts it
                // out in between.
                if !admitted.paired {
                    hub.own
                        .waiting
                        .connected(&admitted.hello.device_id, peer.ip());
                }
                return Ok(admitted);
            }
            Some(Outcome::Refused(refusal)) => return Err(Ended::Refused(refusal)),
            None => {}
        }
        send_frames(handshake, ws, hub).await?;
        let traffic = &hub.shared.metrics.gadget;
        match socket::hear(ws, handshake.poll_timeout(), traffic).await {
            Heard::Text(text) => match DeviceMessage::decode(&text) {
                Ok(msg) => handshake.handle_message(msg),
                Err(err) => handshake.handle_bad_frame(err.to_string()),
            },
            Heard::Binary => handshake.handle_binary(),
            Heard::Late => handshake.handle_timeout(core_now()),
            Heard::Gone => return Err(Ended::Gone),
        }
    }
}

async fn carry_out(
    effect: Effect,
    handshake: &mut Handshake<'_>,
    reservation: &mut Option<AddrPlace>,
    peer: SocketAddr,
    hub: &Arc<GadgetHub>,
) -> Result<(), Ended> {
    let Some(hello) = handshake.hello() else {
        return Ok(());
    };
    match effect {
        Effect::Check => {
            let locked_out = hub.failures.blocked(peer.ip(), Instant::now());
            let known = hub.own.known.get(&hello.device_id);
            handshake.handle_checked(locked_out, known, core_now());
        }
        Effect::Reserve => {
            let (place, expired) = hub.own.waiting.reserve(peer.ip(), Instant::now());
            if !expired.is_empty() {
                // Off this handshake: asking the authorizer may take a round trip each.
                tokio::spawn(forget_expired(hub.clone(), expired));
            }
            handshake.handle_reserved(place.is_some(), core_now());
            *reservation = place;
        }
        Effect::Enroll { key } => {
            let profile = profile_of(hello);
            let known = known_as(key, &profile);
            let device = NewDevice {
                id: hello.device_id.clone(),
                key,
                profile,
                now: now_ms(),
            };
            // In the store's journal before `welcome`, in its table soon after.
            let record = || hub.shared.store.enroll(device);
            let enrolled = hub.own.known.enroll(&hello.device_id, known, record);
            handshake.handle_enrolled(enrolled.map_err(unchecked));
        }
        Effect::Seen => hub.shared.store.seen(&hello.device_id, now_ms()),
        Effect::Touch { key } => {
            let (device_id, profile) = (hello.device_id.clone(), profile_of(hello));
            let known = hub.own.known.clone();
            // On the store's thread, in turn with a `forget`, so memory follows the store.
            let touch = move |store: &dyn Store| {
                if store.touch(&device_id, &profile, now_ms())? {
                    known.insert(&device_id, known_as(key, &profile));
                }
                Ok(())
            };
            let touched = hub.shared.store.run(touch).await.map_err(unchecked);
            handshake.handle_touched(touched);
        }
        Effect::Authorize => {
            let authorizer = hub.shared.authorizer().ok_or(Ended::Gone)?;
            let paired = hub
                .authorized
                .check(authorizer.as_ref(), Platform::Gadget, &hello.device_id)
                .await
                .map_err(|err| {
                    tracing::error!(%err, "authorization failed during a handshake");
                    Unchecked
                });
            handshake.handle_authorized(paired);
        }
    }
    Ok(())
}

fn unchecked(err: StoreError) -> Unchecked {
    tracing::error!(%err, "store failed during a handshake");
    Unchecked
}

/// Write what the handshake has for the device; a close ends the writing.
async fn send_frames<S>(
    handshake: &mut Handshake<'_>,
    ws: &mut WebSocketStream<S>,
    hub: &GadgetHub,
) -> Result<(), Ended>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let traffic = &hub.shared.metrics.gadget;
    match socket::send_frames(ws, || handshake.poll_frame(), traffic).await {
        true => Ok(()),
        false => Err(Ended::Gone),
    }
}

/// Forget devices whose wait for pairing expired, unless approved meanwhile.
async fn forget_expired(hub: Arc<GadgetHub>, expired: Vec<String>) {
    let Some(authorizer) = hub.shared.authorizer() else {
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

/// What the store keeps of a device's `hello`.
pub(crate) fn profile_of(hello: &Hello) -> DeviceProfile {
    DeviceProfile {
        name: hello.name.clone(),
        board: hello.board.clone(),
        firmware: hello.firmware.clone(),
        sensors: hello.sensors.clone(),
    }
}
