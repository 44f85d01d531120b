//! Where a run sends its load: the Herald server the bench starts (`herald serve` of
//! the executable the bench runs in, on loopback, in a temporary data directory) or the
//! running one it is pointed at, and that server's memory and CPU time from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use herald_admin_api::{AdminClient, Info};

use super::worker::loopback_addr;
use super::{soak, BenchArgs, Load, HEARTBEAT_S};

/// Users (app tokens) of a server the bench starts: room for 64 × 32 phones.
const BENCH_USERS: usize = 64;

/// Where a run sends its load.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) bare: bool,
    /// App tokens for phones, taken in turn (each is a user); none for gadgets.
    pub(crate) tokens: Vec<String>,
    /// The server's process, for its memory and CPU time.
    pub(crate) pid: Option<u32>,
    /// The server's data directory, for its admin API.
    pub(crate) admin: Option<PathBuf>,
}

impl Target {
    pub(crate) fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// User plus system CPU time of the server so far.
    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid?)).ok()?;
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
        // utime and stime are fields 14 and 15; Linux reports them in 1/100 s.
        Some((ticks(11)? + ticks(12)?) / 100.0)
    }
}

/// A `herald serve --backend echo` the bench started; stopped when dropped.
pub(crate) struct Spawned {
    child: Child,
    /// The app tokens it was given.
    tokens: Vec<String>,
    dir: tempfile::TempDir,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn random_hex(bytes: usize) -> anyhow::Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Start Herald on loopback with free ports, the echo agent (the soak: the demo agent),
/// every device allowed.
fn start_server(load: Load) -> anyhow::Result<(Spawned, Info)> {
    let dir = tempfile::Builder::new().prefix("herald-bench-").tempdir()?;
    let config = dir.path().join("bench.toml");
    let (backend, extra) = match load {
        Load::Soak => ("demo", soak::SERVER_CONFIG),
        Load::Connect | Load::Talk | Load::Speak | Load::Mobile => ("echo", ""),
    };
    // No speaker cues: the clients check every stream they hear as the agent's speech,
    // and a "heard" cue that the answer replaces would count as a broken one.
    std::fs::write(
        &config,
        format!("[gadget]\nheartbeat_s = {HEARTBEAT_S}\ncue_after_s = 0\n{extra}"),
    )?;
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path)?;
    // A user may have 32 phones and 32 MiB of unfinished uploads: the phones are spread
    // over users, as a household's would be, so the run measures the server, not a cap.
    let tokens = (0..BENCH_USERS)
        .map(|_| random_hex(32))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let child = Command::new(std::env::current_exe()?)
        .args(["serve", "--backend", backend, "--host", "127.0.0.1"])
        .args([
            "--gadget-port",
            "0",
            "--mobile-port",
            "0",
            "--admin-port",
            "0",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .env("GADGET_ALLOW_ALL_USERS", "1")
        .env("MOBILE_ALLOW_ALL_USERS", "1")
        .env("MOBILE_TOKEN", &tokens[0])
        .env("MOBILE_EXTRA_TOKENS", tokens[1..].join(","))
        .env_remove("GADGET_ACCESS_TOKEN")
        .env_remove("MOBILE_ALLOWED_DEVICES")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("cannot start herald serve")?;
    let mut spawned = Spawned { child, tokens, dir };
    let dir = spawned.dir.path().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(info) = AdminClient::connect(&dir).and_then(|c| c.get::<Info>("/v1/info")) {
            return Ok((spawned, info));
        }
        if spawned.child.try_wait()?.is_some() || Instant::now() > deadline {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!("herald serve did not start:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server's URL as seen from loopback: one listening on every interface is reached
/// on 127.0.0.1, the only address the bench loads.
pub(crate) fn on_loopback(url: &str) -> anyhow::Result<String> {
    if loopback_addr(url).is_ok() {
        return Ok(url.to_owned());
    }
    let uri: tokio_tungstenite::tungstenite::http::Uri = url.parse()?;
    if uri.scheme_str() != Some("ws") {
        bail!("{url}: the bench speaks plain ws:// only");
    }
    let port = uri.port_u16().context("no port in the server's URL")?;
    Ok(format!("ws://127.0.0.1:{port}{}", uri.path()))
}

/// Herald's endpoint for `load`: a server the bench starts, or the one named (by its
/// data directory or its URL); and what the server said of itself, when it could be asked.
pub(crate) fn herald_target(
    data_dir: Option<&Path>,
    args: &BenchArgs,
    load: Load,
) -> anyhow::Result<(Target, Option<Spawned>, Option<Info>)> {
    let (info, pid, spawned) = match data_dir {
        None if args.url.is_some() => (None, None, None),
        None => {
            let (spawned, info) = start_server(load)?;
            let pid = spawned.child.id();
            (Some(info), Some(pid), Some(spawned))
        }
        Some(dir) => {
            let client = AdminClient::connect(dir)?;
            let info = client.get::<Info>("/v1/info")?;
            (Some(info), Some(client.endpoint().pid), None)
        }
    };
    let admin = spawned
        .as_ref()
        .map(|s| s.dir.path().to_owned())
        .or_else(|| data_dir.map(Path::to_owned));
    if load == Load::Speak && admin.is_none() {
        bail!("the speak scenario asks Herald to speak through its admin API: give --data-dir");
    }
    let url = match (&args.url, &info) {
        (Some(url), _) => url.clone(),
        (None, Some(info)) if load == Load::Mobile => on_loopback(&info.mobile_url)?,
        (None, Some(info)) => on_loopback(&info.gadget_url)?,
        (None, None) => bail!("give --url or --data-dir"),
    };
    loopback_addr(&url)?;
    let tokens = match (&spawned, &args.token) {
        (Some(spawned), _) => spawned.tokens.clone(),
        (None, Some(tokens)) => tokens
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        (None, None) => info
            .as_ref()
            .and_then(|i| i.mobile_token.as_deref())
            .and_then(|path| std::fs::read_to_string(path).ok())
            .map(|t| vec![t.trim().to_owned()])
            .unwrap_or_default(),
    };
    if load == Load::Mobile && tokens.is_empty() {
        bail!("the mobile scenario needs the app token: --token or MOBILE_TOKEN");
    }
    Ok((
        Target {
            url,
            bare: false,
            tokens,
            pid,
            admin,
        },
        spawned,
        info,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_moved_to_loopback() {
        assert_eq!(
            on_loopback("ws://127.0.0.1:8765/gadget").unwrap(),
            "ws://127.0.0.1:8765/gadget"
        );
        assert_eq!(
            on_loopback("ws://192.168.1.5:8787/ws").unwrap(),
            "ws://127.0.0.1:8787/ws"
        );
        assert!(on_loopback("wss://192.168.1.5:8787/ws").is_err());
    }

    #[test]
    fn proc_figures_of_this_process() {
        let me = Target {
            url: String::new(),
            bare: true,
            tokens: Vec::new(),
            pid: Some(std::process::id()),
            admin: None,
        };
        assert!(me.rss_kib().unwrap() > 0);
        assert!(me.cpu_seconds().unwrap() >= 0.0);
    }
}
