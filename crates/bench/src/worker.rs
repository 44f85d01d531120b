//! Client processes: the parent spawns `herald bench worker` processes, each opening its
//! share of the simulated clients, because one process may hold only so many descriptors
//! and one loopback source address only so many ports.
//!
//! They speak JSON lines. The parent writes a [`Job`] to the worker's standard input,
//! then `go` once per phase; the worker runs the phase and answers with one [`Line`].
//! Between phases the worker keeps its connections (that is how the connect scenario
//! measures memory at rest). End of input stops a worker, so none outlives its parent,
//! and every wait on either side has a deadline.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader as AsyncBufReader, Lines, Stdin};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header, HeaderValue, Uri};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use super::stats::Report;
use super::{connect, mobile, soak, speak, talk, Load};

/// The longest a worker waits for its next instruction before giving up.
const IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);
/// Descriptors a worker keeps for itself beyond its clients.
pub(super) const SPARE_FDS: u64 = 64;

pub(super) type Ws = WebSocketStream<TcpStream>;

/// What one worker does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Job {
    pub load: Load,
    /// The endpoint: Herald's gadget or mobile URL, or the bare baseline's.
    pub url: String,
    /// Against the bare baseline: any text frame answers any request.
    pub bare: bool,
    /// App tokens for phones, taken in turn.
    pub tokens: Vec<String>,
    /// Clients this worker opens.
    pub clients: usize,
    /// Loopback addresses this worker's sockets are bound to, in turn.
    pub sources: Vec<Ipv4Addr>,
    /// Handshakes in flight at once (connect: returning devices).
    pub concurrency: usize,
    /// First-contact handshakes in flight at once.
    pub enroll_concurrency: usize,
    /// Talk: this worker's share of turns per second.
    pub rate: f64,
    pub duration_s: f64,
    /// Talk: every Nth turn is an utterance. Mobile: every Nth message is an upload of
    /// `media_bytes`.
    pub media_every: u32,
    pub media_bytes: usize,
    /// Speak: Herald's data directory (its admin API) and the speech to send.
    pub admin: Option<PathBuf>,
    pub voice: Option<PathBuf>,
    /// Soak: this worker's share of the mix.
    #[serde(default)]
    pub soak: Option<soak::Mix>,
}

impl Job {
    pub fn source(&self, index: usize) -> Ipv4Addr {
        self.sources[index % self.sources.len()]
    }

    /// The app token of this worker's `index`th phone; none against the baseline.
    pub fn token_for(&self, index: usize) -> Option<String> {
        (!self.tokens.is_empty()).then(|| self.tokens[index % self.tokens.len()].clone())
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s)
    }
}

/// A worker's answer to `go`.
#[derive(Debug, Serialize, Deserialize)]
enum Line {
    Report(Report),
    Failed(String),
}

// ---- parent side ----

struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
}

/// The worker processes of one scenario run.
pub(super) struct Workers {
    processes: Vec<Process>,
    lines: mpsc::Receiver<(usize, String)>,
}

impl Workers {
    pub fn spawn(jobs: Vec<Job>) -> anyhow::Result<Workers> {
        let exe = std::env::current_exe().context("cannot find the herald binary")?;
        let (tx, lines) = mpsc::channel();
        let mut workers = Workers {
            processes: Vec::new(),
            lines,
        };
        for (index, job) in jobs.iter().enumerate() {
            let mut child = Command::new(&exe)
                .args(["bench", "worker"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("cannot start a bench worker")?;
            let stdout = child.stdout.take().context("worker without stdout")?;
            let stdin = child.stdin.take();
            // Kept before anything can fail, so dropping `workers` stops it.
            workers.processes.push(Process { child, stdin });
            let stdin = workers.processes[index].stdin.as_mut();
            let stdin = stdin.context("worker without stdin")?;
            writeln!(stdin, "{}", serde_json::to_string(job)?).context("worker stdin")?;
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send((index, line)).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(workers)
    }

    /// Start the next phase in every worker and merge their reports, within `limit`.
    pub fn phase(&mut self, name: &str, limit: Duration) -> anyhow::Result<Report> {
        for process in &mut self.processes {
            let stdin = process.stdin.as_mut().context("worker already stopped")?;
            writeln!(stdin, "go").context("a worker has exited")?;
            stdin.flush()?;
        }
        let deadline = Instant::now() + limit;
        let mut merged = Report::default();
        let mut answered = vec![false; self.processes.len()];
        while answered.iter().any(|a| !a) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (index, text) = self.lines.recv_timeout(left).map_err(|_| {
                anyhow!(
                    "{name}: a worker did not report within {}s",
                    limit.as_secs()
                )
            })?;
            match serde_json::from_str::<Line>(&text) {
                Ok(Line::Report(report)) => {
                    answered[index] = true;
                    merged.merge(report);
                }
                Ok(Line::Failed(message)) => bail!("{name}: worker {index} failed: {message}"),
                // Anything else on stdout is not ours; ignore it.
                Err(_) => {}
            }
        }
        merged.finish();
        Ok(merged)
    }
}

impl Drop for Workers {
    /// End of input stops a worker; one that does not stop in time is killed.
    fn drop(&mut self) {
        for process in &mut self.processes {
            process.stdin = None;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for process in &mut self.processes {
            while Instant::now() < deadline {
                match process.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }
}

// ---- worker side ----

/// A worker's instructions: the job, then `go` before each phase.
pub(super) struct Control {
    lines: Lines<AsyncBufReader<Stdin>>,
}

impl Control {
    /// Wait for `go`. End of input (the parent is done or gone) is an error that stops
    /// the worker.
    pub async fn go(&mut self) -> anyhow::Result<()> {
        let line = tokio::time::timeout(IDLE_LIMIT, self.lines.next_line())
            .await
            .context("no instruction from the bench for too long")??;
        match line.as_deref().map(str::trim) {
            Some("go") => Ok(()),
            Some(other) => bail!("unexpected instruction {other:?}"),
            None => bail!("the bench has stopped"),
        }
    }

    pub fn report(&self, report: Report) -> anyhow::Result<()> {
        say(&Line::Report(report))
    }
}

fn say(line: &Line) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(line)?)?;
    out.flush()?;
    Ok(())
}

/// `herald bench worker`: read a job and run it. Single-threaded on purpose: the parent
/// decides how many processes (and so cores) the clients get.
pub(super) fn run() -> anyhow::Result<()> {
    herald_host::raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let mut lines = AsyncBufReader::new(tokio::io::stdin()).lines();
        let first = lines
            .next_line()
            .await?
            .context("no job on standard input")?;
        let job: Job = serde_json::from_str(&first).context("a malformed job")?;
        if job.sources.is_empty() {
            bail!("a job without source addresses");
        }
        let control = Control { lines };
        match job.load {
            Load::Connect => connect::work(job, control).await,
            Load::Talk => talk::work(job, control).await,
            Load::Speak => speak::work(job, control).await,
            Load::Mobile => mobile::work(job, control).await,
            Load::Soak => soak::work(job, control).await,
        }
    });
    // A worker that fails says why on the line the parent is waiting for.
    if let Err(err) = &result {
        let _ = say(&Line::Failed(format!("{err:#}")));
    }
    // Connections still open are closed by the exit; dropping thousands politely
    // would only delay it.
    runtime.shutdown_background();
    result
}

/// The address of a `ws://` URL, which must be on loopback: the bench never sends
/// load anywhere else.
pub(super) fn loopback_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let uri: Uri = url.parse().with_context(|| format!("not a URL: {url}"))?;
    if uri.scheme_str() != Some("ws") {
        bail!("{url}: the bench speaks plain ws:// only");
    }
    let host = uri.host().unwrap_or("").trim_matches(['[', ']']);
    let ip: IpAddr = match host {
        "localhost" => Ipv4Addr::LOCALHOST.into(),
        other => other
            .parse()
            .with_context(|| format!("{url}: give the host as an IP address"))?,
    };
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => Ok(SocketAddr::new(ip, uri.port_u16().unwrap_or(80))),
        _ => bail!("{url}: the bench only loads servers on 127.0.0.0/8"),
    }
}

/// Why a client failed; the kinds are counted apart.
#[derive(Debug)]
pub(super) enum Failure {
    Timeout,
    /// The server said no, with this error code.
    Refused(String),
    Io(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => f.write_str("timed out"),
            Failure::Refused(code) => write!(f, "refused: {code}"),
            Failure::Io(message) => f.write_str(message),
        }
    }
}

impl From<tokio_tungstenite::tungstenite::Error> for Failure {
    fn from(err: tokio_tungstenite::tungstenite::Error) -> Self {
        Failure::Io(err.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Self {
        Failure::Io(err.to_string())
    }
}

/// Small buffers, like a real device's: thousands of clients share this machine with
/// the server under test.
fn client_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
}

/// Open a WebSocket to `url` from `source`, offering `subprotocol`.
pub(super) async fn open(
    url: &str,
    source: Ipv4Addr,
    subprotocol: Option<&'static str>,
) -> Result<Ws, Failure> {
    let addr = loopback_addr(url).map_err(|e| Failure::Io(e.to_string()))?;
    let socket = TcpSocket::new_v4()?;
    // Ports of closed connections may still be in TIME_WAIT; reuse them.
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::new(source.into(), 0))?;
    let tcp = socket.connect(addr).await?;
    tcp.set_nodelay(true)?;
    let mut request = url.into_client_request()?;
    if let Some(protocol) = subprotocol {
        request.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(protocol),
        );
    }
    let (ws, _) =
        tokio_tungstenite::client_async_with_config(request, tcp, Some(client_config())).await?;
    Ok(ws)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_a_target() {
        assert_eq!(
            loopback_addr("ws://127.0.0.1:8765/gadget").unwrap(),
            "127.0.0.1:8765".parse().unwrap()
        );
        assert!(loopback_addr("ws://localhost:1/x").is_ok());
        assert!(loopback_addr("ws://127.9.9.9:1/x").is_ok());
        assert!(loopback_addr("ws://10.0.0.1:8765/gadget").is_err());
        assert!(loopback_addr("ws://example.invalid:8765/gadget").is_err());
        assert!(loopback_addr("wss://127.0.0.1:8765/gadget").is_err());
    }
}
