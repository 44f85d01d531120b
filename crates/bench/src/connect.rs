//! `connect`: gadgets enroll (first contact), come back (returning devices) and stay
//! connected answering heartbeats, while the bench reads the server's memory.
//!
//! The gadget handshake here is also the set-up step of `talk`. Against the bare
//! baseline the same client sends the same two requests (hello, auth) and takes any
//! text frame as the answer, so the ratio shows what the protocol work costs.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use herald_gadget_proto::{
    auth, limits, AudioCaps, Auth, Caps, DeviceMessage, Hello, Pong, ServerMessage, SUBPROTOCOL,
};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

use super::stats::{Goal, Report, Table, Unit};
use super::worker::{open, Control, Failure, Job, Workers, Ws};
use super::{Run, Target, SETUP_LIMIT};

/// Each handshake step (connect and upgrade, then each answer) must finish within
/// this time, as on a real device.
const STEP: Duration = Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS);
/// Time for the server to settle after the last handshake before its memory is read.
pub(super) const SETTLE: Duration = Duration::from_secs(1);

/// The reference hub's returning-device handshake rate on this machine.
const REFERENCE_RETURNING_PER_S: f64 = 230.0;
/// The memory goal per idle connection, and the fleet it is projected to.
pub(super) const GOAL_KIB_PER_CONN: f64 = 10.0;
const PROJECTED_FLEET: f64 = 50_000.0;

/// The sample rate of the simulated gadgets' microphone and speaker.
pub(super) const SPEECH_RATE: u32 = 16_000;

/// A simulated gadget: a random key and the id derived from it.
pub(super) struct Device {
    key: [u8; limits::KEY_LEN],
    pub id: String,
}

impl Device {
    pub fn many(n: usize) -> anyhow::Result<Vec<Device>> {
        (0..n)
            .map(|_| {
                let mut key = [0u8; limits::KEY_LEN];
                getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
                Ok(Device {
                    id: auth::device_id(&key),
                    key,
                })
            })
            .collect()
    }

    fn hello(&self) -> String {
        DeviceMessage::Hello(Hello {
            proto: herald_gadget_proto::PROTO_VERSION,
            device_id: self.id.clone(),
            name: Some("bench".into()),
            board: Some("bench".into()),
            firmware: Some("0.0.0".into()),
            token: None,
            // A speaker, so the server sends speech (the speak scenario); a microphone.
            caps: Caps {
                mic: Some(voice()),
                speaker: Some(voice()),
                ..Caps::default()
            },
            actions: Vec::new(),
            sensors: Default::default(),
        })
        .encode()
    }

    /// The key on first contact, the MAC over the nonce afterwards.
    fn auth(&self, challenge: &str, bare: bool) -> Result<String, Failure> {
        let proof = if bare {
            Auth {
                key: Some(auth::b64(&self.key)),
                mac: None,
            }
        } else {
            match ServerMessage::decode(challenge) {
                Ok(ServerMessage::Challenge(c)) if c.enrolled => Auth {
                    key: None,
                    mac: Some(auth::b64(&auth::auth_mac(&self.key, &self.id, &c.nonce))),
                },
                Ok(ServerMessage::Challenge(_)) => Auth {
                    key: Some(auth::b64(&self.key)),
                    mac: None,
                },
                Ok(ServerMessage::Error(e)) => {
                    return Err(Failure::Refused(e.code.as_str().into()))
                }
                _ => return Err(Failure::Io("expected a challenge".into())),
            }
        };
        Ok(DeviceMessage::Auth(proof).encode())
    }
}

fn voice() -> AudioCaps {
    AudioCaps {
        rate: SPEECH_RATE,
        format: "pcm16".into(),
    }
}

/// How long each step of a handshake took, as the device saw it.
pub(super) struct Steps {
    /// TCP connect and the WebSocket upgrade.
    upgrade: Duration,
    /// hello sent → challenge received.
    challenge: Duration,
    /// auth sent → welcome received.
    welcome: Duration,
}

/// The report's names of the [`Steps`], with the rows that show them.
const STEPS: [(&str, &str); 3] = [
    ("step_upgrade", "  connect and upgrade p50"),
    ("step_challenge", "  hello to challenge p50"),
    ("step_welcome", "  auth to welcome p50"),
];

impl Steps {
    fn record(&self, report: &mut Report) {
        let durations = [self.upgrade, self.challenge, self.welcome];
        for ((what, _), took) in STEPS.iter().zip(durations) {
            report.latency(what, took);
        }
    }
}

/// hello → challenge → auth → welcome, on a new connection from `source`.
pub(super) async fn handshake(
    job: &Job,
    device: &Device,
    source: Ipv4Addr,
) -> Result<(Ws, Steps), Failure> {
    let started = Instant::now();
    let mut ws = tokio::time::timeout(STEP, open(&job.url, source, Some(SUBPROTOCOL)))
        .await
        .map_err(|_| Failure::Timeout)??;
    let upgraded = Instant::now();
    ws.send(Message::Text(device.hello().into())).await?;
    let challenge = next_text(&mut ws).await?;
    let challenged = Instant::now();
    let proof = device.auth(&challenge, job.bare)?;
    ws.send(Message::Text(proof.into())).await?;
    let steps = |ws: Ws| {
        let steps = Steps {
            upgrade: upgraded - started,
            challenge: challenged - upgraded,
            welcome: challenged.elapsed(),
        };
        Ok((ws, steps))
    };
    loop {
        let text = next_text(&mut ws).await?;
        if job.bare {
            return steps(ws);
        }
        match ServerMessage::decode(&text) {
            Ok(ServerMessage::Welcome(_)) => return steps(ws),
            Ok(ServerMessage::Error(e)) => return Err(Failure::Refused(e.code.as_str().into())),
            _ => {}
        }
    }
}

/// The next text frame, within a handshake step.
async fn next_text(ws: &mut Ws) -> Result<String, Failure> {
    let wait = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => return Ok(text.to_string()),
                Some(Ok(Message::Close(_))) | None => {
                    return Err(Failure::Io("closed during the handshake".into()))
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err.into()),
            }
        }
    };
    tokio::time::timeout(STEP, wait)
        .await
        .map_err(|_| Failure::Timeout)?
}

/// Run every device's handshake, `slots` at a time; each slot keeps to one source
/// address, so the server's per-address enrollment limit holds. Measures go under
/// `what` (latency, count) and `what`_at (completion time since the start). Returns
/// the connections kept, with the index of their device.
pub(super) async fn handshake_all(
    job: &Job,
    devices: &[Device],
    slots: usize,
    keep: bool,
    what: &str,
) -> (Report, Vec<(usize, Ws)>) {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    let deadline = started + SETUP_LIMIT;
    let at = format!("{what}_at");
    let slot = |slot: usize| {
        let (next, at) = (&next, &at);
        async move {
            let mut report = Report::default();
            let mut open = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(device) = devices.get(index) else {
                    break;
                };
                if Instant::now() >= deadline {
                    report.add("not_attempted", 1);
                    continue;
                }
                let t0 = Instant::now();
                match handshake(job, device, job.source(slot)).await {
                    Ok((mut ws, steps)) => {
                        report.latency(what, t0.elapsed());
                        steps.record(&mut report);
                        report.latency(at, started.elapsed());
                        report.add(what, 1);
                        if keep {
                            open.push((index, ws));
                        } else {
                            let _ = tokio::time::timeout(STEP, ws.close(None)).await;
                        }
                    }
                    Err(failure) => {
                        match failure {
                            Failure::Timeout => report.add("timeouts", 1),
                            Failure::Refused(_) => report.add("refused", 1),
                            Failure::Io(_) => report.add("failed", 1),
                        }
                        report.error(failure);
                    }
                }
            }
            (report, open)
        }
    };
    let results = futures_util::future::join_all((0..slots.max(1)).map(slot)).await;
    let mut merged = Report::default();
    let mut open = Vec::new();
    for (report, sockets) in results {
        merged.merge(report);
        open.extend(sockets);
    }
    merged.elapsed_s = started.elapsed().as_secs_f64();
    (merged, open)
}

/// The set-up phase of the scenarios that load gadgets: every device enrolls and stays
/// connected. Returns once the bench starts the next phase.
pub(super) async fn connect_all(
    job: &Job,
    control: &mut Control,
) -> anyhow::Result<(Vec<Device>, Vec<(usize, Ws)>)> {
    let devices = Device::many(job.clients)?;
    control.go().await?;
    let (report, open) =
        handshake_all(job, &devices, job.enroll_concurrency, true, "handshakes").await;
    control.report(report)?;
    control.go().await?;
    Ok((devices, open))
}

/// Stay connected, answering the server's pings, until told to stop. Returns the
/// pongs sent and, if the connection was lost before that, why.
pub(super) async fn hold(mut ws: Ws, mut stop: watch::Receiver<bool>) -> (u64, Option<String>) {
    let mut pongs = 0;
    loop {
        tokio::select! {
            _ = stop.changed() => {
                let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
                return (pongs, None);
            }
            next = ws.next() => match next {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(ServerMessage::Ping(ping)) = ServerMessage::decode(&text) {
                        let pong = DeviceMessage::Pong(Pong { ts: ping.ts }).encode();
                        if let Err(err) = ws.send(Message::Text(pong.into())).await {
                            return (pongs, Some(err.to_string()));
                        }
                        pongs += 1;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return (pongs, Some(err.to_string())),
                None => return (pongs, Some("connection closed".into())),
            }
        }
    }
}

/// The worker's side: first contact, returning devices, rest.
pub(super) async fn work(job: Job, mut control: Control) -> anyhow::Result<()> {
    let devices = Device::many(job.clients)?;

    control.go().await?;
    let (report, _) =
        handshake_all(&job, &devices, job.enroll_concurrency, false, "handshakes").await;
    control.report(report)?;

    control.go().await?;
    let (report, open) = handshake_all(&job, &devices, job.concurrency, true, "handshakes").await;
    control.report(report)?;
    let (stop, stopped) = watch::channel(false);
    let holders: Vec<_> = open
        .into_iter()
        .map(|(_, ws)| tokio::spawn(hold(ws, stopped.clone())))
        .collect();

    // At rest until the bench has read the server's memory.
    control.go().await?;
    let started = Instant::now();
    let _ = stop.send(true);
    let mut report = Report::default();
    for holder in holders {
        if let Ok((pongs, lost)) = holder.await {
            report.add("pongs", pongs);
            report.add("held", u64::from(lost.is_none()));
            report.add("lost", u64::from(lost.is_some()));
        }
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    control.report(report)?;
    Ok(())
}

/// What one target showed.
pub(super) struct Figures {
    first: Report,
    /// Server CPU over the first contacts and a settling second after them.
    first_cpu_s: Option<f64>,
    returning: Report,
    rest: Report,
    /// Resident memory of the target's server before any client and at rest, KiB.
    rss: Option<(u64, u64)>,
    cpu_at_rest: Option<f64>,
}

pub(super) fn measure(run: &Run, target: &Target) -> anyhow::Result<Figures> {
    let mut workers = Workers::spawn(run.jobs(target))?;
    let before = target.rss_kib();
    let cpu_before = target.cpu_seconds();
    let first = workers.phase("first contact", SETUP_LIMIT)?;
    // Work a server put off (writes behind the handshakes) counts too.
    std::thread::sleep(SETTLE);
    let first_cpu_s = cpu_before
        .zip(target.cpu_seconds())
        .map(|(before, after)| after - before);
    let returning = workers.phase("returning devices", SETUP_LIMIT)?;
    std::thread::sleep(SETTLE);
    let cpu = target.cpu_seconds();
    std::thread::sleep(run.duration);
    let at_rest = target.rss_kib();
    let cpu_at_rest = cpu
        .zip(target.cpu_seconds())
        .map(|(a, b)| (b - a) / run.duration.as_secs_f64() * 100.0);
    let rest = workers.phase("rest", SETUP_LIMIT)?;
    Ok(Figures {
        first,
        first_cpu_s,
        returning,
        rest,
        rss: before.zip(at_rest),
        cpu_at_rest,
    })
}

/// Completions per second over the first and the last tenth of a phase.
fn tenths(report: &Report, what: &str) -> Option<(f64, f64)> {
    let at = report.samples(&format!("{what}_at"));
    let tenth = at.len() / 10;
    if tenth < 2 {
        return None;
    }
    let secs = |from: u32, to: u32| f64::from(to.saturating_sub(from)).max(1.0) / 1e6;
    let first = tenth as f64 / secs(0, at[tenth - 1]);
    let last = tenth as f64 / secs(at[at.len() - tenth - 1], at[at.len() - 1]);
    Some((first, last))
}

impl Figures {
    fn per_conn_kib(&self) -> Option<f64> {
        let held = self.rest.count("held");
        self.rss
            .filter(|_| held > 0)
            .map(|(before, after)| after.saturating_sub(before) as f64 / held as f64)
    }

    fn failures(report: &Report) -> f64 {
        ["timeouts", "refused", "failed", "not_attempted"]
            .iter()
            .map(|k| report.count(k))
            .sum::<u64>() as f64
    }
}

/// Rows shared by both handshake phases: latency, its steps and failures.
fn handshake_rows(h: &Report, b: &Report, table: &mut Table) {
    table.quantiles(["  p50", "  p99"], h, b, "handshakes");
    for (what, label) in STEPS {
        table.latency(label, h, b, what, 0.5);
    }
    let failures = |r: &Report| Some(Figures::failures(r));
    let goal = Goal::new("none time out", h.count("timeouts") == 0);
    table.row(
        "  timed out or failed",
        Unit::Count,
        failures(h),
        failures(b),
        Some(goal),
    );
}

pub(super) fn tabulate(run: &Run, herald: &Figures, bare: &Figures, table: &mut Table) {
    let (h, b) = (&herald.first, &bare.first);
    let rate = |r: &Report| Some(r.rate("handshakes"));
    table.row(
        "first contact handshakes",
        Unit::PerSecond,
        rate(h),
        rate(b),
        None,
    );
    let (ht, bt) = (tenths(h, "handshakes"), tenths(b, "handshakes"));
    let (first, last) = (|t: (f64, f64)| t.0, |t: (f64, f64)| t.1);
    table.row(
        "  over the first tenth",
        Unit::PerSecond,
        ht.map(first),
        bt.map(first),
        None,
    );
    let goal =
        ht.map(|(first, last)| Goal::new("does not fall (>=0.8x first)", last >= 0.8 * first));
    table.row(
        "  over the last tenth",
        Unit::PerSecond,
        ht.map(last),
        bt.map(last),
        goal,
    );
    handshake_rows(h, b, table);
    let cpu_ms = |f: &Figures| {
        let handshakes = f.first.count("handshakes");
        f.first_cpu_s
            .filter(|_| handshakes > 0)
            .map(|s| s * 1e3 / handshakes as f64)
    };
    table.row(
        "  server CPU a first contact",
        Unit::Millis,
        cpu_ms(herald),
        cpu_ms(bare),
        None,
    );

    let (h, b) = (&herald.returning, &bare.returning);
    let (rate, bare_rate) = (h.rate("handshakes"), b.rate("handshakes"));
    let target = 10.0 * REFERENCE_RETURNING_PER_S;
    let goal = Goal::new(
        format!(">={target:.0}/s and >=0.5x bare"),
        rate >= target && rate >= 0.5 * bare_rate,
    );
    let label = format!("returning handshakes ({} at once)", run.concurrency);
    table.row(
        &label,
        Unit::PerSecond,
        Some(rate),
        Some(bare_rate),
        Some(goal),
    );
    handshake_rows(h, b, table);

    let (h, b) = (&herald.rest, &bare.rest);
    table.count("connections held at rest", h, b, "held");
    table.count("  lost at rest", h, b, "lost");
    table.count("  heartbeats answered", h, b, "pongs");
    let per_conn = herald.per_conn_kib();
    let goal = per_conn.map(|kib| {
        Goal::new(
            format!("<{GOAL_KIB_PER_CONN:.0} KiB"),
            kib < GOAL_KIB_PER_CONN,
        )
    });
    table.row(
        "server memory per connection",
        Unit::KiB,
        per_conn,
        bare.per_conn_kib(),
        goal,
    );
    let projected = |f: &Figures| {
        f.rss
            .zip(f.per_conn_kib())
            .map(|((before, _), kib)| (before as f64 + kib * PROJECTED_FLEET) / 1024.0)
    };
    table.row(
        "  projected to 50,000",
        Unit::MiB,
        projected(herald),
        projected(bare),
        None,
    );
    let (h, b) = (herald.cpu_at_rest, bare.cpu_at_rest);
    table.row("server CPU at rest", Unit::Percent, h, b, None);
    for (name, f) in [("herald", herald), ("bare", bare)] {
        for report in [&f.first, &f.returning, &f.rest] {
            table.errors_of(name, report);
        }
    }
}
