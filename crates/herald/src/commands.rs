//! What each subcommand does; `main.rs` only parses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use herald_admin_api::{
    AdminClient, AdminError, ApproveRequest, DeliverKind, DeliverMedia, DeliverRequest, Delivered,
    DeviceRecordView, DeviceView, Info, OwnerRequest, PairingRecord, PhoneView, RevokeRequest,
};
use herald_agents::bridge::Ready;
use herald_agents::{Bridge, DemoAgent, EchoAgent};
use herald_config::Config;
use herald_host::{print_table, raise_fd_limit};
use herald_port::{Backend, Chat, Platform};
use herald_server::Server;

use crate::{
    BackendKind, ChatArgs, Global, PairingCommand, SendArgs, ServeArgs, SimCommand, Usage,
};

/// Defaults, then the config file, then the environment.
pub(crate) fn load_config(global: &Global) -> anyhow::Result<Config> {
    load_config_from(config_file(global).as_deref())
}

fn load_config_from(file: Option<&Path>) -> anyhow::Result<Config> {
    let mut config = match file {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    config.apply_env(|name| std::env::var(name).ok())?;
    Ok(config)
}

/// The config file to read: `--config` / `HERALD_CONFIG`, else the first that exists of
/// `$XDG_CONFIG_HOME/herald/herald.toml` (`~/.config/…` when unset) and
/// `/etc/herald/herald.toml`.
fn config_file(global: &Global) -> Option<PathBuf> {
    if let Some(path) = &global.config {
        return Some(path.clone());
    }
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
    let candidates = [
        xdg.map(|dir| dir.join("herald").join("herald.toml")),
        Some(PathBuf::from("/etc/herald/herald.toml")),
    ];
    candidates.into_iter().flatten().find(|path| path.is_file())
}

pub(crate) fn data_dir(global: &Global, config: &Config) -> anyhow::Result<PathBuf> {
    if let Some(dir) = global.data_dir.clone().or_else(|| config.data_dir.clone()) {
        return Ok(dir);
    }
    directories::ProjectDirs::from("", "", "herald")
        .map(|dirs| dirs.data_dir().to_owned())
        .context("no home directory to keep data in; pass --data-dir")
}

pub fn serve(global: &Global, args: ServeArgs) -> anyhow::Result<()> {
    // Under Hermes only the plugin's --config counts: a machine-wide file is not Hermes's.
    let file = match args.backend {
        BackendKind::Bridge => global.config.clone(),
        _ => config_file(global),
    };
    let mut config = load_config_from(file.as_deref())?;
    if let Some(host) = args.host {
        config.gadget.host = host;
        config.mobile.host = host;
    }
    if let Some(port) = args.mobile_port {
        config.mobile.port = port;
    }
    if let Some(port) = args.gadget_port {
        config.gadget.port = port;
    }
    if let Some(port) = args.admin_port {
        config.admin.port = port;
    }
    if args.tls_cert.is_some() || args.tls_key.is_some() {
        config.tls_cert = args.tls_cert;
        config.tls_key = args.tls_key;
    }
    let data_dir = data_dir(global, &config)?;

    init_logging();

    // One descriptor per device: take the hard limit, not the shell's soft one.
    let limit = raise_fd_limit();
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(async {
        tracing::debug!(limit, "descriptor limit");
        let mut bridge = None;
        // The demo's pictures go under the data directory, never a shared temporary one.
        let scratch = data_dir.clone();
        let agent: herald_port::AgentFactory = match args.backend {
            BackendKind::Demo => Box::new(move |out| {
                Backend::agent(Arc::new(DemoAgent::with_scratch_dir(out, scratch)))
            }),
            BackendKind::Echo => Box::new(|out| Backend::agent(Arc::new(EchoAgent::new(out)))),
            BackendKind::Bridge => {
                let (factory, built) = Bridge::factory();
                bridge = Some(built);
                factory
            }
        };
        let server = Server::start(config, &data_dir, agent).await?;
        match bridge {
            Some(built) => {
                let bridge = built.await.context("the bridge backend was not built")?;
                let ready = Ready {
                    protocol: herald_agents::bridge::PROTOCOL,
                    version: env!("CARGO_PKG_VERSION").into(),
                    gadget_url: server.gadget_url().into(),
                    mobile_url: server.mobile_url().into(),
                    admin_url: format!("http://{}", server.admin_addr()),
                };
                tracing::info!(data_dir = %data_dir.display(), "herald is running for Hermes");
                tokio::select! {
                    ended = bridge.run(tokio::io::stdin(), tokio::io::stdout(), ready) => {
                        if let Err(err) = ended {
                            tracing::error!(%err, "the line to Hermes broke");
                        }
                    }
                    () = shutdown_signal() => {}
                }
            }
            None => {
                tracing::info!(data_dir = %data_dir.display(), "herald is running; Ctrl-C stops it");
                shutdown_signal().await;
            }
        }
        tracing::info!("stopping");
        server.shutdown().await;
        anyhow::Ok(())
    });
    // Reading stdin occupies a blocking thread that may never return: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

/// Colour for a terminal, unless `NO_COLOR` is set (<https://no-color.org>).
/// Logs go to stderr: stdout belongs to whatever drives herald (the Hermes bridge).
fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour codes only for a person who wants them: the Hermes plugin copies these
        // lines into its log.
        .with_ansi(color_wanted(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}

/// `herald gadget`: this machine as a gadget. `--config` names the gadget's file here,
/// not the server's, and no server configuration is read.
#[cfg(unix)]
pub fn gadget(global: &Global, command: herald_linux_gadget::GadgetCommand) -> anyhow::Result<()> {
    if matches!(command, herald_linux_gadget::GadgetCommand::Run) {
        init_logging();
    }
    let data_dir = global.data_dir.clone().or_else(|| {
        directories::ProjectDirs::from("", "", "herald").map(|dirs| dirs.data_dir().to_owned())
    });
    herald_linux_gadget::run(command, global.config.as_deref(), data_dir.as_deref())
}

pub(crate) fn color_wanted(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// What `herald info` reports, running or not.
#[derive(Debug, serde::Serialize)]
struct InfoReport {
    running: bool,
    version: Option<String>,
    gadget_url: String,
    mobile_url: String,
    /// The browser chat, at `/` on the phone port; it asks for the app token.
    chat_url: String,
    /// The owner's console (the admin listener); `herald console` logs in to it.
    console_url: String,
    /// How to log in to the console.
    console_login: &'static str,
    /// Where the generated app token is kept, if one was generated.
    mobile_token_file: Option<PathBuf>,
    data_dir: PathBuf,
    store: PathBuf,
    /// The config file read, if any.
    config: Option<PathBuf>,
}

pub fn info(global: &Global, json: bool) -> anyhow::Result<()> {
    let config_path = config_file(global);
    let config = load_config_from(config_path.as_deref())?;
    let data_dir = data_dir(global, &config)?;
    let running = AdminClient::connect(&data_dir).and_then(|c| {
        c.get::<Info>("/v1/info")
            .map(|info| (info, c.endpoint().url.clone()))
    });
    let report = match running {
        Ok((info, admin_url)) => InfoReport {
            running: true,
            version: Some(info.version),
            chat_url: herald_admin_api::chat_page_url(&info.mobile_url),
            gadget_url: info.gadget_url,
            mobile_url: info.mobile_url,
            console_url: format!("{}/", admin_url.trim_end_matches('/')),
            console_login: CONSOLE_LOGIN,
            mobile_token_file: info.mobile_token,
            data_dir: info.data_dir,
            store: info.store,
            config: config_path,
        },
        Err(_) => {
            let urls = configured_urls(&config, None);
            InfoReport {
                running: false,
                version: None,
                chat_url: herald_admin_api::chat_page_url(&urls.mobile),
                gadget_url: urls.gadget,
                mobile_url: urls.mobile,
                console_url: configured_console(&config),
                console_login: CONSOLE_LOGIN,
                mobile_token_file: None,
                store: data_dir.join(herald_server::STORE_FILE),
                data_dir,
                config: config_path,
            }
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("Gadgets connect to:  {}", report.gadget_url);
    println!("Phones connect to:   {}", report.mobile_url);
    println!("Browser chat:        {}", report.chat_url);
    if let Some(token) = &report.mobile_token_file {
        println!("Phone app token:     in {}", token.display());
    }
    println!(
        "Console:             {} ({})",
        report.console_url, report.console_login
    );
    println!("Data directory:      {}", report.data_dir.display());
    println!("Store:               {}", report.store.display());
    match &report.config {
        Some(path) => println!("Config file:         {}", path.display()),
        None => println!("Config file:         none (defaults and the environment)"),
    }
    match &report.version {
        Some(version) => println!("Status:              running (herald {version})"),
        None => println!("Status:              not running (start it with `herald serve`)"),
    }
    Ok(())
}

const CONSOLE_LOGIN: &str = "log in with `herald console`, which prints and opens a one-time link";

/// Where the console would be, from the configuration (port 0: chosen at start-up).
fn configured_console(config: &Config) -> String {
    let host = match config.admin.host {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_owned(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    match config.admin.port {
        0 => format!("http://{host}:<chosen at start-up>/"),
        port => format!("http://{host}:{port}/"),
    }
}

pub fn devices(global: &Global, json: bool) -> anyhow::Result<()> {
    let client = admin(global)?;
    let devices: Vec<DeviceView> = client.get("/v1/devices")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&devices)?);
        return Ok(());
    }
    if devices.is_empty() {
        println!("No devices yet. Point a gadget at the URL `herald info` prints.");
        return Ok(());
    }
    let now = now_ms();
    let rows: Vec<[String; 7]> = devices
        .iter()
        .map(|d| {
            let r = &d.record;
            [
                r.id.clone(),
                r.name.clone().unwrap_or_default(),
                r.owner.clone().unwrap_or_default(),
                r.board.clone().unwrap_or_default(),
                r.firmware.clone().unwrap_or_default(),
                if d.online { "online" } else { "offline" }.to_owned(),
                if d.online {
                    "now".to_owned()
                } else {
                    r.last_seen.map_or("never".to_owned(), |t| ago(now - t))
                },
            ]
        })
        .collect();
    print_table(
        &[
            "ID",
            "NAME",
            "OWNER",
            "BOARD",
            "FIRMWARE",
            "STATUS",
            "LAST SEEN",
        ],
        &rows,
    );
    Ok(())
}

/// Set (or, with none, clear) whose gadget `device_id` is.
pub fn owner(global: &Global, device_id: &str, person: Option<String>) -> anyhow::Result<()> {
    let client = admin(global)?;
    let path = format!("/v1/devices/{device_id}/owner");
    let request = OwnerRequest {
        owner: person.clone(),
    };
    let _: DeviceRecordView = client.put(&path, &request)?;
    match person {
        Some(person) => println!("{device_id} is {person}'s."),
        None => println!("{device_id} belongs to nobody in particular."),
    }
    Ok(())
}

pub fn phones(global: &Global, json: bool) -> anyhow::Result<()> {
    let client = admin(global)?;
    let phones: Vec<PhoneView> = client.get("/v1/phones")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&phones)?);
        return Ok(());
    }
    if phones.is_empty() {
        println!("No phones yet. Try `herald chat`.");
        return Ok(());
    }
    let now = now_ms();
    let rows: Vec<[String; 6]> = phones
        .iter()
        .map(|p| {
            let r = &p.record;
            [
                r.id.clone(),
                r.user_id.clone(),
                r.name.clone().unwrap_or_default(),
                if r.notifications { "on" } else { "off" }.to_owned(),
                if p.online { "online" } else { "offline" }.to_owned(),
                if p.online {
                    "now".to_owned()
                } else {
                    ago(now - r.last_seen)
                },
            ]
        })
        .collect();
    print_table(
        &["ID", "USER", "NAME", "NOTIFICATIONS", "STATUS", "LAST SEEN"],
        &rows,
    );
    Ok(())
}

/// A `ws://` or `wss://` URL, or a usage error before anything connects.
fn check_ws_url(url: &str) -> anyhow::Result<()> {
    if !(url.starts_with("ws://") || url.starts_with("wss://")) {
        return Err(Usage(format!("{url}: use a ws:// or wss:// URL")).into());
    }
    Ok(())
}

/// The URLs of the server that runs on the data directory, else where the configuration
/// says it would listen on this machine: what `herald chat` and `herald sim` connect to
/// without `--url`.
struct LocalUrls {
    gadget: String,
    mobile: String,
}

fn local_urls(config: &Config, data_dir: &Path) -> LocalUrls {
    if let Ok(info) = AdminClient::connect(data_dir).and_then(|c| c.get::<Info>("/v1/info")) {
        return LocalUrls {
            gadget: info.gadget_url,
            mobile: info.mobile_url,
        };
    }
    configured_urls(config, Some([127, 0, 0, 1].into()))
}

/// Where the configuration says the server listens, on its configured hosts or `host`.
fn configured_urls(config: &Config, host: Option<std::net::IpAddr>) -> LocalUrls {
    let scheme = if config.tls().is_some() { "wss" } else { "ws" };
    let url = |configured, port, path: &str| {
        let addr = std::net::SocketAddr::new(host.unwrap_or(configured), port);
        herald_server::net::url(scheme, addr, path)
    };
    LocalUrls {
        gadget: url(config.gadget.host, config.gadget.port, &config.gadget.path),
        mobile: url(config.mobile.host, config.mobile.port, &config.mobile.path),
    }
}

/// What a client command (`herald chat`, `herald sim`) connects with: the data
/// directory, and `url`, else the endpoint `pick` chooses of the local server's.
fn client_target(
    global: &Global,
    url: Option<String>,
    pick: impl FnOnce(LocalUrls) -> String,
) -> anyhow::Result<(PathBuf, String)> {
    let config = load_config(global)?;
    let dir = data_dir(global, &config)?;
    let url = match url {
        Some(url) => url,
        None => pick(local_urls(&config, &dir)),
    };
    check_ws_url(&url)?;
    Ok((dir, url))
}

pub fn chat(global: &Global, args: ChatArgs) -> anyhow::Result<()> {
    let (dir, url) = client_target(global, args.url, |urls| urls.mobile)?;
    let token = match args.token {
        Some(token) => token,
        None => {
            let path = dir.join(herald_server::MOBILE_TOKEN_FILE);
            std::fs::read_to_string(&path)
                .with_context(|| {
                    format!(
                        "no --token or MOBILE_TOKEN, and no generated token at {}",
                        path.display()
                    )
                })?
                .trim()
                .to_owned()
        }
    };
    crate::chat::run(crate::chat::ChatArgs {
        url,
        token,
        device_id: args.device_id,
        downloads: dir.join("downloads"),
    })
}

/// `herald sim`: the simulator on the gadget endpoint of the server that runs on the
/// data directory, unless `--url` names another.
pub fn sim(global: &Global, args: SimCommand) -> anyhow::Result<()> {
    let (dir, url) = client_target(global, args.url, |urls| urls.gadget)?;
    herald_sim::run(url, &dir, args.device)
}

pub fn forget(global: &Global, device_id: &str) -> anyhow::Result<()> {
    let client = admin(global)?;
    let _: serde_json::Value = client.delete(&format!("/v1/devices/{device_id}"))?;
    println!("Forgot {device_id}; it can enroll again.");
    Ok(())
}

pub fn pairing(global: &Global, command: PairingCommand) -> anyhow::Result<()> {
    let client = admin(global)?;
    match command {
        PairingCommand::List { json } => {
            let pairings: Vec<PairingRecord> = client.get("/v1/pairing")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&pairings)?);
            } else if pairings.is_empty() {
                println!("No pairings.");
            } else {
                let now = now_ms();
                let rows: Vec<[String; 5]> = pairings
                    .iter()
                    .map(|p| {
                        [
                            p.platform.to_string(),
                            p.user_id.clone(),
                            p.user_name.clone().unwrap_or_default(),
                            match (&p.code, p.approved_at) {
                                (_, Some(_)) => "approved".to_owned(),
                                (Some(code), None) => format!("pending {code}"),
                                (None, None) => "pending".to_owned(),
                            },
                            ago(now - p.approved_at.unwrap_or(p.created_at)),
                        ]
                    })
                    .collect();
                print_table(&["PLATFORM", "USER", "NAME", "STATE", "SINCE"], &rows);
            }
        }
        PairingCommand::Approve {
            platform,
            code,
            user,
            owner,
        } => {
            if code.is_none() && user.is_none() {
                return Err(Usage("give the code the device shows, or --user ID".into()).into());
            }
            let request = ApproveRequest {
                platform: parse_platform(&platform)?,
                code,
                user_id: user,
                owner: owner.clone(),
            };
            let record: PairingRecord = client.post("/v1/pairing/approve", &request)?;
            match owner {
                Some(owner) => println!(
                    "Approved {} {}, {owner}'s.",
                    record.platform, record.user_id
                ),
                None => println!("Approved {} {}.", record.platform, record.user_id),
            }
        }
        PairingCommand::Revoke { platform, user_id } => {
            let request = RevokeRequest {
                platform: parse_platform(&platform)?,
                user_id,
            };
            let _: serde_json::Value = client.post("/v1/pairing/revoke", &request)?;
            println!("Revoked {} {}.", request.platform, request.user_id);
        }
    }
    Ok(())
}

/// Exit statuses of `herald send`.
const NOT_DELIVERED: i32 = 1;
const NOT_RUNNING_OR_USAGE: i32 = 2;
/// The longest text `herald send` reads from stdin.
const MAX_SEND_TEXT: u64 = 1 << 20;

/// `herald send`: returns the exit status, having said what happened.
pub fn send(global: &Global, args: SendArgs) -> i32 {
    let json = args.json;
    let outcome = deliver(global, args);
    match (json, &outcome) {
        (true, Ok(done)) => println!("{}", serde_json::json!({ "message_id": done.message_id })),
        (true, Err((_, err))) => println!("{}", serde_json::json!({ "error": format!("{err:#}") })),
        (false, Ok(_)) => println!("Delivered."),
        (false, Err((_, err))) => eprintln!("herald send: {err:#}"),
    }
    outcome.map_or_else(|(status, _)| status, |_| 0)
}

fn deliver(global: &Global, args: SendArgs) -> Result<Delivered, (i32, anyhow::Error)> {
    let usage = |err: anyhow::Error| (NOT_RUNNING_OR_USAGE, err);
    let platform = parse_platform(&args.platform).map_err(usage)?;
    let text = match (args.text, args.text_stdin) {
        (Some(text), _) => Some(text),
        (None, true) => {
            use std::io::Read;
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_SEND_TEXT + 1)
                .read_to_string(&mut text)
                .context("reading the text from stdin")
                .map_err(usage)?;
            if text.len() as u64 > MAX_SEND_TEXT {
                return Err(usage(anyhow::anyhow!(
                    "the text is over {MAX_SEND_TEXT} bytes"
                )));
            }
            Some(text)
        }
        (None, false) => None,
    };
    let files = [
        (args.media, None),
        (args.voice, Some(DeliverKind::Voice)),
        (args.document, Some(DeliverKind::Document)),
    ];
    let mut media = Vec::new();
    for (paths, kind) in files {
        for path in paths {
            let path = std::path::absolute(&path)
                .with_context(|| format!("{}", path.display()))
                .map_err(usage)?;
            media.push(DeliverMedia { path, kind });
        }
    }
    let request = DeliverRequest {
        chat: Chat {
            platform,
            id: args.chat,
        },
        text,
        media,
    };
    let client = admin(global).map_err(usage)?;
    client.post("/v1/deliver", &request).map_err(|err| {
        let status = if matches!(err, AdminError::Refused(_)) {
            NOT_DELIVERED
        } else {
            NOT_RUNNING_OR_USAGE
        };
        (status, err.into())
    })
}

pub(crate) fn admin(global: &Global) -> anyhow::Result<AdminClient> {
    let config = load_config(global)?;
    Ok(AdminClient::connect(&data_dir(global, &config)?)?)
}

fn parse_platform(name: &str) -> anyhow::Result<Platform> {
    match name {
        "gadget" => Ok(Platform::Gadget),
        "mobile" => Ok(Platform::Mobile),
        other => Err(Usage(format!("unknown platform {other:?}: use gadget or mobile")).into()),
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// "5s ago", "3m ago", "2h ago", "4d ago".
pub(crate) fn ago(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages_read_naturally() {
        assert_eq!(super::ago(5_000), "5s ago");
        assert_eq!(super::ago(180_000), "3m ago");
        assert_eq!(super::ago(7_200_000), "2h ago");
        assert_eq!(super::ago(-10), "0s ago");
    }
}
