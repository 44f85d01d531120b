//! The simulated board: the device core driven by tokio, with a real WebSocket, a clock,
//! a microphone and a speaker.
//!
//! One task owns the [`Device`] and everything it touches, and waits on four things at
//! once: the core's next deadline, the connection, a request from a frontend (the script or
//! the terminal) and the microphone's next 40 ms frame. After each it carries out the
//! core's actions in order, publishes a [`Snapshot`] on a watch channel when something
//! shown changed, and only then answers the requests it took, so a frontend that got its
//! answer already sees what the request did. Frontends never touch the core: the core sees
//! one event at a time, in one order, as on the board.
//!
//! A restart (after an update is installed, or a rollback) builds a new `Device` on the same
//! [`Flash`], as a power cycle would: the same key, the firmware the flash boots. The
//! simulator's flash is a state directory (`SimHost`); a test brings its own, and watches
//! the protocol through [`Settings::heard`].

//!
//! This file owns the task ([`start`] and the loop); [`frontend`] holds what a frontend
//! holds (commands, the handle, the snapshot) and [`link`] the WebSocket to the server.

mod frontend;
mod link;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use herald_device::{
    Action, Boot, Button, Device, DeviceConfig, Event, Host, Instant, Mode, Phase,
};
use herald_gadget_proto::limits::{AUDIO_FRAME_MS, KEY_LEN};
use herald_gadget_proto::{ActionSpec, ErrorCode};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Interval, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message;

use super::audio::{Mic, Speaker};
use super::render::{Replies, Shown};
use frontend::{Answer, Request};
pub use frontend::{Command, Handle, Snapshot};
pub use link::client_request;
use link::{Link, LinkEvent, Sent};

/// The application action the simulator registers, as the spec's example board does.
pub const LED_ACTION: &str = "led.set";
/// Longest LED colour name accepted.
const MAX_COLOR: usize = 32;
/// Screens remembered for `wait`.
const ENTERED_KEPT: usize = 64;
/// Close code the board uses when it goes away on its own (restart, power off).
const GOING_AWAY: u16 = 1001;
/// The real time an offline board waits between attempts with [`Settings::fast_reconnect`]:
/// short, yet no busy loop while the server is down.
const FAST_RETRY: Duration = Duration::from_millis(20);

/// What the board keeps across power cycles, beside the [`Host`] services the core calls.
pub trait Flash: Host + Send + 'static {
    /// Powers on, switching first to an image installed for the next boot: what the core
    /// is told, and the firmware version that runs.
    fn boot(&mut self) -> anyhow::Result<(Boot, String)>;
    /// Keeps the device key the core made.
    fn store_key(&mut self, key: &[u8; KEY_LEN]) -> anyhow::Result<()>;
    /// The running firmware reached a server: keep it.
    fn confirm(&mut self) -> anyhow::Result<()>;
    /// The running firmware failed its probation: the next boot runs the one before.
    /// Returns that version.
    fn rollback(&mut self) -> anyhow::Result<String>;
    /// Whether the running firmware waits for its first `welcome` to be kept.
    fn on_probation(&self) -> bool;
}

/// How to run the board.
pub struct Settings {
    pub url: String,
    pub config: DeviceConfig,
    /// What the microphone hears when TALK is pressed (silence when `None`).
    pub mic: Option<Vec<i16>>,
    pub speaker: PathBuf,
    /// Print every change of the screen, and every note, to standard output.
    pub echo: bool,
    /// Register the simulator's own `led.set` action.
    pub led_action: bool,
    /// Further application actions, and where their invocations go (bounded: an
    /// invocation that finds the channel full fails at once). They are answered with
    /// [`Command::Complete`].
    pub actions: Vec<ActionSpec>,
    pub invocations: Option<mpsc::Sender<Invocation>>,
    /// Real sound in and out, in place of `mic` and the `speaker` file.
    pub live: Option<Box<dyn LiveSound>>,
    /// Offline, try again after [`FAST_RETRY`] instead of the core's backoff, with the
    /// core's clock moved on by the wait skipped: tests that kill the server find the
    /// restarted one at once. On probation the board waits for real, so that the
    /// probation does not run out meanwhile.
    pub fast_reconnect: bool,
    /// Sees each text frame from the server before the core does (tests watch the
    /// protocol with it).
    pub heard: Option<Heard>,
}

/// What [`Settings::heard`] calls with each text frame.
pub type Heard = Box<dyn FnMut(&str) + Send>;

/// A microphone and a speaker that are really there (a sound card).
pub trait LiveSound: Send {
    /// Starts the microphone: 40 ms frames at `rate` arrive on the channel, and an
    /// error (or the channel closing) when it fails.
    fn start_mic(&mut self, rate: u32) -> mpsc::Receiver<Result<Vec<i16>, String>>;
    fn stop_mic(&mut self);
    /// Queues samples at `rate` after those queued before.
    fn play(&mut self, rate: u32, samples: &[i16]);
    /// Drops what is still queued.
    fn stop_playback(&mut self);
}

/// An application action of [`Settings::actions`] the server invoked.
#[derive(Debug)]
pub struct Invocation {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// Boots the board on `flash` and starts its task; the task ends after [`Command::Quit`],
/// when every [`Handle`] is gone, or with an error when the server refuses the board for
/// good.
pub fn start<F: Flash>(
    settings: Settings,
    flash: F,
) -> anyhow::Result<(Handle, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let device = boot(&settings, flash, Instant::from_millis(0))?;
    let shown = Shown::new(&device.view(), None);
    let snapshot = Snapshot {
        entered: VecDeque::from([(1, shown.screen)]),
        shown,
        device_id: device.identity().device_id().to_string(),
        firmware: device.config().firmware.clone(),
        phase: device.phase(),
        paired: device.is_paired(),
        volume: device.volume(),
        brightness: device.brightness(),
        led: None,
        recording: false,
        note: None,
        replies: VecDeque::new(),
    };
    let (publish, snapshot) = watch::channel(snapshot);
    let (requests, inbox) = mpsc::channel(16);
    let handle = Handle {
        requests,
        snapshot,
        config: settings.config.clone(),
    };
    let mut runner = Runner {
        speaker: Speaker::new(settings.speaker.clone()),
        settings,
        device,
        link: Link::Down,
        origin: tokio::time::Instant::now(),
        skipped: 0,
        restart_due: false,
        inbox,
        publish,
        printed: String::new(),
        redraw: true,
        answers: Vec::new(),
        listening: None,
        say: None,
        led: None,
        note: None,
        link_note: None,
        replies: Replies::default(),
    };
    let config = runner.device.config();
    runner.note(format!(
        "device {} ({}, firmware {}) for {}",
        runner.device.identity().device_id(),
        config.board,
        config.firmware,
        runner.settings.url
    ));
    Ok((handle, tokio::spawn(runner.run())))
}

/// Powers the board on from its flash.
fn boot<F: Flash>(settings: &Settings, mut flash: F, now: Instant) -> anyhow::Result<Device<F>> {
    let (boot, firmware) = flash.boot()?;
    let config = DeviceConfig {
        firmware,
        ..settings.config.clone()
    };
    let mut device = Device::new(config, boot, flash, now);
    if settings.led_action {
        device.register_action(ActionSpec {
            name: LED_ACTION.to_owned(),
            description: Some("Set the colour of the LED.".to_owned()),
            params: Some(json!({
                "type": "object",
                "properties": {"color": {"type": "string"}},
                "required": ["color"],
            })),
        })?;
    }
    for spec in &settings.actions {
        device.register_action(spec.clone())?;
    }
    Ok(device)
}

fn has_button(config: &DeviceConfig, button: Button) -> Result<(), String> {
    if config.has(button) {
        Ok(())
    } else {
        Err(format!("this board has no {} button", button.name()))
    }
}

/// The microphone on: a clip and its 40 ms clock, or a live one.
enum Listening {
    Clip { mic: Mic, ticker: Interval },
    Live(mpsc::Receiver<Result<Vec<i16>, String>>),
}

/// A [`Command::Say`] under way.
struct Saying {
    clip: Option<Vec<i16>>,
    done: oneshot::Sender<Answer>,
}

struct Runner<F: Flash> {
    settings: Settings,
    device: Device<F>,
    link: Link,
    origin: tokio::time::Instant,
    /// Milliseconds of backoff skipped with [`Settings::fast_reconnect`].
    skipped: u64,
    /// The core asked for a restart; the rest of its actions die with it.
    restart_due: bool,
    inbox: mpsc::Receiver<Request>,
    publish: watch::Sender<Snapshot>,
    /// The summary last printed, in echo mode.
    printed: String,
    /// Something shown changed since the last snapshot.
    redraw: bool,
    /// Requests done, answered once the snapshot shows what they did.
    answers: Vec<(oneshot::Sender<Answer>, Answer)>,
    listening: Option<Listening>,
    say: Option<Saying>,
    speaker: Speaker,
    led: Option<String>,
    note: Option<String>,
    /// The note said when the connection last ended: gone once it is back.
    link_note: Option<String>,
    replies: Replies,
}

enum Wake {
    /// The core's deadline came, or (skipping a backoff) the clock is to jump to it.
    Deadline(Option<Instant>),
    Link(LinkEvent),
    Mic,
    LiveMic(Option<Result<Vec<i16>, String>>),
    Request(Option<Request>),
}

impl<F: Flash> Runner<F> {
    async fn run(mut self) -> anyhow::Result<()> {
        let mut quit = None;
        let result = loop {
            if let Err(e) = self.perform().await {
                break Err(e);
            }
            if std::mem::take(&mut self.restart_due) {
                // The old core's queued actions go with it; the new one's come next.
                self = self.restart().await?;
                continue;
            }
            self.publish();
            for (done, answer) in self.answers.drain(..) {
                let _ = done.send(answer);
            }
            let wake = self.wait().await;
            if let Wake::Deadline(Some(at)) = wake {
                let ahead = at.saturating_duration_since(self.now()).as_millis();
                self.skipped += u64::try_from(ahead).unwrap_or(0);
            }
            let now = self.now();
            match wake {
                Wake::Deadline(_) => self.device.handle_timeout(now),
                Wake::Link(event) => {
                    if let Err(e) = self.on_link(event, now) {
                        break Err(e);
                    }
                }
                Wake::Mic => self.on_mic(now),
                Wake::LiveMic(frame) => self.on_live_mic(frame, now),
                Wake::Request(None) => break Ok(()),
                Wake::Request(Some(Request {
                    command: Command::Quit,
                    done,
                })) => {
                    quit = Some(done);
                    break Ok(());
                }
                Wake::Request(Some(request)) => self.on_request(request, now),
            }
        };
        self.link.close(GOING_AWAY, "power off").await;
        self.save_speaker();
        if let Some(done) = quit {
            let _ = done.send(Ok(()));
        }
        result
    }

    fn now(&self) -> Instant {
        let real = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        Instant::from_millis(real.saturating_add(self.skipped))
    }

    /// Waits for the next thing to happen.
    async fn wait(&mut self) -> Wake {
        let next = self.device.next_deadline();
        let skip = self.settings.fast_reconnect
            && self.device.phase() == Phase::Offline
            && !self.device.host().on_probation();
        let deadline = next.map(|d| {
            let at =
                self.origin + Duration::from_millis(d.as_millis().saturating_sub(self.skipped));
            if skip {
                at.min(tokio::time::Instant::now() + FAST_RETRY)
            } else {
                at
            }
        });
        let jump = next.filter(|_| skip);
        let Runner {
            link,
            listening,
            inbox,
            ..
        } = self;
        let timer = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let mic = async {
            match listening {
                Some(Listening::Clip { ticker, .. }) => {
                    ticker.tick().await;
                    Wake::Mic
                }
                Some(Listening::Live(frames)) => Wake::LiveMic(frames.recv().await),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = timer => Wake::Deadline(jump),
            event = link.next() => Wake::Link(event),
            wake = mic => wake,
            request = inbox.recv() => Wake::Request(request),
        }
    }

    /// Carries out the core's actions, in order, until it has none left.
    async fn perform(&mut self) -> anyhow::Result<()> {
        loop {
            while let Some(action) = self.device.poll_action() {
                self.act(action).await?;
                if self.restart_due {
                    return Ok(());
                }
            }
            // A Say whose recording did not start, or stopped early, lets TALK go.
            if self.listening.is_some() {
                break;
            }
            let Some(say) = self.say.take() else { break };
            let now = self.now();
            self.device.handle(Event::ButtonUp(Button::Talk), now);
            let screen = self.device.screen().name();
            let error = format!("the device stopped listening before the clip ended ({screen})");
            self.answers.push((say.done, Err(error)));
        }
        if self.device.mode() != Mode::Responding {
            self.save_speaker();
        }
        Ok(())
    }

    async fn act(&mut self, action: Action) -> anyhow::Result<()> {
        match action {
            Action::Connect => self.link.connect(&self.settings.url),
            Action::Close { code, reason } => self.link.close(code, reason).await,
            Action::Send(message) => self.transmit(Message::text(message.encode())).await,
            Action::SendBinary(bytes) => self.transmit(Message::binary(bytes)).await,
            Action::Redraw => self.redraw = true,
            Action::StartMic => self.start_mic(),
            Action::StopMic => {
                if let Some(Listening::Live(_)) = self.listening.take() {
                    if let Some(live) = self.settings.live.as_mut() {
                        live.stop_mic();
                    }
                }
                self.redraw = true;
            }
            Action::Play { rate, samples } => match self.settings.live.as_mut() {
                Some(live) => live.play(rate, &samples),
                None => self.speaker.play(rate, &samples),
            },
            Action::StopPlayback => {
                if let Some(live) = self.settings.live.as_mut() {
                    live.stop_playback();
                }
                self.note("speaker stopped");
            }
            Action::SetVolume(percent) => self.note(format!("volume {percent}%")),
            Action::SetBrightness(percent) => self.note(format!("brightness {percent}%")),
            Action::StoreKey(key) => {
                if let Err(e) = self.device.host_mut().store_key(&key) {
                    self.note(format!("{e:#}"));
                }
            }
            Action::Invoke { id, name, args } => self.invoke(&id, &name, &args),
            Action::ConfirmFirmware => {
                self.device.host_mut().confirm()?;
                let version = self.device.config().firmware.clone();
                self.note(format!("firmware {version} confirmed"));
            }
            Action::Rollback => {
                let version = self.device.host_mut().rollback()?;
                self.note(format!("firmware failed its probation; back to {version}"));
                self.restart_due = true;
            }
            Action::Restart => self.restart_due = true,
        }
        Ok(())
    }

    async fn transmit(&mut self, message: Message) {
        if self.link.send(message).await == Sent::Broken {
            self.note("the connection broke while sending");
            let now = self.now();
            self.device.handle(
                Event::Closed {
                    code: None,
                    reason: "",
                },
                now,
            );
        }
    }

    /// A power cycle: the connection drops and the board boots what its flash boots.
    async fn restart(mut self) -> anyhow::Result<Self> {
        self.link.close(GOING_AWAY, "restart").await;
        self.listening = None;
        if let Some(say) = self.say.take() {
            self.answers
                .push((say.done, Err("the device restarted".to_owned())));
        }
        self.save_speaker();
        let now = self.now();
        self.device = boot(&self.settings, self.device.into_host(), now)?;
        let config = self.device.config();
        let probation = if self.device.host().on_probation() {
            " on probation"
        } else {
            ""
        };
        self.note(format!(
            "restarted into firmware {}{probation}",
            config.firmware
        ));
        self.redraw = true;
        Ok(self)
    }

    fn start_mic(&mut self) {
        let Some(rate) = self.device.config().mic_rate else {
            return;
        };
        if self.say.is_none() {
            if let Some(live) = self.settings.live.as_mut() {
                self.listening = Some(Listening::Live(live.start_mic(rate)));
                self.redraw = true;
                return;
            }
        }
        let clip = match self.say.as_mut() {
            Some(say) => say.clip.take(),
            None => self.settings.mic.clone(),
        };
        let period = Duration::from_millis(u64::from(AUDIO_FRAME_MS));
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        // Catch up after a stall, so the recording keeps the clip's length in real time.
        ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
        self.listening = Some(Listening::Clip {
            mic: Mic::new(clip.unwrap_or_default(), rate),
            ticker,
        });
        self.redraw = true;
    }

    /// The next 40 ms of sound; a Say lets TALK go when its clip has been heard.
    fn on_mic(&mut self, now: Instant) {
        let Some(Listening::Clip { mic, .. }) = self.listening.as_mut() else {
            return;
        };
        let frame = mic.next_frame();
        let finished = mic.finished();
        self.device.handle(Event::MicSamples(&frame), now);
        if finished && self.listening.is_some() {
            if let Some(say) = self.say.take() {
                self.device.handle(Event::ButtonUp(Button::Talk), now);
                self.answers.push((say.done, Ok(())));
            }
        }
    }

    /// What the live microphone heard. A microphone that failed cancels the recording
    /// (a short CANCEL), so what was not heard is never sent as speech.
    fn on_live_mic(&mut self, frame: Option<Result<Vec<i16>, String>>, now: Instant) {
        match frame {
            Some(Ok(samples)) => self.device.handle(Event::MicSamples(&samples), now),
            failed => {
                let why = match failed {
                    Some(Err(why)) => why,
                    _ => "it stopped".to_owned(),
                };
                if let Some(live) = self.settings.live.as_mut() {
                    live.stop_mic();
                }
                self.listening = None;
                self.note(format!(
                    "the microphone failed ({why}): recording cancelled"
                ));
                self.device.handle(Event::ButtonDown(Button::Cancel), now);
                self.device.handle(Event::ButtonUp(Button::Cancel), now);
            }
        }
    }

    /// Runs a command; it is answered after the next snapshot, a Say when it ends.
    fn on_request(&mut self, Request { command, done }: Request, now: Instant) {
        let config = self.device.config();
        let answer = match command {
            Command::Press(button) => has_button(config, button).map(|()| {
                self.device.handle(Event::ButtonDown(button), now);
            }),
            Command::Release(button) => has_button(config, button).map(|()| {
                self.device.handle(Event::ButtonUp(button), now);
            }),
            Command::Text(text) => self.device.send_text(&text, now).map_err(|e| e.to_string()),
            Command::Event { name, data, notify } => self
                .device
                .emit_event(&name, data, notify)
                .map_err(|e| e.to_string()),
            Command::Complete { id, result } => {
                // Fails only for an action already timed out, which the core answered.
                let _ = self.device.complete_action(&id, result);
                Ok(())
            }
            Command::Say(_) if config.mic_rate.is_none() => {
                Err("this board has no microphone".to_owned())
            }
            Command::Say(_) if self.say.is_some() || self.listening.is_some() => {
                Err("TALK is already held".to_owned())
            }
            Command::Say(clip) => {
                self.say = Some(Saying {
                    clip: Some(clip),
                    done,
                });
                self.device.handle(Event::ButtonDown(Button::Talk), now);
                return;
            }
            Command::Quit => Ok(()),
        };
        self.answers.push((done, answer));
    }

    /// Hands the link's news to the core; an error stops the simulator, when retrying
    /// cannot help.
    fn on_link(&mut self, event: LinkEvent, now: Instant) -> anyhow::Result<()> {
        if let LinkEvent::Closed {
            fatal: Some(why), ..
        } = &event
        {
            return Err(anyhow::anyhow!(why.clone()));
        }
        match event {
            LinkEvent::Connected => {
                if self.link_note.is_some() && self.note == self.link_note.take() {
                    self.note = None;
                    self.redraw = true;
                }
                self.device.handle(Event::Connected, now);
            }
            LinkEvent::Text(text) => {
                if let Some(heard) = self.settings.heard.as_mut() {
                    heard(text.as_str());
                }
                self.device.handle(Event::Text(text.as_str()), now);
            }
            LinkEvent::Binary(bytes) => self.device.handle(Event::Binary(&bytes), now),
            LinkEvent::Closed {
                code,
                reason,
                error,
                ..
            } => {
                match (&error, code) {
                    (Some(error), _) => self.note(format!("connection: {error}")),
                    (None, Some(code)) => self.note(format!("server closed: {code} {reason}")),
                    (None, None) => self.note("connection lost"),
                }
                self.link_note.clone_from(&self.note);
                self.device.handle(
                    Event::Closed {
                        code,
                        reason: &reason,
                    },
                    now,
                );
                // The core shows its setup screen for a refusal retrying cannot mend;
                // a simulator has nobody to read it and stops instead.
                if let Some(code) = self.device.setup_needed() {
                    return Err(anyhow::anyhow!(setup_message(code)));
                }
            }
        }
        Ok(())
    }

    /// The application actions: `led.set {color}`, or one of [`Settings::actions`].
    fn invoke(&mut self, id: &str, name: &str, args: &Value) {
        if self.settings.actions.iter().any(|a| a.name == name) {
            if let Some(to) = &self.settings.invocations {
                let invocation = Invocation {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    args: args.clone(),
                };
                if to.try_send(invocation).is_ok() {
                    return;
                }
            }
            let _ = self
                .device
                .complete_action(id, Err(format!("{name} cannot be run now")));
            return;
        }
        let result = match args.get("color").and_then(Value::as_str) {
            _ if name != LED_ACTION || !self.settings.led_action => {
                Err(format!("unknown action {name}"))
            }
            Some(color) if !color.is_empty() && color.chars().count() <= MAX_COLOR => {
                self.led = Some(color.to_owned());
                self.note(format!("LED {color}"));
                Ok(json!({ "led": color }))
            }
            Some(_) => Err(format!("color must be 1 to {MAX_COLOR} characters")),
            None => Err("color is required".to_owned()),
        };
        // Fails only for an action already timed out, which the core answered itself.
        let _ = self.device.complete_action(id, result);
    }

    fn save_speaker(&mut self) {
        match self.speaker.save() {
            Ok(Some(played)) => {
                let path = self.speaker.path().display().to_string();
                self.note(format!(
                    "played {:.2} s of audio (in {path})",
                    played.as_secs_f64()
                ));
            }
            Ok(None) => {}
            Err(e) => self.note(format!("{e:#}")),
        }
    }

    fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        if self.settings.echo {
            println!("{} * {text}", self.stamp());
        }
        self.note = Some(text);
        self.redraw = true;
    }

    fn stamp(&self) -> String {
        format!("[{:8.3}]", self.origin.elapsed().as_secs_f64())
    }

    /// Publishes what the board shows, and prints it in echo mode when it changed.
    fn publish(&mut self) {
        if !std::mem::take(&mut self.redraw) {
            return;
        }
        let shown = Shown::new(&self.device.view(), Some(&self.publish.borrow().shown));
        let replied = self.replies.observe(&shown);
        if self.settings.echo {
            let summary = shown.summary();
            if summary != self.printed {
                println!("{} {summary}", self.stamp());
                self.printed = summary;
            }
        }
        let device = &self.device;
        let (led, note, recording) = (&self.led, &self.note, self.listening.is_some());
        self.publish.send_modify(|s| {
            if s.entered.back().map(|(_, screen)| *screen) != Some(shown.screen) {
                let n = s.latest() + 1;
                s.entered.push_back((n, shown.screen));
                if s.entered.len() > ENTERED_KEPT {
                    s.entered.pop_front();
                }
            }
            s.shown = shown;
            s.device_id = device.identity().device_id().to_string();
            s.firmware.clone_from(&device.config().firmware);
            s.phase = device.phase();
            s.paired = device.is_paired();
            s.volume = device.volume();
            s.brightness = device.brightness();
            s.led.clone_from(led);
            s.recording = recording;
            s.note.clone_from(note);
            if let Some(reply) = replied {
                reply.apply(&mut s.replies);
            }
        });
    }
}

/// What to do about a refusal the device core needs setup for.
fn setup_message(code: ErrorCode) -> String {
    match code {
        ErrorCode::BadToken => {
            "the server refused the access token: pass --token (its GADGET_ACCESS_TOKEN)".into()
        }
        ErrorCode::AuthFailed => "the server does not accept this device's key (enrolled \
                                  elsewhere?): `herald forget ID` on the server, or another \
                                  --state-dir"
            .into(),
        code => format!(
            "the server refused the gadget protocol ({}): is it a gadget endpoint?",
            code.as_str()
        ),
    }
}
