//! A gadget's session: what the one session loop (`crate::session`) does for gadgets.
//!
//! The state and its rules are [`Core`] (crate `herald-session`), a state machine with
//! no I/O. Here are its reads, its commands (the conversation port, the admin API's
//! firmware updates, pairing changes) and the effects only a gadget has: utterances
//! written as WAV, readings, speech and pictures sent beside the session, Herald's
//! cues, and firmware updates. Those are a sub-machine of the core; the session keeps
//! the staged image open while one is sent and writes each frame as the outbox has
//! room for it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use herald_gadget_proto as proto;
use herald_port::{ActionError, DeliveryError, Notification, PairingCode, RequestError, Response};
use herald_session::gadget::ota::{
    self as ota_core, NotPrepared, OtaEffect, PushError, Staged, StoreFailed, Target,
};
use herald_session::gadget::{Core, Effect, ImageJob, Peer, PictureNotSent, SpeechChunk};
use herald_session::io::{Close, Failed};
use herald_session::{done, CallId, Ids, SessionCore};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

use super::image;
use super::ota;
use super::socket::{Connection, Gadget, Incoming, Read};
use super::{GadgetHub, Gadgets};
use crate::calls::{Call, Reply};
use crate::clock::now_ms;
use crate::edge::socket::{Closed, Outgoing, Room};
use crate::ids::OsEntropy;
use crate::session::{self, Session, SessionKind};
use herald_speaker::{open_speech, Feed, Playback, SpeechInput};
use herald_store::OtaUpdate;

/// The rate Herald renders its cues at; the stream resamples them to the speaker's.
const CUE_RATE: u32 = 16_000;

/// What the agent side and the admin API ask of a device.
pub(crate) enum Command {
    /// A conversation-port call.
    Port(Call),
    /// News from the agent, answered by nobody.
    Notify(Notification),
    /// The admin API asks for the device's firmware limits.
    OtaTarget(oneshot::Sender<Result<Target, PushError>>),
    /// The admin API starts an update with a staged image.
    OtaStart {
        staged: Staged,
        reply: oneshot::Sender<Result<OtaUpdate, PushError>>,
    },
    /// Authorization changed (pairing approved or revoked).
    SetPaired(bool),
    /// The device was removed from the store: drop the connection and end.
    Forget,
    /// The server is stopping.
    Shutdown,
}

/// A connection that finished its handshake, handed to the session.
pub(crate) struct Attach {
    pub conn: Box<Connection>,
    pub hello: proto::Hello,
    pub paired: bool,
    pub session_id: String,
}

pub(crate) enum Event {
    Attach(Box<Attach>),
    /// The authorizer's answer to the core's request for a pairing code.
    PairingCode(Option<PairingCode>),
    /// A picture went out (or could not): the core sends its caption and answers.
    ImageSent(Box<ImageSent>),
    /// Boxed: commands are large and rare next to frames, and an event's size is
    /// what every mailbox slot costs.
    Command(Box<Command>),
}

pub(crate) struct ImageSent {
    call: CallId,
    caption: Option<String>,
    turn: Option<String>,
    sent: Result<(), PictureNotSent>,
}

/// A call the core will answer, as the session holds it.
pub(crate) enum Answering {
    Port(Reply),
    OtaTarget(oneshot::Sender<Result<Target, PushError>>),
    OtaStart(oneshot::Sender<Result<OtaUpdate, PushError>>),
}

impl From<Reply> for Answering {
    fn from(reply: Reply) -> Self {
        Answering::Port(reply)
    }
}

impl session::Answering for Answering {
    fn into_port(self) -> Option<Reply> {
        match self {
            Answering::Port(reply) => Some(reply),
            _ => None,
        }
    }
}

/// What a gadget's session sends beside itself.
#[derive(Default)]
pub(crate) struct Streams {
    /// The staged image of the firmware update being sent, open. Boxed, as the speech
    /// below: rare, and an idle session's size is what every device costs.
    image: Option<Box<tokio::fs::File>>,
    /// The speech being sent, if any.
    playback: Option<Box<Playback>>,
    /// The wait for outbox room for the next firmware frame, on connection `.0`.
    room: Option<(u64, RoomWait)>,
}

/// What a gadget's session waits for besides its mailbox and connection.
pub(crate) enum Wake {
    /// Room in the outbox for a firmware frame.
    Room(Room),
    /// Speech stream `.0` played to its end.
    SpeechDone(u8),
}

/// A wait for room in a connection's outbox, for a firmware frame. Boxed and kept
/// across the loop's turns while an update sends: inline, it would make every idle
/// session's task a few hundred bytes larger.
type RoomWait = Pin<Box<dyn Future<Output = Result<Room, Closed>> + Send>>;

/// An idle session ends this long after its last event.
const RETIRE_AFTER: Duration = Duration::from_secs(3600);

impl SessionKind for Gadgets {
    type Core = Core;
    type Transport = Gadget;
    type Answering = Answering;
    type Parts = Streams;
    type Wake = Wake;
    /// Nothing open (no connection, turn, question, action or firmware transfer;
    /// updates resume from the store) and quiet this long.
    const RETIRE_AFTER: Duration = RETIRE_AFTER;

    fn start(device_id: String, hub: &GadgetHub) -> (Core, Streams) {
        let core = Core::new(device_id, hub.own.rules.clone(), Ids::new(OsEntropy));
        (core, Streams::default())
    }

    fn ends(event: &Event) -> Option<(Close, &'static str)> {
        match event {
            Event::Command(command) => match **command {
                Command::Forget => Some((Close::Normal, "forgotten")),
                Command::Shutdown => Some((Close::Away, "server stopping")),
                _ => None,
            },
            _ => None,
        }
    }

    fn handle(session: &mut Session<Self>, event: Event, now: std::time::Instant) {
        match event {
            Event::Attach(attach) => {
                let Attach {
                    conn,
                    hello,
                    paired,
                    session_id,
                } = *attach;
                let id = conn.id;
                session.conns.attach(conn);
                let heartbeat_s = session.hub.own.config.heartbeat_s;
                session.core.handle_attach(
                    id,
                    Peer::from(hello),
                    paired,
                    session_id,
                    heartbeat_s,
                    now,
                );
            }
            Event::PairingCode(code) => session.core.handle_pairing_code(code),
            Event::ImageSent(image) => {
                let ImageSent {
                    call,
                    caption,
                    turn,
                    sent,
                } = *image;
                session.core.handle_image_sent(call, caption, turn, sent);
            }
            Event::Command(command) => match *command {
                Command::Port(Call { request, reply }) => {
                    let call = session.hold(reply);
                    session.core.handle_call(call, request, now);
                }
                Command::Notify(notification) => {
                    session.core.handle_notification(notification, now)
                }
                Command::SetPaired(paired) => session.core.handle_paired(paired, now),
                Command::OtaTarget(reply) => {
                    let call = session.waiting.hold(Answering::OtaTarget(reply));
                    let request = ota_core::Request::Target { call };
                    session.core.handle_ota_request(request);
                }
                Command::OtaStart { staged, reply } => {
                    let call = session.waiting.hold(Answering::OtaStart(reply));
                    let request = ota_core::Request::Start { staged, call };
                    session.core.handle_ota_request(request);
                }
                // They end the session (`SessionKind::ends`).
                Command::Forget | Command::Shutdown => {}
            },
        }
    }

    /// What the device did.
    fn handle_read(session: &mut Session<Self>, read: Read) {
        let now = session.woken();
        match read {
            Read::Message(Incoming::Frame(msg)) => {
                session.core.touch(now);
                session.core.handle_frame(*msg, now);
            }
            Read::Message(Incoming::Bad { reason, close }) => {
                session.core.touch(now);
                session.core.handle_bad_frame(reason, close);
            }
            Read::Message(Incoming::Binary(data)) => {
                session.core.touch(now);
                session.core.handle_binary(&data);
            }
            Read::Alive => session.core.touch(now),
            // Settling hands the connection to its goodbye, which sends the close reply.
            Read::Closed => session.core.handle_closed(),
            Read::Lost => session.lost(),
        }
    }

    async fn carry_out(session: &mut Session<Self>, effect: Effect) {
        session.carry_out(effect).await;
    }

    fn timeout(session: &mut Session<Self>, now: Instant) {
        session.core.handle_timeout(now.into_std(), unix_ms());
    }

    /// The next firmware frame waits for room in the outbox alongside the mailbox, so
    /// conversation traffic is never held up.
    fn prepare(session: &mut Session<Self>) {
        let conn = session.conns.current();
        let room = &mut session.parts.room;
        match conn.filter(|conn| session.core.ota_wants_chunk() && session.core.is_current(conn.id))
        {
            Some(conn) if room.as_ref().is_none_or(|(id, _)| *id != conn.id) => {
                *room = Some((conn.id, Box::pin(conn.queue().reserve()) as RoomWait));
            }
            Some(_) => {}
            None => *room = None,
        }
    }

    async fn wake(streams: &mut Streams) -> Wake {
        tokio::select! {
            Some(room) = wait_for_room(&mut streams.room) => Wake::Room(room),
            stream = speech_done(&mut streams.playback) => Wake::SpeechDone(stream),
        }
    }

    async fn handle_wake(session: &mut Session<Self>, wake: Wake) {
        match wake {
            Wake::Room(room) => session.send_firmware(room).await,
            Wake::SpeechDone(stream) => session.core.handle_speech_done(stream),
        }
    }

    /// Speech that ended meanwhile counts first, as it happened first.
    fn woken(session: &mut Session<Self>) {
        if let Some(done) = session.parts.playback.take_if(|p| p.is_finished()) {
            session.core.handle_speech_done(done.stream);
        }
    }

    fn settled(session: &mut Session<Self>) {
        if !session.core.ota_is_running() {
            session.parts.image = None;
        }
    }

    async fn end(session: &mut Session<Self>) {
        session.core.fail_actions(ActionError::Disconnected);
        while let Some(effect) = session.core.poll_effect() {
            if let Effect::Answer { call, answer } = effect {
                session.answer(call, answer);
            }
        }
    }
}

/// The room `wait` (for connection `.0`) found, once it does; never, with none. Either
/// way the wait is over: the next turn of the loop starts another if one is wanted.
async fn wait_for_room(wait: &mut Option<(u64, RoomWait)>) -> Option<Room> {
    let Some((_, room)) = wait.as_mut() else {
        return std::future::pending().await;
    };
    let found = room.as_mut().await;
    *wait = None;
    found.ok()
}

/// The stream of the speech that just played to its end; never, with none playing.
async fn speech_done(playback: &mut Option<Box<Playback>>) -> u8 {
    let Some(playing) = playback.as_mut() else {
        return std::future::pending().await;
    };
    playing.finished().await;
    let stream = playing.stream;
    *playback = None;
    stream
}

impl Session<Gadgets> {
    async fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Online { conn } => self.went_online(conn),
            Effect::Offline { paired } => {
                self.went_offline();
                if !paired {
                    self.hub
                        .own
                        .waiting
                        .disconnected(self.core.device_id(), Instant::now().into_std());
                }
            }
            Effect::Paired => self.hub.own.waiting.leave(self.core.device_id()),
            Effect::AskPairingCode { name } => {
                let device_id = self.core.device_id().to_owned();
                if !self.ask_pairing_code(device_id, name, |code| Event::PairingCode(code.ok())) {
                    self.core.handle_pairing_code(None);
                }
            }
            Effect::ToAgent(inbound) => self.hand_to_agent(*inbound),
            Effect::SaveUtterance {
                message_id,
                rate,
                pcm,
            } => {
                let (bytes, hub) = (pcm.len() as u64, self.hub.clone());
                let put = hub.shared.inbox.put("wav", bytes, move |path| {
                    herald_media::wav::write_wav(path, rate, &pcm).map_err(std::io::Error::other)
                });
                let saved = self.draining(put).await.map_err(|err| {
                    warn!(%err, "could not save an utterance");
                    Failed
                });
                self.core.handle_utterance_saved(message_id, saved);
            }
            Effect::RecordLastSeen => self.hub.shared.store.seen(self.core.device_id(), now_ms()),
            Effect::SaveSensors(readings) => {
                let (id, hub) = (self.core.device_id().to_owned(), self.hub.clone());
                let merge = hub
                    .shared
                    .store
                    .run(move |store| store.merge_sensors(&id, &readings));
                if let Err(err) = self.draining(merge).await {
                    warn!(%err, "could not store sensors");
                }
            }
            Effect::Answer { call, answer } => self.answer(call, answer),
            Effect::Count(counted) => self.count(counted),
            Effect::Ota(effect) => self.carry_out_ota(effect).await,
            Effect::OpenSpeech { path, rate, call } => {
                let result = match self.draining(open_speech(&path)).await {
                    Ok(decoder) => self.play(Feed::file(decoder), rate).await,
                    Err(err) => Err(cannot_play(&path, &err)),
                };
                self.answer(call, done(result).map_err(RequestError::from));
            }
            Effect::BeginSpeech {
                stream,
                rate,
                format,
                turn,
            } => {
                // Without a connection the core has already let the stream go.
                let _ = self
                    .begin_speech(Feed::new(format), stream, rate, turn)
                    .await;
            }
            Effect::FeedSpeech {
                stream,
                input,
                call,
            } => {
                let Some(reply) = self
                    .waiting
                    .take(call)
                    .and_then(session::Answering::into_port)
                else {
                    return;
                };
                let input = match input {
                    SpeechChunk::Pcm(pcm) => SpeechInput::Pcm(pcm),
                    SpeechChunk::File(path) => match self.draining(open_speech(&path)).await {
                        Ok(decoder) => SpeechInput::File(decoder),
                        Err(err) => {
                            let failed = RequestError::from(cannot_play(&path, &err));
                            let _ = reply.send(Err(failed));
                            return;
                        }
                    },
                };
                match self.parts.playback.as_ref().filter(|p| p.stream == stream) {
                    Some(playing) => playing.feed.offer(input, reply),
                    // It stopped while the file opened.
                    None => {
                        let _ = reply.send(Ok(Response::Dropped { dropped: true }));
                    }
                }
            }
            Effect::EndSpeech { stream } => {
                if let Some(playing) = self.parts.playback.as_ref().filter(|p| p.stream == stream) {
                    playing.feed.end();
                }
            }
            Effect::StopSpeech { stream } => {
                if let Some(stopped) = self.parts.playback.take_if(|p| p.stream == stream) {
                    self.stop_playback(stopped).await;
                }
                self.core.handle_speech_stopped();
            }
            Effect::ShowImage(job) => self.show_image(*job),
            Effect::Notify(note) => {
                let shared = &self.hub.shared;
                if let Some(person) = shared.owner_of_gadget(self.core.device_id()).await {
                    shared
                        .notifications
                        .notify(&shared.store, &person, &note)
                        .await;
                }
            }
            Effect::PlayCue { cue, rate } => {
                // Herald's own sound, not the turn's speech: it names no turn. If the
                // device went meanwhile, nobody misses it.
                if let Some((stream, _turn)) = self.core.start_speech() {
                    let feed = Feed::clip(cue.render(CUE_RATE), CUE_RATE);
                    let _ = self.begin_speech(feed, stream, rate, None).await;
                }
            }
        }
    }

    async fn carry_out_ota(&mut self, effect: OtaEffect) {
        let (hub, id) = (self.hub.clone(), self.core.device_id().to_owned());
        let store = &hub.shared.store;
        match effect {
            OtaEffect::Lookup => {
                let unfinished = &self.hub.own.unfinished_updates;
                let found = if unfinished.may_have(&id) {
                    store.run(move |store| store.ota_update(&id)).await
                } else {
                    Ok(None)
                };
                let running = |update: &OtaUpdate| update.progress.status.is_active();
                if matches!(&found, Ok(update) if !update.as_ref().is_some_and(running)) {
                    unfinished.settled(self.core.device_id());
                }
                let found = found.map_err(|err| StoreFailed(err.to_string()));
                self.core.handle_ota_found(found);
            }
            OtaEffect::Prepare { file } => {
                let key = match store.run(move |store| store.device(&id)).await {
                    Ok(Some(device)) => match tokio::fs::File::open(&file).await {
                        Ok(image) => {
                            self.parts.image = Some(Box::new(image));
                            Ok(device.key)
                        }
                        Err(err) => Err(NotPrepared::Image(err.to_string())),
                    },
                    Ok(None) => Err(NotPrepared::Forgotten),
                    Err(err) => Err(StoreFailed(err.to_string()).into()),
                };
                self.core
                    .handle_ota_prepared(key, Instant::now().into_std());
            }
            OtaEffect::Save {
                id: update,
                progress,
            } => {
                let save =
                    store.run(move |store| store.save_ota_progress(update, &progress, now_ms()));
                let saved = self.draining(save).await;
                if let Err(err) = saved {
                    warn!(%err, device = %id, "could not record firmware update progress");
                }
            }
            OtaEffect::Remove(file) => ota::remove_staged(&file).await,
            OtaEffect::Stage { image, call } => {
                let file = image.file.clone();
                let stage = store.run(move |store| store.stage_ota(&id, &image, now_ms()));
                let stored = self.draining(stage).await;
                if let Ok(Some(_)) = &stored {
                    self.hub
                        .own
                        .unfinished_updates
                        .started(self.core.device_id());
                }
                let stored = stored.map_err(|err| StoreFailed(err.to_string()));
                self.core.handle_ota_staged(file, stored, call);
            }
            OtaEffect::Discard(file) => ota::discard_staged(store, &id, &file).await,
            OtaEffect::Target { call, answer } => {
                if let Some(Answering::OtaTarget(reply)) = self.waiting.take(call) {
                    let _ = reply.send(answer);
                }
            }
            OtaEffect::Started { call, answer } => {
                if let Some(Answering::OtaStart(reply)) = self.waiting.take(call) {
                    let _ = reply.send(answer);
                }
            }
        }
    }

    /// Send the next firmware frame into the outbox room reserved for it, read from the
    /// staged image.
    async fn send_firmware(&mut self, room: Room) {
        let Some(chunk) = self.core.poll_ota_chunk() else {
            return;
        };
        let mut payload = vec![0; chunk.len];
        let read = match &mut self.parts.image {
            Some(image) => image.read_exact(&mut payload).await.map(drop),
            None => Err(std::io::Error::other("it is not open")),
        };
        match read {
            Ok(()) => room.send(Outgoing::Binary(proto::encode_frame(
                chunk.header,
                &payload,
            ))),
            // The staged copy is gone or shorter than recorded: no attempt can succeed.
            Err(err) => self.core.handle_ota_unreadable(err.to_string()),
        }
    }

    /// Start a speech file the core agreed to: a new stream replaces the one playing.
    async fn play(&mut self, feed: Feed, rate: u32) -> Result<(), DeliveryError> {
        let Some((stream, turn)) = self.core.start_speech() else {
            return Err(DeliveryError::Offline(self.core.chat()));
        };
        if !self.begin_speech(feed, stream, rate, turn).await {
            return Err(DeliveryError::Offline(self.core.chat()));
        }
        Ok(())
    }

    /// Start speech stream `stream`; false when the device is gone.
    async fn begin_speech(
        &mut self,
        feed: Feed,
        stream: u8,
        rate: u32,
        turn: Option<String>,
    ) -> bool {
        // The stream it replaces ends first, its abort before the new start.
        if let Some(replaced) = self.parts.playback.take() {
            self.stop_playback(replaced).await;
        }
        let Some(conn) = self.conns.current() else {
            return false;
        };
        self.parts.playback = Some(Box::new(Playback::start(
            feed,
            stream,
            rate,
            turn,
            (conn.id, conn.queue()),
            self.hub.shared.metrics.clone(),
        )));
        true
    }

    /// `work`, while the connection's outbox keeps draining: speech another task paces
    /// must not wait behind a store write or a file opening. A write that fails ends the
    /// draining and, for a connection the core still holds, loses it as the run loop
    /// would.
    async fn draining<T>(&mut self, work: impl Future<Output = T>) -> T {
        let metrics = &self.hub.shared.metrics;
        let Some(conn) = self.conns.current() else {
            return work.await;
        };
        let id = conn.id;
        tokio::pin!(work);
        tokio::select! {
            done = &mut work => return done,
            () = conn.keep_writing(metrics) => {}
        }
        if self.core.is_current(id) {
            self.lost();
        }
        work.await
    }

    /// Stop `playback`; the device hears the abort if it heard the start, unless the
    /// core has let its connection go meanwhile (the close ends the speech).
    async fn stop_playback(&mut self, playback: Box<Playback>) {
        let conn = playback.conn;
        if let Some(abort) = playback.stop().await {
            if self.core.is_current(conn) {
                self.send(conn, abort);
            }
        }
    }

    /// Fit a picture into the device's image box and send its frames; the work runs on
    /// a task of its own so the session keeps serving the device meanwhile, and the
    /// outcome comes back through the mailbox (the core sends the caption after it).
    fn show_image(&mut self, job: ImageJob) {
        let ImageJob {
            path,
            image_box,
            stream,
            caption,
            turn,
            call,
        } = job;
        let Some(outbox) = self.conns.current().map(|conn| conn.queue()) else {
            let offline = DeliveryError::Offline(self.core.chat());
            return self.answer(call, Err(offline.into()));
        };
        self.beside(async move {
            let sent = image::send(&path, image_box, stream, &outbox)
                .await
                .map(drop)
                .map_err(|err| match err {
                    image::PictureError::Gone => PictureNotSent::Gone,
                    unusable => PictureNotSent::Unusable(unusable.to_string()),
                });
            let sent = ImageSent {
                call,
                caption,
                turn,
                sent,
            };
            Event::ImageSent(Box::new(sent))
        });
    }
}

fn cannot_play(path: &std::path::Path, err: &herald_media::audio::AudioError) -> DeliveryError {
    DeliveryError::Failed(format!("cannot play {}: {err}", path.display()))
}

/// The wall clock as a ping carries it.
fn unix_ms() -> u64 {
    u64::try_from(now_ms()).unwrap_or(0)
}

#[cfg(test)]
mod tests;
