//! The shell of a phone's admission (`hello` → `ready`; the rules are [`Admission`] in
//! `herald-session`): it answers the core from the hub's memory (the address's failed
//! attempts) and the store (the device id's claim), writes a refusal, or says `ready`
//! and hands an admitted phone's connection to its session; a deliver token's is
//! served by [`deliver_only`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use herald_mobile_proto::{self as proto, ServerFrame};
use herald_port::Platform;
use herald_session::mobile::admission::{
    Admission, Admitted, Claim, Effect, Outcome, Refusal, Role, Rules, StoreFailed,
};
use herald_session::mobile::link::Delivers;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info};

use super::session::{Attach, Event};
use super::socket::{deliver_only, Connection};
use super::{MobileHub, MAX_LABEL};
use crate::clock::now_ms;
use crate::edge::listener;
use crate::edge::socket::{self, Heard, Outgoing};
use crate::labels;
use crate::session::core_now;
use herald_store::{PhoneClaim, PhoneInfo, MAX_PHONES_PER_USER, STALE_PHONE_DAYS};

/// Why admission ended without a phone let in.
enum Ended {
    Refused(Refusal),
    /// The connection is gone.
    Gone,
}

/// Every connection to the endpoint starts with its handshake.
impl listener::Handler for MobileHub {
    async fn handle<S>(self: Arc<Self>, ws: WebSocketStream<S>, peer: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        run(ws, peer, self).await;
    }
}

async fn run<S>(mut ws: WebSocketStream<S>, peer: SocketAddr, hub: Arc<MobileHub>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let rules = Rules {
        tokens: &hub.own.tokens,
        deliver_tokens: &hub.own.deliver_tokens,
        allowed_devices: &hub.own.config.allowed_devices,
    };
    let mut admission = Admission::new(rules, core_now());
    let (hello, role) = match drive(&mut admission, &mut ws, peer, &hub).await {
        Ok(admitted) => {
            let Admitted { hello, role } = *admitted;
            (hello, role)
        }
        Err(Ended::Refused(refusal)) => {
            if refusal.counts_as_failed_attempt() {
                hub.failures.failed(peer.ip(), Instant::now());
            }
            let code = refusal.code.as_str();
            hub.shared.metrics.handshake(Platform::Mobile, code);
            debug!(%peer, code, message = %refusal.message, "phone refused");
            // The error frame and the close; then the phone's close reply, within a grace.
            let traffic = &hub.shared.metrics.mobile;
            if socket::send_frames(&mut ws, || admission.poll_frame(), traffic).await {
                socket::await_close_reply(&mut ws).await;
            }
            return;
        }
        Err(Ended::Gone) => return,
    };
    let ready = ServerFrame::Ready {
        session: proto::session_key(&hello.device.id),
        // Without MOBILE_AVATAR_URL, the avatar page herald serves itself.
        avatar_url: Some(
            hub.own
                .config
                .avatar_url
                .clone()
                .unwrap_or_else(|| herald_pages::AVATAR_PATH.to_owned()),
        ),
        capabilities: hub.capabilities(),
    };
    let ready = ready.encode();
    let conn_id = hub.devices.conn_id();
    hub.shared.metrics.handshake(Platform::Mobile, "ok");
    let mut conn = Connection::new(conn_id, ws, peer);
    // `conn` names the connection in the log's "device disconnected" too.
    info!(%peer, conn = conn.id, device = %hello.device.id, "phone connected");
    match role {
        Role::Phone { user_id } => {
            // A listener on `::` sees IPv4 loopback as `::ffff:127.0.0.1`.
            let on_loopback = peer.ip().to_canonical().is_loopback();
            let from_loopback = hub.own.config.deliver_from_loopback;
            let attach = Attach {
                conn,
                ready,
                delivers: Delivers::of(Some(&user_id), on_loopback, from_loopback),
                user_id,
                user_name: labels::clean_opt(hello.device.name.as_deref(), MAX_LABEL),
            };
            // Online, and in the session's mailbox, before the phone can read `ready`:
            // a push it (or anyone) asks for the moment it has `ready` queues behind the
            // attach and finds the phone there.
            hub.devices.went_online(&hello.device.id, conn_id);
            let session = hub.session(&hello.device.id);
            if session.send(Event::Attach(Box::new(attach))).await.is_err() {
                hub.devices.went_offline(&hello.device.id);
            }
        }
        // A task of its own, so the handshake's state is freed now, not at disconnect.
        Role::Deliverer => {
            if conn.send(Outgoing::Text(ready), &hub.shared.metrics) {
                tokio::spawn(deliver_only(conn, hub));
            }
        }
    }
}

/// Carry admission's effects out and feed it the phone's frames until it ends.
async fn drive<S>(
    admission: &mut Admission<'_>,
    ws: &mut WebSocketStream<S>,
    peer: SocketAddr,
    hub: &MobileHub,
) -> Result<Box<Admitted>, Ended>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        while let Some(effect) = admission.poll_effect() {
            carry_out(effect, admission, peer, hub).await;
        }
        match admission.outcome() {
            Some(Outcome::Admitted(admitted)) => return Ok(admitted),
            Some(Outcome::Refused(refusal)) => return Err(Ended::Refused(refusal)),
            None => {}
        }
        let traffic = &hub.shared.metrics.mobile;
        match socket::hear(ws, admission.poll_timeout(), traffic).await {
            Heard::Text(text) => admission.handle_text(&text),
            Heard::Binary => admission.handle_binary(),
            Heard::Late => admission.handle_timeout(core_now()),
            Heard::Gone => return Err(Ended::Gone),
        }
    }
}

async fn carry_out(
    effect: Effect,
    admission: &mut Admission<'_>,
    peer: SocketAddr,
    hub: &MobileHub,
) {
    match effect {
        Effect::Check => {
            let locked_out = hub.failures.blocked(peer.ip(), Instant::now());
            admission.handle_checked(locked_out);
        }
        Effect::Claim { user_id } => {
            let Some(hello) = admission.hello() else {
                return;
            };
            let info = PhoneInfo {
                name: labels::clean_opt(hello.device.name.as_deref(), MAX_LABEL),
                platform: labels::clean_opt(hello.device.platform.as_deref(), MAX_LABEL),
            };
            let (id, user) = (hello.device.id.clone(), user_id);
            let claim = hub
                .shared
                .store
                .run(move |store| store.claim_phone(&id, &user, &info, now_ms()))
                .await
                .map(|claim| match claim {
                    PhoneClaim::Mine => Claim::Mine,
                    PhoneClaim::OwnedBy(_) => Claim::OwnedByAnother,
                    PhoneClaim::TooMany => Claim::TooMany {
                        most: MAX_PHONES_PER_USER,
                        unseen_days: STALE_PHONE_DAYS,
                    },
                })
                .map_err(|err| {
                    tracing::error!(%err, "store failed during a phone's hello");
                    StoreFailed
                });
            admission.handle_claimed(claim);
        }
    }
}
