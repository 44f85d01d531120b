//! The one session loop: a task per device, the shell of its session core, written once
//! for both platforms.
//!
//! A [`Session`] owns the device's connection while there is one (`crate::edge::connection`):
//! it reads the device's frames and hands it the core's, and the connection writes what
//! waits for the device while the session waits, so a connected device costs one task
//! and one that stops reading never holds its session up. Everything else arrives on
//! one bounded mailbox: calls from the agent through the conversation port, commands
//! from the admin API, a new connection, the answers of work done on tasks beside it.
//! The loop feeds it all to the core with the time, sends the frames the core hands
//! back, carries out its effects and sleeps until the next deadline, so nothing ticks
//! while a device is idle. An idle session retires, and what reached its mailbox on the
//! way out is handed to its successor.
//!
//! When several things are ready at once, the session takes them in a fixed order
//! (see `first_ready!`): the device's connection, the mailbox, the platform's own
//! wake-ups, the deadline.
//!
//! What the platforms do alike lives here: the loop, the call table, retirement and
//! hand-over, and the effects both cores have (online, offline, to the agent, answers,
//! counts). What is a platform's own (its reads, commands, timers and the rest of its
//! effects) it adds through [`SessionKind`]: the gadget's in `gadget/session`, the
//! phone's in `mobile/session`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use herald_port::{
    AccessError, Chat, DeliveryError, Inbound, InboundBody, PairingCode, Request, RequestError,
    Response,
};
use herald_session::io::{Close, Transmit};
use herald_session::{CallId, Counted, SessionCore};
use tokio::time::{sleep_until, Instant};
use tracing::{debug, warn};

use crate::calls::Reply;
use crate::devices::{hand_over, AgentQueue, MAILBOX};
use crate::edge::connection::{outgoing, Connections, Read, Transport};
use crate::edge::socket::Outgoing;
use crate::hub::{DeviceKind, Hub, Shared};
use crate::queue;
use herald_questions::Claim;

/// The time as a core is told it: tokio's clock, so paused tests reach it.
pub(crate) fn core_now() -> std::time::Instant {
    Instant::now().into_std()
}

/// What woke a session.
enum Woken<N, E, W> {
    /// The connection: what the device did.
    Connection(N),
    /// The mailbox: an event, or `None` when every sender is gone.
    Mailbox(Option<E>),
    /// The platform's own wake-up ([`SessionKind::wake`]).
    Platform(W),
    /// The session's next deadline came.
    Deadline,
}

/// Wait for the first of a session's wake-ups. When several are ready together they
/// are taken in this fixed order, never at random: the connection first (what the
/// device says is the newest word: a cancel, an answer, a sign of life, and a device
/// that floods holds up only its own session), then the mailbox, then the platform's
/// own wake-up, then the deadline (`deadline`, an `Option<Instant>`).
///
/// A macro, not an async function: every idle session's task waits here, and a
/// function's own future (the four waits moved into it) cost 0.5 KiB per connection
/// (`herald bench connect`: 1.36x the bare baseline's memory against 1.22x).
macro_rules! first_ready {
    ($connection:expr, $mailbox:expr, $platform:expr, $deadline:ident) => {
        tokio::select! {
            biased;
            read = $connection => Woken::Connection(read),
            event = $mailbox => Woken::Mailbox(event),
            wake = $platform => Woken::Platform(wake),
            _ = sleep_until($deadline.unwrap_or_else(Instant::now)), if $deadline.is_some() => {
                Woken::Deadline
            }
        }
    };
}

/// What a platform adds to the one session loop.
pub(crate) trait SessionKind: DeviceKind {
    type Core: SessionCore + Send + 'static;
    type Transport: Transport<Message: Send> + Send;
    /// A call the core will answer, as the session holds it until then.
    type Answering: Answering;
    /// What only this platform's session keeps.
    type Parts: Send;
    /// What the platform's own wake-up ([`SessionKind::wake`]) found.
    type Wake: Send;
    /// An idle session ends this long after its last event.
    const RETIRE_AFTER: Duration;

    fn start(device_id: String, hub: &Hub<Self>) -> (Self::Core, Self::Parts);

    /// Why `event` ends the session at once (the device was forgotten, the server
    /// stops), with the close its connection gets; `None` for every other event.
    fn ends(event: &Self::Event) -> Option<(Close, &'static str)>;

    /// Feed `event` to the core.
    fn handle(session: &mut Session<Self>, event: Self::Event, now: std::time::Instant);

    /// Feed what the device sent to the core.
    fn handle_read(
        session: &mut Session<Self>,
        read: Read<<Self::Transport as Transport>::Message>,
    );

    /// Carry out one of the core's effects.
    fn carry_out(
        session: &mut Session<Self>,
        effect: <Self::Core as SessionCore>::Effect,
    ) -> impl Future<Output = ()> + Send;

    /// A deadline passed: the core's timers.
    fn timeout(session: &mut Session<Self>, now: Instant);

    /// Before the loop waits: set up what [`SessionKind::wake`] waits for.
    fn prepare(_session: &mut Session<Self>) {}

    /// Whether the session reads its device's connection now; while not, the device's
    /// frames wait (what waits for the device is still written), and the mailbox is
    /// served.
    fn reads(_session: &Session<Self>) -> bool {
        true
    }

    /// Something of the platform's own to wait for beside the mailbox and the
    /// connection; never, by default. Safe to cancel.
    fn wake(_parts: &mut Self::Parts) -> impl Future<Output = Self::Wake> + Send {
        std::future::pending()
    }

    fn handle_wake(
        _session: &mut Session<Self>,
        _wake: Self::Wake,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The mailbox woke the session, at `now`.
    fn woken(_session: &mut Session<Self>) {}

    /// The core's output is all carried out.
    fn settled(_session: &mut Session<Self>) {}

    /// The session ends: the core lets go of what it held.
    fn end(session: &mut Session<Self>) -> impl Future<Output = ()> + Send;
}

/// Withdraw question `prompt_id` from `chats`, each told where it was answered, on a
/// task of its own: one of them may be the session that answered. A copy already gone
/// is told too: the sharing withdraws a copy it finds answered as it went out, and
/// that may come first.
fn withdraw_copies(shared: &Shared, prompt_id: String, chats: Vec<Chat>, answered_on: String) {
    let Some(outbound) = shared.outbound() else {
        return;
    };
    tokio::spawn(async move {
        for chat in chats {
            let withdraw = Request::Withdraw {
                prompt_id: prompt_id.clone(),
            };
            let withdrawn = outbound.request(&chat, withdraw).await;
            if matches!(
                withdrawn,
                Ok(_) | Err(RequestError::Delivery(DeliveryError::UnknownMessage(_)))
            ) {
                let text = format!("Answered on {answered_on}.");
                let _ = outbound.request(&chat, Request::Notice { text }).await;
            }
        }
    });
}

impl<K: SessionKind> Hub<K> {
    /// The session of a device, started on first use.
    pub(crate) fn session(self: &Arc<Self>, device_id: &str) -> queue::Sender<K::Event> {
        self.devices.session_or_spawn(device_id, || {
            Session::spawn(device_id.to_owned(), self.clone())
        })
    }
}

/// A call the core will answer, as the session holds it.
pub(crate) trait Answering: From<Reply> + Send {
    /// The conversation port's reply channel, if this is a port call.
    fn into_port(self) -> Option<Reply>;
}

impl Answering for Reply {
    fn into_port(self) -> Option<Reply> {
        Some(self)
    }
}

/// The session's calls in progress, by the id the core knows them by. A list, not a
/// map: a session rarely has more than a few, and an idle one then holds no allocation.
pub(crate) struct Waiting<A> {
    next: u64,
    calls: Vec<(CallId, A)>,
}

impl<A> Default for Waiting<A> {
    fn default() -> Self {
        Waiting {
            next: 0,
            calls: Vec::new(),
        }
    }
}

impl<A> Waiting<A> {
    pub(crate) fn hold(&mut self, answering: A) -> CallId {
        self.next += 1;
        let call = CallId(self.next);
        self.calls.push((call, answering));
        call
    }

    pub(crate) fn take(&mut self, call: CallId) -> Option<A> {
        let at = self.calls.iter().position(|(id, _)| *id == call)?;
        let (_, answering) = self.calls.swap_remove(at);
        if self.calls.is_empty() {
            self.calls = Vec::new();
        }
        Some(answering)
    }
}

pub(crate) struct Session<K: SessionKind> {
    pub(crate) hub: Arc<Hub<K>>,
    pub(crate) mailbox: queue::Sender<K::Event>,
    pub(crate) core: K::Core,
    /// The calls the core will answer.
    pub(crate) waiting: Waiting<K::Answering>,
    /// The device's connection, while it has one.
    pub(crate) conns: Connections<K::Transport>,
    to_agent: AgentQueue,
    /// When the mailbox last had something for the session.
    pub(crate) last_event: Instant,
    pub(crate) parts: K::Parts,
}

impl<K: SessionKind> Session<K> {
    /// Start the session of `device_id`; its mailbox.
    pub(crate) fn spawn(device_id: String, hub: Arc<Hub<K>>) -> queue::Sender<K::Event> {
        let (tx, rx) = queue::channel(MAILBOX);
        // Boxed, with its handlers' futures boxed below: an idle device's task then holds
        // a pointer instead of every handler's state inline (`herald bench connect`
        // measures the memory this saves per connection).
        tokio::spawn(Session::new(device_id, hub, tx.clone()).run(rx));
        tx
    }

    /// The session of `device_id`, whose mailbox `mailbox` sends to, not yet running.
    pub(crate) fn new(
        device_id: String,
        hub: Arc<Hub<K>>,
        mailbox: queue::Sender<K::Event>,
    ) -> Box<Self> {
        let (core, parts) = K::start(device_id, &hub);
        Box::new(Session {
            hub,
            mailbox,
            core,
            waiting: Waiting::default(),
            conns: Connections::default(),
            to_agent: AgentQueue::default(),
            last_event: Instant::now(),
            parts,
        })
    }

    async fn run(mut self: Box<Self>, mut mailbox: queue::Receiver<K::Event>) {
        let retired = loop {
            self.settle().await;
            // Started (or still running) after the server began to stop, as a retiring
            // session's successor may be: it ends as the others were told to, and calls
            // left in its mailbox hear that the device is offline.
            if self.hub.devices.is_stopping() {
                self.core.close(Close::Away, "server stopping");
                self.settle().await;
                break false;
            }
            let deadline = self.next_deadline();
            K::prepare(&mut self);
            let reading = K::reads(&self);
            let woken = first_ready!(
                self.conns.next(reading, &self.hub.shared.metrics),
                mailbox.recv(),
                K::wake(&mut self.parts),
                deadline
            );
            let event = match woken {
                Woken::Connection(read) => {
                    K::handle_read(&mut self, read);
                    continue;
                }
                Woken::Mailbox(event) => event,
                Woken::Platform(wake) => {
                    Box::pin(K::handle_wake(&mut self, wake)).await;
                    continue;
                }
                Woken::Deadline => {
                    let now = Instant::now();
                    if self.retire_at().is_some_and(|at| at <= now) {
                        break true;
                    }
                    K::timeout(&mut self, now);
                    continue;
                }
            };
            let Some(event) = event else { break false };
            let now = self.woken();
            if let Some((close, reason)) = K::ends(&event) {
                self.core.close(close, reason);
                self.settle().await;
                break false;
            }
            K::handle(&mut self, event, now);
        };
        Box::pin(K::end(&mut self)).await;
        self.hub
            .devices
            .session_ended(self.core.device_id(), &self.mailbox);
        if retired {
            let (hub, id) = (self.hub.clone(), self.core.device_id().to_owned());
            Box::pin(hand_over(mailbox, move || hub.session(&id))).await;
        }
    }

    /// When an idle session ends: nothing open in its core and quiet for
    /// [`SessionKind::RETIRE_AFTER`], so devices that never come back do not keep a
    /// session each.
    fn retire_at(&self) -> Option<Instant> {
        self.core
            .is_idle()
            .then(|| self.last_event + K::RETIRE_AFTER)
    }

    /// The session's next wake-up: the core's next timer or the retirement, whichever
    /// is first.
    fn next_deadline(&self) -> Option<Instant> {
        let core = self.core.poll_timeout().map(Instant::from_std);
        [core, self.retire_at()].into_iter().flatten().min()
    }

    /// Something woke the session: the time, as the core is told it.
    pub(crate) fn woken(&mut self) -> std::time::Instant {
        let now = Instant::now();
        self.last_event = now;
        K::woken(self);
        now.into_std()
    }

    /// Send what the core handed back and carry out its effects, in order, until it
    /// has nothing more; then a connection the core let go says goodbye. (A boxed
    /// future of no named type: an effect may settle in turn, as a phone's download
    /// does between its chunks.)
    pub(crate) fn settle(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                self.flush();
                let Some(effect) = self.core.poll_effect() else {
                    break;
                };
                K::carry_out(self, effect).await;
            }
            self.conns.settle(&self.core, &self.hub.shared.metrics);
            K::settled(self);
        })
    }

    /// Send every frame the core handed back, each to its connection.
    pub(crate) fn flush(&mut self) {
        while let Some(Transmit { conn, frame }) = self.core.poll_transmit() {
            self.send(conn, outgoing(frame));
        }
    }

    /// Send `out` to connection `id`, without waiting for the device; dropped when that
    /// connection is gone. The current connection failing (or falling too far behind)
    /// is news for the core; one the core let go (its close among what it was sent) is
    /// settled into its goodbye, which waits for the device's close in turn.
    pub(crate) fn send(&mut self, id: u64, out: Outgoing) {
        let metrics = &self.hub.shared.metrics;
        if !self.conns.send(id, out, metrics) && self.core.is_current(id) {
            self.lost();
        }
    }

    /// The current connection broke: the core hears it, and it is let go.
    pub(crate) fn lost(&mut self) {
        self.core.handle_closed();
        self.conns.let_go();
    }

    /// Hold a port call for the core; the id the core answers it by.
    pub(crate) fn hold(&mut self, reply: Reply) -> CallId {
        self.waiting.hold(K::Answering::from(reply))
    }

    /// Send the core's answer to call `call` back to whoever is waiting for it.
    pub(crate) fn answer(&mut self, call: CallId, answer: Result<Response, RequestError>) {
        if let Some(reply) = self.waiting.take(call).and_then(Answering::into_port) {
            let _ = reply.send(answer);
        }
    }

    /// The device is online on connection `conn`.
    pub(crate) fn went_online(&self, conn: u64) {
        self.hub.devices.went_online(self.core.device_id(), conn);
    }

    /// The device's connection is gone.
    pub(crate) fn went_offline(&self) {
        self.hub.devices.went_offline(self.core.device_id());
    }

    /// Hand `inbound` to the agent, in order, and note it in the activity log; a core
    /// whose device sends faster than the agent takes hears that the queue is full. An
    /// answer to a question shared with other devices goes only if it is the first.
    pub(crate) fn hand_to_agent(&mut self, mut inbound: Inbound) {
        if let InboundBody::PromptAnswer(answer) = &inbound.body {
            let shared = &self.hub.shared;
            let chat = &inbound.source.chat;
            match shared
                .questions
                .claim(&answer.prompt_id, chat, std::time::Instant::now())
            {
                Claim::NotShared => {}
                Claim::Lost => {
                    debug!(prompt = %answer.prompt_id, "an answer came after another device's");
                    return;
                }
                Claim::Won {
                    origin,
                    origin_user,
                    others,
                    answered_on,
                } => {
                    withdraw_copies(shared, answer.prompt_id.clone(), others, answered_on);
                    inbound.source.chat = origin;
                    inbound.source.user_id = origin_user;
                }
            }
        }
        let activity = &self.hub.shared.metrics.activity;
        activity.said(&inbound.source.chat, &inbound.body);
        if let Some(agent) = self.hub.shared.agent() {
            if !self.to_agent.push(agent, inbound) {
                self.core.handle_agent_full();
            }
        }
    }

    pub(crate) fn count(&self, counted: Counted) {
        let metrics = &self.hub.shared.metrics;
        match counted {
            Counted::Turn => metrics.turn(K::PLATFORM),
            Counted::Error(code) => metrics.error(K::PLATFORM, code),
        }
    }

    /// Do `work` on a task of its own (under Hermes an answer may cross a pipe, a
    /// picture takes a while to fit) and hand its outcome back through the mailbox,
    /// so the session keeps serving its device meanwhile.
    pub(crate) fn beside(&self, work: impl Future<Output = K::Event> + Send + 'static) {
        let mailbox = self.mailbox.clone();
        tokio::spawn(async move {
            let _ = mailbox.send(work.await).await;
        });
    }

    /// Ask the authorizer for a pairing code for `id` (called `name`) beside the session;
    /// `answer` makes the mailbox event of its reply. False when there is no authorizer
    /// to ask.
    pub(crate) fn ask_pairing_code(
        &self,
        id: String,
        name: Option<String>,
        answer: impl FnOnce(Result<PairingCode, AccessError>) -> K::Event + Send + 'static,
    ) -> bool {
        let Some(authorizer) = self.hub.shared.authorizer().cloned() else {
            return false;
        };
        self.beside(async move {
            let code = authorizer
                .pairing_code(K::PLATFORM, &id, name.as_deref())
                .await;
            if let Err(err) = &code {
                warn!(%err, device = %id, "could not create a pairing code");
            }
            answer(code)
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use std::future::{pending, ready};

    use super::*;

    #[tokio::test]
    async fn what_is_ready_together_is_taken_in_the_documented_order() {
        // Many rounds: an unordered choice would pick another branch in some of them.
        for _ in 0..64 {
            let now = Some(Instant::now());
            let woken: Woken<u8, u8, u8> = first_ready!(ready(1), ready(Some(2)), ready(3), now);
            assert!(matches!(woken, Woken::Connection(1)));
            let woken: Woken<u8, u8, u8> = first_ready!(pending(), ready(Some(2)), ready(3), now);
            assert!(matches!(woken, Woken::Mailbox(Some(2))));
            let woken: Woken<u8, u8, u8> = first_ready!(pending(), pending(), ready(3), now);
            assert!(matches!(woken, Woken::Platform(3)));
            let woken: Woken<u8, u8, u8> = first_ready!(pending(), pending(), pending(), now);
            assert!(matches!(woken, Woken::Deadline));
        }
    }
}
