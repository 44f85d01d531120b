//! Real sound cards through cpal: ALSA's devices, which include PulseAudio's and
//! PipeWire's (`pulse`, `pipewire`, `default`) where those run.
//!
//! cpal's streams must stay on the thread that made them, so one thread owns the cards:
//! [`CardSound`] sends it commands. The microphone's stream is opened when recording
//! starts and closed when it stops; the speaker's is opened at the first sound and kept,
//! playing silence when nothing is queued. Each card runs at its default configuration
//! and [`Capture`] / [`Render`] convert.
//!
//! Cards fail, and a sound server that dies does not close its streams: they fall
//! silent or report errors without end. So the thread watches each stream, and one
//! that moves no sound for too long (a second for a microphone, five for a speaker,
//! whose buffer may hold two) or that complains for [`STALLED`] without moving any is
//! closed: the recording is cancelled (the runner says why), the speaker is opened
//! again at a later sound. The speaker's complaints go to the log as one line, then at
//! most a summary a minute.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use tokio::sync::mpsc;

use super::{Capture, CardState, Render, SoundHealth, DEVICE_RATE};
use herald_sim::runner::LiveSound;

/// Mic frames waiting for the runner (2.5 s): more means it stopped reading.
const MIC_QUEUE: usize = 64;
/// How often the thread looks at the streams; a gap this long in what the core plays
/// is also a pause, and the resampler is flushed.
const CHECK_EVERY: Duration = Duration::from_millis(150);
/// A stream whose callbacks move no sound this long is dead: a sound server that dies
/// leaves the stream silent, or complaining without end, rather than closed.
const STALLED: Duration = Duration::from_secs(1);
/// A speaker that moves no sound and says nothing is dead after this long.
const SPEAKER_QUIET: Duration = Duration::from_secs(5);
/// A stream may take this long to move its first sound (a sound server waking from
/// its idle suspend, a USB microphone powering up).
const START_GRACE: Duration = Duration::from_secs(3);
/// A failed speaker is opened again at a sound no sooner than this.
const SPEAKER_RETRY: Duration = Duration::from_secs(2);
/// After a card's first log line, at most one more this often.
const COMPLAINTS_EVERY: Duration = Duration::from_secs(60);
/// Most speaker audio queued, in seconds of the card's frames.
const MAX_QUEUED_SECS: usize = 30;
/// Most audio on its way to the sound thread, in samples (10 s at 48 kHz): a thread
/// held up in a card's call costs no more, whatever keeps coming to play.
const MAX_SENT_SAMPLES: usize = 480_000;

/// Why a card could not be found or used.
#[derive(Debug, thiserror::Error)]
pub enum SoundError {
    #[error("the sound system failed: {0}")]
    System(String),
    #[error("no {kind} device {spec:?}; `herald gadget audio-devices` lists them")]
    NotFound { kind: &'static str, spec: String },
    #[error(
        "{spec:?} matches several {kind} devices ({names}); give more of the name or the index"
    )]
    Ambiguous {
        kind: &'static str,
        spec: String,
        names: String,
    },
    #[error("{name}: {message}")]
    Device { name: String, message: String },
    #[error("the microphone failed: {0}")]
    Microphone(String),
}

fn system(e: impl std::fmt::Display) -> SoundError {
    SoundError::System(e.to_string())
}

/// One device as `audio-devices` lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub index: usize,
    /// ALSA's name for it (`pulse`, `hw:CARD=Device,DEV=0`), as a config names it.
    pub id: String,
    /// What it is, for a person.
    pub name: String,
    /// The default input (rate, channels), for a device that records.
    pub input: Option<(u32, u16)>,
    /// The default output (rate, channels), for a device that plays.
    pub output: Option<(u32, u16)>,
}

/// Every device, in the order indexes refer to.
pub fn list() -> Result<Vec<Listed>, SoundError> {
    let host = cpal::default_host();
    let devices = host.devices().map_err(system)?;
    Ok(devices
        .enumerate()
        .map(|(index, device)| Listed {
            index,
            id: alsa_id(&device),
            name: device.to_string(),
            input: device
                .default_input_config()
                .ok()
                .map(|c| (c.sample_rate(), c.channels())),
            output: device
                .default_output_config()
                .ok()
                .map(|c| (c.sample_rate(), c.channels())),
        })
        .collect())
}

/// The device's ALSA name (`pulse`), or empty when it has none.
fn alsa_id(device: &cpal::Device) -> String {
    device.id().map(|id| id.id().to_owned()).unwrap_or_default()
}

/// The device `spec` names: `default`, an index from [`list`], an ALSA name
/// (`pulse`, `hw:CARD=Device,DEV=0`), a whole description, or the one description that
/// contains it (case-insensitive).
fn find(spec: &str, input: bool) -> Result<cpal::Device, SoundError> {
    let kind = if input { "input" } else { "output" };
    let host = cpal::default_host();
    if spec == "default" {
        let device = if input {
            host.default_input_device()
        } else {
            host.default_output_device()
        };
        return device.ok_or_else(|| SoundError::NotFound {
            kind,
            spec: spec.to_owned(),
        });
    }
    let mut devices: Vec<cpal::Device> = host.devices().map_err(system)?.collect();
    if let Ok(index) = spec.parse::<usize>() {
        if index < devices.len() {
            return Ok(devices.swap_remove(index));
        }
    }
    let usable = |d: &cpal::Device| {
        if input {
            d.default_input_config().is_ok()
        } else {
            d.default_output_config().is_ok()
        }
    };
    devices.retain(usable);
    if let Some(at) = devices
        .iter()
        .position(|d| alsa_id(d) == spec || d.to_string() == spec)
    {
        return Ok(devices.swap_remove(at));
    }
    let wanted = spec.to_lowercase();
    devices.retain(|d| d.to_string().to_lowercase().contains(&wanted));
    match devices.len() {
        0 => Err(SoundError::NotFound {
            kind,
            spec: spec.to_owned(),
        }),
        1 => Ok(devices.swap_remove(0)),
        _ => Err(SoundError::Ambiguous {
            kind,
            spec: spec.to_owned(),
            names: devices
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

enum Command {
    StartMic(u32, mpsc::Sender<Result<Vec<i16>, String>>),
    StopMic,
    Play(u32, Vec<i16>),
    StopPlayback,
}

/// The cards, driven from their thread.
pub struct CardSound {
    commands: std_mpsc::Sender<Command>,
    /// Audio sent that the thread has not taken yet, and what was dropped for want of
    /// room; the other commands are a few bytes, one per press or turn.
    sent: Arc<Sent>,
}

/// Audio between [`CardSound::play`] and the sound thread, in samples.
#[derive(Default)]
struct Sent {
    waiting: AtomicUsize,
    dropped: AtomicUsize,
}

impl Sent {
    /// Room for `n` more samples, taken if there is.
    fn reserve(&self, n: usize) -> bool {
        let room = |w: usize| w.checked_add(n).filter(|&t| t <= MAX_SENT_SAMPLES);
        let taken = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, room);
        if taken.is_err() {
            self.dropped.fetch_add(n, Ordering::Relaxed);
        }
        taken.is_ok()
    }

    fn taken(&self, n: usize) {
        self.waiting.fetch_sub(n, Ordering::AcqRel);
    }
}

impl CardSound {
    /// Finds the devices (failing here for a name that matches none) and starts the
    /// thread; it ends when this is dropped. How the cards do is kept in `health`.
    pub fn open(
        input: Option<&str>,
        output: Option<&str>,
        health: Arc<SoundHealth>,
    ) -> Result<CardSound, SoundError> {
        let input = input.map(|spec| find(spec, true)).transpose()?;
        let output = output.map(|spec| find(spec, false)).transpose()?;
        let configured = |yes: bool| if yes { CardState::Ok } else { CardState::Off };
        health.set_microphone(configured(input.is_some()));
        health.set_speaker(configured(output.is_some()));
        let (commands, inbox) = std_mpsc::channel();
        let sent = Arc::new(Sent::default());
        let cards = Cards {
            sent: sent.clone(),
            input,
            output,
            health,
            mic: None,
            speaker: None,
            speaker_retry: None,
            failures: Complaints::default(),
            failure_said: false,
            glitches: Complaints::default(),
            rendered: Vec::new(),
        };
        std::thread::Builder::new()
            .name("sound".to_owned())
            .spawn(move || cards.run(&inbox))
            .map_err(system)?;
        Ok(CardSound { commands, sent })
    }

    /// `length` of the microphone at `DEVICE_RATE`, for a command in the terminal (it
    /// blocks until then).
    pub fn record(&mut self, length: Duration) -> Result<Vec<i16>, SoundError> {
        let wanted = (length.as_secs_f64() * f64::from(DEVICE_RATE)) as usize;
        let mut frames = self.start_mic(DEVICE_RATE);
        let mut heard = Vec::with_capacity(wanted);
        while heard.len() < wanted {
            match frames.blocking_recv() {
                Some(Ok(frame)) => heard.extend(frame),
                Some(Err(why)) => return Err(SoundError::Microphone(why)),
                None => return Err(SoundError::Microphone("it stopped".to_owned())),
            }
        }
        self.stop_mic();
        Ok(heard)
    }

    fn send(&self, command: Command) {
        // The thread ends only when this is dropped.
        let _ = self.commands.send(command);
    }
}

impl LiveSound for CardSound {
    fn start_mic(&mut self, rate: u32) -> mpsc::Receiver<Result<Vec<i16>, String>> {
        let (frames, receiver) = mpsc::channel(MIC_QUEUE);
        self.send(Command::StartMic(rate, frames));
        receiver
    }

    fn stop_mic(&mut self) {
        self.send(Command::StopMic);
    }

    fn play(&mut self, rate: u32, samples: &[i16]) {
        if self.sent.reserve(samples.len()) {
            self.send(Command::Play(rate, samples.to_vec()));
        }
    }

    fn stop_playback(&mut self) {
        self.send(Command::StopPlayback);
    }
}

/// What a stream's callbacks saw since the sound thread last looked.
#[derive(Default)]
struct Seen {
    /// The card asked for samples or gave some.
    data: AtomicBool,
    errors: Mutex<Errors>,
}

#[derive(Default)]
struct Errors {
    count: u64,
    first: Option<String>,
    /// The stream ended: the device is gone.
    gone: bool,
    /// The stream ended through no fault of the card (the recording fell behind).
    not_the_card: bool,
}

impl Seen {
    fn error(&self, e: &cpal::Error) {
        let mut errors = locked(&self.errors);
        errors.count += 1;
        errors.first.get_or_insert_with(|| e.to_string());
        errors.gone |= e.kind() == cpal::ErrorKind::DeviceNotAvailable;
    }

    /// The stream cannot go on, for this reason, and `card` says whether the card is
    /// to blame.
    fn failed(&self, why: String, card: bool) {
        let mut errors = locked(&self.errors);
        errors.first = Some(why);
        errors.gone = true;
        errors.not_the_card = !card;
    }
}

/// What the sound thread makes of what a stream's callbacks saw.
enum Liveness {
    /// Working; `errors` glitches (the first one `first`) came and went.
    Alive { errors: u64, first: Option<String> },
    /// Dead: quiet too long, complaining without a pause for [`STALLED`], or the device
    /// went away (`card`), or ended through no fault of the card.
    Dead { why: String, card: bool },
}

/// A stream and the watch on it.
struct Watched {
    _stream: cpal::Stream,
    seen: Arc<Seen>,
    /// When its callbacks last moved sound, and whether they ever did.
    moved: Instant,
    started: bool,
    /// How long it may be quiet without an error: a speaker's first callback fills the
    /// card's buffer (two seconds through PulseAudio) and the next waits for room.
    quiet: Duration,
    /// Since when, and what, it has reported at every look without moving sound. A
    /// burst as a stream starts is not that; a dead sound server is.
    complaining: Option<(Instant, String)>,
}

impl Watched {
    fn new(stream: cpal::Stream, seen: Arc<Seen>, quiet: Duration) -> Watched {
        Watched {
            _stream: stream,
            seen,
            moved: Instant::now(),
            started: false,
            quiet,
            complaining: None,
        }
    }

    fn check(&mut self, now: Instant) -> Liveness {
        let moved = self.seen.data.swap(false, Ordering::Relaxed);
        if moved {
            self.moved = now;
            self.started = true;
        }
        let errors = std::mem::take(&mut *locked(&self.seen.errors));
        self.complaining = match (errors.first.as_ref(), self.complaining.take()) {
            (Some(_), Some(going_on)) if !moved => Some(going_on),
            (Some(first), _) if !moved => Some((now, first.clone())),
            _ => None,
        };
        let silent = now.duration_since(self.moved);
        let complained_long = self
            .complaining
            .as_ref()
            .is_some_and(|(since, _)| now.duration_since(*since) >= STALLED);
        let quiet = if self.started {
            self.quiet
        } else {
            self.quiet.max(START_GRACE)
        };
        if errors.gone || complained_long || silent >= quiet {
            let why = (self.complaining.take().map(|(_, why)| why))
                .or(errors.first)
                .unwrap_or_else(|| format!("no sound moved for {:.1} s", silent.as_secs_f32()));
            let card = !errors.not_the_card;
            return Liveness::Dead { why, card };
        }
        Liveness::Alive {
            errors: errors.count,
            first: errors.first,
        }
    }
}

struct Mic {
    watched: Watched,
    /// Where a failure is said: the runner then cancels the recording.
    frames: mpsc::Sender<Result<Vec<i16>, String>>,
}

struct Speaker {
    watched: Watched,
    render: Render,
    queue: Arc<Mutex<VecDeque<i16>>>,
    capacity: usize,
}

impl Speaker {
    /// Queues `samples`; false when some were dropped for want of room.
    fn queue(&self, samples: &[i16]) -> bool {
        let mut queue = locked(&self.queue);
        let room = self.capacity.saturating_sub(queue.len());
        queue.extend(samples.iter().take(room));
        room >= samples.len()
    }
}

/// A card's log lines: the first at once, then at most one per [`COMPLAINTS_EVERY`]
/// saying how many were held back, however often the library complains.
#[derive(Debug, Default)]
struct Complaints {
    said: Option<Instant>,
    held: u64,
    last: Option<String>,
}

impl Complaints {
    /// `count` complaints, the latest `what`: the line to log now, if any.
    fn add(&mut self, now: Instant, count: u64, what: String) -> Option<String> {
        if count == 0 {
            return None;
        }
        let quiet = self
            .said
            .is_none_or(|at| now.duration_since(at) >= COMPLAINTS_EVERY);
        if quiet && self.held == 0 {
            self.said = Some(now);
            self.held = count - 1;
            return Some(what);
        }
        self.held += count;
        self.last = Some(what);
        self.due(now)
    }

    /// The summary of what was held back, once [`COMPLAINTS_EVERY`] has passed.
    fn due(&mut self, now: Instant) -> Option<String> {
        let since = self.said?;
        if self.held == 0 || now.duration_since(since) < COMPLAINTS_EVERY {
            return None;
        }
        self.said = Some(now);
        let held = std::mem::take(&mut self.held);
        let last = self.last.take().unwrap_or_default();
        Some(format!(
            "{held} more in the last {} s; the latest: {last}",
            now.duration_since(since).as_secs()
        ))
    }
}

/// The sound thread's state.
struct Cards {
    /// What [`CardSound::play`] sent: taken off as each `Play` is obeyed.
    sent: Arc<Sent>,
    input: Option<cpal::Device>,
    output: Option<cpal::Device>,
    health: Arc<SoundHealth>,
    mic: Option<Mic>,
    speaker: Option<Speaker>,
    /// After the speaker failed, it is not reopened before this.
    speaker_retry: Option<Instant>,
    /// The speaker's failures, and whether the last one was logged (so is its end).
    failures: Complaints,
    failure_said: bool,
    /// Errors of a speaker that goes on playing (an underrun), and audio dropped on its
    /// way to it.
    glitches: Complaints,
    rendered: Vec<i16>,
}

impl Cards {
    fn run(mut self, inbox: &std_mpsc::Receiver<Command>) {
        let mut next_check = Instant::now() + CHECK_EVERY;
        loop {
            match inbox.recv_timeout(CHECK_EVERY) {
                Ok(command) => self.obey(command),
                Err(std_mpsc::RecvTimeoutError::Timeout) => self.flush_speaker(),
                Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
            }
            // On a clock of its own: "at every look" means every CHECK_EVERY, however
            // often commands come.
            let now = Instant::now();
            if now >= next_check {
                self.check(now);
                next_check = now + CHECK_EVERY;
            }
        }
    }

    fn obey(&mut self, command: Command) {
        match command {
            Command::StartMic(rate, frames) => {
                self.mic = None;
                let opened = match &self.input {
                    Some(device) => open_mic(device, rate, frames.clone()),
                    None => Err("no microphone is configured".to_owned()),
                };
                match opened {
                    Ok(watched) => {
                        self.health.set_microphone(CardState::Ok);
                        self.mic = Some(Mic { watched, frames });
                    }
                    Err(why) => self.mic_failed(&frames, why),
                }
            }
            Command::StopMic => self.mic = None,
            Command::Play(rate, samples) => {
                self.sent.taken(samples.len());
                let dropped = self.sent.dropped.swap(0, Ordering::Relaxed);
                if dropped > 0 {
                    let what = format!("the sound thread fell behind: {dropped} samples dropped");
                    self.glitch(Instant::now(), what);
                }
                self.play(rate, &samples);
            }
            Command::StopPlayback => {
                if let Some(speaker) = &self.speaker {
                    locked(&speaker.queue).clear();
                }
            }
        }
    }

    /// The runner hears of it and cancels the recording (and notes why, its one line).
    fn mic_failed(&self, frames: &mpsc::Sender<Result<Vec<i16>, String>>, why: String) {
        self.health.set_microphone(CardState::Failed(why.clone()));
        let _ = frames.try_send(Err(why));
    }

    fn play(&mut self, rate: u32, samples: &[i16]) {
        let now = Instant::now();
        if self.speaker.is_none() {
            let Some(device) = &self.output else { return };
            // What comes while the speaker cannot play is dropped, not kept for later.
            if self.speaker_retry.is_some_and(|at| now < at) {
                return;
            }
            match open_speaker(device) {
                Ok(opened) => {
                    if self.speaker_retry.take().is_some() && self.failure_said {
                        tracing::info!("sound: the speaker plays again");
                    }
                    self.health.set_speaker(CardState::Ok);
                    self.speaker = Some(opened);
                }
                Err(e) => {
                    self.speaker_failed(now, e.to_string());
                    return;
                }
            }
        }
        let Some(speaker) = self.speaker.as_mut() else {
            return;
        };
        self.rendered.clear();
        if let Err(e) = speaker.render.push(rate, samples, &mut self.rendered) {
            tracing::warn!("the speaker's audio cannot be converted: {e}");
            return;
        }
        if !speaker.queue(&self.rendered) {
            self.behind(now);
        }
    }

    fn behind(&mut self, now: Instant) {
        let what = format!("the speaker is {MAX_QUEUED_SECS} s behind: audio dropped");
        self.glitch(now, what);
    }

    fn glitch(&mut self, now: Instant, what: String) {
        if let Some(line) = self.glitches.add(now, 1, what) {
            tracing::warn!("sound: {line}");
        }
    }

    /// Nothing to play for a while: what the resampler holds is played too.
    fn flush_speaker(&mut self) {
        if let Some(speaker) = self.speaker.as_mut() {
            self.rendered.clear();
            match speaker.render.flush(&mut self.rendered) {
                Ok(true) => {
                    if !speaker.queue(&self.rendered) {
                        self.behind(Instant::now());
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!("the speaker's audio cannot be converted: {e}"),
            }
        }
    }

    /// Closes the speaker; it is opened again at a sound after [`SPEAKER_RETRY`].
    fn speaker_failed(&mut self, now: Instant, why: String) {
        self.speaker = None;
        self.speaker_retry = Some(now + SPEAKER_RETRY);
        self.health.set_speaker(CardState::Failed(why.clone()));
        let line = self
            .failures
            .add(now, 1, format!("the speaker failed ({why}): closed"));
        self.failure_said = line.is_some();
        if let Some(line) = line {
            tracing::warn!("sound: {line}");
        }
    }

    /// Looks at both streams: a dead one is closed and said, glitches are counted.
    fn check(&mut self, now: Instant) {
        if let Some(mic) = self.mic.as_mut() {
            match mic.watched.check(now) {
                Liveness::Alive { .. } => {}
                Liveness::Dead { why, card } => {
                    let frames = mic.frames.clone();
                    self.mic = None;
                    if card {
                        self.mic_failed(&frames, why);
                    } else {
                        let _ = frames.try_send(Err(why));
                    }
                }
            }
        }
        if let Some(speaker) = self.speaker.as_mut() {
            match speaker.watched.check(now) {
                Liveness::Alive { errors, first } => {
                    // Underruns, and PulseAudio's plugin at a stream's start: it plays on.
                    let what = format!("the speaker skipped: {}", first.unwrap_or_default());
                    if let Some(line) = self.glitches.add(now, errors, what) {
                        tracing::info!("sound: {line}");
                    }
                }
                Liveness::Dead { why, .. } => self.speaker_failed(now, why),
            }
        }
        if let Some(line) = self.failures.due(now) {
            tracing::warn!("sound: {line}");
        }
        if let Some(line) = self.glitches.due(now) {
            tracing::info!("sound: {line}");
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Opens the microphone; its 40 ms frames at `rate` go to `frames`. When the runner
/// falls behind, nothing more is sent and the stream is closed at the next look: a
/// recording with a hole is not sent (and the card is not blamed).
fn open_mic(
    device: &cpal::Device,
    rate: u32,
    frames: mpsc::Sender<Result<Vec<i16>, String>>,
) -> Result<Watched, String> {
    let name = device.to_string();
    let supported = device
        .default_input_config()
        .map_err(|e| format!("{name}: {e}"))?;
    let config = supported.config();
    let mut capture =
        Capture::new(config.sample_rate, config.channels, rate).map_err(|e| e.to_string())?;
    let seen = Arc::new(Seen::default());
    let on_error = {
        let seen = seen.clone();
        move |e: cpal::Error| seen.error(&e)
    };
    let mut deliver = {
        let seen = seen.clone();
        let mut sending = true;
        move |samples: &[i16]| {
            if !sending {
                // Still moving sound, as far as the card goes.
                seen.data.store(true, Ordering::Relaxed);
                return;
            }
            let ready = match capture.push(samples) {
                Ok(ready) => ready,
                Err(e) => {
                    sending = false;
                    seen.failed(format!("its audio cannot be converted: {e}"), false);
                    return;
                }
            };
            for frame in ready {
                match frames.try_send(Ok(frame)) {
                    Ok(()) => {}
                    // The recording ended; the runner stops the microphone next.
                    Err(mpsc::error::TrySendError::Closed(_)) => sending = false,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        sending = false;
                        seen.failed("the recording fell behind".to_owned(), false);
                        return;
                    }
                }
            }
            seen.data.store(true, Ordering::Relaxed);
        }
    };
    let built = match supported.sample_format() {
        cpal::SampleFormat::F32 => device.build_input_stream::<f32, _, _>(
            config,
            move |data: &[f32], _: &cpal::InputCallbackInfo| {
                let samples: Vec<i16> = data.iter().map(|s| to_i16(*s)).collect();
                deliver(&samples);
            },
            on_error,
            None,
        ),
        _ => device.build_input_stream::<i16, _, _>(
            config,
            move |data: &[i16], _: &cpal::InputCallbackInfo| deliver(data),
            on_error,
            None,
        ),
    };
    let stream = built.map_err(|e| format!("{name}: {e}"))?;
    stream.play().map_err(|e| format!("{name}: {e}"))?;
    Ok(Watched::new(stream, seen, STALLED))
}

fn to_i16(sample: f32) -> i16 {
    (sample.clamp(-1.0, 1.0) * 32767.0) as i16
}

fn open_speaker(device: &cpal::Device) -> Result<Speaker, SoundError> {
    let name = device.to_string();
    let failed = |e: &dyn std::fmt::Display| SoundError::Device {
        name: name.clone(),
        message: e.to_string(),
    };
    let supported = device.default_output_config().map_err(|e| failed(&e))?;
    let config = supported.config();
    let queue = Arc::new(Mutex::new(VecDeque::new()));
    let seen = Arc::new(Seen::default());
    let on_error = {
        let seen = seen.clone();
        move |e: cpal::Error| seen.error(&e)
    };
    let built = match supported.sample_format() {
        cpal::SampleFormat::F32 => {
            let (queue, seen) = (queue.clone(), seen.clone());
            device.build_output_stream::<f32, _, _>(
                config,
                move |out: &mut [f32], _: &cpal::OutputCallbackInfo| {
                    let mut queue = locked(&queue);
                    for sample in out.iter_mut() {
                        *sample = f32::from(queue.pop_front().unwrap_or(0)) / 32768.0;
                    }
                    seen.data.store(true, Ordering::Relaxed);
                },
                on_error,
                None,
            )
        }
        _ => {
            let (queue, seen) = (queue.clone(), seen.clone());
            device.build_output_stream::<i16, _, _>(
                config,
                move |out: &mut [i16], _: &cpal::OutputCallbackInfo| {
                    let mut queue = locked(&queue);
                    for sample in out.iter_mut() {
                        *sample = queue.pop_front().unwrap_or(0);
                    }
                    seen.data.store(true, Ordering::Relaxed);
                },
                on_error,
                None,
            )
        }
    };
    let stream = built.map_err(|e| failed(&e))?;
    stream.play().map_err(|e| failed(&e))?;
    let render = Render::new(config.sample_rate, config.channels).map_err(|e| failed(&e))?;
    Ok(Speaker {
        watched: Watched::new(stream, seen, SPEAKER_QUIET),
        render,
        queue,
        capacity: MAX_QUEUED_SECS * config.sample_rate as usize * usize::from(config.channels),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_the_sound_thread_has_not_taken_is_bounded_and_commands_still_pass() {
        // A sound thread held up in a card's call: nothing is taken.
        let (commands, inbox) = std_mpsc::channel();
        let sent = Arc::new(Sent::default());
        let mut sound = CardSound { commands, sent };
        let second = vec![0i16; 48_000];
        for _ in 0..30 {
            sound.play(48_000, &second);
        }
        sound.stop_playback();
        let queued: Vec<Command> = inbox.try_iter().collect();
        let plays = queued
            .iter()
            .filter(|c| matches!(c, Command::Play(..)))
            .count();
        assert_eq!(plays, 10, "ten seconds wait, the rest is dropped");
        assert!(matches!(queued.last(), Some(Command::StopPlayback)));
        assert_eq!(sound.sent.dropped.load(Ordering::Relaxed), 20 * 48_000);
        // Once the thread takes what waits, there is room again.
        sound.sent.taken(10 * 48_000);
        sound.play(48_000, &second);
        assert_eq!(inbox.try_iter().count(), 1);
    }

    #[test]
    fn a_flood_of_complaints_is_one_line_then_one_summary_a_minute() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut complaints = Complaints::default();
        let first = complaints.add(at(0), 3, "EIO".to_owned());
        assert_eq!(first.as_deref(), Some("EIO"));
        // A million more within the minute: nothing, however they come.
        for n in 1..=1000 {
            assert_eq!(complaints.add(at(n * 50), 1000, format!("EIO {n}")), None);
            assert_eq!(complaints.due(at(n * 50)), None);
        }
        let summary = complaints.due(at(60_000));
        assert_eq!(
            summary.as_deref(),
            Some("1000002 more in the last 60 s; the latest: EIO 1000")
        );
        // Said: nothing more is due until more comes.
        assert_eq!(complaints.due(at(200_000)), None);
        // A quiet minute later, the next complaint is said at once.
        assert_eq!(
            complaints
                .add(at(200_000), 1, "EPIPE".to_owned())
                .as_deref(),
            Some("EPIPE")
        );
        assert_eq!(complaints.add(at(200_001), 0, String::new()), None);
    }
}
