//! Fault injection: `herald serve` is killed with SIGKILL at seeded random moments while
//! real clients (the gadget device core over a WebSocket, the phone client library) enroll
//! gadgets, approve pairings, stage and retry firmware updates, hold phone turns and
//! upload files. After every kill, with the server dead, the store must pass SQLite's
//! integrity check and nothing the server had acknowledged may be missing; the restarted
//! server must have swept every temporary file the dead one left.
//!
//! Each scenario runs `HERALD_FAULT_RUNS` times (3 by default) with consecutive seeds from
//! a random base, each printed before its run; `HERALD_FAULT_SEED=N` replays seed N (with
//! `HERALD_FAULT_RUNS`, the seeds from N on). Two tests pin down, without chance, what the
//! random ones ran into: a kill between an update's staged copy and its record, and
//! upload chunks out of order.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_admin_api::{AdminClient, Method};
use herald_device::{Action, Boot, Device, DeviceConfig, Event, FlashError, Host, Phase};
use herald_gadget_proto::ota_image::inspect_image;
use herald_gadget_proto::{auth, ServerMessage, SUBPROTOCOL};
use herald_mobile_client::{media_frames, Backoff, Client, ClientConfig, Event as PhoneEvent};
use herald_mobile_proto::{limits, ClientFrame, DeviceInfo, MediaKind, ServerFrame, Text};
use herald_test_support::firmware::firmware_image;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use common::BIN;

/// Temporary files killed servers left, all scenarios together.
static SWEPT: AtomicUsize = AtomicUsize::new(0);

/// How long a test waits for something that must happen.
const PATIENCE: Duration = Duration::from_secs(20);
/// The board of [`DeviceConfig::reference`]; firmware must carry its tag.
const BOARD: &str = "esp32s3-breadboard";

// ---- seeds ----

/// xorshift64, seeded through splitmix64 so nearby seeds give unrelated streams.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // xorshift never leaves zero.
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut bytes = vec![0; n];
        self.fill(&mut bytes);
        bytes
    }

    fn key(&mut self) -> [u8; 32] {
        let mut key = [0; 32];
        self.fill(&mut key);
        key
    }

    fn hex(&mut self, chars: usize) -> String {
        hex::encode(self.bytes(chars.div_ceil(2)))[..chars].to_owned()
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}

/// The seeds of this test run: `HERALD_FAULT_RUNS` of them, from `HERALD_FAULT_SEED` or
/// from a random base.
fn seeds() -> Vec<u64> {
    let fixed = env_number("HERALD_FAULT_SEED");
    let runs = env_number("HERALD_FAULT_RUNS").unwrap_or(if fixed.is_some() { 1 } else { 3 });
    let base = fixed.unwrap_or_else(|| {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).unwrap();
        // Short enough to type back.
        u64::from_le_bytes(bytes) % 1_000_000_000
    });
    (0..runs.max(1)).map(|i| base.wrapping_add(i)).collect()
}

/// Prints how to replay a run that panicked.
struct Replay<'a> {
    scenario: &'a str,
    seed: u64,
}

impl Drop for Replay<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "faults: {} FAILED with seed {}; replay with \
                 HERALD_FAULT_SEED={} cargo test -p herald --test faults {}",
                self.scenario, self.seed, self.seed, self.scenario
            );
        }
    }
}

/// Run `scenario` once per seed; each run returns how many times it killed the server.
fn run_seeds<F, Fut>(name: &str, scenario: F)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let seeds = seeds();
    let mut kills = 0;
    for &seed in &seeds {
        let _replay = Replay {
            scenario: name,
            seed,
        };
        eprintln!("faults: {name} seed {seed}");
        kills += runtime.block_on(scenario(seed));
    }
    eprintln!(
        "faults: {name}: {} runs (seeds {seeds:?}), {kills} kills, {:.1?}; \
         temporary files swept after kills, all scenarios so far: {}",
        seeds.len(),
        started.elapsed(),
        SWEPT.load(Ordering::Relaxed)
    );
}

// ---- the server ----

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `herald serve` on loopback with fixed gadget and phone ports, so clients reconnect to
/// the restarted server by themselves.
struct Herald {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// Server logs, outside the data directory.
    logs: tempfile::TempDir,
    gadget_port: u16,
    mobile_port: u16,
    env: Vec<(String, String)>,
    starts: usize,
    kills: usize,
    gadget_url: String,
    mobile_url: String,
}

impl Herald {
    fn start(env: &[(&str, &str)]) -> Herald {
        let mut herald = Herald {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            logs: tempfile::tempdir().unwrap(),
            gadget_port: free_port(),
            mobile_port: free_port(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            starts: 0,
            kills: 0,
            gadget_url: String::new(),
            mobile_url: String::new(),
        };
        herald.spawn();
        let (status, info) = admin(herald.data(), "/v1/info", None).unwrap();
        assert_eq!(status, 200, "{info}");
        herald.gadget_url = info["gadget_url"].as_str().unwrap().to_owned();
        herald.mobile_url = info["mobile_url"].as_str().unwrap().to_owned();
        herald
    }

    fn data(&self) -> &Path {
        self.dir.path()
    }

    fn store(&self) -> PathBuf {
        self.data().join(herald_server::STORE_FILE)
    }

    fn mobile_token(&self) -> String {
        let path = self.data().join(herald_server::MOBILE_TOKEN_FILE);
        std::fs::read_to_string(path).unwrap().trim().to_owned()
    }

    /// Start the server on the data directory; returns once its admin API is published.
    fn spawn(&mut self) {
        assert!(self.child.is_none(), "herald is already running");
        let dir = self.data().to_owned();
        // The dead server's endpoint file stays behind; the new one writes its own.
        let _ = std::fs::remove_file(dir.join("admin.json"));
        self.starts += 1;
        let log =
            std::fs::File::create(self.logs.path().join(format!("serve-{}.log", self.starts)))
                .unwrap();
        let mut child = Command::new(BIN)
            .args(["serve", "--host", "127.0.0.1", "--gadget-port"])
            .arg(self.gadget_port.to_string())
            .arg("--mobile-port")
            .arg(self.mobile_port.to_string())
            .args(["--admin-port", "0", "--data-dir"])
            .arg(&dir)
            .env("RUST_LOG", "info")
            .env("RUST_BACKTRACE", "1")
            .env_remove("MOBILE_TOKEN")
            .env_remove("HERALD_CONFIG")
            .env("XDG_CONFIG_HOME", self.logs.path().join("no-config"))
            .env_remove("GADGET_ACCESS_TOKEN")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !dir.join("admin.json").exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("herald serve exited ({status}):\n{}", self.log_text());
            }
            assert!(
                started.elapsed() < PATIENCE,
                "herald serve did not start:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = Some(child);
    }

    /// SIGKILL, and wait until the process is gone.
    fn kill(&mut self) {
        let mut child = self.child.take().expect("herald is running");
        child.kill().unwrap();
        child.wait().unwrap();
        self.kills += 1;
    }

    /// With the server killed: check the store and note the temporary files left, start
    /// the server again, and check that they were swept.
    fn restart(&mut self) {
        assert!(self.child.is_none(), "herald is still running");
        check_store(&self.store());
        let partial = temporary_files(self.data());
        SWEPT.fetch_add(partial.len(), Ordering::Relaxed);
        self.spawn();
        // Only the dead server's: the new one may be writing some for its clients.
        let left: Vec<&PathBuf> = partial.iter().filter(|p| p.exists()).collect();
        assert!(
            left.is_empty(),
            "temporary files the killed server left survive the restart: {left:?}"
        );
    }

    fn crash_and_restart(&mut self) {
        self.kill();
        self.restart();
    }

    /// No server of this data directory panicked (a panic in a connection's task is
    /// caught by the runtime and only logged, so nothing else would tell).
    fn assert_no_panics(&self) {
        let logs = self.log_text();
        let lines: Vec<&str> = logs.lines().collect();
        if let Some(at) = lines.iter().position(|l| l.contains("panicked at")) {
            // The message, and the frames of Herald's own code.
            let head = (at + 2).min(lines.len());
            let end = (at + 60).min(lines.len());
            let ours = lines[head..end]
                .iter()
                .filter(|l| l.contains("herald") || l.contains("/crates/"));
            let shown: Vec<&str> = lines[at..head].iter().chain(ours).copied().collect();
            panic!("herald serve panicked:\n{}", shown.join("\n"));
        }
    }

    fn log_text(&self) -> String {
        let mut text = String::new();
        for start in 1..=self.starts {
            let path = self.logs.path().join(format!("serve-{start}.log"));
            let log = std::fs::read_to_string(path).unwrap_or_default();
            text.push_str(&format!("--- serve start {start} ---\n{log}"));
        }
        text
    }
}

impl Drop for Herald {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_text());
        }
    }
}

/// `PRAGMA integrity_check` and `foreign_key_check` on the store, opened read-only.
fn check_store(path: &Path) {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    let rows = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt
            .query_map([], |row| {
                let value: rusqlite::types::Value = row.get(0)?;
                Ok(format!("{value:?}"))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let integrity = rows("PRAGMA integrity_check");
    assert_eq!(
        integrity,
        [r#"Text("ok")"#],
        "integrity_check of {} failed",
        path.display()
    );
    let dangling = rows("PRAGMA foreign_key_check");
    assert!(
        dangling.is_empty(),
        "foreign_key_check of {}: {dangling:?}",
        path.display()
    );
}

/// Whether `path` is named as temporary files are: the `.NAME.….part` of every atomic
/// write, and SQLite's rollback journal.
fn is_temporary(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.ends_with(".part") || name.ends_with(".tmp") || name.ends_with("-journal")
}

/// The temporary files under `dir`.
fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
                continue;
            }
            if is_temporary(&path) {
                found.push(path);
            }
        }
    }
    found
}

/// At the end of a run, everything quiet: the store is sound, nothing temporary is left
/// anywhere in the data directory, and no server panicked.
fn final_checks(herald: &Herald) {
    check_store(&herald.store());
    let found = temporary_files(herald.data());
    assert!(found.is_empty(), "temporary files left: {found:?}");
    herald.assert_no_panics();
}

// ---- the admin API ----

/// A GET (no body) or POST to the admin API of the server running on `dir`: the status
/// and the JSON answer. An error means the server could not be reached.
fn admin(dir: &Path, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
    let method = if body.is_some() {
        Method::POST
    } else {
        Method::GET
    };
    let reply = AdminClient::connect(dir)
        .and_then(|client| client.request(method, path, body))
        .map_err(|e| e.to_string())?;
    let value = serde_json::from_str(&reply.body).unwrap_or(Value::String(reply.body));
    Ok((reply.status, value))
}

async fn admin_async(dir: &Path, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
    let (dir, path) = (dir.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || admin(&dir, &path, body.as_ref()))
        .await
        .unwrap()
}

/// A GET that must succeed.
async fn admin_get(herald: &Herald, path: &str) -> Value {
    let (status, value) = admin_async(herald.data(), path, None).await.unwrap();
    assert_eq!(status, 200, "GET {path}: {value}");
    value
}

/// Poll `probe` until it gives a value.
async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {what} in time");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

// ---- a gadget: the device core over a real WebSocket ----

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// An installed image; printed by size only.
#[derive(Clone, PartialEq)]
struct Image(Arc<Vec<u8>>);

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Image({} bytes)", self.0.len())
    }
}

/// What a gadget has seen so far.
#[derive(Debug, Clone, Default)]
struct Seen {
    online: bool,
    welcomes: u32,
    /// `welcome.paired` of the latest welcome.
    paired: Option<bool>,
    /// `challenge.enrolled` of each handshake.
    challenges: Vec<bool>,
    pairing_code: Option<String>,
    offers: u32,
    errors: Vec<String>,
    setup_needed: bool,
    firmware: String,
    installed: Option<Image>,
    restarts: u32,
    rollbacks: u32,
}

/// The board's flash and random source.
struct Board {
    rng: Rng,
    partition: Vec<u8>,
    installed: Option<Image>,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            rng: Rng::new(0),
            partition: Vec::new(),
            installed: None,
        }
    }
}

impl Host for Board {
    fn fill_random(&mut self, buf: &mut [u8]) {
        self.rng.fill(buf);
    }

    fn ota_begin(&mut self, _size: u64) -> Result<(), FlashError> {
        self.partition.clear();
        Ok(())
    }

    fn ota_write(&mut self, bytes: &[u8]) -> Result<(), FlashError> {
        self.partition.extend_from_slice(bytes);
        Ok(())
    }

    fn ota_finish(&mut self) -> Result<(), FlashError> {
        inspect_image(&self.partition).map_err(|_| FlashError::InvalidImage)?;
        self.installed = Some(Image(Arc::new(std::mem::take(&mut self.partition))));
        Ok(())
    }

    fn ota_abort(&mut self) {
        self.partition.clear();
    }
}

/// The device's clock: real time, plus the reconnect waits skipped while offline.
struct Clock {
    origin: std::time::Instant,
    skipped: u64,
}

impl Clock {
    fn now(&self) -> herald_device::Instant {
        let real = u64::try_from(self.origin.elapsed().as_millis()).unwrap();
        herald_device::Instant::from_millis(real + self.skipped)
    }

    fn advance_to(&mut self, at: herald_device::Instant) {
        let ahead = at.saturating_duration_since(self.now());
        self.skipped += u64::try_from(ahead.as_millis()).unwrap();
    }
}

/// A gadget running in a task of its own; stopped on drop.
struct Gadget {
    id: String,
    seen: watch::Receiver<Seen>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Gadget {
    /// Boot the reference board with `key` and connect to `url`.
    fn spawn(url: &str, key: [u8; 32], seed: u64) -> Gadget {
        let config = DeviceConfig::reference("Fault gadget");
        let (tx, seen) = watch::channel(Seen {
            firmware: config.firmware.clone(),
            ..Seen::default()
        });
        let (stop, stopped) = oneshot::channel();
        let board = Board {
            rng: Rng::new(seed),
            ..Board::default()
        };
        let task = tokio::spawn(drive(url.to_owned(), config, key, board, tx, stopped));
        Gadget {
            id: auth::device_id(&key),
            seen,
            stop: Some(stop),
            task,
        }
    }

    fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    /// Wait until `what` holds; panics after [`PATIENCE`].
    async fn wait(&mut self, what: &str, pred: impl Fn(&Seen) -> bool) -> Seen {
        let found = match timeout(PATIENCE, self.seen.wait_for(|s| pred(s))).await {
            Ok(Ok(seen)) => Some(seen.clone()),
            _ => None,
        };
        found.unwrap_or_else(|| panic!("gadget {}: no {what}: {:?}", self.id, self.seen()))
    }

    /// Wait until `pred` holds (true) or `stop` is set or `limit` passes (false).
    async fn wait_unless(
        &mut self,
        pred: impl Fn(&Seen) -> bool,
        stop: &AtomicBool,
        limit: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if pred(&self.seen.borrow()) {
                return true;
            }
            if stop.load(Ordering::SeqCst) || tokio::time::Instant::now() >= deadline {
                return false;
            }
            let _ = timeout(Duration::from_millis(10), self.seen.changed()).await;
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for Gadget {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn open(url: &str) -> Result<Ws, String> {
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static(SUBPROTOCOL),
    );
    match timeout(
        Duration::from_secs(5),
        tokio_tungstenite::connect_async(request),
    )
    .await
    {
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("connect timed out".into()),
    }
}

/// Send on the open socket; false when that failed (the connection is gone).
async fn transmit(ws: &mut Option<Ws>, message: Message) -> bool {
    let Some(socket) = ws else {
        return true;
    };
    match timeout(Duration::from_secs(10), socket.send(message)).await {
        Ok(Ok(())) => true,
        _ => {
            *ws = None;
            false
        }
    }
}

async fn receive(
    ws: &mut Option<Ws>,
) -> Option<Result<Message, tokio_tungstenite::tungstenite::Error>> {
    match ws {
        Some(socket) => socket.next().await,
        None => std::future::pending().await,
    }
}

fn observe(seen: &mut Seen, message: &ServerMessage) {
    match message {
        ServerMessage::Challenge(challenge) => seen.challenges.push(challenge.enrolled),
        ServerMessage::Welcome(welcome) => {
            seen.welcomes += 1;
            seen.paired = Some(welcome.paired);
        }
        ServerMessage::Pairing(pairing) => seen.pairing_code = Some(pairing.code.clone()),
        ServerMessage::OtaOffer(_) => seen.offers += 1,
        ServerMessage::Error(error) => seen.errors.push(format!("{:?}", error.code)),
        _ => {}
    }
}

/// Run the device core: carry out its actions, feed it frames and time.
async fn drive(
    url: String,
    mut config: DeviceConfig,
    key: [u8; 32],
    board: Board,
    seen: watch::Sender<Seen>,
    mut stop: oneshot::Receiver<()>,
) {
    let closed = Event::Closed {
        code: None,
        reason: "",
    };
    let mut clock = Clock {
        origin: std::time::Instant::now(),
        skipped: 0,
    };
    let boot = Boot {
        key: Some(key),
        probation: false,
    };
    let mut device = Device::new(config.clone(), boot, board, clock.now());
    let mut probation = false;
    let mut ws: Option<Ws> = None;
    loop {
        while let Some(action) = device.poll_action() {
            match action {
                Action::Connect => {
                    ws = None;
                    match open(&url).await {
                        Ok(socket) => {
                            ws = Some(socket);
                            device.handle(Event::Connected, clock.now());
                        }
                        Err(_) => device.handle(closed, clock.now()),
                    }
                }
                Action::Close { code, reason } => {
                    if let Some(mut socket) = ws.take() {
                        let frame = CloseFrame {
                            code: CloseCode::from(code),
                            reason: reason.into(),
                        };
                        let _ = timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
                    }
                }
                Action::Send(message) => {
                    let sent = transmit(&mut ws, Message::Text(message.encode().into())).await;
                    if !sent {
                        device.handle(closed, clock.now());
                    }
                }
                Action::SendBinary(bytes) => {
                    let sent = transmit(&mut ws, Message::Binary(bytes.into())).await;
                    if !sent {
                        device.handle(closed, clock.now());
                    }
                }
                Action::ConfirmFirmware => probation = false,
                Action::Rollback => seen.send_modify(|s| s.rollbacks += 1),
                Action::Restart => {
                    // A power cycle into the installed image, on probation.
                    if let Some(mut socket) = ws.take() {
                        let _ = timeout(Duration::from_secs(1), socket.close(None)).await;
                    }
                    let board = std::mem::take(device.host_mut());
                    if let Some(image) = &board.installed {
                        if let Ok(info) = inspect_image(&image.0) {
                            config.firmware = info.version;
                        }
                    }
                    probation = true;
                    seen.send_modify(|s| {
                        s.restarts += 1;
                        s.firmware = config.firmware.clone();
                    });
                    let boot = Boot {
                        key: Some(key),
                        probation: true,
                    };
                    device = Device::new(config.clone(), boot, board, clock.now());
                }
                _ => {}
            }
        }
        let installed = device.host().installed.clone();
        seen.send_if_modified(|s| {
            let online = device.phase() == Phase::Online;
            let setup = device.setup_needed().is_some();
            let changed = s.online != online || s.setup_needed != setup || s.installed != installed;
            s.online = online;
            s.setup_needed = setup;
            s.installed = installed;
            changed
        });

        let deadline = device.next_deadline();
        let wait = deadline.map(|d| d.saturating_duration_since(clock.now()));
        // Offline, the core only waits for its next attempt: skip the backoff. A board on
        // probation waits for real, so that its probation does not run out meanwhile.
        let skip = device.phase() == Phase::Offline && !probation;
        let real = match wait {
            Some(wait) if skip => wait.min(Duration::from_millis(20)),
            Some(wait) => wait,
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(real) => {
                if let (true, Some(deadline)) = (skip, deadline) {
                    clock.advance_to(deadline);
                }
                device.handle_timeout(clock.now());
            }
            incoming = receive(&mut ws) => match incoming {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(message) = ServerMessage::decode(text.as_str()) {
                        seen.send_modify(|s| observe(s, &message));
                    }
                    device.handle(Event::Text(text.as_str()), clock.now());
                }
                Some(Ok(Message::Binary(bytes))) => {
                    device.handle(Event::Binary(&bytes), clock.now());
                }
                Some(Ok(Message::Close(frame))) => {
                    ws = None;
                    let (code, reason) = frame
                        .map(|f| (Some(u16::from(f.code)), f.reason.to_string()))
                        .unwrap_or_default();
                    device.handle(Event::Closed { code, reason: &reason }, clock.now());
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => {
                    ws = None;
                    device.handle(closed, clock.now());
                }
            },
        }
    }
    if let Some(mut socket) = ws.take() {
        let _ = timeout(Duration::from_secs(1), socket.close(None)).await;
    }
}

/// A fake ESP-IDF application image of `size` random bytes.
fn firmware(version: &str, size: usize, rng: &mut Rng) -> Vec<u8> {
    firmware_image(BOARD, version, rng.bytes(size))
}

// ---- a phone: the mobile client library ----

struct Phone {
    client: Client,
}

impl Phone {
    fn spawn(herald: &Herald, token: &str, id: &str) -> Phone {
        let config = ClientConfig {
            url: herald.mobile_url.clone(),
            token: token.to_owned(),
            device: DeviceInfo {
                id: id.to_owned(),
                name: Some(format!("Phone {id}")),
                platform: Some("test".into()),
            },
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(250),
            },
        };
        Phone {
            client: Client::spawn(config),
        }
    }

    async fn event(&mut self) -> PhoneEvent {
        match timeout(PATIENCE, self.client.next_event()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("the phone client stopped"),
            Err(_) => panic!("no event from the phone in time"),
        }
    }

    async fn connected(&mut self) {
        loop {
            match self.event().await {
                PhoneEvent::Connected { .. } => return,
                PhoneEvent::Denied { reason } | PhoneEvent::Failed { reason } => {
                    panic!("the phone was refused: {reason}")
                }
                _ => {}
            }
        }
    }

    async fn send_text(&self, id: &str, text: &str) {
        let frame = ClientFrame::Text(Text {
            id: id.to_owned(),
            text: text.to_owned(),
            reply_to: None,
        });
        self.client.send(frame).await.unwrap();
    }

    /// The text of the next final message.
    async fn final_text(&mut self) -> String {
        loop {
            if let PhoneEvent::Frame(ServerFrame::Message(m)) = self.event().await {
                if m.final_ {
                    return m.text;
                }
            }
        }
    }
}

/// The final text of `event`, if it is the last frame of a reply.
fn final_text(event: &PhoneEvent) -> Option<&str> {
    match event {
        PhoneEvent::Frame(ServerFrame::Message(m)) if m.final_ => Some(&m.text),
        _ => None,
    }
}

fn typing_on(event: &PhoneEvent) -> bool {
    matches!(
        event,
        PhoneEvent::Frame(ServerFrame::Typing { stop: false })
    )
}

/// A message of `words` words, unique to `tag`.
fn words(tag: &str, words: u64) -> String {
    let mut text = tag.to_owned();
    for n in 1..words {
        text.push_str(&format!(" w{n}"));
    }
    text
}

// ---- enrollment ----

/// A key a gadget enrolled with, and whether it was welcomed.
type Tried = ([u8; 32], bool);

/// Gadgets enroll one after another (three at a time) until the server is killed; every
/// one that got `welcome` must be known by its key to the restarted server, and every
/// one at all (welcomed or caught mid-handshake) must get in afterwards.
#[test]
fn enrollment() {
    run_seeds("enrollment", enrollment_run);
}

async fn enrollment_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("GADGET_ALLOW_ALL_USERS", "1")]);
    let url = herald.gadget_url.clone();
    let mut welcomed = Vec::new();
    for _round in 0..rng.range(1, 3) {
        let stop = Arc::new(AtomicBool::new(false));
        let tried: Arc<Mutex<Vec<Tried>>> = Arc::default();
        let mut enrollers = Vec::new();
        for _ in 0..3 {
            let (url, stop, tried) = (url.clone(), stop.clone(), tried.clone());
            let mut rng = Rng::new(rng.next_u64());
            enrollers.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let key = rng.key();
                    let index = {
                        let mut tried = tried.lock().unwrap();
                        tried.push((key, false));
                        tried.len() - 1
                    };
                    let mut gadget = Gadget::spawn(&url, key, rng.next_u64());
                    let limit = Duration::from_secs(5);
                    if gadget.wait_unless(|s| s.welcomes > 0, &stop, limit).await {
                        tried.lock().unwrap()[index].1 = true;
                    }
                    gadget.stop().await;
                }
            }));
        }
        tokio::time::sleep(rng.millis(10, 400)).await;
        herald.kill();
        stop.store(true, Ordering::SeqCst);
        for enroller in enrollers {
            enroller.await.unwrap();
        }
        herald.restart();

        let tried = std::mem::take(&mut *tried.lock().unwrap());
        for batch in tried.chunks(8) {
            let mut checks = Vec::new();
            for &(key, was_welcomed) in batch {
                let url = url.clone();
                let seed = rng.next_u64();
                checks.push(tokio::spawn(async move {
                    let mut gadget = Gadget::spawn(&url, key, seed);
                    let seen = gadget
                        .wait("welcome after the restart", |s| {
                            s.welcomes > 0 || s.setup_needed
                        })
                        .await;
                    assert!(
                        !seen.setup_needed,
                        "gadget {} is refused after the restart (welcomed before: \
                         {was_welcomed}): {seen:?}",
                        gadget.id
                    );
                    if was_welcomed {
                        assert_eq!(
                            seen.challenges.first(),
                            Some(&true),
                            "gadget {} was welcomed before the kill, but the restarted \
                             server does not hold its key",
                            gadget.id
                        );
                    }
                    gadget.stop().await;
                }));
            }
            for check in checks {
                check.await.unwrap();
            }
        }
        welcomed.extend(
            tried
                .iter()
                .filter(|(_, w)| *w)
                .map(|(k, _)| auth::device_id(k)),
        );
    }
    let devices = admin_get(&herald, "/v1/devices").await;
    let listed: Vec<&str> = devices
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    for id in &welcomed {
        assert!(
            listed.contains(&id.as_str()),
            "{id} is not listed: {listed:?}"
        );
    }
    eprintln!(
        "faults: enrollment seed {seed}: {} gadgets welcomed before kills",
        welcomed.len()
    );
    final_checks(&herald);
    herald.kills
}

// ---- pairing approval ----

#[derive(Debug, Clone)]
struct Approval {
    platform: &'static str,
    user_id: String,
    body: Value,
}

/// The owner approves gadgets (by code and by id) and phone users (by code) as fast as
/// the admin API answers; the server is killed after a seeded number of answers. Every
/// approval answered 2xx must hold after the restart: in the store, for a gadget's
/// `welcome`, and for a phone's next message.
#[test]
fn pairing_approval() {
    run_seeds("pairing_approval", pairing_run);
}

async fn pairing_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let users: Vec<(String, String)> = (1..=3).map(|n| (format!("user{n}"), rng.hex(64))).collect();
    let extra: Vec<String> = users.iter().map(|(u, t)| format!("{u}:{t}")).collect();
    let mut herald = Herald::start(&[("MOBILE_EXTRA_TOKENS", &extra.join(","))]);
    let url = herald.gadget_url.clone();

    let mut approvals = Vec::new();
    // Three fit in the waiting room of one address with a place to spare.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let mut gadget = Gadget::spawn(&url, rng.key(), rng.next_u64());
        let seen = gadget
            .wait("pairing code", |s| s.pairing_code.is_some())
            .await;
        let code = seen.pairing_code.unwrap();
        approvals.push(Approval {
            platform: "gadget",
            user_id: gadget.id.clone(),
            body: json!({"platform": "gadget", "code": code}),
        });
        waiting.push(gadget);
    }
    let mut phones = Vec::new();
    for (user, token) in &users {
        let mut phone = Phone::spawn(&herald, token, &format!("phone-{user}"));
        phone.connected().await;
        phone.send_text("first", "hello").await;
        let text = phone.final_text().await;
        let code = text
            .split("Pairing code: ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no pairing code in {text:?}"))
            .to_owned();
        approvals.push(Approval {
            platform: "mobile",
            user_id: user.clone(),
            body: json!({"platform": "mobile", "code": code}),
        });
        phones.push((user.clone(), phone));
    }
    let spare: Vec<[u8; 32]> = (0..6).map(|_| rng.key()).collect();
    for key in &spare {
        let id = auth::device_id(key);
        approvals.push(Approval {
            platform: "gadget",
            user_id: id.clone(),
            body: json!({"platform": "gadget", "user_id": id}),
        });
    }
    rng.shuffle(&mut approvals);

    let answered: Arc<Mutex<Vec<Approval>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let owner = {
        let (dir, approvals) = (herald.data().to_owned(), approvals.clone());
        let (answered, count) = (answered.clone(), count.clone());
        std::thread::spawn(move || {
            for approval in approvals {
                match admin(&dir, "/v1/pairing/approve", Some(&approval.body)) {
                    Ok((status, _)) if (200..300).contains(&status) => {
                        answered.lock().unwrap().push(approval);
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok((status, answer)) => {
                        panic!("approval {approval:?} refused: {status} {answer}")
                    }
                    // Killed.
                    Err(_) => break,
                }
            }
        })
    };
    let kill_after = rng.below(approvals.len() as u64 + 1) as usize;
    let extra_wait = Duration::from_micros(rng.below(3000));
    let deadline = std::time::Instant::now() + PATIENCE;
    while count.load(Ordering::SeqCst) < kill_after {
        assert!(std::time::Instant::now() < deadline, "approvals stalled");
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    tokio::time::sleep(extra_wait).await;
    herald.kill();
    tokio::task::spawn_blocking(move || owner.join().unwrap())
        .await
        .unwrap();
    herald.restart();

    let answered = answered.lock().unwrap().clone();
    let pairings = admin_get(&herald, "/v1/pairing").await;
    for approval in &answered {
        let record = pairings.as_array().unwrap().iter().find(|p| {
            p["platform"] == approval.platform && p["user_id"] == approval.user_id.as_str()
        });
        assert!(
            record.is_some_and(|r| r["approved_at"].is_i64()),
            "approval answered before the kill is gone: {approval:?}; pairings: {pairings}"
        );
    }
    let approved = |platform: &str, user: &str| {
        answered
            .iter()
            .any(|a| a.platform == platform && a.user_id == user)
    };
    // The gadgets that waited come back by themselves.
    for gadget in &mut waiting {
        let seen = gadget
            .wait("welcome after the restart", |s| s.welcomes >= 2)
            .await;
        if approved("gadget", &gadget.id) {
            assert_eq!(
                seen.paired,
                Some(true),
                "gadget {} was approved before the kill, but is not paired after it",
                gadget.id
            );
        }
    }
    for key in &spare {
        let id = auth::device_id(key);
        if !approved("gadget", &id) {
            continue;
        }
        let mut gadget = Gadget::spawn(&url, *key, rng.next_u64());
        let seen = gadget.wait("welcome", |s| s.welcomes > 0).await;
        assert_eq!(
            seen.paired,
            Some(true),
            "gadget {id} was approved by id before the kill, but is not paired after it"
        );
        gadget.stop().await;
    }
    for (user, phone) in &mut phones {
        if !approved("mobile", user) {
            continue;
        }
        phone.connected().await;
        phone.send_text("after", "hi").await;
        let text = phone.final_text().await;
        assert_eq!(
            text, "You said: hi",
            "{user} was approved before the kill, but is not after it"
        );
    }
    eprintln!(
        "faults: pairing_approval seed {seed}: {} of {} approvals answered before the kill",
        answered.len(),
        approvals.len()
    );
    for gadget in waiting {
        gadget.stop().await;
    }
    final_checks(&herald);
    herald.kills
}

// ---- firmware updates ----

/// An update is pushed to a gadget and the server killed during the push, or during the
/// transfer, and sometimes again during the retry after the restart. An update the push
/// answered must still be there after each restart and end installed, byte for byte;
/// no staged image may stay behind.
#[test]
fn ota_staging_and_retry() {
    run_seeds("ota_staging_and_retry", ota_run);
}

async fn ota_status(herald: &Herald, id: &str) -> Option<Value> {
    let path = format!("/v1/ota/{id}");
    let (status, update) = admin_async(herald.data(), &path, None).await.unwrap();
    match status {
        200 => Some(update),
        404 => None,
        _ => panic!("GET {path}: {status} {update}"),
    }
}

fn is_active(update: &Value) -> bool {
    matches!(update["status"].as_str(), Some("sending" | "retrying"))
}

async fn ota_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("GADGET_ALLOW_ALL_USERS", "1")]);
    let files = tempfile::tempdir().unwrap();
    let version = format!("9.{}.{}", rng.below(100), rng.below(100));
    let size = rng.range(20_000, 900_000) as usize;
    let image = firmware(&version, size, &mut rng);
    let path = files.path().join("update.bin");
    std::fs::write(&path, &image).unwrap();

    let mut gadget = Gadget::spawn(&herald.gadget_url, rng.key(), rng.next_u64());
    gadget.wait("welcome", |s| s.online).await;
    let id = gadget.id.clone();
    let request = json!({"device_id": id, "image": path});
    let dir = herald.data().to_owned();
    let push = tokio::task::spawn_blocking(move || admin(&dir, "/v1/ota", Some(&request)));
    let during_push = rng.one_in(2);
    let answered = if during_push {
        // A push takes 25 to 70 ms here: the checks, the staged copy, the first offer.
        tokio::time::sleep(rng.millis(0, 80)).await;
        herald.kill();
        matches!(push.await.unwrap(), Ok((200..=299, _)))
    } else {
        let (status, answer) = push.await.unwrap().unwrap();
        assert_eq!(status, 200, "push refused: {answer}");
        // The transfer takes 50 to 150 ms here; now and then the update is done first.
        tokio::time::sleep(rng.millis(0, 40 + size as u64 / 4000)).await;
        herald.kill();
        true
    };
    // Offers the dead server made; the restarted one's retry makes the next.
    let offers = gadget.seen().offers;
    herald.restart();

    let mut update = ota_status(&herald, &id).await;
    if answered {
        assert!(
            update.is_some(),
            "the push of {id} was answered before the kill, but no update is recorded after it"
        );
    }
    // Again while the restarted server retries.
    if update.as_ref().is_some_and(is_active) && rng.one_in(2) {
        gadget
            .wait("the retry's offer", |s| s.offers > offers)
            .await;
        tokio::time::sleep(rng.millis(0, 400)).await;
        herald.crash_and_restart();
        update = ota_status(&herald, &id).await;
        assert!(
            update.is_some(),
            "the update of {id} is gone after a kill during its retry"
        );
    }
    if update.is_some() {
        update = Some(
            eventually("end of the update", async || {
                ota_status(&herald, &id).await.filter(|u| !is_active(u))
            })
            .await,
        );
        let update = update.as_ref().unwrap();
        assert_eq!(update["status"], "done", "{update}");
        let seen = gadget
            .wait("the new firmware", |s| s.firmware == version && s.online)
            .await;
        assert!(
            seen.installed.as_ref().is_some_and(|i| *i.0 == image),
            "the installed image differs from the pushed one: {seen:?}"
        );
        assert_eq!(seen.rollbacks, 0);
    }
    // The staged copy goes with the update's end (removed just after it is recorded); a
    // push the kill cut short leaves none.
    let staging = herald.data().join("ota");
    let staged = || {
        std::fs::read_dir(&staging)
            .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !staged().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let left = staged();
    assert!(
        left.is_empty(),
        "staged images left behind in {} (the push {} answered; the update now: {update:?}): \
         {left:?}",
        staging.display(),
        if answered { "was" } else { "was not" },
    );
    eprintln!(
        "faults: ota_staging_and_retry seed {seed}: {size} bytes, killed {} the push, \
         push answered: {answered}, update: {}",
        if during_push { "during" } else { "after" },
        update.map_or("none".into(), |u| format!("{} attempts", u["attempts"]))
    );
    gadget.stop().await;
    final_checks(&herald);
    herald.kills
}

/// The kill lands between the staged copy and its record every time: the test holds the
/// store's write lock, so the push waits there (the server gives up after 5 s). Nothing
/// refers to that copy after the restart, so it must not stay either.
#[test]
fn ota_push_killed_between_staging_and_record() {
    run_seeds("ota_push_killed_between_staging_and_record", staging_run);
}

async fn staging_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("GADGET_ALLOW_ALL_USERS", "1")]);
    let files = tempfile::tempdir().unwrap();
    let size = rng.range(20_000, 900_000) as usize;
    let image = firmware("9.0.1", size, &mut rng);
    let path = files.path().join("update.bin");
    std::fs::write(&path, &image).unwrap();
    let mut gadget = Gadget::spawn(&herald.gadget_url, rng.key(), rng.next_u64());
    gadget.wait("welcome", |s| s.online).await;
    let id = gadget.id.clone();

    let lock = rusqlite::Connection::open(herald.store()).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let request = json!({"device_id": id, "image": path});
    let dir = herald.data().to_owned();
    let push = tokio::task::spawn_blocking(move || admin(&dir, "/v1/ota", Some(&request)));
    let staging = herald.data().join("ota");
    let staged = || {
        std::fs::read_dir(&staging)
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| !is_temporary(p))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while staged().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the push staged nothing"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    herald.kill();
    drop(lock);
    let answer = push.await.unwrap();
    assert!(answer.is_err(), "the push was answered: {answer:?}");
    herald.restart();
    gadget
        .wait("welcome after the restart", |s| s.welcomes >= 2)
        .await;
    let update = ota_status(&herald, &id).await;
    assert!(update.is_none(), "an update was recorded: {update:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !staged().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let left = staged();
    assert!(
        left.is_empty(),
        "a push killed after staging its image and before recording the update leaves \
         the staged copy behind for good, with no update referring to it: {left:?}"
    );
    gadget.stop().await;
    final_checks(&herald);
    herald.kills
}

// ---- phone turns ----

/// One message of a phone's conversation.
#[derive(Debug)]
struct Turn {
    id: String,
    text: String,
    sent: bool,
    /// The typing indicator came on for it: the server took it.
    answered: bool,
    replies: usize,
    /// Answered by a server that was killed before the reply came (what arrives between
    /// a kill and the next `ready` is the dead server's); the protocol says not to resend.
    given_up: bool,
}

impl Turn {
    fn reply(&self) -> String {
        format!("You said: {}", self.text)
    }
}

/// A phone talks, one message at a time, resending after a reconnect what was not
/// answered yet, as the protocol asks; the server is killed once or twice in between.
/// Every message unanswered at a kill must be answered after the restart, none twice.
#[test]
fn phone_turns() {
    run_seeds("phone_turns", phone_turns_run);
}

async fn phone_turns_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let token = herald.mobile_token();
    let device = format!("turns-{seed}");
    let mut phone = Phone::spawn(&herald, &token, &device);
    let mut turns: Vec<Turn> = (0..6)
        .map(|n| Turn {
            id: format!("m{n}"),
            text: words(&format!("turn {n} of {seed}"), rng.range(1, 8)),
            sent: false,
            answered: false,
            replies: 0,
            given_up: false,
        })
        .collect();
    let start = tokio::time::Instant::now();
    let mut kills_at: Vec<tokio::time::Instant> = (0..rng.range(1, 3))
        .map(|_| start + rng.millis(0, 2500))
        .collect();
    kills_at.sort();
    let mut killed_since_ready = false;
    let mut current = 0;
    let mut connected = false;
    while current < turns.len() || !kills_at.is_empty() {
        let next_kill = kills_at.first().copied();
        let event = tokio::select! {
            _ = tokio::time::sleep_until(next_kill.unwrap_or(start)), if next_kill.is_some() => {
                kills_at.remove(0);
                herald.crash_and_restart();
                killed_since_ready = true;
                continue;
            }
            event = phone.event() => event,
        };
        match &event {
            PhoneEvent::Connected { .. } => {
                connected = true;
                if let Some(turn) = turns.get_mut(current) {
                    if killed_since_ready && turn.answered && turn.replies == 0 {
                        // Its turn died with the server; the protocol says not to resend.
                        turn.given_up = true;
                        current += 1;
                    }
                }
                killed_since_ready = false;
                if let Some(turn) = turns.get_mut(current) {
                    if !turn.answered {
                        phone.send_text(&turn.id, &turn.text).await;
                        turn.sent = true;
                    }
                }
            }
            PhoneEvent::Disconnected { .. } => connected = false,
            PhoneEvent::Denied { reason } | PhoneEvent::Failed { reason } => {
                panic!("the phone was refused: {reason}")
            }
            _ if typing_on(&event) => {
                if let Some(turn) = turns.get_mut(current) {
                    turn.answered |= turn.sent;
                }
            }
            _ => {
                if let Some(text) = final_text(&event) {
                    let turn = turns.iter_mut().find(|t| t.reply() == text);
                    let turn = turn.unwrap_or_else(|| panic!("a reply to nothing: {text:?}"));
                    turn.replies += 1;
                    if turns.get(current).is_some_and(|t| t.replies > 0) {
                        current += 1;
                        if let Some(turn) = turns.get_mut(current) {
                            if connected {
                                phone.send_text(&turn.id, &turn.text).await;
                                turn.sent = true;
                            }
                        }
                    }
                }
            }
        }
    }
    for turn in &turns {
        assert!(turn.replies <= 1, "answered twice: {turn:?}");
        // Only a reply the server was producing when it died may be missing.
        assert!(
            turn.replies == 1 || turn.given_up,
            "never answered: {turn:?}"
        );
    }
    let lost: Vec<&Turn> = turns.iter().filter(|t| t.given_up).collect();
    assert!(lost.len() <= herald.kills, "{lost:?}");
    let phones = admin_get(&herald, "/v1/phones").await;
    assert!(
        phones
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == device.as_str()),
        "the phone is not listed after the restarts: {phones}"
    );
    eprintln!(
        "faults: phone_turns seed {seed}: {} turns, {} cut off by a kill",
        turns.len(),
        lost.len()
    );
    drop(phone);
    final_checks(&herald);
    herald.kills
}

/// A phone goes away as soon as its message is answered; the reply goes to its outbox.
/// First a blip with the server alive (the outbox hands the reply over on reconnect, which
/// shows the test's timing holds), then the same with the server killed while the reply
/// waits in the outbox: the reply must still reach the phone after the restart.
#[test]
fn outboxed_reply_survives_a_kill() {
    run_seeds("outboxed_reply_survives_a_kill", outbox_run);
}

/// Send `text` as `id` and wait until the typing indicator comes on for it.
async fn until_answered(phone: &mut Phone, id: &str, text: &str) {
    phone.send_text(id, text).await;
    while !typing_on(&phone.event().await) {}
}

/// Reconnect as `device`, ask something new, and collect every final reply up to the
/// new one's: frames kept for a phone come right after `ready`, before any new turn's.
async fn replies_on_return(herald: &Herald, token: &str, device: &str) -> Vec<String> {
    let mut phone = Phone::spawn(herald, token, device);
    phone.connected().await;
    phone.send_text("probe", "probe").await;
    let mut replies = Vec::new();
    loop {
        let text = phone.final_text().await;
        if text == "You said: probe" {
            return replies;
        }
        replies.push(text);
    }
}

async fn outbox_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let token = herald.mobile_token();
    let device = format!("outbox-{seed}");
    let length = rng.range(3, 10);

    // How long a turn of this length takes here.
    let mut phone = Phone::spawn(&herald, &token, &device);
    phone.connected().await;
    let calibration = words("calibration", length);
    let began = tokio::time::Instant::now();
    until_answered(&mut phone, "c", &calibration).await;
    assert_eq!(phone.final_text().await, format!("You said: {calibration}"));
    // Twice that, and some, from the moment the phone leaves: the reply is in the outbox.
    let in_outbox = began.elapsed() * 2 + Duration::from_millis(200);

    let blip = words("blip", length);
    until_answered(&mut phone, "b", &blip).await;
    drop(phone);
    tokio::time::sleep(in_outbox).await;
    let replies = replies_on_return(&herald, &token, &device).await;
    assert!(
        replies.contains(&format!("You said: {blip}")),
        "the outbox lost a reply without a kill: {replies:?}"
    );

    let kept = words("kept", length);
    let mut phone = Phone::spawn(&herald, &token, &device);
    phone.connected().await;
    until_answered(&mut phone, "k", &kept).await;
    drop(phone);
    tokio::time::sleep(in_outbox + rng.millis(0, 500)).await;
    herald.crash_and_restart();
    let replies = replies_on_return(&herald, &token, &device).await;
    assert!(
        replies.contains(&format!("You said: {kept}")),
        "the reply to {kept:?} waited in the outbox of phone {device} when the server was \
         killed, and was not delivered after the restart (replies on return: {replies:?})"
    );
    final_checks(&herald);
    herald.kills
}

// ---- uploads ----

struct Upload {
    id: String,
    caption: String,
    bytes: Vec<u8>,
    sent: bool,
    /// The typing indicator came on for it: the server took it (and saved it first).
    taken: bool,
    /// "Got your document" arrived.
    acked: bool,
}

impl Upload {
    fn answered(&self) -> bool {
        self.taken || self.acked
    }
}

/// A phone uploads files one after another, some in several chunks; the server is killed
/// at seeded moments. With the server dead, every upload it had taken must be in the
/// inbox, and every file there must be a whole upload; after the restart the phone sends
/// again what was not taken, and that must arrive too.
#[test]
fn uploads() {
    run_seeds("uploads", uploads_run);
}

/// Every file in the inbox is one of `uploads` whole, and every answered upload is there.
fn check_inbox(herald: &Herald, uploads: &[Upload]) {
    let inbox = herald.data().join("inbox");
    let files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&inbox)
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| !is_temporary(p))
                .map(|p| {
                    let bytes = std::fs::read(&p).unwrap();
                    (p, bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    for (path, bytes) in &files {
        assert!(
            uploads.iter().any(|u| u.bytes == *bytes),
            "{} ({} bytes) is no upload: a file cut short?",
            path.display(),
            bytes.len()
        );
    }
    for upload in uploads.iter().filter(|u| u.answered()) {
        assert!(
            files.iter().any(|(_, b)| *b == upload.bytes),
            "upload {} ({} bytes) was taken by the server, but is not in the inbox",
            upload.id,
            upload.bytes.len()
        );
    }
}

/// Send every part of `upload` (an unfinished series is dropped with its connection).
async fn send_upload(phone: &Phone, n: usize, upload: &mut Upload) {
    let frames = media_frames(
        &upload.id,
        MediaKind::Document,
        Some("application/octet-stream".into()),
        Some(format!("file{n}.bin")),
        Some(upload.caption.clone()),
        &upload.bytes,
    );
    for frame in frames {
        phone.client.send(frame).await.unwrap();
    }
    upload.sent = true;
}

/// Set the next kill of `plan` going once upload `sent` (or a later one) is sent.
fn arm(plan: &mut Vec<(usize, Duration)>, kill_at: &mut Option<tokio::time::Instant>, sent: usize) {
    if kill_at.is_none() && plan.first().is_some_and(|(n, _)| *n <= sent) {
        let (_, delay) = plan.remove(0);
        *kill_at = Some(tokio::time::Instant::now() + delay);
    }
}

async fn uploads_run(seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let token = herald.mobile_token();
    let mut phone = Phone::spawn(&herald, &token, &format!("uploads-{seed}"));
    let mut uploads: Vec<Upload> = (0..6)
        .map(|n| {
            let size = if rng.one_in(4) {
                limits::MEDIA_CHUNK_BYTES + rng.range(1, 400_000) as usize
            } else {
                rng.range(1, 300_000) as usize
            };
            Upload {
                id: format!("u{seed}-{n}"),
                caption: format!("upload {n} of {seed}"),
                bytes: rng.bytes(size),
                sent: false,
                taken: false,
                acked: false,
            }
        })
        .collect();
    // Kills a seeded while after an upload is sent: while the server decodes and writes
    // it, or answers it, or waits for the next.
    let mut plan: Vec<(usize, Duration)> = (0..rng.range(1, 4))
        .map(|_| {
            let scale = [5, 60, 400][rng.below(3) as usize];
            (
                rng.below(uploads.len() as u64) as usize,
                rng.millis(0, scale),
            )
        })
        .collect();
    plan.sort();
    let mut kill_at = None;
    let mut current = 0;
    let mut connected = false;
    while current < uploads.len() || kill_at.is_some() {
        let event = tokio::select! {
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(tokio::time::Instant::now)),
                if kill_at.is_some() => {
                kill_at = None;
                herald.kill();
                check_inbox(&herald, &uploads);
                herald.restart();
                continue;
            }
            event = phone.event() => event,
        };
        match &event {
            PhoneEvent::Connected { .. } => {
                connected = true;
                // Taken but not answered: its turn died with the server; it is in the
                // inbox (checked above), and sending it again would be a second message.
                while uploads.get(current).is_some_and(Upload::answered) {
                    current += 1;
                }
                if let Some(upload) = uploads.get_mut(current) {
                    send_upload(&phone, current, upload).await;
                    arm(&mut plan, &mut kill_at, current);
                }
            }
            PhoneEvent::Disconnected { .. } => connected = false,
            PhoneEvent::Denied { reason } | PhoneEvent::Failed { reason } => {
                panic!("the phone was refused: {reason}")
            }
            PhoneEvent::Frame(ServerFrame::Error { code, message }) => {
                panic!("upload refused: {code:?} {message}")
            }
            _ if typing_on(&event) => {
                if let Some(upload) = uploads.get_mut(current) {
                    upload.taken |= upload.sent;
                }
            }
            _ => {
                let Some(text) = final_text(&event) else {
                    continue;
                };
                let upload = uploads
                    .iter_mut()
                    .find(|u| text == format!("Got your document: {}.", u.caption));
                let Some(upload) = upload else {
                    panic!(
                        "an answer to no upload: {text:?} (a caption lost when the chunks \
                         came out of order after a reconnect? see \
                         upload_chunks_out_of_order_keep_their_caption)"
                    )
                };
                upload.acked = true;
                while uploads.get(current).is_some_and(Upload::answered) {
                    current += 1;
                }
                if let Some(upload) = uploads.get_mut(current) {
                    if connected && !upload.sent {
                        send_upload(&phone, current, upload).await;
                        arm(&mut plan, &mut kill_at, current);
                    }
                }
            }
        }
    }
    drop(phone);
    check_inbox(&herald, &uploads);
    let sizes: Vec<usize> = uploads.iter().map(|u| u.bytes.len()).collect();
    let acked = uploads.iter().filter(|u| u.acked).count();
    eprintln!("faults: uploads seed {seed}: sizes {sizes:?}, {acked} answered");
    final_checks(&herald);
    herald.kills
}

/// What the uploads scenario ran into: after a reconnect the client library sends first
/// the chunk that failed on the dead connection, then the app sends all of them again, so
/// a later chunk arrives before the first, which alone carries the caption. Chunks may
/// arrive in any order; the file's caption must not depend on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_chunks_out_of_order_keep_their_caption() {
    let herald = Herald::start(&[("MOBILE_ALLOW_ALL_USERS", "1")]);
    let mut phone = Phone::spawn(&herald, &herald.mobile_token(), "reordered");
    phone.connected().await;
    let bytes = Rng::new(7).bytes(limits::MEDIA_CHUNK_BYTES + 1000);
    let mut frames = media_frames(
        "two-parts",
        MediaKind::Document,
        Some("application/pdf".into()),
        Some("report.pdf".into()),
        Some("the report".into()),
        &bytes,
    );
    assert_eq!(frames.len(), 2);
    frames.reverse();
    for frame in frames {
        phone.client.send(frame).await.unwrap();
    }
    assert_eq!(phone.final_text().await, "Got your document: the report.");
}
