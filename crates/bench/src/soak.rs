//! `soak`: Herald at the descriptor limit for minutes, with the demo agent, under a
//! steady mix: idle gadgets answering heartbeats, gadgets sending typed turns, gadgets
//! sending utterances that the agent plays back (speech), and phones sending text.
//! Every few seconds the bench reads the server's memory and the clients' counts; at
//! the end it fits a line to the memory after the warm-up and checks that nothing was
//! dropped: every connection held, every turn answered, every speech stream whole.
//!
//! Each client has one turn in flight at most and sends the next one a period after
//! the last (later, if the answer took longer), so a slow server shows as late turns
//! rather than as turns the demo agent cancels for newer ones. There is no baseline:
//! the figures are the server's against its own start.
//!
//! This file owns the options, the mix of clients and [`run`], the parent's side;
//! [`clients`] is the worker's side (its gadgets and phones under load) and [`summary`]
//! turns the samples and the counts into the curve and the table.

mod clients;
mod summary;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use herald_admin_api::MAX_PHONES_PER_USER;
use herald_host::print_table;
use serde::{Deserialize, Serialize};

use super::worker::Workers;
use super::{
    herald_target, machine, on_loopback, share, BenchArgs, Load, Run, HEARTBEAT_S, SETUP_LIMIT,
};

pub(super) use clients::work;
use summary::{Memory, Sample, Summary};

/// Descriptors the server keeps beyond its connections: the store, its listeners,
/// recordings being written and speech being read.
const SERVER_SPARE_FDS: u64 = 1000;
/// The server's inbox is kept small, so that it fills up within the warm-up and the
/// oldest recordings are pruned through the rest of the soak, as in a long-running home.
pub(super) const SERVER_CONFIG: &str = "[inbox]\nmax_mb = 16\n";
/// A turn not answered (and, for an utterance, not played back) within this is lost.
const TURN_LIMIT: Duration = Duration::from_secs(30);
/// The longest the workers may take to report their counts.
const SAMPLE_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// soak: minutes of load
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// soak: percent of the devices that are gadgets sending typed turns
    #[arg(long, default_value_t = 10.0)]
    typing: f64,
    /// soak: percent that are gadgets sending utterances, which the agent plays back
    #[arg(long, default_value_t = 2.0)]
    speaking: f64,
    /// soak: phones sending text; one app token (one user) may have 32
    #[arg(long, default_value_t = MAX_PHONES_PER_USER)]
    phones: usize,
    /// soak: seconds from one turn of a client to its next
    #[arg(long, default_value_t = 10.0)]
    every: f64,
    /// soak: seconds between samples
    #[arg(long, default_value_t = 10.0)]
    sample: f64,
    /// soak: seconds of load before the memory counts as settled (at most half the run);
    /// an idle connection's queues take 32 heartbeats (160 s) to reach their size
    #[arg(long, default_value_t = 180.0)]
    warmup: f64,
    /// soak: also write the samples to this CSV file
    #[arg(long)]
    csv: Option<PathBuf>,
}

impl SoakArgs {
    fn check(&self) -> anyhow::Result<()> {
        if !(self.minutes > 0.0 && self.minutes <= 24.0 * 60.0) {
            bail!("--minutes must be between 0 and 1440");
        }
        if !(self.every > 0.0 && self.every <= 3600.0) {
            bail!("--every must be between 0 and 3600 seconds");
        }
        // Workers give up on a parent silent for half an hour.
        if !(self.sample >= 0.1 && self.sample <= 600.0) {
            bail!("--sample must be between 0.1 and 600 seconds");
        }
        if self.warmup.is_nan() || self.warmup < 0.0 {
            bail!("--warmup must not be negative");
        }
        let shares = [self.typing, self.speaking];
        if shares.iter().any(|p| p.is_nan() || *p < 0.0) || shares.iter().sum::<f64>() > 100.0 {
            bail!("--typing and --speaking are percentages adding up to 100 at most");
        }
        // The server refuses a user's phones beyond this; the bench has one user.
        if self.phones > MAX_PHONES_PER_USER {
            bail!("--phones: one app token may have {MAX_PHONES_PER_USER} phones at most");
        }
        Ok(())
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.minutes * 60.0)
    }
}

/// As many devices as the server's descriptors allow: the clients are spread over
/// worker processes, the server holds them all.
pub(super) fn default_devices(fd_limit: u64) -> usize {
    fd_limit.saturating_sub(SERVER_SPARE_FDS).max(1) as usize
}

/// What a worker's clients do (or, in the parent, all of them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Mix {
    pub idle: usize,
    pub typing: usize,
    pub speaking: usize,
    pub phones: usize,
    pub mobile_url: Option<String>,
    pub every_s: f64,
    /// Samples the parent takes before it ends the load.
    pub samples: u32,
}

impl Mix {
    fn of(devices: usize, args: &SoakArgs) -> Mix {
        let part = |percent: f64| (devices as f64 * percent / 100.0).round() as usize;
        // Rounding may overshoot by one; the idle gadgets take what is left.
        let phones = args.phones.min(devices);
        let speaking = part(args.speaking).min(devices - phones);
        let typing = part(args.typing).min(devices - phones - speaking);
        Mix {
            idle: devices - phones - speaking - typing,
            typing,
            speaking,
            phones,
            mobile_url: None,
            every_s: args.every,
            samples: 0,
        }
    }

    /// Worker `index`'s share of `parts`.
    fn share(&self, parts: usize, index: usize) -> Mix {
        Mix {
            idle: share(self.idle, parts, index),
            typing: share(self.typing, parts, index),
            speaking: share(self.speaking, parts, index),
            phones: share(self.phones, parts, index),
            ..self.clone()
        }
    }

    fn gadgets(&self) -> usize {
        self.idle + self.typing + self.speaking
    }

    fn describe(&self) -> String {
        format!(
            "{} idle gadgets, {} typing, {} speaking, {} phones",
            self.idle, self.typing, self.speaking, self.phones
        )
    }
}

pub(super) fn run(data_dir: Option<&Path>, args: &BenchArgs) -> anyhow::Result<()> {
    let soak = &args.soak;
    soak.check()?;
    let fd_limit = herald_host::raise_fd_limit();
    let mut run = Run::new(args, Load::Soak, fd_limit)?;
    run.duration = soak.duration();
    let mut mix = Mix::of(run.clients, soak);
    let (target, _server, info) = herald_target(data_dir, args, Load::Soak)?;
    if mix.phones > 0 {
        let info =
            info.context("phones need the server's mobile URL: give --data-dir, or --phones 0")?;
        mix.mobile_url = Some(on_loopback(&info.mobile_url)?);
        if target.tokens.is_empty() {
            bail!("phones need the app token: --token or MOBILE_TOKEN");
        }
    }
    let length = run.duration.as_secs_f64();
    mix.samples = (length / soak.sample).ceil().max(1.0) as u32;
    let warmup_s = soak.warmup.min(length / 2.0);
    let mut jobs = run.jobs(&target);
    let processes = jobs.len();
    for (index, job) in jobs.iter_mut().enumerate() {
        let mine = mix.share(processes, index);
        job.clients = mine.gadgets() + mine.phones;
        job.soak = Some(mine);
    }
    let mut csv = match &soak.csv {
        Some(path) => {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            writeln!(file, "{}", Sample::HEADER)?;
            Some(file)
        }
        None => None,
    };

    println!("machine: {}", machine());
    println!(
        "herald bench soak: {} devices ({}) in {} processes, {} min, a turn every {} s per \
         client, heartbeat {HEARTBEAT_S} s, a sample every {} s; Herald at {}",
        run.clients,
        mix.describe(),
        processes,
        soak.minutes,
        soak.every,
        soak.sample,
        target.url
    );
    let mut workers = Workers::spawn(jobs)?;
    let rss_idle = target.rss_kib();
    let setup = workers.phase("connecting", SETUP_LIMIT)?;
    let rss_connected = target.rss_kib();
    eprintln!(
        "connected {} of {} in {:.1} s",
        setup.count("handshakes") + setup.count("connected"),
        run.clients,
        setup.elapsed_s
    );
    workers.phase("starting", SAMPLE_LIMIT)?;
    let started = Instant::now();
    let cpu_start = target.cpu_seconds();
    Sample::print_header();
    let mut curve = Vec::new();
    for k in 1..=mix.samples {
        let at = Duration::from_secs_f64((soak.sample * f64::from(k)).min(length));
        std::thread::sleep((started + at).saturating_duration_since(Instant::now()));
        let live = workers.phase("sampling", SAMPLE_LIMIT)?;
        let point = Sample::read(started.elapsed(), &target, &live);
        point.print();
        if let Some(file) = csv.as_mut() {
            writeln!(file, "{}", point.csv())?;
            file.flush()?;
        }
        curve.push(point);
    }
    let cpu = cpu_start
        .zip(target.cpu_seconds())
        .map(|(a, b)| (b - a) / started.elapsed().as_secs_f64() * 100.0);
    let end = workers.phase("finishing", TURN_LIMIT + SAMPLE_LIMIT)?;
    drop(workers);

    let summary = Summary {
        mix: &mix,
        setup: &setup,
        end: &end,
        memory: Memory::of(&curve, warmup_s),
        rss_idle,
        rss_connected,
        cpu,
        minutes: soak.minutes,
    };
    let rows = summary.rows();
    print_table(&["METRIC", "VALUE", "GOAL"], &rows);
    let errors: Vec<String> = [("connecting", &setup), ("load", &end)]
        .iter()
        .flat_map(|(phase, r)| {
            r.errors()
                .map(move |(m, n)| format!("  {phase}: {m} (x{n})"))
        })
        .collect();
    if !errors.is_empty() {
        println!("errors seen by the clients:");
        for line in errors {
            println!("{line}");
        }
    }
    let missed = rows.iter().filter(|r| r[2].ends_with("MISSED")).count();
    if missed > 0 {
        println!("{missed} goal(s) missed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_adds_up() {
        let args = SoakArgs {
            minutes: 1.0,
            typing: 33.4,
            speaking: 33.4,
            phones: 32,
            every: 10.0,
            sample: 10.0,
            warmup: 0.0,
            csv: None,
        };
        for devices in [1, 2, 3, 7, 19000] {
            let mix = Mix::of(devices, &args);
            assert_eq!(mix.gadgets() + mix.phones, devices);
            let total: usize = (0..3)
                .map(|w| {
                    let m = mix.share(3, w);
                    m.gadgets() + m.phones
                })
                .sum();
            assert_eq!(total, devices);
        }
    }
}
