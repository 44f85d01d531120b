//! A gadget: the device core driven by the simulator's runner over a real WebSocket, as
//! `herald sim` drives it, on a flash of the test's own: in memory, with seeded
//! randomness, telling the test what was installed and rolled back. The runner skips the
//! reconnect backoff, so a gadget finds the restarted server at once.

use std::sync::Arc;
use std::time::Duration;

use herald_device::{Boot, DeviceConfig, FlashError, Host, Phase};
use herald_gadget_proto::limits::KEY_LEN;
use herald_gadget_proto::ota_image::inspect_image;
use herald_gadget_proto::{auth, ServerMessage};
use herald_sim::runner::{self, Command, Flash, Handle, Settings, Snapshot};
use herald_test_support::firmware::firmware_image;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use super::seeds::Rng;
use super::PATIENCE;

/// The board of [`DeviceConfig::reference`]; firmware must carry its tag.
const BOARD: &str = "esp32s3-breadboard";

/// An installed image; printed by size only.
#[derive(Clone, PartialEq)]
pub struct Image(pub Arc<Vec<u8>>);

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Image({} bytes)", self.0.len())
    }
}

/// What a gadget has seen so far.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub online: bool,
    pub welcomes: u32,
    /// `welcome.paired` of the latest welcome.
    pub paired: Option<bool>,
    /// `challenge.enrolled` of each handshake.
    pub challenges: Vec<bool>,
    pub pairing_code: Option<String>,
    pub offers: u32,
    pub errors: Vec<String>,
    /// The runner stopped by itself: the server refused the board for good.
    pub setup_needed: bool,
    pub firmware: String,
    pub installed: Option<Image>,
    pub restarts: u32,
    pub rollbacks: u32,
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

/// The board's flash and random source, kept in memory; what it installs, boots and
/// rolls back goes into [`Seen`].
struct Board {
    rng: Rng,
    key: [u8; KEY_LEN],
    running: String,
    previous: Option<String>,
    probation: bool,
    partition: Vec<u8>,
    /// The image to boot next.
    next: Option<Image>,
    booted: bool,
    seen: watch::Sender<Seen>,
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
        let image = Image(Arc::new(std::mem::take(&mut self.partition)));
        self.next = Some(image.clone());
        self.seen.send_modify(|s| s.installed = Some(image));
        Ok(())
    }

    fn ota_abort(&mut self) {
        self.partition.clear();
    }
}

impl Flash for Board {
    fn boot(&mut self) -> anyhow::Result<(Boot, String)> {
        if let Some(image) = self.next.take() {
            let info = inspect_image(&image.0).map_err(|e| anyhow::anyhow!("{e:?}"))?;
            self.previous = Some(std::mem::replace(&mut self.running, info.version));
            self.probation = true;
        }
        let restart = std::mem::replace(&mut self.booted, true);
        self.seen.send_modify(|s| {
            s.restarts += u32::from(restart);
            s.firmware.clone_from(&self.running);
        });
        let boot = Boot {
            key: Some(self.key),
            probation: self.probation,
        };
        Ok((boot, self.running.clone()))
    }

    fn store_key(&mut self, key: &[u8; KEY_LEN]) -> anyhow::Result<()> {
        self.key = *key;
        Ok(())
    }

    fn confirm(&mut self) -> anyhow::Result<()> {
        self.probation = false;
        self.previous = None;
        Ok(())
    }

    fn rollback(&mut self) -> anyhow::Result<String> {
        if let Some(previous) = self.previous.take() {
            self.running = previous;
        }
        self.probation = false;
        self.seen.send_modify(|s| s.rollbacks += 1);
        Ok(self.running.clone())
    }

    fn on_probation(&self) -> bool {
        self.probation
    }
}

/// A gadget running in a task of its own; stopped on drop.
pub struct Gadget {
    pub id: String,
    seen: watch::Receiver<Seen>,
    snapshot: watch::Receiver<Snapshot>,
    handle: Handle,
    task: JoinHandle<anyhow::Result<()>>,
    /// Where its speaker would write (nothing plays here).
    _dir: tempfile::TempDir,
}

impl Gadget {
    /// Boot the reference board with `key` and connect to `url`.
    pub fn spawn(url: &str, key: [u8; KEY_LEN], seed: u64) -> Gadget {
        let config = DeviceConfig::reference("Fault gadget");
        let (tx, seen) = watch::channel(Seen::default());
        let heard = tx.clone();
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            url: url.to_owned(),
            config: config.clone(),
            mic: None,
            speaker: dir.path().join("speaker.wav"),
            echo: false,
            led_action: false,
            actions: Vec::new(),
            invocations: None,
            live: None,
            fast_reconnect: true,
            heard: Some(Box::new(move |text: &str| {
                if let Ok(message) = ServerMessage::decode(text) {
                    heard.send_modify(|s| observe(s, &message));
                }
            })),
        };
        let board = Board {
            rng: Rng::new(seed),
            key,
            running: config.firmware,
            previous: None,
            probation: false,
            partition: Vec::new(),
            next: None,
            booted: false,
            seen: tx,
        };
        let (handle, task) = runner::start(settings, board).unwrap();
        Gadget {
            id: auth::device_id(&key),
            seen,
            snapshot: handle.snapshot(),
            handle,
            task,
            _dir: dir,
        }
    }

    pub fn seen(&self) -> Seen {
        let mut seen = self.seen.borrow().clone();
        seen.online = self.snapshot.borrow().phase == Phase::Online;
        seen.setup_needed = self.task.is_finished();
        seen
    }

    /// Until something changed (or, the runner gone, a moment passed).
    async fn changed(&mut self) {
        let open = tokio::select! {
            r = self.seen.changed() => r.is_ok(),
            r = self.snapshot.changed() => r.is_ok(),
        };
        if !open {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Wait until `what` holds; panics after [`PATIENCE`], or when the runner stops first.
    pub async fn wait(&mut self, what: &str, pred: impl Fn(&Seen) -> bool) -> Seen {
        let found = timeout(PATIENCE, async {
            loop {
                let seen = self.seen();
                if pred(&seen) {
                    return Some(seen);
                }
                if seen.setup_needed {
                    return None;
                }
                self.changed().await;
            }
        })
        .await;
        match found {
            Ok(Some(seen)) => seen,
            _ => panic!("gadget {}: no {what}: {:?}", self.id, self.seen()),
        }
    }

    /// Wait until `pred` holds (true) or `stop` is set or `limit` passes (false).
    pub async fn wait_unless(
        &mut self,
        pred: impl Fn(&Seen) -> bool,
        stop: &std::sync::atomic::AtomicBool,
        limit: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if pred(&self.seen()) {
                return true;
            }
            let stopped = stop.load(std::sync::atomic::Ordering::SeqCst);
            if stopped || tokio::time::Instant::now() >= deadline {
                return false;
            }
            let _ = timeout(Duration::from_millis(10), self.changed()).await;
        }
    }

    /// Power off: the runner closes the connection and ends.
    pub async fn stop(mut self) {
        let _ = self.handle.run(Command::Quit).await;
        let _ = (&mut self.task).await;
    }
}

impl Drop for Gadget {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A fake ESP-IDF application image of `size` random bytes.
pub fn firmware(version: &str, size: usize, rng: &mut Rng) -> Vec<u8> {
    firmware_image(BOARD, version, rng.bytes(size))
}
