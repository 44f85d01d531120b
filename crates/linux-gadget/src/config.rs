//! The service's configuration file: where the server is, who the device is, where it
//! keeps its state, and which GPIO lines are its buttons, status LED and outputs.
//!
//! ```toml
//! server = "ws://herald.local:8765/gadget"
//! name = "Kitchen"
//! token = "…"                              # the server's GADGET_ACCESS_TOKEN, if it has one
//! state_dir = "/var/lib/herald-gadget"     # default: gadget in the data directory
//!
//! [audio]                                # `herald gadget audio-devices` lists the names
//! input = "USB"
//! output = "USB"
//! tap_to_talk = true                     # a tap on TALK: listen until the speaker stops
//! end_silence_ms = 700                   # the silence that ends such a turn
//! max_utterance_s = 30
//!
//! [gpio]
//! chip = "/dev/gpiochip0"
//! talk = 17
//! cancel = 27
//! status_led = 22
//!
//! [[gpio.outputs]]
//! name = "lamp"
//! line = 23
//! description = "The lamp on the desk."
//! ```
//!
//! A file that holds a token must not be readable by others (mode `o-r`): the token lets
//! anyone enroll devices on the server. Group-readable is allowed so that `root:herald`
//! with mode 0640 works for a service user.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use herald_gadget_proto::limits::MAX_RECORDING_SECS;
use serde::Deserialize;

/// Longest output name: it becomes part of an action name.
const MAX_OUTPUT_NAME: usize = 32;
/// Most outputs one device exposes.
pub const MAX_OUTPUTS: usize = 16;
/// Default debounce window for the buttons.
const DEFAULT_DEBOUNCE_MS: u64 = 30;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid gadget configuration: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{path} holds an access token but others can read it: `chmod o-rw {path}` \
         (and own it by the service's user or group)"
    )]
    Exposed { path: PathBuf },
}

/// The whole file.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GadgetConfig {
    /// The server's gadget endpoint, `ws://` or `wss://`.
    pub server: String,
    /// The device's name, as the owner sees it.
    pub name: String,
    /// The server's access token (its GADGET_ACCESS_TOKEN).
    #[serde(default)]
    pub token: Option<String>,
    /// Where the key and the control socket live.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    #[serde(default)]
    pub gpio: Option<GpioConfig>,
    #[serde(default)]
    pub audio: AudioConfig,
}

/// The sound cards, each named as `herald gadget audio-devices` lists it: `default`, an
/// index, a whole name or a part of one. Without an input the device has no microphone,
/// without an output no speaker (and says so in `hello`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioConfig {
    pub input: Option<String>,
    pub output: Option<String>,
    /// A short tap on TALK starts a hands-free turn: it ends when the speaker stops.
    #[serde(default)]
    pub tap_to_talk: bool,
    /// The silence after speech that ends a hands-free turn.
    #[serde(default = "default_end_silence")]
    pub end_silence_ms: u64,
    /// The longest hands-free turn.
    #[serde(default = "default_max_utterance")]
    pub max_utterance_s: u64,
    /// A short note when a hands-free turn starts listening.
    #[serde(default = "yes")]
    pub earcons: bool,
    /// Listen all the time for the wake word made with `herald gadget wake-word`; when
    /// it is heard, a hands-free turn starts as a tap on TALK would.
    #[serde(default)]
    pub wake_word: bool,
    /// 0 to 1: higher hears the word more often, and other sounds as the word too.
    #[serde(default = "default_wake_sensitivity")]
    pub wake_sensitivity: f32,
}

impl Default for AudioConfig {
    fn default() -> Self {
        AudioConfig {
            input: None,
            output: None,
            tap_to_talk: false,
            end_silence_ms: default_end_silence(),
            max_utterance_s: default_max_utterance(),
            earcons: true,
            wake_word: false,
            wake_sensitivity: default_wake_sensitivity(),
        }
    }
}

fn default_wake_sensitivity() -> f32 {
    crate::wake_word::DEFAULT_SENSITIVITY
}

fn default_end_silence() -> u64 {
    700
}

fn default_max_utterance() -> u64 {
    30
}

impl AudioConfig {
    fn check(&self) -> Result<(), String> {
        if !(200..=5000).contains(&self.end_silence_ms) {
            return Err("end_silence_ms must be 200 to 5000".to_owned());
        }
        // The device core ends every recording at this length anyway.
        let longest = MAX_RECORDING_SECS;
        if !(1..=longest).contains(&self.max_utterance_s) {
            return Err(format!("max_utterance_s must be 1 to {longest}"));
        }
        if self.tap_to_talk && self.input.is_none() {
            return Err("tap_to_talk needs an input (a microphone)".to_owned());
        }
        if self.wake_word && self.input.is_none() {
            return Err("wake_word needs an input (a microphone)".to_owned());
        }
        if !(0.0..=1.0).contains(&self.wake_sensitivity) {
            return Err("wake_sensitivity must be 0 to 1".to_owned());
        }
        Ok(())
    }
}

/// The GPIO lines, by their offset on the chip (BCM numbers on a Raspberry Pi).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpioConfig {
    /// The GPIO character device.
    #[serde(default = "default_chip")]
    pub chip: PathBuf,
    /// Buttons close to ground, with the line's pull-up enabled (active low). Set false
    /// for buttons that drive the line high (then pulled down).
    #[serde(default = "yes")]
    pub buttons_active_low: bool,
    /// How long a button's level must hold before it counts.
    #[serde(default = "default_debounce")]
    pub debounce_ms: u64,
    pub talk: Option<u32>,
    pub cancel: Option<u32>,
    pub up: Option<u32>,
    pub down: Option<u32>,
    /// The status LED (lit when the line is high).
    pub status_led: Option<u32>,
    #[serde(default)]
    pub outputs: Vec<OutputConfig>,
}

/// One output line, offered to the agent as the action `output.NAME`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    pub name: String,
    pub line: u32,
    /// What it switches, for the model.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether "on" drives the line low (a relay board that switches on low).
    #[serde(default)]
    pub active_low: bool,
}

/// Everything but the token, which never reaches a log.
impl std::fmt::Debug for GadgetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GadgetConfig")
            .field("server", &self.server)
            .field("name", &self.name)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("state_dir", &self.state_dir)
            .field("gpio", &self.gpio)
            .field("audio", &self.audio)
            .finish()
    }
}

fn default_chip() -> PathBuf {
    PathBuf::from("/dev/gpiochip0")
}

fn yes() -> bool {
    true
}

fn default_debounce() -> u64 {
    DEFAULT_DEBOUNCE_MS
}

impl GadgetConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<GadgetConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config = GadgetConfig::parse(&text).map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        if config.token.is_some() && readable_by_others(path) {
            return Err(ConfigError::Exposed {
                path: path.to_owned(),
            });
        }
        Ok(config)
    }

    /// Parses and checks the text of a file.
    pub fn parse(text: &str) -> Result<GadgetConfig, String> {
        let mut config: GadgetConfig = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        if !(config.server.starts_with("ws://") || config.server.starts_with("wss://")) {
            return Err("server must be a ws:// or wss:// URL".to_owned());
        }
        if config.name.trim().is_empty() {
            return Err("name must not be empty".to_owned());
        }
        config.token = config.token.filter(|t| !t.is_empty());
        if let Some(gpio) = &config.gpio {
            gpio.check()?;
        }
        config.audio.check()?;
        if config.audio.tap_to_talk && config.gpio.as_ref().is_none_or(|g| g.talk.is_none()) {
            return Err("tap_to_talk needs a TALK button ([gpio] talk)".to_owned());
        }
        Ok(config)
    }
}

impl GpioConfig {
    fn check(&self) -> Result<(), String> {
        let mut used = BTreeSet::new();
        let lines = [self.talk, self.cancel, self.up, self.down, self.status_led];
        let outputs = self.outputs.iter().map(|o| Some(o.line));
        for line in lines.into_iter().chain(outputs).flatten() {
            if !used.insert(line) {
                return Err(format!("GPIO line {line} is used twice"));
            }
        }
        if self.outputs.len() > MAX_OUTPUTS {
            return Err(format!("at most {MAX_OUTPUTS} outputs"));
        }
        let mut names = BTreeSet::new();
        for output in &self.outputs {
            let name = &output.name;
            let valid = !name.is_empty()
                && name.len() <= MAX_OUTPUT_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !valid {
                return Err(format!(
                    "output name {name:?}: 1 to {MAX_OUTPUT_NAME} of a-z, 0-9 and _"
                ));
            }
            if !names.insert(name) {
                return Err(format!("output {name} is named twice"));
            }
        }
        if self.debounce_ms > 1000 {
            return Err("debounce_ms must be at most 1000".to_owned());
        }
        Ok(())
    }
}

#[cfg(unix)]
fn readable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    // Unknown counts as exposed: a token is not run with on a guess.
    std::fs::metadata(path).map_or(true, |m| m.permissions().mode() & 0o004 != 0)
}

#[cfg(not(unix))]
fn readable_by_others(_: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
        server = "ws://127.0.0.1:8765/gadget"
        name = "Kitchen"
        token = "secret-token"
        [audio]
        input = "USB PnP"
        [gpio]
        talk = 17
        cancel = 27
        status_led = 22
        [[gpio.outputs]]
        name = "lamp"
        line = 23
        description = "The desk lamp."
    "#;

    #[test]
    fn a_full_file_parses_with_defaults() {
        let config = GadgetConfig::parse(FULL).unwrap();
        assert_eq!(config.token.as_deref(), Some("secret-token"));
        assert!(!format!("{config:?}").contains("secret-token"));
        assert_eq!(config.audio.input.as_deref(), Some("USB PnP"));
        assert_eq!(config.audio.output, None);
        let gpio = config.gpio.unwrap();
        assert_eq!(gpio.chip, PathBuf::from("/dev/gpiochip0"));
        assert!(gpio.buttons_active_low);
        assert_eq!((gpio.talk, gpio.up, gpio.debounce_ms), (Some(17), None, 30));
        assert_eq!(gpio.outputs[0].name, "lamp");
        assert!(!gpio.outputs[0].active_low);
    }

    #[test]
    fn mistakes_are_named() {
        let bad = |text: &str, what: &str| {
            let err = GadgetConfig::parse(text).unwrap_err();
            assert!(err.contains(what), "{err}");
        };
        bad("name = \"x\"", "server");
        bad("server = \"http://x\"\nname = \"x\"", "ws://");
        bad("server = \"ws://x\"\nname = \"x\"\ncolour = 1", "colour");
        let audio = |extra: &str| format!("server = \"ws://x\"\nname = \"x\"\n[audio]\n{extra}");
        bad(
            &audio("input = \"pulse\"\nend_silence_ms = 50"),
            "end_silence_ms",
        );
        bad(
            &audio("input = \"pulse\"\nmax_utterance_s = 0"),
            "max_utterance_s",
        );
        bad(&audio("tap_to_talk = true"), "needs an input");
        bad(
            &audio("input = \"pulse\"\nmax_utterance_s = 45"),
            "max_utterance_s",
        );
        bad(
            &audio("input = \"pulse\"\ntap_to_talk = true"),
            "TALK button",
        );
        let gpio = |extra: &str| format!("server = \"ws://x\"\nname = \"x\"\n[gpio]\n{extra}");
        bad(&gpio("talk = 17\ncancel = 17"), "used twice");
        bad(
            &gpio("[[gpio.outputs]]\nname = \"Lamp!\"\nline = 3"),
            "output name",
        );
        bad(
            &gpio("[[gpio.outputs]]\nname = \"a\"\nline = 3\n[[gpio.outputs]]\nname = \"a\"\nline = 4"),
            "named twice",
        );
    }

    #[test]
    fn a_token_readable_by_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gadget.toml");
        std::fs::write(&path, FULL).unwrap();
        let mode = |m| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m));
        mode(0o644).unwrap();
        let err = GadgetConfig::load(&path).unwrap_err();
        assert!(matches!(err, ConfigError::Exposed { .. }), "{err}");
        // The message never repeats the token.
        assert!(!err.to_string().contains("secret-token"));
        mode(0o640).unwrap();
        GadgetConfig::load(&path).unwrap();
        // Without a token the file may be public.
        std::fs::write(&path, "server = \"ws://x\"\nname = \"x\"\n").unwrap();
        mode(0o644).unwrap();
        GadgetConfig::load(&path).unwrap();
        assert!(matches!(
            GadgetConfig::load(&dir.path().join("missing.toml")),
            Err(ConfigError::Read { .. })
        ));
    }
}
