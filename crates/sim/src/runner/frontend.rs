//! A frontend's side of the board (the script or the terminal): the commands it sends,
//! the [`Handle`] it sends them through and the [`Snapshot`] it reads back.

use std::collections::VecDeque;

use herald_device::{Button, DeviceConfig, Phase, Screen};
use tokio::sync::{mpsc, oneshot, watch};

use crate::render::Shown;

/// What a frontend asks of the board.
#[derive(Debug)]
pub enum Command {
    Press(Button),
    Release(Button),
    /// Type a message to the agent.
    Text(String),
    /// Send an `event`; with `notify` the agent receives it as a message.
    Event {
        name: String,
        data: Option<serde_json::Value>,
        notify: bool,
    },
    /// The answer to an [`super::Invocation`].
    Complete {
        id: String,
        result: Result<serde_json::Value, String>,
    },
    /// Hold TALK while the microphone hears this clip to its end, then let go.
    Say(Vec<i16>),
    /// Power off: close the connection and save the speaker's audio.
    Quit,
}

pub(super) type Answer = Result<(), String>;

pub(super) struct Request {
    pub(super) command: Command,
    pub(super) done: oneshot::Sender<Answer>,
}

/// A frontend's end: send commands, read snapshots.
#[derive(Clone)]
pub struct Handle {
    pub(super) requests: mpsc::Sender<Request>,
    pub(super) snapshot: watch::Receiver<Snapshot>,
    pub(super) config: DeviceConfig,
}

impl Handle {
    /// Runs `command`; returns once its effect is in the snapshot (for [`Command::Say`],
    /// once TALK is released).
    pub async fn run(&self, command: Command) -> Answer {
        let stopped = || "the simulator stopped".to_owned();
        let (done, answer) = oneshot::channel();
        self.requests
            .send(Request { command, done })
            .await
            .map_err(|_| stopped())?;
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    pub fn snapshot(&self) -> watch::Receiver<Snapshot> {
        self.snapshot.clone()
    }

    /// The board profile (the firmware version is the one it booted first).
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }
}

/// What the frontends see of the board.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub shown: Shown,
    /// The latest screens entered, oldest first, numbered from 1: `wait` looks here so a
    /// screen shown only briefly is not missed.
    pub entered: VecDeque<(u64, Screen)>,
    pub device_id: String,
    pub firmware: String,
    pub phase: Phase,
    pub paired: bool,
    pub volume: u8,
    pub brightness: u8,
    pub led: Option<String>,
    pub recording: bool,
    /// The latest thing that happened beside the screen (an LED, an update, an error).
    pub note: Option<String>,
    /// The agent's last replies, as the screen showed them, oldest first.
    pub replies: VecDeque<String>,
}

impl Snapshot {
    /// The number of the screen shown, in [`Snapshot::entered`].
    pub fn latest(&self) -> u64 {
        self.entered.back().map_or(0, |(n, _)| *n)
    }
}
