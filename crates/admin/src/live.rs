//! `GET /v1/events`: the console's live updates, as server-sent events.
//!
//! The hubs and the store announce nothing, so each stream looks at what the console
//! lists (devices, phones, pairings, firmware updates, the main figures) once a second,
//! four times a second while an update is sending, and at once when the admin API
//! changed something ([`Live::Changed`]); it sends a part only when it differs from what
//! this stream sent last, the whole part as JSON (an owner's lists are short). The
//! first look sends every part, so a page needs no other request to draw itself.
//! Conversation events arrive as they happen, from the [`Activity`] bus.
//!
//! Event names: `devices`, `phones`, `pairing`, `ota`, `stats`, `conversation`, and
//! `problem` when a look failed. At most [`MAX_STREAMS`] streams are open at once. A
//! stream opened by a console session ends when the session does (each look checks it,
//! and a logout makes every stream look at once); one opened with the bearer token runs
//! until its client leaves.
//!
//! [`Activity`]: herald_metrics::activity::Activity

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tracing::debug;

use super::api::gauges;
use super::session::SessionKey;
use super::Console;
use super::{api, AdminState, ApiError};
use herald_metrics::activity::Live;

/// Streams open at most (a person has a tab or two open).
pub(crate) const MAX_STREAMS: usize = 16;
const LOOK: Duration = Duration::from_secs(1);
/// While an update is sending, so its progress bar moves smoothly.
const LOOK_FAST: Duration = Duration::from_millis(250);

/// Counts a stream while it is open.
struct Open(Arc<Console>);

impl Open {
    fn new(console: Arc<Console>) -> Option<Open> {
        let before = console.streams.fetch_add(1, Ordering::Relaxed);
        let open = Open(console);
        (before < MAX_STREAMS).then_some(open)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) async fn events(
    State(state): State<AdminState>,
    State(console): State<Arc<Console>>,
    session: Option<Extension<SessionKey>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let open = Open::new(console).ok_or_else(|| {
        ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            format!("{MAX_STREAMS} console pages are open already: close one"),
        )
    })?;
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(watch(state, tx, open, session.map(|Extension(key)| key)));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// What this stream sent last of each part.
#[derive(Default)]
struct Sent {
    parts: Vec<(&'static str, String)>,
}

impl Sent {
    /// Whether `json` is news for `name`, remembering it.
    fn news(&mut self, name: &'static str, json: &str) -> bool {
        match self.parts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, last)) if last == json => false,
            Some((_, last)) => {
                *last = json.to_owned();
                true
            }
            None => {
                self.parts.push((name, json.to_owned()));
                true
            }
        }
    }
}

/// Every part, as JSON; and whether an update is sending.
async fn look(state: &AdminState) -> Result<(Vec<(&'static str, String)>, bool), ApiError> {
    let json = |value: serde_json::Result<String>| {
        value.map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
    };
    let mut parts = Vec::with_capacity(5);
    let devices = api::devices(State(state.clone())).await?.0;
    parts.push(("devices", json(serde_json::to_string(&devices))?));
    let phones = api::phones(State(state.clone())).await?.0;
    parts.push(("phones", json(serde_json::to_string(&phones))?));
    // `null` when the backend cannot list them (a Hermes plugin older than this herald).
    let pairing = match state.authorizer.pairings().await {
        Ok(pairings) => Some(pairings),
        Err(err) => {
            debug!(%err, "no pairing list for the console");
            None
        }
    };
    parts.push(("pairing", json(serde_json::to_string(&pairing))?));
    let updates = api::ota_list(State(state.clone())).await?.0;
    let sending = updates.iter().any(|u| u.update.progress.status.is_active());
    parts.push(("ota", json(serde_json::to_string(&updates))?));
    let stats = state.metrics.stats(&gauges(state).await?);
    parts.push(("stats", json(serde_json::to_string(&stats))?));
    Ok((parts, sending))
}

async fn watch(
    state: AdminState,
    tx: mpsc::Sender<Event>,
    open: Open,
    session: Option<SessionKey>,
) {
    let mut live = state.metrics.activity.subscribe();
    let mut sent = Sent::default();
    let mut next = Instant::now();
    loop {
        if Instant::now() >= next {
            // Dropping `tx` ends the response: the page's EventSource then finds out why.
            let ended =
                session.is_some_and(|key| !open.0.sessions.alive(&key, std::time::Instant::now()));
            if ended {
                return;
            }
            let (events, period) = match look(&state).await {
                Ok((parts, sending)) => {
                    let events: Vec<Event> = parts
                        .into_iter()
                        .filter(|(name, json)| sent.news(name, json))
                        .map(|(name, json)| Event::default().event(name).data(json))
                        .collect();
                    (events, if sending { LOOK_FAST } else { LOOK })
                }
                Err(ApiError(_, problem)) => {
                    let data = serde_json::json!({ "error": problem }).to_string();
                    (vec![Event::default().event("problem").data(data)], LOOK)
                }
            };
            for event in events {
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            next = Instant::now() + period;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = tx.closed() => return,
            heard = live.recv() => match heard {
                Ok(Live::Conversation { platform, id, event }) => {
                    let data = serde_json::json!({ "platform": platform, "id": id, "event": event });
                    let event = Event::default().event("conversation").data(data.to_string());
                    if tx.send(event).await.is_err() {
                        return;
                    }
                }
                Ok(Live::Changed) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    next = Instant::now();
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_news_is_sent() {
        let mut sent = Sent::default();
        assert!(sent.news("devices", "[]"));
        assert!(!sent.news("devices", "[]"));
        assert!(sent.news("phones", "[]"));
        assert!(sent.news("devices", "[1]"));
        assert!(!sent.news("phones", "[]"));
    }
}
