//! The load bench behind `herald bench`: how many gadgets and phones one machine carries.
//!
//! The bench starts `herald serve --backend echo` on loopback with a temporary data
//! directory (or finds a running server with `--data-dir`/`--url`), starts a bare
//! WebSocket server of its own (`baseline`), and runs the scenario against each in
//! turn with the same client code, in worker processes (`worker`) so the clients are
//! not limited by one process's descriptors. It prints Herald's figures beside the
//! baseline's and their ratio: a shared machine is noisy, and the ratio is what stays
//! comparable between runs.
//!
//! Scenarios: `connect` (handshakes and memory at rest), `talk` (typed turns from
//! gadgets), `speak` (paced speech to gadgets), `mobile` (phones' messages and
//! uploads), `soak` (a long mixed run against the demo agent, Herald only).
//! `target` starts or finds the Herald server a run loads.
//!
//! Everything is bounded: a run has a fixed number of clients, each phase a deadline,
//! and the only addresses used are on 127.0.0.0/8.
//!
//! The bench runs inside the `herald` binary: it starts the server and its worker
//! processes as `herald serve` and `herald bench worker` of the executable it runs in.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod baseline;
mod connect;
mod mobile;
mod soak;
mod speak;
mod stats;
mod talk;
mod target;
mod worker;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;
use herald_admin_api::MAX_PHONES_PER_USER;
use serde::{Deserialize, Serialize};

use self::baseline::Baseline;
use self::stats::{Report, Table, Unit};
use self::target::{herald_target, on_loopback, random_hex, Target};
use self::worker::{Job, Workers, SPARE_FDS};

/// How long a set-up phase (connecting every client) may take.
const SETUP_LIMIT: Duration = Duration::from_secs(600);
/// Loopback source addresses per worker: spreads the ephemeral ports, and keeps each
/// address under the server's per-address enrollment limit.
const SOURCES_PER_WORKER: u8 = 8;
/// Worker processes at most; each gets its own 127.0.N.0/24 source block.
const MAX_WORKERS: usize = 16;
/// Heartbeat of the server the bench starts: the protocol's shortest, so a short rest
/// still exchanges heartbeats.
const HEARTBEAT_S: u32 = 5;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Gadgets enroll, come back and stay connected: handshakes/s, latency, memory
    Connect,
    /// Gadgets send typed turns to the echo agent: turns/s, added latency
    Talk,
    /// Gadgets receive paced speech at once: frame lateness, bursts
    Speak,
    /// Phones exchange messages and chunked media: messages/s, MiB/s, latency
    Mobile,
    /// Minutes at the descriptor limit with the demo agent: memory curve, nothing dropped
    Soak,
    /// A client process of a running bench
    #[value(hide = true)]
    Worker,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[arg(value_enum)]
    scenario: Scenario,
    /// Simulated clients [default: connect 1000, talk 200, speak 200, mobile 50, soak:
    /// as many as the descriptor limit allows]
    #[arg(long, visible_alias = "devices")]
    clients: Option<usize>,
    /// Seconds of load (talk, mobile), of speech (speak) or of rest with every gadget
    /// connected (connect)
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Client processes [default: enough for the descriptor limit, at least 2]
    #[arg(long)]
    processes: Option<usize>,
    /// connect: returning-device handshakes in flight at once
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// talk: typed turns per second offered by all gadgets together
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// talk: every Nth turn is an utterance; mobile: every Nth message is a file upload
    /// (0: none)
    #[arg(long, default_value_t = 10)]
    media_every: u32,
    /// mobile: size of each uploaded file in KiB (sent in the protocol's 3 MiB chunks)
    #[arg(long, default_value_t = 4096)]
    media_kib: usize,
    /// Load a running server at this ws:// URL (its gadget or mobile endpoint) instead
    /// of starting one; with --data-dir the bench also reads its memory
    #[arg(long)]
    url: Option<String>,
    /// mobile: the app tokens of a running server, separated by commas; each is a user,
    /// who may have 32 phones [default: its generated token]
    #[arg(long, env = "MOBILE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(flatten)]
    soak: soak::SoakArgs,
}

/// The scenario a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Load {
    Connect,
    Talk,
    Speak,
    Mobile,
    Soak,
}

/// What a scenario that connects its clients, then loads them, showed of one target.
struct Loaded {
    setup: Report,
    load: Report,
    /// The server's CPU use during the load, in percent of one core.
    cpu: Option<f64>,
    /// The server's resident memory before any client, and once all are connected and
    /// idle, KiB (the mobile scenario only).
    rss: Option<(u64, u64)>,
}

impl Loaded {
    /// The set-up phase, then the load phase `name`.
    fn measure(run: &Run, target: &Target, name: &str) -> anyhow::Result<Loaded> {
        let mut workers = Workers::spawn(run.jobs(target))?;
        let before = target.rss_kib();
        let setup = workers.phase("connecting", SETUP_LIMIT)?;
        // Only the mobile table shows an idle client's memory: the others skip the wait.
        let connected = (run.load == Load::Mobile)
            .then(|| {
                std::thread::sleep(connect::SETTLE);
                target.rss_kib()
            })
            .flatten();
        let cpu = target.cpu_seconds();
        let started = Instant::now();
        let load = workers.phase(name, run.duration + SETUP_LIMIT)?;
        let cpu = cpu
            .zip(target.cpu_seconds())
            .map(|(a, b)| (b - a) / started.elapsed().as_secs_f64() * 100.0);
        let rss = before.zip(connected);
        Ok(Loaded {
            setup,
            load,
            cpu,
            rss,
        })
    }

    /// Server memory per client that `what` (connected), while all were idle, KiB.
    fn idle_kib(&self, what: &str) -> Option<f64> {
        let clients = self.setup.count(what);
        self.rss
            .filter(|_| clients > 0)
            .map(|(before, idle)| idle.saturating_sub(before) as f64 / clients as f64)
    }

    /// The row every such scenario starts with: how many clients `what` (connected);
    /// then the load reports of both.
    fn start_table<'a>(
        label: &str,
        what: &str,
        herald: &'a Loaded,
        bare: &'a Loaded,
        table: &mut Table,
    ) -> (&'a Report, &'a Report) {
        table.count(label, &herald.setup, &bare.setup, what);
        (&herald.load, &bare.load)
    }

    /// The rows every such scenario ends with.
    fn finish_table(herald: &Loaded, bare: &Loaded, table: &mut Table) {
        table.row("server CPU", Unit::Percent, herald.cpu, bare.cpu, None);
        for (name, f) in [("herald", herald), ("bare", bare)] {
            table.errors_of(name, &f.setup);
            table.errors_of(name, &f.load);
        }
    }
}

/// The shape of one run, shared by both targets.
struct Run {
    load: Load,
    clients: usize,
    processes: usize,
    duration: Duration,
    concurrency: usize,
    rate: f64,
    media_every: u32,
    media_bytes: usize,
    /// Speak: the speech every gadget hears.
    voice: Option<PathBuf>,
}

/// `index`'s share when `total` is split over `parts` as evenly as possible.
fn share(total: usize, parts: usize, index: usize) -> usize {
    total / parts + usize::from(index < total % parts)
}

impl Run {
    fn new(args: &BenchArgs, load: Load, fd_limit: u64) -> anyhow::Result<Run> {
        let clients = args.clients.unwrap_or(match load {
            Load::Connect => 1000,
            Load::Talk | Load::Speak => 200,
            Load::Mobile => 50,
            Load::Soak => soak::default_devices(fd_limit),
        });
        if clients == 0 {
            bail!("--clients must be at least 1");
        }
        if !(args.duration > 0.0 && args.duration <= 3600.0) {
            bail!("--duration must be between 0 and 3600 seconds");
        }
        if !(args.rate > 0.0 && args.rate <= 1_000_000.0) {
            bail!("--rate must be positive");
        }
        let per_process = fd_limit.saturating_sub(SPARE_FDS).max(1) as usize;
        // The baseline server lives in this process and holds every client at once.
        if clients > per_process {
            bail!(
                "{clients} clients need more descriptors than this process may hold \
                 ({fd_limit}); the limit applies to the server too"
            );
        }
        let processes = args
            .processes
            .unwrap_or_else(|| clients.div_ceil(per_process).max(2))
            .min(clients);
        if processes == 0 || processes > MAX_WORKERS {
            bail!("--processes must be between 1 and {MAX_WORKERS}");
        }
        if clients.div_ceil(processes) > per_process {
            bail!("{clients} clients over {processes} processes exceed {fd_limit} descriptors each; use more --processes");
        }
        Ok(Run {
            load,
            clients,
            processes,
            duration: Duration::from_secs_f64(args.duration),
            concurrency: args.concurrency.max(1),
            rate: args.rate,
            media_every: args.media_every,
            media_bytes: args.media_kib.saturating_mul(1024),
            voice: None,
        })
    }

    /// One job per worker process.
    fn jobs(&self, target: &Target) -> Vec<Job> {
        let enrolling = herald_gadget_proto::limits::MAX_PENDING_ENROLLMENTS;
        (0..self.processes)
            .map(|w| {
                let clients = share(self.clients, self.processes, w);
                // Worker w binds to 127.0.(w+1).1..=8; MAX_WORKERS keeps w+1 in a u8.
                let block = u8::try_from(w + 1).unwrap_or(u8::MAX);
                Job {
                    load: self.load,
                    url: target.url.clone(),
                    bare: target.bare,
                    tokens: target.tokens.clone(),
                    clients,
                    sources: (1..=SOURCES_PER_WORKER)
                        .map(|host| Ipv4Addr::new(127, 0, block, host))
                        .collect(),
                    concurrency: share(self.concurrency, self.processes, w).max(1),
                    // The server lets 16 devices enroll at once; more would be refused.
                    enroll_concurrency: share(enrolling, self.processes, w).max(1),
                    rate: self.rate * clients as f64 / self.clients as f64,
                    duration_s: self.duration.as_secs_f64(),
                    media_every: self.media_every,
                    media_bytes: self.media_bytes,
                    admin: target.admin.clone(),
                    voice: self.voice.clone(),
                    soak: None,
                }
            })
            .collect()
    }
}

/// The machine the figures come from, for the record.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or_else(
            || "? GiB".into(),
            |kib| format!("{:.0} GiB", kib / 1024.0 / 1024.0),
        );
    format!("{cores} cores, {cpu}, {memory}")
}

/// Run the scenario `args` names. `data_dir` is a running server's data directory
/// (`--data-dir`): that server is loaded instead of one the bench starts.
pub fn run(data_dir: Option<&Path>, args: BenchArgs) -> anyhow::Result<()> {
    let load = match args.scenario {
        Scenario::Worker => return worker::run(),
        Scenario::Connect => Load::Connect,
        Scenario::Talk => Load::Talk,
        Scenario::Mobile => Load::Mobile,
        Scenario::Speak => Load::Speak,
        Scenario::Soak => return soak::run(data_dir, &args),
    };
    let fd_limit = herald_host::raise_fd_limit();
    let mut run = Run::new(&args, load, fd_limit)?;
    // Speech for every gadget: a file the server reads, as `herald send --voice` does;
    // kept until the run ends.
    let _speech = match load {
        Load::Speak => {
            let dir = tempfile::Builder::new().prefix("herald-bench-").tempdir()?;
            run.voice = Some(speak::write_speech(dir.path(), run.duration)?);
            Some(dir)
        }
        _ => None,
    };
    let (herald, _server, _) = herald_target(data_dir, &args, load)?;
    let users = herald.tokens.len();
    if load == Load::Mobile && run.clients > MAX_PHONES_PER_USER * users {
        bail!(
            "--clients: {users} app token(s) may have {} phones at most ({MAX_PHONES_PER_USER} each)",
            MAX_PHONES_PER_USER * users
        );
    }
    let baseline = Baseline::start(match load {
        Load::Mobile => baseline::MOBILE_READ_BUFFER,
        Load::Connect | Load::Talk | Load::Speak | Load::Soak => baseline::GADGET_READ_BUFFER,
    })?;
    let bare = baseline.target();

    eprintln!(
        "herald bench {}: {} clients in {} processes, {:.0} s; Herald at {}, bare baseline at {}",
        format!("{:?}", args.scenario).to_lowercase(),
        run.clients,
        run.processes,
        run.duration.as_secs_f64(),
        herald.url,
        bare.url,
    );
    let mut table = Table::default();
    // The baseline first: Herald's run then starts on a machine the baseline has left.
    match load {
        Load::Connect => {
            let b = connect::measure(&run, &bare)?;
            let h = connect::measure(&run, &herald)?;
            connect::tabulate(&run, &h, &b, &mut table);
        }
        Load::Talk => {
            let b = Loaded::measure(&run, &bare, "talking")?;
            let h = Loaded::measure(&run, &herald, "talking")?;
            talk::tabulate(&run, &h, &b, &mut table);
        }
        Load::Speak => {
            let b = Loaded::measure(&run, &bare, "speaking")?;
            let h = Loaded::measure(&run, &herald, "speaking")?;
            speak::tabulate(&run, &h, &b, &mut table);
        }
        Load::Mobile => {
            let b = Loaded::measure(&run, &bare, "exchanging")?;
            let h = Loaded::measure(&run, &herald, "exchanging")?;
            mobile::tabulate(&h, &b, &mut table);
        }
        // Ran on its own above: it has no baseline.
        Load::Soak => {}
    }
    println!("machine: {}", machine());
    println!(
        "herald bench {}: {} clients, {} processes, {:.0} s",
        format!("{:?}", args.scenario).to_lowercase(),
        run.clients,
        run.processes,
        run.duration.as_secs_f64()
    );
    table.print();
    if table.missed() > 0 {
        println!("{} goal(s) missed", table.missed());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for (total, parts) in [(10, 3), (16, 16), (5, 8), (1000, 7)] {
            let sum: usize = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(sum, total);
        }
    }
}
