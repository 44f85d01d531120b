//! `hello` → `ready`: who is connecting, and may they? An admitted phone's connection
//! goes to its session; a deliver token's is served by [`deliver_only`].
//!
//! The access decision, in the order the protocol fixes: a wrong or missing token, then
//! a device outside `MOBILE_ALLOWED_DEVICES`, then a device id another user owns. Each
//! refusal is an `error` frame and close 1008, which tells apps not to retry. Whether
//! the user may talk to the agent is decided later, on every message.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_mobile_proto::{self as proto, ClientFrame, ErrorCode, ServerFrame};
use herald_port::Platform;
use herald_session::mobile::link::Delivers;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info};

use super::session::{Attach, Event};
use super::socket::{deliver_only, Connection};
use super::{MobileHub, MAX_LABEL};
use crate::clock::now_ms;
use crate::edge::listener;
use crate::edge::socket;
use crate::labels;
use crate::metrics::Traffic;
use herald_store::{PhoneClaim, PhoneInfo, MAX_PHONES_PER_USER, STALE_PHONE_DAYS};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

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
    let hello = match receive_hello(&mut ws, &hub.shared.metrics.mobile).await {
        Ok(hello) => hello,
        Err(Some((code, message))) => {
            hub.shared
                .metrics
                .handshake(Platform::Mobile, code.as_str());
            return refuse(&mut ws, code, &message).await;
        }
        Err(None) => return,
    };
    let role = match admit(&hub, &hello, peer).await {
        Ok(role) => role,
        Err((code, message)) => {
            if code == ErrorCode::AuthFailed {
                hub.failures.failed(peer.ip(), std::time::Instant::now());
            }
            hub.shared
                .metrics
                .handshake(Platform::Mobile, code.as_str());
            debug!(%peer, device = %hello.device.id, code = code.as_str(), "phone refused");
            return refuse(&mut ws, code, &message).await;
        }
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
    hub.shared.metrics.mobile.outbound(ready.len());
    let conn_id = hub.devices.conn_id();
    let phone = matches!(role, Role::Phone { .. });
    // Online from `ready` on, so a push the app asks for at once finds its target (the
    // session says so again when the connection reaches it, and offline when it ends).
    if phone {
        hub.devices.went_online(&hello.device.id, conn_id);
    }
    if ws.send(Message::Text(ready.into())).await.is_err() {
        if phone {
            hub.devices.went_offline(&hello.device.id);
        }
        return;
    }
    hub.shared.metrics.handshake(Platform::Mobile, "ok");
    let conn = Connection::new(conn_id, ws, peer);
    // `conn` names the connection in the log's "device disconnected" too.
    info!(%peer, conn = conn.id, device = %hello.device.id, "phone connected");
    match role {
        Role::Phone { user_id } => {
            // A listener on `::` sees IPv4 loopback as `::ffff:127.0.0.1`.
            let on_loopback = peer.ip().to_canonical().is_loopback();
            let from_loopback = hub.own.config.deliver_from_loopback;
            let attach = Attach {
                conn,
                delivers: Delivers::of(Some(&user_id), on_loopback, from_loopback),
                user_id,
                user_name: labels::clean_opt(hello.device.name.as_deref(), MAX_LABEL),
            };
            // From here the session owns the connection.
            let session = hub.session(&hello.device.id);
            if session.send(Event::Attach(Box::new(attach))).await.is_err() {
                hub.devices.went_offline(&hello.device.id);
            }
        }
        // A task of its own, so the handshake's state is freed now, not at disconnect.
        Role::Deliverer => {
            tokio::spawn(deliver_only(conn, hub));
        }
    }
}

/// What the connection may do, decided by its token at `hello`.
enum Role {
    /// An app: a user's phone with a session.
    Phone { user_id: String },
    /// A `MOBILE_DELIVER_TOKENS` holder: it may only `deliver` (and `ping`).
    Deliverer,
}

async fn receive_hello<S>(
    ws: &mut WebSocketStream<S>,
    traffic: &Traffic,
) -> Result<proto::Hello, Option<(ErrorCode, String)>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let first = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => {
                    traffic.inbound(text.len());
                    return Ok(text);
                }
                Some(Ok(Message::Binary(_))) => {
                    return Err(Some((
                        ErrorCode::NotReady,
                        "the first frame must be hello".into(),
                    )))
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                _ => return Err(None),
            }
        }
    };
    let text = tokio::time::timeout(HELLO_TIMEOUT, first)
        .await
        .map_err(|_| Some((ErrorCode::NotReady, "no hello in time".to_owned())))??;
    match ClientFrame::decode(&text) {
        Ok(ClientFrame::Hello(hello)) => Ok(hello),
        Ok(_) | Err(proto::DecodeError::UnknownFrame(_)) => Err(Some((
            ErrorCode::NotReady,
            "the first frame must be hello".into(),
        ))),
        Err(err) => Err(Some((err.code(), err.to_string()))),
    }
}

async fn admit(
    hub: &MobileHub,
    hello: &proto::Hello,
    peer: SocketAddr,
) -> Result<Role, (ErrorCode, String)> {
    if hub.failures.blocked(peer.ip(), std::time::Instant::now()) {
        return Err((
            ErrorCode::RateLimited,
            "too many failed attempts from this address; try again in a minute".into(),
        ));
    }
    let token = hello.token.as_deref().unwrap_or("");
    let device = &hello.device.id;
    let allowed = &hub.own.config.allowed_devices;
    if hub.own.deliver_tokens.authenticate(token).is_some() {
        return Ok(Role::Deliverer);
    }
    let Some(user_id) = hub.own.tokens.authenticate(token).map(str::to_owned) else {
        return Err((ErrorCode::AuthFailed, "wrong or missing token".into()));
    };
    if !allowed.is_empty() && !allowed.iter().any(|d| d == device) {
        return Err((ErrorCode::AuthFailed, "this device is not allowed".into()));
    }
    let info = PhoneInfo {
        name: labels::clean_opt(hello.device.name.as_deref(), MAX_LABEL),
        platform: labels::clean_opt(hello.device.platform.as_deref(), MAX_LABEL),
    };
    let (id, user) = (device.clone(), user_id.clone());
    let claim = hub
        .shared
        .store
        .run(move |store| store.claim_phone(&id, &user, &info, now_ms()))
        .await
        .map_err(|err| {
            tracing::error!(%err, "store failed during a phone's hello");
            (
                ErrorCode::Internal,
                "the server could not check this device".to_owned(),
            )
        })?;
    match claim {
        PhoneClaim::Mine => Ok(Role::Phone { user_id }),
        PhoneClaim::OwnedBy(_) => Err((
            ErrorCode::Forbidden,
            "this device id belongs to another user".into(),
        )),
        PhoneClaim::TooMany => Err((
            ErrorCode::Forbidden,
            format!(
                "this user already has {MAX_PHONES_PER_USER} devices; forget one \
                 (`herald forget ID`) or wait until one is unseen for {STALE_PHONE_DAYS} days"
            ),
        )),
    }
}

async fn refuse<S>(ws: &mut WebSocketStream<S>, code: ErrorCode, message: &str)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let error = ServerFrame::error(code, message).encode();
    // 1008 tells an app to stop for good; a fault of the server's or a throttle that
    // ends in a minute are worth a later try.
    let close = match code {
        ErrorCode::Internal => CloseCode::Error,
        ErrorCode::RateLimited => CloseCode::Again,
        _ => CloseCode::Policy,
    };
    socket::refuse(ws, error, close, code.as_str()).await;
}
