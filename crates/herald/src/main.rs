//! The `herald` command line: one binary over every Herald crate.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod chat;
mod commands;
mod console;
mod ota;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Herald connects voice gadgets and mobile apps to a personal AI agent.
#[derive(Debug, Parser)]
#[command(name = "herald", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Where Herald keeps its state and finds its configuration.
#[derive(Debug, Args)]
struct Global {
    /// Data directory (store, recordings, admin endpoint) [default: the platform's data dir]
    #[arg(long, global = true, env = "HERALD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// TOML configuration file [default: $XDG_CONFIG_HOME/herald/herald.toml, else
    /// /etc/herald/herald.toml, when present]
    #[arg(long, global = true, env = "HERALD_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server with the built-in demo agent
    Serve(ServeArgs),
    /// Print the URLs devices should use, where data lives and which config was read
    Info {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Print a link that logs in to the owner's console once (two minutes), and open it
    /// in a browser when one is at hand ($BROWSER, else the desktop's opener)
    Console {
        /// Only print the link
        #[arg(long)]
        no_open: bool,
    },
    /// List enrolled gadgets
    Devices {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Set whose gadget this is (its questions show on that person's phones too), or
    /// clear it
    Owner {
        /// The device id (hg-…)
        device_id: String,
        /// A phone user, as `herald phones` shows (an app token's label, or its id)
        #[arg(required_unless_present = "clear")]
        person: Option<String>,
        /// Belongs to nobody in particular (the server's only user, if it has one)
        #[arg(long, conflicts_with = "person")]
        clear: bool,
    },
    /// Remove a gadget so a reset device can enroll again
    Forget {
        /// The device id (hg-…)
        device_id: String,
    },
    /// Approve, revoke and list pairings
    #[command(subcommand)]
    Pairing(PairingCommand),
    /// Update a gadget's firmware over its connection
    #[command(subcommand)]
    Ota(ota::OtaCommand),
    /// Talk to the agent from the terminal, as a phone app would
    Chat(ChatArgs),
    /// List phones that have connected
    Phones {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Deliver a message to a device through the running server (for `hermes send` and
    /// cron). Exit status: 0 delivered, 1 not delivered, 2 not running or bad usage
    Send(SendArgs),
    /// Load a server with simulated gadgets or phones and print what it carries
    Bench(herald_bench::BenchArgs),
    /// Run a simulated gadget against a server, in the terminal or from a script
    Sim(SimCommand),
    /// This machine as a gadget: a service with buttons and outputs on GPIO, and the
    /// commands that talk to it (docs/linux-gadget.md)
    #[cfg(unix)]
    #[command(subcommand)]
    Gadget(herald_linux_gadget::GadgetCommand),
}

#[derive(Debug, Args)]
struct SimCommand {
    /// The server's gadget endpoint (ws:// or wss://) [default: the server running on
    /// the data directory, else the configured port on this machine]
    #[arg(long)]
    url: Option<String>,
    #[command(flatten)]
    device: herald_sim::SimArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("text_source").args(["text", "text_stdin"])))]
#[command(group(
    clap::ArgGroup::new("content")
        .args(["text", "text_stdin", "media", "voice", "document"])
        .required(true)
        .multiple(true)
))]
struct SendArgs {
    /// gadget or mobile
    platform: String,
    /// The chat: a gadget id (hg-…) or a phone's device id
    chat: String,
    /// The message text
    #[arg(long)]
    text: Option<String>,
    /// Read the message text from stdin
    #[arg(long)]
    text_stdin: bool,
    /// A file, sent as a picture, voice or document by its extension (repeatable)
    #[arg(long, value_name = "PATH")]
    media: Vec<PathBuf>,
    /// An audio file to play or send as a voice message (repeatable)
    #[arg(long, value_name = "PATH")]
    voice: Vec<PathBuf>,
    /// A file to send as a document (repeatable)
    #[arg(long, value_name = "PATH")]
    document: Vec<PathBuf>,
    /// Print the outcome as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ChatArgs {
    /// The phone endpoint (ws:// or wss://) [default: the server running on the data
    /// directory, else the configured port on this machine]
    #[arg(long)]
    url: Option<String>,
    /// The app token [default: MOBILE_TOKEN, else the token `herald serve` generated]
    #[arg(long, env = "MOBILE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// This client's device id (keep it stable: it names the session)
    #[arg(long, default_value = "herald-chat")]
    device_id: String,
}

/// Who answers the devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendKind {
    /// The built-in demo agent: every feature, no keys, no network
    Demo,
    /// Replies with what it got, at once: for load tests
    Echo,
    /// Hermes, through the plugin that started this process: JSON lines on stdin and
    /// stdout, logs on stderr; herald stops when stdin ends
    Bridge,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The agent backend
    #[arg(long, value_enum, default_value_t = BackendKind::Demo)]
    backend: BackendKind,
    /// Address to listen on for devices
    #[arg(long)]
    host: Option<IpAddr>,
    /// Port for gadgets
    #[arg(long)]
    gadget_port: Option<u16>,
    /// Port for phones (MOBILE_PORT)
    #[arg(long)]
    mobile_port: Option<u16>,
    /// Port for the local admin API (0 picks a free one)
    #[arg(long)]
    admin_port: Option<u16>,
    /// PEM certificate chain: serve wss:// (needs --tls-key)
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert
    #[arg(long)]
    tls_key: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum PairingCommand {
    /// Show pending and approved pairings
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Approve a pairing by its code (or by user id with --user)
    Approve {
        /// gadget or mobile
        platform: String,
        /// The code the device shows
        code: Option<String>,
        /// Approve this user id directly instead of a code
        #[arg(long, conflicts_with = "code")]
        user: Option<String>,
        /// A gadget's owner: the person (a phone user, as `herald phones` shows) whose
        /// phones also get its questions; the default is the server's only user
        #[arg(long)]
        owner: Option<String>,
    },
    /// Revoke a pairing: the device has to pair again
    Revoke {
        /// gadget or mobile
        platform: String,
        /// The device or user id
        user_id: String,
    },
}

/// An error in how herald was called rather than in what it did: exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Usage(pub String);

/// Errors are printed once, never with a backtrace: `RUST_BACKTRACE` is for panics.
fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(status) => status,
        Err(err) => {
            eprintln!("error: {}", said_once(&err));
            if err.is::<Usage>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The error and its causes joined with `: `, each said once. Most of Herald's errors
/// name their cause in their own message, so that a log line or an API answer is whole;
/// a cause already said is not said again.
fn said_once(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let done = |result: anyhow::Result<()>| result.map(|()| ExitCode::SUCCESS);
    done(match cli.command {
        Command::Serve(args) => commands::serve(&cli.global, args),
        Command::Info { json } => commands::info(&cli.global, json),
        Command::Console { no_open } => console::run(&cli.global, no_open),
        Command::Devices { json } => commands::devices(&cli.global, json),
        Command::Owner {
            device_id,
            person,
            clear: _,
        } => commands::owner(&cli.global, &device_id, person),
        Command::Forget { device_id } => commands::forget(&cli.global, &device_id),
        Command::Pairing(command) => commands::pairing(&cli.global, command),
        Command::Ota(command) => ota::run(&cli.global, command),
        Command::Chat(args) => commands::chat(&cli.global, args),
        Command::Phones { json } => commands::phones(&cli.global, json),
        Command::Send(args) => {
            let status = commands::send(&cli.global, args);
            return Ok(ExitCode::from(u8::try_from(status).unwrap_or(1)));
        }
        Command::Bench(args) => herald_bench::run(cli.global.data_dir.as_deref(), args),
        Command::Sim(args) => commands::sim(&cli.global, args),
        #[cfg(unix)]
        Command::Gadget(command) => commands::gadget(&cli.global, command),
    })
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::said_once;

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        // A message that names its cause, as thiserror's `{source}` does.
        let named =
            anyhow::Error::new(io).context("cannot listen on :8765: Address already in use");
        assert_eq!(
            said_once(&named),
            "cannot listen on :8765: Address already in use"
        );
        // Causes that their messages do not name are all said, in order.
        let plain = Err::<(), _>(std::io::Error::other("disk full"))
            .context("writing the store")
            .context("cannot start")
            .unwrap_err();
        assert_eq!(
            said_once(&plain),
            "cannot start: writing the store: disk full"
        );
    }
}
