//! Configuration: built-in defaults, then one TOML file, then the environment.
//!
//! The environment names come from the protocol documents (`GADGET_ACCESS_TOKEN`,
//! `GADGET_ALLOWED_USERS`, ...) and are a public interface: they keep their meaning.
//! Command-line flags are applied last by the binary.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use herald_gadget_proto::limits;
use serde::Deserialize;

pub const DEFAULT_GADGET_PORT: u16 = 8765;
pub const DEFAULT_MOBILE_PORT: u16 = 8787;
pub const DEFAULT_ADMIN_PORT: u16 = 8766;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{name}: {reason}")]
    Invalid { name: String, reason: String },
}

/// A token or password: readable by the code that checks it, hidden from `Debug`, so a
/// logged configuration never leaks it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// Everything `herald serve` needs to run.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the store and recordings live; `None` means the platform's data directory.
    pub data_dir: Option<PathBuf>,
    /// PEM certificate chain and private key; both set means `wss://`.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub gadget: GadgetConfig,
    pub mobile: MobileConfig,
    pub admin: AdminConfig,
    pub inbox: InboxConfig,
    pub push: PushConfig,
    pub questions: QuestionsConfig,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GadgetConfig {
    pub host: IpAddr,
    pub port: u16,
    pub path: String,
    pub heartbeat_s: u32,
    pub max_utterance_s: u32,
    /// A speaker gadget hears a soft "still working" cue once a turn has been quiet this
    /// long, and again every `cue_every_s`; 0: no cues at all (not even "heard" and
    /// "failed").
    pub cue_after_s: u32,
    pub cue_every_s: u32,
    /// A turn the agent leaves silent this long is ended as failed.
    pub turn_timeout_s: u32,
    /// Devices must present this token in `hello` when set.
    pub access_token: Option<Secret>,
    /// Device ids authorized without pairing.
    pub allowed_users: Vec<String>,
    pub allow_all_users: bool,
    /// Firmware updates: seconds to wait for `ota.ready`, for each `ota.ack`, and for
    /// `ota.done` before abandoning an attempt (the spec's 30, 30 and 60).
    pub ota_ready_timeout_s: u64,
    pub ota_ack_timeout_s: u64,
    pub ota_done_timeout_s: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MobileConfig {
    pub host: IpAddr,
    pub port: u16,
    pub path: String,
    /// The app token (`MOBILE_TOKEN`); generated into the data directory when unset.
    pub token: Option<Secret>,
    /// More tokens, `label:token` pairs separated by commas (`MOBILE_EXTRA_TOKENS`).
    pub extra_tokens: Option<Secret>,
    /// User ids allowed without pairing.
    pub allowed_users: Vec<String>,
    /// When not empty, only these device ids may connect.
    pub allowed_devices: Vec<String>,
    pub allow_all_users: bool,
    /// Tokens that may send `deliver` to any device.
    pub deliver_tokens: Vec<Secret>,
    /// Let an app connected from loopback `deliver` without a deliver token, to the
    /// devices of its own user only (`MOBILE_DELIVER_FROM_LOOPBACK`). On by default, as
    /// the protocol has it (cron jobs on the agent's machine push without a token); turn
    /// it off behind a reverse proxy on the same host, where every phone is on loopback.
    pub deliver_from_loopback: bool,
    pub avatar_url: Option<String>,
    /// Longer replies are split into chunks of at most this many characters.
    pub max_message_chars: u32,
    /// A turn the agent leaves silent this long is ended as failed, and the phone told.
    pub turn_timeout_s: u32,
}

impl Default for MobileConfig {
    fn default() -> Self {
        MobileConfig {
            host: IpAddr::from([0, 0, 0, 0]),
            port: DEFAULT_MOBILE_PORT,
            path: "/ws".into(),
            token: None,
            extra_tokens: None,
            allowed_users: Vec::new(),
            allowed_devices: Vec::new(),
            allow_all_users: false,
            deliver_tokens: Vec::new(),
            deliver_from_loopback: true,
            avatar_url: None,
            max_message_chars: herald_mobile_proto::limits::MAX_MESSAGE_CHARS,
            turn_timeout_s: 180,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Loopback by default: the admin API changes who may talk to the agent.
    pub host: IpAddr,
    /// 0 picks a free port; the CLI finds it in the data directory either way.
    pub port: u16,
}

/// Questions shown on every device of the person asked (docs/gadgets.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuestionsConfig {
    /// Show a question on the person's other connected phones too.
    pub share: bool,
    /// People (user ids) and phones (device ids) that get no copies of questions asked
    /// elsewhere.
    pub not_to: Vec<String>,
}

impl Default for QuestionsConfig {
    fn default() -> Self {
        QuestionsConfig {
            share: true,
            not_to: Vec::new(),
        }
    }
}

/// Notifications to apps that are closed (Web Push; docs/notifications.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushConfig {
    /// Offer notifications to apps (`HERALD_PUSH=0` turns them off).
    pub enabled: bool,
    /// Who runs this server, for push services to reach (a `mailto:` or `https:` URL).
    pub contact: String,
    /// Accept push endpoints on private and loopback addresses, plain `http://` there
    /// included: only for a push service on the owner's own network
    /// (`HERALD_PUSH_ALLOW_PRIVATE`).
    pub allow_private_endpoints: bool,
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            enabled: true,
            contact: "mailto:herald@localhost".into(),
            allow_private_endpoints: false,
        }
    }
}

/// The recordings and uploads handed to the agent (`<data dir>/inbox`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InboxConfig {
    /// The most the inbox may hold, in MiB; the oldest files make room. 0: no limit.
    pub max_mb: u64,
    /// Files older than this many days are removed. 0: kept until the quota needs room.
    pub max_age_days: u32,
}

impl Default for InboxConfig {
    fn default() -> Self {
        InboxConfig {
            max_mb: 2048,
            max_age_days: 30,
        }
    }
}

impl Default for GadgetConfig {
    fn default() -> Self {
        GadgetConfig {
            host: IpAddr::from([0, 0, 0, 0]),
            port: DEFAULT_GADGET_PORT,
            path: "/gadget".into(),
            heartbeat_s: 20,
            max_utterance_s: 60,
            cue_after_s: 4,
            cue_every_s: 8,
            turn_timeout_s: 180,
            access_token: None,
            allowed_users: Vec::new(),
            allow_all_users: false,
            ota_ready_timeout_s: limits::OTA_READY_TIMEOUT_SECS,
            ota_ack_timeout_s: limits::OTA_ACK_TIMEOUT_SECS,
            ota_done_timeout_s: limits::OTA_DONE_TIMEOUT_SECS,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            host: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_ADMIN_PORT,
        }
    }
}

impl Config {
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    /// Apply the environment variables the protocol documents define, read through
    /// `var` so tests need not touch the process environment.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(token) = var("GADGET_ACCESS_TOKEN").filter(|t| !t.is_empty()) {
            self.gadget.access_token = Some(Secret(token));
        }
        if let Some(users) = var("GADGET_ALLOWED_USERS") {
            self.gadget.allowed_users = split_list(&users);
        }
        if let Some(all) = var("GADGET_ALLOW_ALL_USERS") {
            self.gadget.allow_all_users = parse_bool("GADGET_ALLOW_ALL_USERS", &all)?;
        }
        let mobile = &mut self.mobile;
        if let Some(host) = var("MOBILE_HOST").filter(|h| !h.is_empty()) {
            mobile.host = host.parse().map_err(|_| ConfigError::Invalid {
                name: "MOBILE_HOST".into(),
                reason: format!("not an IP address: {host:?}"),
            })?;
        }
        if let Some(port) = var("MOBILE_PORT").filter(|p| !p.is_empty()) {
            mobile.port = port.parse().map_err(|_| ConfigError::Invalid {
                name: "MOBILE_PORT".into(),
                reason: format!("not a port number: {port:?}"),
            })?;
        }
        if let Some(path) = var("MOBILE_PATH").filter(|p| !p.is_empty()) {
            mobile.path = path;
        }
        if let Some(token) = var("MOBILE_TOKEN").filter(|t| !t.trim().is_empty()) {
            mobile.token = Some(Secret(token));
        }
        if let Some(extra) = var("MOBILE_EXTRA_TOKENS") {
            mobile.extra_tokens = Some(Secret(extra));
        }
        if let Some(users) = var("MOBILE_ALLOWED_USERS") {
            mobile.allowed_users = split_list(&users);
        }
        if let Some(devices) = var("MOBILE_ALLOWED_DEVICES") {
            mobile.allowed_devices = split_list(&devices);
        }
        if let Some(all) = var("MOBILE_ALLOW_ALL_USERS") {
            mobile.allow_all_users = parse_bool("MOBILE_ALLOW_ALL_USERS", &all)?;
        }
        if let Some(tokens) = var("MOBILE_DELIVER_TOKENS") {
            mobile.deliver_tokens = split_list(&tokens).into_iter().map(Secret).collect();
        }
        // Defaults to on, so `0`, `false`, `no`, `off` and an empty value all turn it off.
        if let Some(on) = var("MOBILE_DELIVER_FROM_LOOPBACK") {
            mobile.deliver_from_loopback = parse_bool("MOBILE_DELIVER_FROM_LOOPBACK", &on)?;
        }
        if let Some(url) = var("MOBILE_AVATAR_URL").filter(|u| !u.is_empty()) {
            mobile.avatar_url = Some(url);
        }
        if let Some(on) = var("HERALD_PUSH") {
            self.push.enabled = parse_bool("HERALD_PUSH", &on)?;
        }
        if let Some(on) = var("HERALD_PUSH_ALLOW_PRIVATE") {
            self.push.allow_private_endpoints = parse_bool("HERALD_PUSH_ALLOW_PRIVATE", &on)?;
        }
        if let Some(mb) = var("HERALD_INBOX_MAX_MB").filter(|v| !v.is_empty()) {
            self.inbox.max_mb = parse_number("HERALD_INBOX_MAX_MB", &mb)?;
        }
        if let Some(days) = var("HERALD_INBOX_MAX_AGE_DAYS").filter(|v| !v.is_empty()) {
            self.inbox.max_age_days = parse_number("HERALD_INBOX_MAX_AGE_DAYS", &days)?;
        }
        Ok(())
    }

    /// Check what serde cannot: ranges and pairs that only make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |name: &str, reason: &str| ConfigError::Invalid {
            name: name.into(),
            reason: reason.into(),
        };
        let contact = &self.push.contact;
        if !(contact.starts_with("mailto:") || contact.starts_with("https://")) {
            return Err(invalid(
                "push.contact",
                "must be a mailto: or https: URL (push services use it to reach you)",
            ));
        }
        if !(5..=300).contains(&self.gadget.heartbeat_s) {
            return Err(invalid(
                "gadget.heartbeat_s",
                "must be between 5 and 300 seconds",
            ));
        }
        if !(1..=600).contains(&self.gadget.max_utterance_s) {
            return Err(invalid(
                "gadget.max_utterance_s",
                "must be between 1 and 600 seconds",
            ));
        }
        if !(1..=120).contains(&self.gadget.cue_every_s) {
            return Err(invalid(
                "gadget.cue_every_s",
                "must be between 1 and 120 seconds",
            ));
        }
        if self.gadget.cue_after_s > 120 {
            return Err(invalid(
                "gadget.cue_after_s",
                "must be 0 (no cues) to 120 seconds",
            ));
        }
        for (key, seconds) in [
            ("gadget.turn_timeout_s", self.gadget.turn_timeout_s),
            ("mobile.turn_timeout_s", self.mobile.turn_timeout_s),
        ] {
            if !(10..=3600).contains(&seconds) {
                return Err(invalid(key, "must be between 10 and 3600 seconds"));
            }
        }
        let ota_timeouts = [
            self.gadget.ota_ready_timeout_s,
            self.gadget.ota_ack_timeout_s,
            self.gadget.ota_done_timeout_s,
        ];
        if ota_timeouts.iter().any(|t| !(1..=3600).contains(t)) {
            return Err(invalid(
                "gadget.ota_*_timeout_s",
                "must be between 1 and 3600 seconds",
            ));
        }
        if !self.gadget.path.starts_with('/') {
            return Err(invalid("gadget.path", "must start with /"));
        }
        if !self.mobile.path.starts_with('/') {
            return Err(invalid("mobile.path", "must start with /"));
        }
        if (1..16).contains(&self.inbox.max_mb) {
            return Err(invalid(
                "inbox.max_mb",
                "must be 0 (no limit) or at least 16, room for the largest upload",
            ));
        }
        if self.mobile.max_message_chars < 16 {
            return Err(invalid("mobile.max_message_chars", "must be at least 16"));
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => Err(invalid("tls_key", "tls_cert is set but tls_key is not")),
            (None, Some(_)) => Err(invalid("tls_cert", "tls_key is set but tls_cert is not")),
            _ => Ok(()),
        }
    }

    pub fn tls(&self) -> Option<(&Path, &Path)> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            _ => None,
        }
    }
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError::Invalid {
        name: name.into(),
        reason: format!("expected a whole number, got {value:?}"),
    })
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(ConfigError::Invalid {
            name: name.into(),
            reason: format!("expected 1/0 or true/false, got {value:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_environment() {
        let mut config: Config = toml::from_str(
            r#"
            [gadget]
            port = 9000
            heartbeat_s = 30
            allowed_users = ["hg-aaaaaaaaaaaaaaaa"]
            "#,
        )
        .unwrap();
        assert_eq!(config.gadget.port, 9000);
        assert_eq!(config.gadget.path, "/gadget");
        config
            .apply_env(|name| match name {
                "GADGET_ALLOWED_USERS" => Some("hg-1, hg-2,,".into()),
                "GADGET_ALLOW_ALL_USERS" => Some("1".into()),
                "GADGET_ACCESS_TOKEN" => Some("s3cret".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.gadget.allowed_users, ["hg-1", "hg-2"]);
        assert!(config.gadget.allow_all_users);
        assert_eq!(
            config.gadget.access_token.as_ref().map(Secret::expose),
            Some("s3cret")
        );
        assert!(!format!("{config:?}").contains("s3cret"));
        config.validate().unwrap();

        config
            .apply_env(|name| match name {
                "MOBILE_PORT" => Some("9999".into()),
                "MOBILE_PATH" => Some("/app".into()),
                "MOBILE_TOKEN" => Some("t0k3n".into()),
                "MOBILE_ALLOWED_DEVICES" => Some("tel-1,tel-2".into()),
                "MOBILE_DELIVER_FROM_LOOPBACK" => Some("0".into()),
                _ => None,
            })
            .unwrap();
        assert!(!config.mobile.deliver_from_loopback);
        config
            .apply_env(|name| match name {
                "HERALD_INBOX_MAX_MB" => Some("512".into()),
                "HERALD_INBOX_MAX_AGE_DAYS" => Some(" 7 ".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.inbox.max_mb, 512);
        assert_eq!(config.inbox.max_age_days, 7);
        assert_eq!(config.mobile.port, 9999);
        assert_eq!(config.mobile.path, "/app");
        assert_eq!(config.mobile.allowed_devices, ["tel-1", "tel-2"]);
        assert!(!format!("{:?}", config.mobile).contains("t0k3n"));
        assert!(config
            .clone()
            .apply_env(|n| (n == "MOBILE_PORT").then(|| "http".into()))
            .is_err());
    }

    #[test]
    fn deliver_from_loopback_is_on_unless_turned_off() {
        assert!(Config::default().mobile.deliver_from_loopback);
        let with = |value: &str| {
            let mut config = Config::default();
            let value = value.to_owned();
            config
                .apply_env(|n| (n == "MOBILE_DELIVER_FROM_LOOPBACK").then(|| value.clone()))
                .map(|()| config.mobile.deliver_from_loopback)
        };
        for off in ["0", "false", "no", "off", "FALSE", " No ", ""] {
            assert_eq!(with(off).ok(), Some(false), "{off:?}");
        }
        for on in ["1", "true", "yes", "on", "True"] {
            assert_eq!(with(on).ok(), Some(true), "{on:?}");
        }
        assert!(with("nope").is_err());
        assert!(with("2").is_err());
        // The file turns it off; the environment, when set, has the last word.
        let mut config: Config = toml::from_str("[mobile]\ndeliver_from_loopback = false").unwrap();
        assert!(!config.mobile.deliver_from_loopback);
        config.apply_env(|_| None).unwrap();
        assert!(!config.mobile.deliver_from_loopback);
        config
            .apply_env(|n| (n == "MOBILE_DELIVER_FROM_LOOPBACK").then(|| "1".into()))
            .unwrap();
        assert!(config.mobile.deliver_from_loopback);
    }

    #[test]
    fn rejects_bad_values() {
        assert!(toml::from_str::<Config>("[gadget]\nprot = 1").is_err());
        let mut config = Config::default();
        config.gadget.heartbeat_s = 2;
        assert!(config.validate().is_err());
        let config = Config {
            tls_cert: Some("cert.pem".into()),
            ..Config::default()
        };
        assert!(config.validate().is_err());
        let mut config = Config::default();
        assert!(config
            .apply_env(|n| (n == "GADGET_ALLOW_ALL_USERS").then(|| "maybe".into()))
            .is_err());
        assert!(config
            .apply_env(|n| (n == "HERALD_INBOX_MAX_MB").then(|| "lots".into()))
            .is_err());
        config.inbox.max_mb = 8;
        assert!(config.validate().is_err(), "a quota below one upload");
    }

    #[test]
    fn each_platform_s_turn_timeout_is_kept_within_its_range() {
        for (platform, seconds, ok) in [
            ("gadget", 9, false),
            ("gadget", 10, true),
            ("mobile", 9, false),
            ("mobile", 3600, true),
            ("mobile", 3601, false),
        ] {
            let mut config = Config::default();
            match platform {
                "gadget" => config.gadget.turn_timeout_s = seconds,
                _ => config.mobile.turn_timeout_s = seconds,
            }
            match config.validate() {
                Ok(()) => assert!(ok, "{platform} {seconds} s accepted"),
                Err(ConfigError::Invalid { name, .. }) => {
                    assert!(!ok, "{platform} {seconds} s refused");
                    assert_eq!(name, format!("{platform}.turn_timeout_s"));
                }
                Err(other) => panic!("{other}"),
            }
        }
    }
}
