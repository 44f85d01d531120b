//! What `herald gadget status` reports: the device's state and the agent's last replies
//! from the runner's snapshot, and the outputs.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::audio::SoundHealth;
use herald_sim::runner::Snapshot;

/// Shared between the panel and the control socket.
#[derive(Debug, Default)]
pub struct Status {
    outputs: Mutex<Vec<(String, bool)>>,
    sound: Arc<SoundHealth>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere leaves plain data behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Status {
    /// With the cards' health as the sound thread keeps it.
    pub fn new(sound: Arc<SoundHealth>) -> Status {
        Status {
            outputs: Mutex::default(),
            sound,
        }
    }

    pub fn sound(&self) -> &Arc<SoundHealth> {
        &self.sound
    }

    pub fn set_outputs(&self, outputs: Vec<(String, bool)>) {
        *locked(&self.outputs) = outputs;
    }

    /// The answer to a `status` request.
    pub fn to_json(&self, snapshot: &Snapshot) -> Value {
        let outputs: serde_json::Map<String, Value> = locked(&self.outputs)
            .iter()
            .map(|(name, on)| (name.clone(), Value::Bool(*on)))
            .collect();
        let sound = self.sound.now();
        json!({
            "device_id": snapshot.device_id,
            "version": snapshot.firmware,
            "phase": snapshot.phase.name(),
            "paired": snapshot.paired,
            "screen": snapshot.shown.screen.name(),
            "shows": snapshot.shown.summary(),
            "recording": snapshot.recording,
            "note": snapshot.note,
            "outputs": outputs,
            "sound": {
                "microphone": sound.microphone.to_string(),
                "speaker": sound.speaker.to_string(),
            },
            "replies": snapshot.replies,
        })
    }
}
