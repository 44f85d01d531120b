//! `herald gadget`: a Linux box (a Raspberry Pi with buttons and relays, or any Linux
//! machine) as a Herald gadget, run as a service.
//!
//! It is the simulator's runner (the device core, its WebSocket and the state directory
//! as flash) with a service around it instead of a terminal: a TOML file for its
//! settings, a lock on the state directory, signals for a polite stop, a control socket
//! for scripts, and GPIO lines for buttons, a status LED and outputs the agent can
//! switch. It is a crate of its own beside the simulator, whose runner and host (the
//! state directory as flash) it shares.
//!
//! Layout: `config` (the file), `service` (start-up, the lock, the panel task, the stop),
//! `control` (the socket and its client), `status` (what `status` reports), `terminal`
//! (lines typed into the service's own terminal), `audio` (sound-card conversions, the
//! end of speech, and `audio::card` for the cards through cpal), `hands_free` (turns
//! that end when the speaker stops), `wake_word` (a word made from the owner's voice,
//! and the commands that record, make and measure it), `gpio` (the line logic, and `gpio::cdev` for the
//! kernel's GPIO character device).

// Without sound cards the conversions serve only their tests.
#[cfg_attr(not(all(target_os = "linux", feature = "sound")), allow(dead_code))]
mod audio;
mod config;
mod control;
mod gpio;
mod hands_free;
mod service;
mod status;
mod terminal;
mod wake_word;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;

pub use audio::speech_end::{EndRules, Ended, SpeechEnd};
pub use config::GadgetConfig;
use control::Request;
pub use wake_word::{take, train, Spotter, DEFAULT_SENSITIVITY};

/// What `herald gadget` does. The configuration file is herald's global `--config`.
#[derive(Debug, Subcommand)]
pub enum GadgetCommand {
    /// Run the gadget as a service, from the gadget's own file, which --config must
    /// name (herald.toml, the server's, is not read)
    Run,
    /// Send a message to the agent, as typed on the device
    Say {
        /// The message
        text: String,
        #[command(flatten)]
        target: Target,
    },
    /// Send an event; with --notify the agent hears about it
    Event {
        /// The event's name (e.g. doorbell)
        name: String,
        /// Its data, as JSON
        #[arg(long)]
        data: Option<String>,
        /// Tell the agent
        #[arg(long)]
        notify: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Press a button: talk, cancel, up or down
    Press {
        /// talk, cancel, up or down
        button: String,
        /// How long to hold it, in seconds (cancel held 2 s starts a new conversation)
        #[arg(long, default_value_t = 0.1)]
        hold: f64,
        #[command(flatten)]
        target: Target,
    },
    /// List the sound devices, with the index and name [audio] input and output take
    AudioDevices,
    /// Record 3 s from the microphone, print how loud it was and play it back (sends
    /// nothing to any server)
    AudioCheck {
        /// The input device [default: [audio] input of --config, else default]
        #[arg(long)]
        input: Option<String>,
        /// The output device [default: [audio] output of --config, else default]
        #[arg(long)]
        output: Option<String>,
    },
    /// The wake word: record it in your voice, make it, try it, measure it
    WakeWord {
        #[command(subcommand)]
        command: wake_word::commands::WakeWordCommand,
        #[command(flatten)]
        target: Target,
    },
    /// Show the device's state, its outputs and the last replies
    Status {
        /// Print JSON
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
}

/// Which running gadget a command talks to.
#[derive(Debug, Args)]
pub struct Target {
    /// The gadget's state directory [default: state_dir of --config, else gadget in the
    /// data directory]
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

/// Runs `command`; `config_file` is `--config`, `data_dir` the data directory.
pub fn run(
    command: GadgetCommand,
    config_file: Option<&Path>,
    data_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let load = |path: &Path| GadgetConfig::load(path).map_err(anyhow::Error::from);
    let state_dir = |target: Option<&Target>, config: Option<&GadgetConfig>| {
        target
            .and_then(|t| t.state_dir.clone())
            .or_else(|| config.and_then(|c| c.state_dir.clone()))
            .or_else(|| data_dir.map(service::default_state_dir))
            .context("no state directory: pass --state-dir or --data-dir")
    };
    let (request, target) = match command {
        GadgetCommand::Run => {
            let path = config_file.context("herald gadget run needs --config FILE")?;
            let config = load(path)?;
            let dir = state_dir(None, Some(&config))?;
            return service::run(config, dir);
        }
        GadgetCommand::AudioDevices => return sound::list_devices(),
        GadgetCommand::AudioCheck { input, output } => {
            let config = config_file.map(load).transpose()?.map(|c| c.audio);
            let pick = |flag: Option<String>, configured: Option<String>| {
                flag.or(configured).unwrap_or_else(|| "default".to_owned())
            };
            let input = pick(input, config.as_ref().and_then(|a| a.input.clone()));
            let output = pick(output, config.and_then(|a| a.output));
            return sound::check(&input, &output);
        }
        GadgetCommand::WakeWord { command, target } => {
            let config = config_file.map(load).transpose()?;
            let dir = state_dir(Some(&target), config.as_ref())?;
            let input = config.and_then(|c| c.audio.input);
            return wake_word::commands::run(command, &dir, input);
        }
        GadgetCommand::Say { text, target } => (Request::Say { text }, target),
        GadgetCommand::Event {
            name,
            data,
            notify,
            target,
        } => {
            let data = data
                .map(|d| serde_json::from_str::<Value>(&d))
                .transpose()
                .context("--data is not JSON")?;
            (Request::Event { name, data, notify }, target)
        }
        GadgetCommand::Press {
            button,
            hold,
            target,
        } => {
            if !(0.0..=10.0).contains(&hold) {
                anyhow::bail!("--hold is 0 to 10 seconds");
            }
            let hold_ms = Some((hold * 1000.0).round() as u64);
            (Request::Press { button, hold_ms }, target)
        }
        GadgetCommand::Status { json, target } => {
            let config = config_file.map(load).transpose()?;
            let dir = state_dir(Some(&target), config.as_ref())?;
            let status = ask(&dir, &Request::Status)?;
            if json {
                println!("{status:#}");
            } else {
                print!("{}", describe(&status));
            }
            return Ok(());
        }
    };
    let config = match (&target.state_dir, config_file) {
        (None, Some(path)) => Some(load(path)?),
        _ => None,
    };
    let dir = state_dir(Some(&target), config.as_ref())?;
    ask(&dir, &request).map(drop)
}

/// Why a build without the `sound` feature cannot use sound cards.
#[cfg(not(all(target_os = "linux", feature = "sound")))]
const NO_SOUND: &str = "this herald was built without sound cards: on Linux, build it with \
                        `--features sound` (docs/linux-gadget.md)";

#[cfg(all(target_os = "linux", feature = "sound"))]
mod sound {
    //! `audio-devices` and `audio-check`.
    use std::time::Duration;

    use super::audio::card::{list, CardSound};
    use super::audio::{level, DEVICE_RATE};
    use herald_sim::runner::LiveSound;

    const CHECK: Duration = Duration::from_secs(3);

    pub fn list_devices() -> anyhow::Result<()> {
        let format = |c: Option<(u32, u16)>| {
            c.map_or("-".to_owned(), |(rate, channels)| {
                format!("{rate} Hz × {channels}")
            })
        };
        println!(
            "{:>3}  {:<24} {:<16} {:<16} description",
            "#", "name", "input", "output"
        );
        for device in list()? {
            println!(
                "{:>3}  {:<24} {:<16} {:<16} {}",
                device.index,
                device.id,
                format(device.input),
                format(device.output),
                device.name
            );
        }
        Ok(())
    }

    pub fn check(input: &str, output: &str) -> anyhow::Result<()> {
        let mut sound = CardSound::open(Some(input), Some(output), Default::default())?;
        println!("recording {} s from {input}...", CHECK.as_secs());
        let heard = sound.record(CHECK)?;
        let (rms, peak) = level(&heard);
        println!("level: {rms:.1} dBFS RMS, peak {peak:.1} dBFS");
        if peak < -50.0 {
            println!("(that is near silence: is the microphone muted, or the wrong device?)");
        }
        println!("playing it back on {output}...");
        sound.play(DEVICE_RATE, &heard);
        std::thread::sleep(CHECK + Duration::from_millis(500));
        Ok(())
    }
}

#[cfg(not(all(target_os = "linux", feature = "sound")))]
mod sound {
    pub fn list_devices() -> anyhow::Result<()> {
        anyhow::bail!("{}", super::NO_SOUND)
    }

    pub fn check(_: &str, _: &str) -> anyhow::Result<()> {
        anyhow::bail!("{}", super::NO_SOUND)
    }
}

fn ask(state_dir: &Path, request: &Request) -> anyhow::Result<Value> {
    control::request(&state_dir.join(control::SOCKET), request)?.map_err(anyhow::Error::msg)
}

/// `herald gadget status` for a person.
fn describe(status: &Value) -> String {
    let text = |key: &str| status.get(key).and_then(Value::as_str).unwrap_or("?");
    let mut out = format!(
        "device   {} (herald {})\nphase    {}{}\nscreen   {}\n",
        text("device_id"),
        text("version"),
        text("phase"),
        if status["paired"] == Value::Bool(true) {
            ", paired"
        } else {
            ""
        },
        text("shows"),
    );
    if let Some(outputs) = status.get("outputs").and_then(Value::as_object) {
        for (name, on) in outputs {
            let on = if on == &Value::Bool(true) {
                "on"
            } else {
                "off"
            };
            out.push_str(&format!("output   {name}: {on}\n"));
        }
    }
    if let Some(sound) = status.get("sound").and_then(Value::as_object) {
        for (card, state) in sound {
            let state = state.as_str().unwrap_or("?");
            out.push_str(&format!("sound    {card}: {state}\n"));
        }
    }
    if let Some(replies) = status.get("replies").and_then(Value::as_array) {
        for reply in replies.iter().filter_map(Value::as_str) {
            out.push_str(&format!("reply    {reply}\n"));
        }
    }
    out
}
