//! The device state machine.
//!
//! [`Device`] has the four kinds of methods of a sans-IO protocol object:
//! - inputs: [`Device::handle`] for an [`Event`], [`Device::handle_timeout`] when the
//!   deadline from [`Device::next_deadline`] has come;
//! - commands from the application: [`Device::send_text`], [`Device::set_sensor`],
//!   [`Device::emit_event`], [`Device::register_action`], [`Device::complete_action`];
//! - outputs: [`Device::poll_action`] until it returns `None`, after every input and
//!   command;
//! - getters: [`Device::phase`], [`Device::mode`], [`Device::screen`], [`Device::view`].
//!
//! Every timer is a deadline stored next to the state it belongs to; `next_deadline` is
//! their minimum, so a host sleeps until then or until the next event, and a test with a
//! fake clock jumps from deadline to deadline. `handle` first runs the timers already due,
//! so a host that is late calling `handle_timeout` still sees events in time order.
//!
//! The implementation is split by concern, one `impl` block per submodule: `link`
//! (connection, handshake, heartbeat, backoff, firmware probation), `conversation`
//! (server messages, turns, actions, telemetry), `input` (buttons, mic) and `screen`
//! (overlays and the render model).

mod conversation;
mod input;
mod link;
mod screen;

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use herald_gadget_proto::limits::{KEY_LEN, MAX_TEXT};
use herald_gadget_proto::{ActionSpec, DeviceMessage, ErrorCode, Pairing};
use serde_json::{Map, Value};

use crate::config::DeviceConfig;
use crate::host::Host;
use crate::identity::Identity;
use crate::io::{Action, Event};
use crate::mic::Recording;
use crate::ota::{OtaProgress, OtaReceiver};
use crate::playback::{PlaybackStats, Player};
use crate::text::Pager;
use crate::time::{earliest, Instant};
use crate::view::Phase;
use input::CancelHold;

use conversation::{Chat, Invoked};
pub use conversation::{BRIGHTNESS_ACTION, VOLUME_ACTION};
use input::Press;
use link::Backoff;
use screen::{CardShown, ImageShown, IncomingImage, NoticeShown, PromptShown};

/// Least time between two `state` messages; readings in between are merged and sent
/// together when it has passed.
pub const STATE_INTERVAL_SECS: u64 = 10;
/// How long the application has to answer an [`Action::Invoke`] before the core answers
/// for it with an error, inside the server's 18 s.
pub const ACTION_ANSWER_SECS: u64 = 15;
/// Volume and brightness at boot, in percent.
pub const DEFAULT_LEVEL: u8 = 80;

/// What the host knows at boot.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Boot {
    /// The stored device key; `None` on first boot, when the core makes one and asks the
    /// host to store it.
    pub key: Option<[u8; KEY_LEN]>,
    /// Whether this firmware was just installed and is not yet confirmed.
    pub probation: bool,
}

impl core::fmt::Debug for Boot {
    // The key is a secret.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Boot")
            .field("key", &self.key.map(|_| "<set>"))
            .field("probation", &self.probation)
            .finish()
    }
}

/// Why an application command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The device is not online.
    #[error("not connected to the server")]
    Offline,
    /// The text is empty.
    #[error("the message is empty")]
    Empty,
    /// The text is longer than the protocol allows.
    #[error("the message is longer than {MAX_TEXT} characters")]
    TooLong,
    /// No invoked action has this id (answered, timed out or never invoked).
    #[error("no pending action has this id")]
    UnknownAction,
    /// The name belongs to a built-in action.
    #[error("the name belongs to a built-in action")]
    ReservedName,
}

/// Counters for a host to show or log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames from the server that did not decode and were ignored.
    pub bad_frames: u32,
    /// Images refused for their format or size.
    pub refused_images: u32,
    /// The speaker's jitter buffer.
    pub playback: PlaybackStats,
}

/// The device core.
pub struct Device<H: Host> {
    config: DeviceConfig,
    host: H,
    identity: Identity,
    app_actions: Vec<ActionSpec>,
    actions: VecDeque<Action>,
    dirty: bool,
    stats: Stats,

    // Connection.
    phase: Phase,
    boot_at: Option<Instant>,
    retry_at: Option<Instant>,
    /// Connect or handshake timeout, whichever phase is current.
    phase_deadline: Option<Instant>,
    backoff: Backoff,
    setup_needed: Option<ErrorCode>,
    /// The `error` code the server sent on this connection, explaining its close.
    refused: Option<ErrorCode>,
    online_since: Option<Instant>,
    heartbeat: Duration,
    last_inbound: Instant,
    next_ping: Option<Instant>,
    paired: bool,
    pairing: Option<Pairing>,

    // Firmware life cycle.
    probation_until: Option<Instant>,
    restart_at: Option<Instant>,
    ota: OtaReceiver,

    // Conversation.
    chat: Chat,
    recording: Option<Recording>,
    player: Player,
    presses: [Option<Press>; 4],
    /// CANCEL held down: when the hold starts a new conversation, and its countdown.
    cancel_hold: Option<CancelHold>,
    next_id: u32,
    next_stream: u8,
    invoked: Vec<Invoked>,
    volume: u8,
    brightness: u8,

    // Telemetry.
    sensors: Map<String, Value>,
    pending_sensors: Map<String, Value>,
    last_state_at: Option<Instant>,
    state_flush_at: Option<Instant>,

    // Screen.
    prompt: Option<PromptShown>,
    card: Option<CardShown>,
    image: Option<ImageShown>,
    /// Whether the image arrived after the card, so it is the one on top.
    image_on_top: bool,
    incoming_image: Option<IncomingImage>,
    notice: Option<NoticeShown>,
}

impl<H: Host> Device<H> {
    /// A device that boots at `now`. On first boot (`boot.key` is `None`) it makes its key
    /// and queues [`Action::StoreKey`]; the first [`Action::Redraw`] is queued too.
    pub fn new(config: DeviceConfig, boot: Boot, mut host: H, now: Instant) -> Self {
        let mut actions = VecDeque::new();
        let identity = match boot.key {
            Some(key) => Identity::from_key(key),
            None => {
                let identity = Identity::generate(&mut host);
                actions.push_back(Action::StoreKey(*identity.key()));
                identity
            }
        };
        actions.push_back(Action::Redraw);
        let (cols, rows) = screen::text_geometry(&config);
        Device {
            host,
            identity,
            app_actions: Vec::new(),
            actions,
            dirty: false,
            stats: Stats::default(),
            phase: Phase::Boot,
            boot_at: Some(now),
            retry_at: None,
            phase_deadline: None,
            backoff: Backoff::default(),
            setup_needed: None,
            refused: None,
            online_since: None,
            heartbeat: link::default_heartbeat(),
            last_inbound: now,
            next_ping: None,
            paired: false,
            pairing: None,
            probation_until: boot.probation.then(|| link::probation_deadline(now)),
            restart_at: None,
            ota: OtaReceiver::default(),
            chat: Chat::new(Pager::new(cols, rows)),
            recording: None,
            player: Player::default(),
            presses: [None; 4],
            cancel_hold: None,
            next_id: 0,
            next_stream: 0,
            invoked: Vec::new(),
            volume: DEFAULT_LEVEL,
            brightness: DEFAULT_LEVEL,
            sensors: Map::new(),
            pending_sensors: Map::new(),
            last_state_at: None,
            state_flush_at: None,
            prompt: None,
            card: None,
            image: None,
            image_on_top: false,
            incoming_image: None,
            notice: None,
            config,
        }
    }

    /// Takes one event. Timers already due at `now` run first.
    pub fn handle(&mut self, event: Event<'_>, now: Instant) {
        self.run_timers(now);
        match event {
            Event::Connected => self.on_connected(now),
            Event::Closed { reason, .. } => self.on_closed(reason, now),
            Event::Text(text) => self.on_text(text, now),
            Event::Binary(bytes) => self.on_binary(bytes, now),
            Event::ButtonDown(button) => self.button_down(button, now),
            Event::ButtonUp(button) => self.button_up(button, now),
            Event::MicSamples(samples) => self.mic_samples(samples),
            Event::Crashed => self.on_crash(),
        }
        self.finish();
    }

    /// Runs every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.run_timers(now);
        self.finish();
    }

    /// The next thing the host must do, in order; call until `None` after every input.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Device::handle_timeout`] must next be called, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        let timers = [
            self.link_deadline(),
            self.restart_at,
            self.recording.as_ref().map(Recording::deadline),
            self.cancel_hold.as_ref().map(CancelHold::deadline),
            self.chat.no_reply_at,
            self.screen_deadline(),
            self.state_flush_at,
            self.player.deadline(),
            self.ota.deadline(),
            self.invoked.iter().map(|i| i.deadline).min(),
        ];
        timers.into_iter().fold(None, earliest)
    }

    /// Where the connection stands.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The device's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The board profile.
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// The host services.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The host services, mutably (a simulator adjusting its fake flash, say).
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    /// The host back: a power cycle keeps the flash and boots a new core on it.
    pub fn into_host(self) -> H {
        self.host
    }

    /// Whether the server reported the device as paired.
    pub fn is_paired(&self) -> bool {
        self.paired
    }

    /// Speaker volume in percent.
    pub fn volume(&self) -> u8 {
        self.volume
    }

    /// Screen brightness in percent.
    pub fn brightness(&self) -> u8 {
        self.brightness
    }

    /// The firmware update in progress, if any.
    pub fn ota_progress(&self) -> Option<OtaProgress<'_>> {
        self.ota.progress()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        Stats {
            playback: self.player.stats(),
            ..self.stats
        }
    }

    fn run_timers(&mut self, now: Instant) {
        self.link_timers(now);
        self.input_timers(now);
        self.conversation_timers(now);
        self.screen_timers(now);
    }

    fn send(&mut self, msg: impl Into<DeviceMessage>) {
        self.actions.push_back(Action::Send(msg.into()));
    }

    fn act(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    /// Marks the view as changed; one [`Action::Redraw`] follows the current input.
    fn touch(&mut self) {
        self.dirty = true;
    }

    fn finish(&mut self) {
        if core::mem::take(&mut self.dirty) {
            self.actions.push_back(Action::Redraw);
        }
    }
}
