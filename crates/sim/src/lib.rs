//! The gadget simulator behind `herald sim`: a gadget in the terminal, running the same
//! device core as the firmware against a real server.
//!
//! The simulator is the core ([`herald_device::Device`]) with a host around it made of
//! ordinary things: a tokio task, a WebSocket, a state directory for the key and the
//! firmware, audio files for the microphone and the speaker. It shows what the board
//! would show and does what the board would do, so it serves three purposes: trying a
//! server without hardware, demonstrating it, and testing it end to end.
//!
//! Layout, one responsibility a file: `boards` (the profiles), `host` (the state
//! directory as flash), `runner` (the task that drives the core), `audio` (microphone
//! and speaker files), `render` (the screen as text), `script` (the script language)
//! and `tui` (interactive mode). [`runner`] and [`host`] are public: the Linux gadget
//! (`herald-linux-gadget`) runs its device with them, and the fault-injection tests
//! drive their gadgets with the runner, on a flash of their own. This file holds the options and
//! [`run`], which wires them together. Where to connect is the caller's to decide (the
//! `herald` CLI asks the server running on the data directory): [`run`] takes the URL
//! and the data directory resolved.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod audio;
mod boards;
#[cfg(unix)]
pub mod host;
mod render;
pub mod runner;
mod script;
mod tui;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use herald_device::DeviceConfig;

use boards::Board;
use host::{SimHost, StateLock};
use runner::{Command, Settings};

/// The simulated device and how it is driven (the URL it connects to is the caller's).
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The board to be
    #[arg(long, value_enum, default_value_t = Board::Breadboard)]
    board: Board,
    /// The device's name
    #[arg(long, default_value = "Simulator")]
    name: String,
    /// The server's access token (its GADGET_ACCESS_TOKEN)
    #[arg(long, env = "GADGET_ACCESS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Where the device keeps its key and firmware [default: sim-BOARD in the data dir]
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Run this script (wait, text, press, release, tap, wav, sleep, expect, screenshot)
    #[arg(long)]
    script: Option<PathBuf>,
    /// No terminal UI: print every screen change as a line, and run the script or, without
    /// one, the commands typed on standard input
    #[arg(long)]
    headless: bool,
    /// What the microphone hears while TALK is held: an audio file (WAV, MP3, Ogg, FLAC)
    #[arg(long)]
    mic: Option<PathBuf>,
    /// Where the speaker's audio goes, as WAV [default: speaker.wav in the state dir]
    #[arg(long)]
    speaker: Option<PathBuf>,
}

/// Run the device against the gadget endpoint `url` (already known to be `ws://` or
/// `wss://`), keeping its state under `data_dir` unless `--state-dir` says otherwise.
pub fn run(url: String, data_dir: &Path, args: SimArgs) -> anyhow::Result<()> {
    runner::client_request(&url).with_context(|| format!("{url} is not a WebSocket URL"))?;
    let state_dir = args
        .state_dir
        .unwrap_or_else(|| data_dir.join(format!("sim-{}", args.board.name())));
    let config = DeviceConfig {
        token: args.token.filter(|t| !t.is_empty()),
        ..args.board.config(&args.name)
    };
    let mic = match (&args.mic, config.mic_rate) {
        (Some(path), Some(rate)) => Some(audio::load_clip(path, rate)?),
        (Some(_), None) => bail!("the {} board has no microphone", args.board.name()),
        (None, _) => None,
    };
    let script = args.script.as_deref().map(script::load).transpose()?;
    if !args.headless && !std::io::stdout().is_terminal() {
        bail!(
            "interactive mode needs a terminal; use --headless (with --script FILE, or \
             commands on standard input)"
        );
    }
    // Two simulators on one directory would be one device knocking itself offline.
    let _lock = StateLock::acquire(&state_dir, "herald sim")?;
    let flash = SimHost::open(&state_dir, &config.firmware)?;
    let settings = Settings {
        url,
        speaker: args
            .speaker
            .unwrap_or_else(|| state_dir.join("speaker.wav")),
        config,
        mic,
        echo: args.headless,
        led_action: true,
        actions: Vec::new(),
        invocations: None,
        live: None,
        fast_reconnect: false,
        heard: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (handle, board) = runner::start(settings, flash)?;
        let outcome = match (args.headless, script) {
            (true, Some(lines)) => script::run(&handle, lines).await,
            (true, None) => script::run_stdin(&handle).await,
            (false, script) => tui::run(&handle, args.board, script).await,
        };
        // Whatever stopped the frontend, the board powers off cleanly and saves its audio.
        let _ = handle.run(Command::Quit).await;
        board.await.context("the simulator failed")??;
        outcome
    })
}
