//! `herald gadget run`: the device core as a service, on the simulator's runner.
//!
//! Start-up takes the state directory's lock (one service per directory), boots the
//! device from the directory (the same key every time; a damaged key file stops here
//! rather than enrolling a new device), opens the control socket and the GPIO lines,
//! then runs until Ctrl-C or SIGTERM, when it closes the connection politely, switches
//! the outputs and the LED off and removes the socket. Reconnecting with backoff is the
//! device core's: the runner only carries out its `Connect`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use herald_device::{Button, DeviceConfig, DisplayProfile};
use tokio::sync::{mpsc, watch};

use super::audio::speech_end::EndRules;
use super::audio::DEVICE_RATE;
use super::config::{AudioConfig, GadgetConfig, GpioConfig};
use super::control;
use super::gpio::{led_pattern, Buttons, Gpio, Outputs, RawEdge};
use super::hands_free::{Attentive, HandsFree, Talk, TurnEnd, NO_SPEECH};
use super::status::Status;
use super::wake_word::commands::Reference;
use super::wake_word::ear::Ear;
use herald_sim::host::{SimHost, StateLock};
use herald_sim::runner::{self, Command, Handle, Invocation, LiveSound, Settings};

/// The board name the service announces.
pub const BOARD: &str = "linux-gadget";
const QUEUE: usize = 64;

/// The device the service is: a text screen (the log), no images, every button (the
/// control socket can press those the GPIO does not wire), a microphone and a speaker
/// only where a sound card is configured for them, and no firmware updates (the package
/// manager updates a Linux box).
pub fn device_config(config: &GadgetConfig) -> DeviceConfig {
    DeviceConfig {
        name: config.name.clone(),
        board: BOARD.to_owned(),
        firmware: env!("CARGO_PKG_VERSION").to_owned(),
        token: config.token.clone(),
        display: Some(DisplayProfile {
            width: 640,
            height: 480,
            color: false,
            charset: "utf8".to_owned(),
            text_cols: 80,
            text_rows: 24,
            image: None,
        }),
        mic_rate: config.audio.input.as_ref().map(|_| DEVICE_RATE),
        speaker_rate: config.audio.output.as_ref().map(|_| DEVICE_RATE),
        inputs: Button::ALL.to_vec(),
        ota_max_size: None,
    }
}

/// Boots the gadget on its state directory and starts the runner; `echo` prints every
/// screen to standard output.
pub fn start(
    config: &GadgetConfig,
    state_dir: &Path,
    outputs: &Outputs,
    invocations: Option<mpsc::Sender<Invocation>>,
    live: Option<Box<dyn LiveSound>>,
    echo: bool,
) -> anyhow::Result<(Handle, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let url = config.server.clone();
    let config = device_config(config);
    let flash = SimHost::open(state_dir, &config.firmware)?;
    let settings = Settings {
        url,
        config,
        speaker: state_dir.join("speaker.wav"),
        mic: None,
        echo,
        led_action: false,
        actions: outputs.specs(),
        invocations,
        live,
        fast_reconnect: false,
        heard: None,
    };
    runner::start(settings, flash)
}

/// Runs the service until a signal or a failure.
pub fn run(config: GadgetConfig, state_dir: PathBuf) -> anyhow::Result<()> {
    let _lock = StateLock::acquire(&state_dir, "herald gadget")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(serve(config, state_dir));
    // A read of the terminal still waiting must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    outcome
}

async fn serve(config: GadgetConfig, state_dir: PathBuf) -> anyhow::Result<()> {
    let origin = std::time::Instant::now();
    let outputs = Outputs::new(config.gpio.as_ref().map_or(&[][..], |g| &g.outputs));
    let (invoke_tx, invocations) = mpsc::channel(QUEUE);
    let status = Arc::new(Status::new(Arc::default()));
    let Sound {
        live,
        hands_free,
        woke,
    } = Sound::assemble(open_sound(&config, &status)?, &config.audio, &state_dir)?;
    let armed = hands_free
        .as_ref()
        .map(|(hands_free, _)| hands_free.clone());
    let mut talk = Some(Talk::new(hands_free).taps(config.audio.tap_to_talk));
    let (handle, board) = start(&config, &state_dir, &outputs, Some(invoke_tx), live, true)?;
    status.set_outputs(outputs.states());

    let socket = state_dir.join(control::SOCKET);
    let listener = control::bind(&socket)?;
    let control = tokio::spawn(control::serve(listener, handle.clone(), status.clone()));
    let keys = std::io::IsTerminal::is_terminal(&std::io::stdin()).then(|| {
        println!("{}", super::terminal::HINT);
        tokio::spawn(super::terminal::run(handle.clone()))
    });

    let (stop_panel, stopped) = watch::channel(false);
    let panel = match &config.gpio {
        Some(gpio) => {
            let panel = Panel {
                gpio: (),
                buttons: Buttons::new(gpio),
                led: gpio.status_led,
                outputs,
                talk: talk.take().unwrap_or_else(|| Talk::new(None)),
                handle: handle.clone(),
                status: status.clone(),
                origin,
            };
            Some(start_panel(gpio, panel, invocations, stopped)?)
        }
        None => None,
    };
    // Without a panel, the wake word's turns are ended by its own task.
    let wake = woke
        .zip(armed)
        .map(|(woke, armed)| tokio::spawn(wake_turns(woke, handle.clone(), armed, talk.take())));
    tracing::info!(
        "herald gadget {} runs on {}; control socket {}",
        env!("CARGO_PKG_VERSION"),
        state_dir.display(),
        socket.display()
    );

    let mut board = board;
    let outcome = tokio::select! {
        () = shutdown_signal() => {
            tracing::info!("stopping");
            let _ = handle.run(Command::Quit).await;
            (&mut board).await.context("the gadget failed")?
        }
        ended = &mut board => ended.context("the gadget failed")?,
    };
    let _ = stop_panel.send(true);
    if let Some(panel) = panel {
        let _ = panel.await;
    }
    control.abort();
    if let Some(wake) = wake {
        wake.abort();
    }
    if let Some(keys) = keys {
        keys.abort();
    }
    let _ = std::fs::remove_file(&socket);
    outcome
}

/// The sound cards as the service uses them, as `[audio]` asks: the microphone kept
/// open for the wake word, and listened to for the end of hands-free turns.
struct Sound {
    live: Option<Box<dyn LiveSound>>,
    /// Hands-free turns and where their ends are said, when there are such turns.
    hands_free: Option<(Arc<HandsFree>, mpsc::Receiver<TurnEnd>)>,
    /// Told when the wake word is heard.
    woke: Option<mpsc::Receiver<f32>>,
}

impl Sound {
    fn assemble(
        cards: Option<Box<dyn LiveSound>>,
        audio: &AudioConfig,
        state_dir: &Path,
    ) -> anyhow::Result<Sound> {
        let Some(mut cards) = cards else {
            return Ok(Sound {
                live: None,
                hands_free: None,
                woke: None,
            });
        };
        let mut woke = None;
        if audio.wake_word {
            let (reference, sensitivity) = (Reference::load(state_dir)?, audio.wake_sensitivity);
            let (mic, own_voice) = (
                reference.spotter(sensitivity)?,
                reference.spotter(sensitivity)?,
            );
            let (tx, rx) = mpsc::channel(1);
            woke = Some(rx);
            cards = Box::new(Ear::start(cards, mic, own_voice, tx));
        }
        // A tap on TALK, when asked for, or the wake word start a turn that ends when
        // the speaker stops.
        let mut hands_free = None;
        if audio.tap_to_talk || audio.wake_word {
            let (turns, ends) = HandsFree::new(end_rules(audio));
            cards = Box::new(Attentive::new(cards, turns.clone(), audio.earcons));
            hands_free = Some((turns, ends));
        }
        Ok(Sound {
            live: Some(cards),
            hands_free,
            woke,
        })
    }
}

/// The sound cards the file names, if any; their health goes to `status`.
fn open_sound(
    config: &GadgetConfig,
    status: &Status,
) -> anyhow::Result<Option<Box<dyn LiveSound>>> {
    let (input, output) = (
        config.audio.input.as_deref(),
        config.audio.output.as_deref(),
    );
    if input.is_none() && output.is_none() {
        return Ok(None);
    }
    #[cfg(all(target_os = "linux", feature = "sound"))]
    {
        let sound = super::audio::card::CardSound::open(input, output, status.sound().clone())?;
        Ok(Some(Box::new(sound)))
    }
    #[cfg(not(all(target_os = "linux", feature = "sound")))]
    {
        let _ = status;
        anyhow::bail!("{}", super::NO_SOUND)
    }
}

/// Turns the wake word starts: TALK pressed for the device and the recording made a
/// hands-free turn, as a tap does. `talk`, without a panel, lets TALK go when the
/// speaker stops; with one, the panel does.
async fn wake_turns(
    mut woke: mpsc::Receiver<f32>,
    handle: Handle,
    hands_free: Arc<HandsFree>,
    mut talk: Option<Talk>,
) {
    loop {
        let ended = async {
            match talk.as_mut() {
                Some(talk) => talk.ended().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            heard = woke.recv() => {
                if heard.is_none() {
                    return;
                }
                if handle.snapshot().borrow().recording {
                    continue;
                }
                if let Err(e) = handle.run(Command::Press(Button::Talk)).await {
                    tracing::warn!("wake word: {e}");
                    continue;
                }
                // Not recording after all (offline, say): TALK is let go at once.
                if !hands_free.arm() {
                    let _ = handle.run(Command::Release(Button::Talk)).await;
                }
            }
            commands = ended => {
                for command in commands {
                    if let Err(e) = handle.run(command).await {
                        tracing::warn!("wake word: {e}");
                    }
                }
            }
        }
    }
}

/// The rules of a hands-free turn, from `[audio]`.
fn end_rules(audio: &AudioConfig) -> EndRules {
    EndRules {
        end_silence: Duration::from_millis(audio.end_silence_ms),
        max: Duration::from_secs(audio.max_utterance_s),
        no_speech: NO_SPEECH,
    }
}

/// Opens the lines and starts the task that runs `panel` on them.
fn start_panel(
    config: &GpioConfig,
    panel: Panel<()>,
    invocations: mpsc::Receiver<Invocation>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (config, panel, invocations, stop);
        anyhow::bail!("GPIO needs Linux's GPIO character device");
    }
    #[cfg(target_os = "linux")]
    {
        let mut levels = panel.outputs.initial();
        levels.extend(config.status_led.map(|led| (led, false)));
        let (edge_tx, edges) = mpsc::channel(QUEUE);
        let (gpio, edge_thread) = super::gpio::cdev::open(
            &config.chip,
            &panel.buttons.lines(),
            panel.buttons.active_low(),
            &levels,
            panel.origin,
            edge_tx,
        )?;
        let panel = panel.on(gpio);
        Ok(tokio::spawn(async move {
            let _edge_thread = edge_thread;
            panel.run(edges, invocations, stop).await;
        }))
    }
}

/// Buttons, LED and outputs around a [`Gpio`].
pub struct Panel<G> {
    pub gpio: G,
    pub buttons: Buttons,
    pub led: Option<u32>,
    pub outputs: Outputs,
    pub talk: Talk,
    pub handle: Handle,
    pub status: Arc<Status>,
    pub origin: std::time::Instant,
}

impl Panel<()> {
    /// The panel, on its lines.
    fn on<G>(self, gpio: G) -> Panel<G> {
        Panel {
            gpio,
            buttons: self.buttons,
            led: self.led,
            outputs: self.outputs,
            talk: self.talk,
            handle: self.handle,
            status: self.status,
            origin: self.origin,
        }
    }
}

impl<G: Gpio> Panel<G> {
    /// Runs until `stop` turns true (or its sender is gone); then switches every output
    /// and the LED off.
    pub async fn run(
        mut self,
        edges: mpsc::Receiver<RawEdge>,
        invocations: mpsc::Receiver<Invocation>,
        mut stop: watch::Receiver<bool>,
    ) {
        let (mut edges, mut invocations) = (Some(edges), Some(invocations));
        let mut snapshot = self.handle.snapshot();
        let mut sound = self.status.sound().watch();
        let mut lit = None;
        loop {
            let now = self.origin.elapsed();
            for (button, down) in self.buttons.poll(now) {
                for command in self.talk.button(button, down, now) {
                    if let Err(e) = self.handle.run(command).await {
                        tracing::warn!("button {}: {e}", button.name());
                    }
                }
            }
            let pattern = {
                let s = snapshot.borrow_and_update();
                let sound_failed = sound.borrow_and_update().failed();
                led_pattern(s.phase, s.shown.screen, s.recording, sound_failed)
            };
            if let Some(line) = self.led {
                let want = pattern.lit(now);
                if lit != Some(want) {
                    match self.gpio.set(line, want) {
                        Ok(()) => lit = Some(want),
                        Err(e) => tracing::warn!("status LED: {e}"),
                    }
                }
            }
            let next = [
                self.buttons.deadline(),
                self.led.and_then(|_| pattern.next_change(now)),
            ]
            .into_iter()
            .flatten()
            .min();
            let timer = async {
                match next {
                    Some(at) => tokio::time::sleep_until((self.origin + at).into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = timer => {}
                edge = recv(&mut edges) => match edge {
                    Some(edge) => self.buttons.edge(edge),
                    None => edges = None,
                },
                invocation = recv(&mut invocations) => match invocation {
                    Some(Invocation { id, name, args }) => {
                        let result = self.outputs.invoke(&name, &args, &mut self.gpio);
                        if let Err(e) = &result {
                            tracing::warn!("{name}: {e}");
                        }
                        self.status.set_outputs(self.outputs.states());
                        let _ = self.handle.run(Command::Complete { id, result }).await;
                    }
                    None => invocations = None,
                },
                changed = snapshot.changed() => if changed.is_err() { break },
                _ = sound.changed() => {}
                commands = self.talk.ended() => for command in commands {
                    if let Err(e) = self.handle.run(command).await {
                        tracing::warn!("hands-free: {e}");
                    }
                },
                changed = stop.changed() => if changed.is_err() || *stop.borrow() { break },
            }
        }
        for e in self.outputs.all_off(&mut self.gpio) {
            tracing::error!("an output stays on: {e}");
        }
        self.status.set_outputs(self.outputs.states());
        if let Some(line) = self.led {
            if let Err(e) = self.gpio.set(line, false) {
                tracing::warn!("status LED: {e}");
            }
        }
    }
}

/// The next item of a channel; a channel that ended (`None`) is not polled again.
async fn recv<T>(channel: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match channel {
        Some(channel) => channel.recv().await,
        None => std::future::pending().await,
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// The default state directory under the data directory.
pub fn default_state_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("gadget")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpio::double::FakeGpio;
    use herald_device::Phase;
    use herald_test_support::server::Harness;
    use serde_json::json;
    use std::path::Path;
    use std::time::Duration;

    const CONFIG: &str = r#"
        server = "ws://127.0.0.1:1/gadget"
        name = "Panel test"
        [gpio]
        talk = 17
        cancel = 27
        status_led = 22
        debounce_ms = 20
        [[gpio.outputs]]
        name = "lamp"
        line = 23
        description = "The desk lamp."
    "#;

    pub(super) async fn until(
        handle: &Handle,
        what: &str,
        test: impl Fn(&runner::Snapshot) -> bool,
    ) {
        let mut snapshot = handle.snapshot();
        let reached = tokio::time::timeout(Duration::from_secs(10), async {
            snapshot.wait_for(|s| test(s)).await.is_ok()
        })
        .await;
        if reached != Ok(true) {
            panic!("never {what}: {:?}", handle.snapshot().borrow().shown);
        }
    }

    /// Waits until the double's `line` is at `level`.
    async fn level(gpio: &FakeGpio, line: u32, want: bool) {
        for _ in 0..200 {
            if gpio.level(line) == Some(want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("line {line} never went {want}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn buttons_led_and_outputs_drive_a_device_on_a_real_server() {
        let harness = Harness::start().await;
        let mut config = GadgetConfig::parse(CONFIG).unwrap();
        config.server.clone_from(&harness.url);
        let state = tempfile::tempdir().unwrap();
        let gpio_config = config.gpio.clone().unwrap();
        let outputs = Outputs::new(&gpio_config.outputs);
        let (invoke_tx, invocations) = mpsc::channel(QUEUE);
        let (handle, board) = start(
            &config,
            state.path(),
            &outputs,
            Some(invoke_tx),
            None,
            false,
        )
        .unwrap();
        let gpio = FakeGpio::default();
        let status = Arc::new(Status::default());
        let origin = std::time::Instant::now();
        let (edge_tx, edges) = mpsc::channel(QUEUE);
        let (stop, stopped) = watch::channel(false);
        let panel = Panel {
            gpio: gpio.clone(),
            buttons: Buttons::new(&gpio_config),
            led: gpio_config.status_led,
            outputs,
            talk: Talk::new(None),
            handle: handle.clone(),
            status: status.clone(),
            origin,
        };
        let panel = tokio::spawn(panel.run(edges, invocations, stopped));

        until(&handle, "online", |s| s.phase == Phase::Online).await;
        // Online, the status LED is lit steadily.
        level(&gpio, 22, true).await;

        // CANCEL closes line 27 to ground, bouncing; held, the device counts down to a
        // new conversation. Pulled up, the line is high again once let go.
        for high in [false, true, false] {
            let at = origin.elapsed();
            edge_tx.send(RawEdge { line: 27, high, at }).await.unwrap();
        }
        until(&handle, "counting down", |s| {
            s.shown.status.starts_with("New chat in")
        })
        .await;
        let at = origin.elapsed();
        edge_tx
            .send(RawEdge {
                line: 27,
                high: true,
                at,
            })
            .await
            .unwrap();
        until(&handle, "released", |s| {
            !s.shown.status.starts_with("New chat in")
        })
        .await;

        // The output is an action the server can invoke, with a boolean `on`.
        let body = json!({"device_id": handle.snapshot().borrow().device_id, "name": "output.lamp", "args": {"on": true}});
        let (code, answer) = harness.admin("POST", "/v1/action", Some(body)).await;
        assert_eq!(
            (code, &answer["result"]),
            (200, &json!({"on": true})),
            "{answer}"
        );
        assert_eq!(gpio.level(23), Some(true));
        assert_eq!(
            status.to_json(&handle.snapshot().borrow())["outputs"]["lamp"],
            true
        );
        let bad = json!({"device_id": handle.snapshot().borrow().device_id, "name": "output.lamp", "args": {"on": 1}});
        let (code, answer) = harness.admin("POST", "/v1/action", Some(bad)).await;
        assert_ne!(code, 200, "{answer}");

        // A clean stop switches the output and the LED off.
        stop.send(true).unwrap();
        panel.await.unwrap();
        assert_eq!((gpio.level(23), gpio.level(22)), (Some(false), Some(false)));
        handle.run(Command::Quit).await.unwrap();
        board.await.unwrap().unwrap();
    }

    /// A microphone that hears `clip` (then silence, or a failure after `fail_after`
    /// frames; with `fails_once`, on its first start only) in real time, and a speaker
    /// that keeps what it plays.
    #[derive(Clone, Default)]
    struct FakeSound {
        clip: Vec<i16>,
        fail_after: Option<usize>,
        fails_once: bool,
        /// How often the microphone was started.
        starts: Arc<std::sync::atomic::AtomicUsize>,
        heard_all: Arc<tokio::sync::Notify>,
        played: Arc<std::sync::Mutex<Vec<i16>>>,
    }

    impl LiveSound for FakeSound {
        fn start_mic(&mut self, rate: u32) -> mpsc::Receiver<Result<Vec<i16>, String>> {
            assert_eq!(rate, DEVICE_RATE);
            let (frames, receiver) = mpsc::channel(64);
            let this = self.clone();
            let first = self
                .starts
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                == 0;
            let fail_after = self.fail_after.filter(|_| first || !self.fails_once);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(40));
                for n in 0.. {
                    tick.tick().await;
                    if fail_after == Some(n) {
                        let _ = frames.send(Err("unplugged".to_owned())).await;
                        return;
                    }
                    let start = (n * 640).min(this.clip.len());
                    let mut frame = this.clip[start..(start + 640).min(this.clip.len())].to_vec();
                    if frame.len() < 640 {
                        this.heard_all.notify_one();
                    }
                    frame.resize(640, 0);
                    if frames.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
            });
            receiver
        }

        fn stop_mic(&mut self) {}

        fn play(&mut self, rate: u32, samples: &[i16]) {
            assert_eq!(rate, DEVICE_RATE);
            self.played.lock().unwrap().extend_from_slice(samples);
        }

        fn stop_playback(&mut self) {}
    }

    /// A gadget with a microphone and a speaker on `sound`, online against `harness`.
    async fn with_sound(harness: &Harness, sound: &FakeSound, state: &Path) -> Handle {
        let text = format!(
            "server = \"{}\"\nname = \"Voice\"\n[audio]\ninput = \"mic\"\noutput = \"speaker\"\n",
            harness.url
        );
        let config = GadgetConfig::parse(&text).unwrap();
        let device = device_config(&config);
        assert_eq!(
            (device.mic_rate, device.speaker_rate),
            (Some(DEVICE_RATE), Some(DEVICE_RATE))
        );
        let (handle, _board) = start(
            &config,
            state,
            &Outputs::new(&[]),
            None,
            Some(Box::new(sound.clone())),
            false,
        )
        .unwrap();
        until(&handle, "online", |s| s.phase == Phase::Online).await;
        handle
    }

    fn tone(seconds: f64) -> Vec<i16> {
        let n = (seconds * f64::from(DEVICE_RATE)) as usize;
        (0..n)
            .map(|i| ((i as f64 * 0.13).sin() * 8000.0) as i16)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_live_microphone_is_heard_and_the_reply_played() {
        let harness = Harness::start().await;
        let state = tempfile::tempdir().unwrap();
        let sound = FakeSound {
            clip: tone(1.2),
            ..FakeSound::default()
        };
        let handle = with_sound(&harness, &sound, state.path()).await;
        handle.run(Command::Press(Button::Talk)).await.unwrap();
        sound.heard_all.notified().await;
        handle.run(Command::Release(Button::Talk)).await.unwrap();
        let (seconds, reply) = heard(&handle).await;
        until(&handle, "done", |s| {
            s.shown.screen == herald_device::Screen::Ready
        })
        .await;
        // The clip, and the silence until TALK was let go.
        assert!((1.2..=1.6).contains(&seconds), "{reply}");
        // The demo agent plays the recording back: the speaker played that much of it.
        let played = sound.played.lock().unwrap().clone();
        let played_s = played.len() as f64 / f64::from(DEVICE_RATE);
        assert!(
            (played_s - seconds).abs() < 0.15,
            "played {played_s} s, heard {seconds} s"
        );
        let (rms, _) = crate::audio::level(&played);
        assert!(rms > -25.0, "played back {rms} dBFS");
        handle.run(Command::Quit).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_microphone_cancels_instead_of_sending() {
        let harness = Harness::start().await;
        let state = tempfile::tempdir().unwrap();
        let sound = FakeSound {
            clip: tone(2.0),
            fail_after: Some(10),
            ..FakeSound::default()
        };
        let handle = with_sound(&harness, &sound, state.path()).await;
        handle.run(Command::Press(Button::Talk)).await.unwrap();
        until(&handle, "told", |s| {
            s.note
                .as_deref()
                .is_some_and(|n| n.contains("the microphone failed (unplugged)"))
        })
        .await;
        assert!(!handle.snapshot().borrow().recording);
        handle.run(Command::Release(Button::Talk)).await.unwrap();
        // What reaches the agent next is the text, not a recording.
        handle.run(Command::Text("after".to_owned())).await.unwrap();
        until(&handle, "answered", |s| {
            s.shown.lines.join(" ").contains("You said: after")
        })
        .await;
        until(&handle, "done", |s| {
            s.shown.screen == herald_device::Screen::Ready
        })
        .await;
        assert_eq!(handle.snapshot().borrow().replies, ["You said: after"]);
        assert!(sound.played.lock().unwrap().is_empty());
        handle.run(Command::Quit).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tap_on_talk_listens_until_the_speaker_stops() {
        use crate::audio::speech_end::tests::{silence, spoken};
        let harness = Harness::start().await;
        let text = format!(
            "server = \"{}\"\nname = \"Hands-free\"\n[audio]\ninput = \"mic\"\noutput = \"speaker\"\n\
             tap_to_talk = true\n[gpio]\ntalk = 17\ndebounce_ms = 20\n",
            harness.url
        );
        let config = GadgetConfig::parse(&text).unwrap();
        // Real speech (espeak-ng), then a long silence the turn must not wait for.
        let speech = spoken("Turn on the kitchen lights, please.");
        let speech_s = speech.len() as f64 / f64::from(DEVICE_RATE);
        let sound = FakeSound {
            clip: [silence(0.3), speech, silence(6.0)].concat(),
            ..FakeSound::default()
        };
        let state = tempfile::tempdir().unwrap();
        let cards: Box<dyn LiveSound> = Box::new(sound.clone());
        let parts = Sound::assemble(Some(cards), &config.audio, state.path()).unwrap();
        let (handle, board) = start(
            &config,
            state.path(),
            &Outputs::new(&[]),
            None,
            parts.live,
            false,
        )
        .unwrap();
        let gpio_config = config.gpio.clone().unwrap();
        let origin = std::time::Instant::now();
        let (edge_tx, edges) = mpsc::channel(QUEUE);
        let (_invoke, invocations) = mpsc::channel(QUEUE);
        let (stop, stopped) = watch::channel(false);
        let panel = Panel {
            gpio: FakeGpio::default(),
            buttons: Buttons::new(&gpio_config),
            led: None,
            outputs: Outputs::new(&[]),
            talk: Talk::new(parts.hands_free).taps(config.audio.tap_to_talk),
            handle: handle.clone(),
            status: Arc::new(Status::default()),
            origin,
        };
        let panel = tokio::spawn(panel.run(edges, invocations, stopped));
        until(&handle, "online", |s| s.phase == Phase::Online).await;

        // A tap: TALK (pulled up, so low when pressed) for 150 ms.
        let press = |high: bool| RawEdge {
            line: 17,
            high,
            at: origin.elapsed(),
        };
        edge_tx.send(press(false)).await.unwrap();
        until(&handle, "recording", |s| s.recording).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        edge_tx.send(press(true)).await.unwrap();
        // Still recording after the tap, until the speaker stops.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            handle.snapshot().borrow().recording,
            "the tap ended the turn"
        );
        let (heard, reply) = heard(&handle).await;
        // The speech, its lead-in and the end silence (0.7 s); far short of the clip.
        let expected = 0.3 + speech_s + 0.7;
        assert!(
            (expected - 0.6..=expected + 0.4).contains(&heard),
            "heard {heard} s of {speech_s:.2} s of speech: {reply}"
        );
        // The speaker said "listening" once, at the tap, before the agent's answer.
        let listening = listening_cue();
        let played = sound.played.lock().unwrap().clone();
        assert!(played.starts_with(&listening), "no cue first");
        assert!(
            !played[listening.len()..].starts_with(&listening),
            "cued twice"
        );

        stop.send(true).unwrap();
        panel.await.unwrap();
        handle.run(Command::Quit).await.unwrap();
        board.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wake_word_starts_a_turn_without_the_word_that_ends_when_the_speaker_stops() {
        use crate::audio::speech_end::tests::silence;
        use crate::wake_word::tests::{owner, takes};
        let harness = Harness::start().await;
        let text = format!(
            "server = \"{}\"\nname = \"Kitchen\"\n[audio]\ninput = \"mic\"\noutput = \"speaker\"\n\
             wake_word = true\n",
            harness.url
        );
        let config = GadgetConfig::parse(&text).unwrap();
        let state = tempfile::tempdir().unwrap();
        let reference = crate::wake_word::train("hey herald", &takes()).unwrap();
        std::fs::write(state.path().join(crate::wake_word::MODEL_FILE), reference).unwrap();

        // Said as none of the takes was: the word, a pause, the request, a long silence.
        let word = owner(155, 52, "hey herald");
        let request = owner(155, 52, "Turn on the kitchen lights, please.");
        let (word_s, request_s) = (seconds(word.len()), seconds(request.len()));
        let sound = FakeSound {
            // Heard once the device is online: a wake word before then wakes nothing.
            clip: [silence(2.5), word, silence(0.6), request, silence(6.0)].concat(),
            ..FakeSound::default()
        };
        let cards: Box<dyn LiveSound> = Box::new(sound.clone());
        let Sound {
            live,
            hands_free,
            woke,
        } = Sound::assemble(Some(cards), &config.audio, state.path()).unwrap();
        let (handle, board) =
            start(&config, state.path(), &Outputs::new(&[]), None, live, false).unwrap();
        let armed = hands_free.as_ref().map(|(turns, _)| turns.clone()).unwrap();
        let talk = Talk::new(hands_free).taps(config.audio.tap_to_talk);
        let wake = tokio::spawn(wake_turns(woke.unwrap(), handle.clone(), armed, Some(talk)));
        until(&handle, "online", |s| s.phase == Phase::Online).await;
        until(&handle, "recording", |s| s.recording).await;
        let (heard, _) = heard(&handle).await;
        // The request with the pause before it and the end silence (0.7 s), not the word.
        let expected = 0.6 + request_s + 0.7;
        assert!(
            (expected - 0.7..=expected + 0.4).contains(&heard),
            "heard {heard} s: the word {word_s:.2} s, the request {request_s:.2} s"
        );
        assert!(!handle.snapshot().borrow().recording, "TALK let go");
        // The speaker said "listening" once, when the word was heard.
        let listening = listening_cue();
        assert!(sound.played.lock().unwrap().starts_with(&listening));

        wake.abort();
        handle.run(Command::Quit).await.unwrap();
        board.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_word_interrupts_the_gadget_but_its_own_voice_saying_it_does_not() {
        use crate::audio::speech_end::tests::{silence, spoken_by};
        use crate::wake_word::tests::{owner, takes};
        let reference = crate::wake_word::train("hey herald", &takes()).unwrap();
        let word = owner(155, 52, "hey herald");
        // The gadget's reply, without the word, in another voice.
        let reply = spoken_by(
            "en-gb",
            170,
            50,
            "The forecast says rain after four, so take an umbrella.",
        );
        // What the microphone hears while it plays: the reply's echo, 12 dB down, and
        // the owner's word over it, or the gadget itself saying the word.
        let echo = |of: &[i16]| -> Vec<i16> { of.iter().map(|s| s / 4).collect() };
        let mix = |a: &[i16], b: &[i16]| -> Vec<i16> {
            (0..a.len().max(b.len()))
                .map(|i| {
                    a.get(i)
                        .copied()
                        .unwrap_or(0)
                        .saturating_add(b.get(i).copied().unwrap_or(0))
                })
                .collect()
        };
        let over_reply = mix(&echo(&reply), &[silence(0.8), word.clone()].concat());
        let own_saying = [silence(0.5), word.clone(), silence(0.5)].concat();
        for (played, heard, wakes) in [
            (
                &reply,
                [silence(0.3), over_reply, silence(1.0)].concat(),
                true,
            ),
            (
                &own_saying,
                [silence(0.3), echo(&own_saying), silence(1.0)].concat(),
                false,
            ),
        ] {
            let sound = FakeSound {
                clip: heard,
                ..FakeSound::default()
            };
            let spotter = || crate::wake_word::Spotter::new(&reference, 0.4).unwrap();
            let (woke_tx, mut woke) = mpsc::channel(1);
            let mut ear = Ear::start(Box::new(sound.clone()), spotter(), spotter(), woke_tx);
            // Played as the runner plays a stream: as it comes, a little ahead.
            for chunk in played.chunks(640 * 5) {
                ear.play(DEVICE_RATE, chunk);
            }
            sound.heard_all.notified().await;
            let heard = tokio::time::timeout(Duration::from_millis(500), woke.recv()).await;
            assert_eq!(heard.is_ok(), wakes, "woke: {heard:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_microphone_that_fails_while_listening_is_opened_again_and_hears_the_word() {
        use crate::audio::speech_end::tests::silence;
        use crate::wake_word::tests::{owner, takes};
        let reference = crate::wake_word::train("hey herald", &takes()).unwrap();
        let sound = FakeSound {
            clip: [silence(0.5), owner(155, 52, "hey herald"), silence(1.0)].concat(),
            // Unplugged before the word, the first time only.
            fail_after: Some(5),
            fails_once: true,
            ..FakeSound::default()
        };
        let spotter = || crate::wake_word::Spotter::new(&reference, 0.4).unwrap();
        let (woke_tx, mut woke) = mpsc::channel(1);
        let _ear = Ear::start(Box::new(sound.clone()), spotter(), spotter(), woke_tx);
        // Heard after the ear's rest (2 s) and the clip again (about 2.5 s).
        let heard = tokio::time::timeout(Duration::from_secs(15), woke.recv()).await;
        assert!(matches!(heard, Ok(Some(_))), "{heard:?}");
        assert_eq!(sound.starts.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// How many seconds the demo agent says it heard ("I heard N.N seconds of audio."),
    /// once it has answered, and its reply.
    async fn heard(handle: &Handle) -> (f64, String) {
        until(handle, "answered", |s| {
            s.shown.lines.join(" ").contains("I heard")
        })
        .await;
        let reply = handle.snapshot().borrow().replies.back().unwrap().clone();
        let seconds = reply
            .trim_start_matches("I heard ")
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{reply}"));
        (seconds, reply)
    }

    /// The "listening" note, as the speaker gets it.
    fn listening_cue() -> Vec<i16> {
        crate::audio::pcm16_samples(&herald_media::cue::Cue::Listening.render(DEVICE_RATE))
            .collect()
    }

    fn seconds(samples: usize) -> f64 {
        samples as f64 / f64::from(DEVICE_RATE)
    }
}

/// The sound cards for real: PulseAudio with a pipe as the microphone and a null sink as
/// the speaker, reached through ALSA's `pulse` device as on a desktop Pi.
#[cfg(all(test, target_os = "linux", feature = "sound"))]
mod sound_server_tests {
    use super::tests::until;
    use super::*;
    use crate::audio::{card::CardSound, level, CardState, SoundHealth, SoundState};
    use herald_device::{Phase, Screen};
    use herald_test_support::server::Harness;
    use std::io::Write;
    use std::path::Path;
    use std::process::{Child, Command as Process, Stdio};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// The pipe source's format.
    const PIPE_RATE: u32 = 48_000;
    /// What the test records of the speaker.
    const RECORD_RATE: u32 = 16_000;

    /// The tests share `PULSE_SERVER` and the log: one at a time.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    struct Killed(Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// PulseAudio must be here: a missing one fails the test, never passes it unseen.
    fn require_pulseaudio() {
        let found = ["pulseaudio", "parec"].iter().all(|tool| {
            Process::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
        assert!(
            found,
            "PulseAudio is not installed: scripts/setup installs it \
             (apt-get install pulseaudio pulseaudio-utils libasound2-plugins)"
        );
    }

    /// A PulseAudio server in `dir`, and `parec` recording its speaker's monitor.
    struct Pulse {
        dir: std::path::PathBuf,
        fifo: std::path::PathBuf,
        server: String,
        /// The recorder first: it dies with the server anyway.
        running: Option<(Killed, Killed)>,
        /// Each start's recording of the speaker.
        starts: usize,
    }

    impl Pulse {
        fn start(dir: &Path) -> Pulse {
            require_pulseaudio();
            let (runtime, home) = (dir.join("rt"), dir.join("home"));
            std::fs::create_dir_all(&runtime).unwrap();
            std::fs::create_dir_all(&home).unwrap();
            let socket = runtime.join("pulse").join("native");
            let mut pulse = Pulse {
                dir: dir.to_owned(),
                fifo: dir.join("mic.fifo"),
                server: format!("unix:{}", socket.display()),
                running: None,
                starts: 0,
            };
            // ALSA's pulse plugin and parec find the server here.
            std::env::set_var("PULSE_SERVER", &pulse.server);
            pulse.restart();
            pulse
        }

        /// Starts the server (again), with the same socket, pipe and sink.
        fn restart(&mut self) {
            self.kill();
            let runtime = self.dir.join("rt");
            let socket = runtime.join("pulse").join("native");
            // A killed server leaves them behind, and its successor would not start.
            let _ = std::fs::remove_file(&socket);
            let _ = std::fs::remove_file(&self.fifo);
            let log = self.dir.join(format!("pulseaudio-{}.log", self.starts + 1));
            let server = Killed(
                Process::new("pulseaudio")
                    .args(["--daemonize=no", "--exit-idle-time=-1", "-n", "--disallow-exit"])
                    .args(["--disable-shm=yes", "--log-target=stderr"])
                    .args(["-L", "module-native-protocol-unix auth-anonymous=1"])
                    .args(["-L", "module-null-sink sink_name=speaker rate=48000 channels=2"])
                    .arg("-L")
                    .arg(format!(
                        "module-pipe-source source_name=mic file={} format=s16le rate={PIPE_RATE} channels=1",
                        self.fifo.display()
                    ))
                    .env_remove("PULSE_SERVER")
                    .env("XDG_RUNTIME_DIR", &runtime)
                    .env("HOME", self.dir.join("home"))
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(&log).unwrap())
                    .spawn()
                    .unwrap(),
            );
            let started = Instant::now();
            while !(socket.exists() && self.fifo.exists()) {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "PulseAudio did not start:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            self.starts += 1;
            let recorder = Killed(
                Process::new("parec")
                    .args([
                        "-d",
                        "speaker.monitor",
                        "--raw",
                        "--format=s16le",
                        "--channels=1",
                        // What the test reads is at most this late.
                        "--latency-msec=20",
                    ])
                    .arg(format!("--rate={RECORD_RATE}"))
                    .env("PULSE_SERVER", &self.server)
                    .stdout(std::fs::File::create(self.recorded()).unwrap())
                    .spawn()
                    .unwrap(),
            );
            self.running = Some((recorder, server));
        }

        /// Kills the server as a crash would (SIGKILL).
        fn kill(&mut self) {
            self.running = None;
        }

        /// The file this start's recorder writes.
        fn recorded(&self) -> std::path::PathBuf {
            self.dir.join(format!("speaker-{}.raw", self.starts))
        }

        /// What the speaker played since the server last started.
        fn played(&self) -> Vec<i16> {
            let raw = std::fs::read(self.recorded()).unwrap_or_default();
            crate::audio::pcm16_samples(&raw).collect()
        }

        /// Seconds of `played` louder than -30 dBFS.
        fn loud(samples: &[i16]) -> f64 {
            samples
                .chunks(RECORD_RATE as usize / 50)
                .filter(|c| level(c).0 > -30.0)
                .count() as f64
                / 50.0
        }

        /// Waits until the speaker has played `seconds` of tone since the server started.
        async fn heard(&self, seconds: f64) {
            let started = Instant::now();
            while Pulse::loud(&self.played()) < seconds {
                assert!(
                    started.elapsed() < Duration::from_secs(15),
                    "the speaker played {} s of the tone, not {seconds}",
                    Pulse::loud(&self.played())
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }

        /// Waits until the sink has played `seconds` more of its output, sound or
        /// silence: its clock, not ours.
        async fn plays_on(&self, seconds: f64) {
            let mark = self.played().len() + (seconds * f64::from(RECORD_RATE)) as usize;
            let started = Instant::now();
            while self.played().len() < mark {
                assert!(
                    started.elapsed() < Duration::from_secs(15),
                    "the sink stopped"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }

        /// Writes `clip` into the microphone's pipe in real time; stops early if the
        /// server goes away.
        fn speak(&self, clip: Vec<i16>) -> tokio::task::JoinHandle<()> {
            let fifo = self.fifo.clone();
            tokio::task::spawn_blocking(move || {
                let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                let start = Instant::now();
                for (n, chunk) in clip.chunks(PIPE_RATE as usize / 50).enumerate() {
                    if pipe.write_all(&crate::audio::pcm16_bytes(chunk)).is_err() {
                        return;
                    }
                    let due = Duration::from_millis(20 * (n as u64 + 1));
                    std::thread::sleep(due.saturating_sub(start.elapsed()));
                }
            })
        }
    }

    fn tone(rate: u32, seconds: f64, amplitude: f64) -> Vec<i16> {
        let n = (seconds * f64::from(rate)) as usize;
        (0..n)
            .map(|i| {
                let t = i as f64 / f64::from(rate);
                ((2.0 * std::f64::consts::PI * 440.0 * t).sin() * amplitude) as i16
            })
            .collect()
    }

    /// A tone of `seconds` between short silences, as the pipe takes it.
    fn spoken(seconds: f64) -> Vec<i16> {
        let silence = vec![0i16; PIPE_RATE as usize * 3 / 10];
        [silence.clone(), tone(PIPE_RATE, seconds, 8000.0), silence].concat()
    }

    /// What a test drives: the gadget on a PulseAudio of its own, online to a fresh
    /// server, and the directories they keep their files in.
    struct Rig {
        dirs: (tempfile::TempDir, tempfile::TempDir),
        harness: Harness,
        pulse: Pulse,
        health: Arc<SoundHealth>,
        handle: Handle,
        board: tokio::task::JoinHandle<anyhow::Result<()>>,
    }

    impl Rig {
        async fn start() -> Rig {
            let (dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let pulse = Pulse::start(dir.path());
            let harness = Harness::start().await;
            let health = Arc::new(SoundHealth::default());
            let text = format!(
                "server = \"{}\"\nname = \"Pulse\"\n[audio]\ninput = \"pulse\"\noutput = \"pulse\"\n",
                harness.url
            );
            let config = GadgetConfig::parse(&text).unwrap();
            let sound = CardSound::open(Some("pulse"), Some("pulse"), health.clone()).unwrap();
            let (handle, board) = start(
                &config,
                state.path(),
                &Outputs::new(&[]),
                None,
                Some(Box::new(sound)),
                false,
            )
            .unwrap();
            until(&handle, "online", |s| s.phase == Phase::Online).await;
            Rig {
                dirs: (dir, state),
                harness,
                pulse,
                health,
                handle,
                board,
            }
        }
    }

    /// The replies that say what the demo agent heard.
    fn heard_replies(handle: &Handle) -> Vec<String> {
        let snapshot = handle.snapshot();
        let replies = &snapshot.borrow().replies;
        replies
            .iter()
            .filter(|r| r.contains("I heard"))
            .cloned()
            .collect()
    }

    /// Holds TALK while the pipe hears `seconds` of tone.
    async fn say(handle: &Handle, pulse: &Pulse, seconds: f64) {
        handle.run(Command::Press(Button::Talk)).await.unwrap();
        until(handle, "recording", |s| s.recording).await;
        pulse.speak(spoken(seconds)).await.unwrap();
        handle.run(Command::Release(Button::Talk)).await.unwrap();
    }

    /// [`say`], then waits for the turn to end; returns the agent's reply.
    async fn talk(handle: &Handle, pulse: &Pulse, seconds: f64) -> String {
        let before = heard_replies(handle).len();
        say(handle, pulse, seconds).await;
        until(handle, "answered", |s| {
            s.replies.iter().filter(|r| r.contains("I heard")).count() > before
        })
        .await;
        until(handle, "done", |s| s.shown.screen == Screen::Ready).await;
        heard_replies(handle).pop().unwrap_or_default()
    }

    /// The seconds in "I heard N.N seconds of audio".
    fn seconds_in(reply: &str) -> f64 {
        reply
            .split("I heard ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{reply}"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn speech_through_pulseaudio_reaches_the_agent_and_its_reply_the_speaker() {
        let _one = ONE_AT_A_TIME.lock().await;
        let Rig {
            dirs: _dirs,
            harness: _harness,
            pulse,
            health,
            handle,
            board,
        } = Rig::start().await;

        // Hold TALK while the microphone hears a second and a half of a tone between
        // short silences, written into the pipe in real time.
        let reply = talk(&handle, &pulse, 1.5).await;
        // The tone and the silences around it (2.1 s), give or take the stream's start
        // and a release that a loaded machine makes late.
        assert!((1.5..=3.2).contains(&seconds_in(&reply)), "{reply}");

        // The demo agent plays the recording back: the speaker's monitor hears the tone,
        // as long and as loud as it was spoken.
        pulse.heard(1.4).await;
        // The rest of the tone, if it is there, follows within the sink's latency.
        pulse.plays_on(0.5).await;
        let samples = pulse.played();
        let played = Pulse::loud(&samples);
        assert!(
            (1.2..=2.0).contains(&played),
            "the speaker played {played} s of the tone"
        );
        let tone_part: Vec<i16> = samples
            .chunks(RECORD_RATE as usize / 50)
            .filter(|c| level(c).0 > -30.0)
            .flatten()
            .copied()
            .collect();
        let (rms, _) = level(&tone_part);
        // Amplitude 8000 is -15.3 dBFS RMS.
        assert!((rms + 15.3).abs() < 2.0, "played back at {rms} dBFS");
        let now = health.now();
        assert_eq!(
            (now.microphone, now.speaker),
            (CardState::Ok, CardState::Ok)
        );

        handle.run(Command::Quit).await.unwrap();
        board.await.unwrap().unwrap();
    }

    /// Every line logged while the test runs (the sound thread logs from its own thread,
    /// so the subscriber is the process's).
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl Write for Log {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let line = String::from_utf8_lossy(buf).trim_end().to_owned();
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Log {
        fn lines(&self, containing: &str) -> Vec<String> {
            let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
            lines
                .iter()
                .filter(|l| l.contains(containing))
                .cloned()
                .collect()
        }
    }

    async fn health_until(health: &SoundHealth, what: &str, test: impl Fn(&SoundState) -> bool) {
        let mut watch = health.watch();
        let reached = tokio::time::timeout(Duration::from_secs(10), watch.wait_for(|s| test(s)))
            .await
            .is_ok_and(|r| r.is_ok());
        assert!(reached, "never {what}: {:?}", health.now());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn talk_during_a_reply_silences_the_speaker_at_once() {
        let _one = ONE_AT_A_TIME.lock().await;
        let Rig {
            dirs: _dirs,
            harness: _harness,
            pulse,
            handle,
            board,
            ..
        } = Rig::start().await;

        // A reply of about eight seconds, half a second of it heard, then TALK. The
        // gadget and the server both stop the reply; what still plays is what the
        // sound server had taken (under 0.1 s here, 0.8 to 1.1 under qemu), not the 7 s
        // left: of the next 4 s, at most half may be the reply.
        say(&handle, &pulse, 8.0).await;
        pulse.heard(0.5).await;
        handle.run(Command::Press(Button::Talk)).await.unwrap();
        let at_press = Pulse::loud(&pulse.played());
        pulse.plays_on(4.0).await;
        let after = Pulse::loud(&pulse.played()) - at_press;
        handle.run(Command::Release(Button::Talk)).await.unwrap();
        assert!(
            after <= 2.0,
            "the reply went on for {after:.2} s after TALK"
        );

        handle.run(Command::Quit).await.unwrap();
        board.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sound_server_that_dies_cancels_the_recording_and_sound_returns_with_it() {
        let _one = ONE_AT_A_TIME.lock().await;
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only test that logs");

        let Rig {
            dirs: _dirs,
            harness: _harness,
            mut pulse,
            health,
            handle,
            board,
        } = Rig::start().await;

        // Killed while the reply plays: the speaker is closed, said once in the log.
        talk(&handle, &pulse, 2.0).await;
        pulse.heard(0.5).await;
        pulse.kill();
        health_until(&health, "the speaker failed", |s| {
            matches!(s.speaker, CardState::Failed(_))
        })
        .await;
        // However often ALSA complains meanwhile.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let said = log.lines("the speaker failed");
        assert_eq!(said.len(), 1, "{:#?}", log.lines("sound:"));
        assert!(log.lines("sound:").len() <= 3, "{:#?}", log.lines("sound:"));

        // Killed while TALK is held: the recording is cancelled, not sent.
        pulse.restart();
        handle.run(Command::Press(Button::Talk)).await.unwrap();
        until(&handle, "recording", |s| s.recording).await;
        let speaking = pulse.speak(spoken(3.0));
        tokio::time::sleep(Duration::from_millis(1200)).await;
        pulse.kill();
        until(&handle, "told", |s| {
            s.note
                .as_deref()
                .is_some_and(|n| n.contains("the microphone failed"))
        })
        .await;
        assert!(!handle.snapshot().borrow().recording);
        speaking.await.unwrap();
        handle.run(Command::Release(Button::Talk)).await.unwrap();
        assert!(matches!(health.now().microphone, CardState::Failed(_)));
        // What reaches the agent next is the text, not a recording.
        handle.run(Command::Text("after".to_owned())).await.unwrap();
        until(&handle, "answered", |s| {
            s.replies.iter().any(|r| r.contains("You said: after"))
        })
        .await;
        assert_eq!(
            heard_replies(&handle).len(),
            1,
            "the cancelled recording was sent"
        );

        // The server is back: the next recording is heard, and its reply played.
        // (The speaker is opened again no sooner than 2 s after it failed: the reply
        // comes after a recording longer than that.)
        pulse.restart();
        let reply = talk(&handle, &pulse, 1.5).await;
        assert!((1.5..=3.2).contains(&seconds_in(&reply)), "{reply}");
        pulse.heard(1.2).await;
        health_until(&health, "both cards work again", |s| {
            s.microphone == CardState::Ok && s.speaker == CardState::Ok
        })
        .await;
        assert_eq!(
            log.lines("the speaker plays again").len(),
            1,
            "{:#?}",
            log.lines("sound:")
        );

        handle.run(Command::Quit).await.unwrap();
        board.await.unwrap().unwrap();
    }
}
