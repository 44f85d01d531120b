//! `herald sim` against `herald serve` and its demo agent, both real processes: the
//! simulator runs a script headless, the test reads the lines it prints and plays the
//! owner with the other `herald` commands (approve a pairing, push firmware, restart the
//! server).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use herald_test_support::firmware::firmware_image;

use common::{stdout, Lines, Serve, BIN, PATIENCE};

/// The simulator's board, and the tag firmware for it must carry.
const BOARD: &str = "esp32s3-breadboard";

/// Every device may talk without pairing: for the tests about something else.
const ALLOW_ALL: &[(&str, &str)] = &[("GADGET_ALLOW_ALL_USERS", "1")];

/// `herald sim --headless --script` and what it prints; killed on drop.
struct Sim {
    child: Child,
    lines: Lines,
    errors: Option<std::thread::JoinHandle<String>>,
}

impl Sim {
    /// Runs `script` as the device whose state is in `state`, against the gadget URL.
    fn start(url: &str, state: &Path, script: &str) -> Sim {
        let file = state.with_extension("script");
        std::fs::write(&file, script).unwrap();
        let mut child = Command::new(BIN)
            .args(["sim", "--headless", "--name", "Test sim", "--url", url])
            .arg("--state-dir")
            .arg(state)
            .arg("--script")
            .arg(&file)
            .env_remove("GADGET_ACCESS_TOKEN")
            .env_remove("HERALD_CONFIG")
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Lines::of(child.stdout.take().unwrap());
        let mut err = child.stderr.take().unwrap();
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
            text
        });
        Sim {
            child,
            lines,
            errors: Some(errors),
        }
    }

    fn line_with(&mut self, needle: &str) -> String {
        self.lines.line_with(needle)
    }

    /// Waits for the script to end and returns everything printed; panics unless it
    /// succeeded.
    fn succeeds(mut self) -> String {
        let (success, output) = self.end();
        assert!(success, "the script failed:\n{output}");
        output
    }

    /// Waits for the script to end: whether it succeeded, and everything printed.
    fn end(&mut self) -> (bool, String) {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the simulator did not end:\n{}",
                self.lines.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends with the pipe.
        self.lines.drain(Duration::from_secs(5));
        let errors = self.errors.take().map(|e| e.join().unwrap_or_default());
        let errors = errors.unwrap_or_default();
        (
            status.success(),
            format!("{}\n{errors}", self.lines.seen.join("\n")),
        )
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A state directory for one simulated device, inside `root`.
fn state_in(root: &tempfile::TempDir) -> PathBuf {
    root.path().join("device")
}

/// The device id from the simulator's first line (`* device hg-… (board, firmware …)`).
fn device_id(line: &str) -> String {
    let at = line.find("hg-").expect("a device id");
    line[at..at + 19].to_owned()
}

/// A fake ESP-IDF application image of 150,000 bytes.
fn firmware(board: &str, version: &str) -> Vec<u8> {
    firmware_image(
        board,
        version,
        (0..150_000).map(|i| (i % 251) as u8).collect(),
    )
}

/// The code in a screen line that shows one (`… Pairing code: ABCD2345 …`).
fn pairing_code(line: &str) -> String {
    let rest = line.split("Pairing code: ").nth(1).expect("a pairing code");
    rest.split_whitespace().next().unwrap().to_owned()
}

fn devices(serve: &Serve) -> serde_json::Value {
    serde_json::from_str(&stdout(&serve.herald(&["devices", "--json"]))).unwrap()
}

#[test]
fn pairing_then_a_typed_turn_and_the_same_device_next_time() {
    let serve = Serve::start();
    let url = serve.url("Gadgets connect to:");
    let root = tempfile::tempdir().unwrap();
    let state = state_in(&root);
    let shot = root.path().join("shot.txt");
    let script = format!(
        "wait pairing\n\
         wait ready 20\n\
         expect Paired\n\
         text hello from the sim\n\
         wait ready\n\
         expect You said: hello from the sim\n\
         screenshot {}\n",
        shot.display()
    );
    let mut sim = Sim::start(&url, &state, &script);
    let id = device_id(&sim.line_with("* device"));
    let code = pairing_code(&sim.line_with("Pairing code:"));
    let listed = stdout(&serve.herald(&["pairing", "list"]));
    assert!(listed.contains(&format!("pending {code}")), "{listed}");
    stdout(&serve.herald(&["pairing", "approve", "gadget", &code]));
    sim.succeeds();

    let screen = std::fs::read_to_string(&shot).unwrap();
    assert!(
        screen.starts_with("screen: ready\nstatus: Ready\n"),
        "{screen}"
    );
    // The reference board's text area is 25 columns: the reply wraps.
    assert!(
        screen.contains("|You said: hello from the |\n|sim"),
        "{screen}"
    );
    let devices = devices(&serve);
    assert_eq!(devices[0]["id"], id.as_str());
    assert_eq!(devices[0]["name"], "Test sim");
    assert_eq!(devices[0]["board"], BOARD);
    assert_eq!(devices[0]["firmware"], "0.1.0");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(state.join("key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The key in the state directory makes it the same, already paired, device.
    let mut again = Sim::start(&url, &state, "wait ready|pairing\nexpect Ready\n");
    assert_eq!(device_id(&again.line_with("* device")), id);
    let output = again.succeeds();
    assert!(!output.contains("Pairing code"), "{output}");
}

#[test]
fn a_second_simulator_on_the_same_state_directory_refuses_to_start() {
    let serve = Serve::start();
    let url = serve.url("Gadgets connect to:");
    let root = tempfile::tempdir().unwrap();
    let state = state_in(&root);
    let mut first = Sim::start(&url, &state, "wait pairing\nwait ready 60\n");
    let code = pairing_code(&first.line_with("Pairing code:"));
    let (success, output) = Sim::start(&url, &state, "wait pairing\n").end();
    assert!(!success, "{output}");
    assert!(output.contains("in use by another herald sim"), "{output}");
    // The first one goes on as the device it is.
    stdout(&serve.herald(&["pairing", "approve", "gadget", &code]));
    first.succeeds();
}

#[test]
fn prompts_are_answered_yes_with_talk_and_no_with_cancel() {
    let serve = Serve::start_with(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let script = "wait ready\n\
                  text /ask Shall we go?\n\
                  wait prompt\n\
                  expect Question | Shall we go?\n\
                  # A prompt ignores presses in its first 0.6 s.\n\
                  sleep 0.7\n\
                  tap talk\n\
                  expect You answered yes.\n\
                  text /ask Again?\n\
                  wait prompt\n\
                  sleep 0.7\n\
                  tap cancel\n\
                  expect You answered no.\n";
    let sim = Sim::start(&serve.url("Gadgets connect to:"), &state_in(&root), script);
    let output = sim.succeeds();
    assert!(
        output.contains("prompt | Question |") && output.contains("TALK yes, CANCEL no"),
        "{output}"
    );
}

#[test]
fn the_agent_runs_device_actions_and_shows_a_card() {
    let serve = Serve::start_with(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let script = "wait ready\n\
                  text /action led.set {\"color\":\"red\"}\n\
                  expect Result: {\"led\":\"red\"}\n\
                  text /action led.set {}\n\
                  expect Action failed: color is required\n\
                  text /action speaker.volume {\"percent\":30}\n\
                  expect Result: {\"percent\":30}\n\
                  text /card Timer | Pasta: 9 min\n\
                  wait card\n\
                  expect card | Card | Timer | Pasta: 9 min\n\
                  # CANCEL takes the card away.\n\
                  tap cancel\n\
                  wait ready\n\
                  expect Card shown.\n";
    let sim = Sim::start(&serve.url("Gadgets connect to:"), &state_in(&root), script);
    let output = sim.succeeds();
    assert!(output.contains("* LED red"), "{output}");
    assert!(output.contains("* volume 30%"), "{output}");
}

#[test]
fn cancel_stops_a_slow_reply() {
    let serve = Serve::start_with(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let (before, after) = (
        root.path().join("before.txt"),
        root.path().join("after.txt"),
    );
    let script = format!(
        "wait ready\n\
         text /slow\n\
         wait responding\n\
         expect Counting: 1\n\
         tap cancel\n\
         wait ready\n\
         expect notice: Cancelled\n\
         # A preview already on its way may still land.\n\
         sleep 0.3\n\
         screenshot {}\n\
         # The reply would count on every half second.\n\
         sleep 1.2\n\
         screenshot {}\n",
        before.display(),
        after.display()
    );
    let sim = Sim::start(&serve.url("Gadgets connect to:"), &state_in(&root), &script);
    sim.succeeds();
    let before = std::fs::read_to_string(before).unwrap();
    assert!(before.contains("|Counting: 1"), "{before}");
    assert_eq!(before, std::fs::read_to_string(after).unwrap());
}

#[test]
fn the_device_comes_back_after_a_server_restart() {
    // Behind a port the test holds, where the restarted server is found again.
    let mut serve = Serve::restartable(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let script = "wait ready\n\
                  text before\n\
                  expect You said: before\n\
                  wait offline|connecting 10\n\
                  wait ready 20\n\
                  text after the restart\n\
                  expect You said: after the restart\n";
    let mut sim = Sim::start(&serve.gadget_url(), &state_in(&root), script);
    sim.line_with("You said: before");
    serve.restart();
    let output = sim.succeeds();
    assert!(output.contains("offline | Offline"), "{output}");
}

#[test]
fn an_update_is_verified_installed_and_kept_after_the_restart() {
    let serve = Serve::start_with(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let state = state_in(&root);
    let script = "wait ready\n\
                  wait updating 20\n\
                  wait boot 20\n\
                  wait ready 20\n";
    let mut sim = Sim::start(&serve.url("Gadgets connect to:"), &state, script);
    let id = device_id(&sim.line_with("* device"));
    sim.line_with("ready | Ready");

    let wrong = root.path().join("other-board.bin");
    std::fs::write(&wrong, firmware("esp32s3-other", "0.2.0")).unwrap();
    let refused = serve.herald(&["ota", "push", &id, wrong.to_str().unwrap()]);
    assert!(!refused.status.success());
    let refusal = String::from_utf8_lossy(&refused.stderr);
    assert!(refusal.contains("wrong_board"), "{refusal}");

    let image = root.path().join("firmware.bin");
    std::fs::write(&image, firmware(BOARD, "0.2.0")).unwrap();
    let pushed = stdout(&serve.herald(&["ota", "push", &id, image.to_str().unwrap(), "--wait"]));
    assert!(pushed.contains("Installed 0.2.0"), "{pushed}");
    let output = sim.succeeds();
    assert!(
        output.contains("* restarted into firmware 0.2.0 on probation"),
        "{output}"
    );
    assert!(output.contains("* firmware 0.2.0 confirmed"), "{output}");
    assert_eq!(devices(&serve)[0]["firmware"], "0.2.0");
    // What the board boots next time.
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.join("firmware.json")).unwrap()).unwrap();
    assert_eq!(state["running"], "0.2.0");
    assert_eq!(state["probation"], false);
}

#[test]
fn a_voice_turn_is_answered_and_played_back() {
    let serve = Serve::start_with(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let state = state_in(&root);
    // One second of a 440 Hz tone at the microphone's 16 kHz.
    let tone: Vec<u8> = (0..16_000)
        .map(|i| ((f64::from(i) * 440.0 / 16_000.0 * std::f64::consts::TAU).sin() * 8000.0) as i16)
        .flat_map(i16::to_le_bytes)
        .collect();
    let wav = root.path().join("tone.wav");
    herald_media::wav::write_wav(&wav, 16_000, &tone).unwrap();
    // The reply's audio may come after its turn has ended (the screen goes back to ready
    // in between), so the test waits for the speaker rather than for a screen.
    let script = format!(
        "wait ready\n\
         wav {}\n\
         expect I heard 1.0 seconds of audio.\n\
         sleep 30\n",
        wav.display()
    );
    let mut sim = Sim::start(&serve.url("Gadgets connect to:"), &state, &script);
    sim.line_with("listening | Listening");
    sim.line_with("| I heard 1.0 seconds of audio.");
    // The file is written before the line is printed.
    sim.line_with("* played");
    let played = std::fs::read(state.join("speaker.wav")).unwrap();
    let played = herald_media::wav::inspect(&played).unwrap();
    assert!(
        (Duration::from_millis(800)..=Duration::from_millis(1300)).contains(&played.duration),
        "{played:?}"
    );
}

#[test]
fn an_image_is_fitted_into_the_screen() {
    let serve = Serve::start_with(ALLOW_ALL);
    let root = tempfile::tempdir().unwrap();
    let shot = root.path().join("image.txt");
    let script = format!(
        "wait ready\n\
         text /image\n\
         wait image\n\
         screenshot {}\n",
        shot.display()
    );
    let sim = Sim::start(&serve.url("Gadgets connect to:"), &state_in(&root), &script);
    sim.succeeds();
    let screen = std::fs::read_to_string(shot).unwrap();
    let size = screen
        .lines()
        .find_map(|l| l.strip_prefix("image "))
        .unwrap_or_else(|| panic!("no image in {screen}"));
    let (w, h) = size.split_once('x').unwrap();
    let (w, h): (u32, u32) = (w.parse().unwrap(), h.parse().unwrap());
    // The 1200×900 demo picture in the reference board's 320×196 box: the height decides.
    assert_eq!(h, 196, "{screen}");
    assert!((260..=262).contains(&w), "{screen}");
}
