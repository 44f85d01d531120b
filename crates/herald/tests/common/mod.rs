//! What the tests of the `herald` binary share: `herald serve` in a child process on
//! loopback, and the other commands run against its data directory.

#![allow(dead_code)] // each test binary uses its own part

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use herald_test_support::Relay;

pub const BIN: &str = env!("CARGO_BIN_EXE_herald");

/// `herald serve` on loopback, the demo agent answering; killed on drop.
pub struct Serve {
    child: Child,
    pub dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    /// The gadget port of a server that restarts, held by the test ([`Serve::restartable`]).
    gadgets: Option<Relay>,
}

impl Serve {
    /// Free ports everywhere.
    pub fn start() -> Serve {
        Serve::start_with(&[])
    }

    /// Free ports, with these environment variables.
    pub fn start_with(env: &[(&str, &str)]) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let child = spawn(dir.path(), &env);
        Serve {
            child,
            dir,
            env,
            gadgets: None,
        }
    }

    /// A server to [`Serve::restart`]: gadgets reach it, before and after, through
    /// [`Serve::gadget_url`], a port this test holds for its whole life.
    pub fn restartable(env: &[(&str, &str)]) -> Serve {
        let mut serve = Serve::start_with(env);
        let relay = Relay::start();
        relay.point_to(port_of(&serve.url("Gadgets connect to:")));
        serve.gadgets = Some(relay);
        serve
    }

    /// Where gadgets connect: the held port of a restartable server, else the server's.
    pub fn gadget_url(&self) -> String {
        match &self.gadgets {
            Some(relay) => format!("ws://127.0.0.1:{}/gadget", relay.port()),
            None => self.url("Gadgets connect to:"),
        }
    }

    /// Kills the server and starts it again on the same data directory, behind the
    /// same gadget URL.
    pub fn restart(&mut self) {
        let relay = self.gadgets.take().expect("a restartable server");
        // Its port is anyone's once it is gone: new connections wait for the new one.
        relay.point_to(0);
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The new server announces itself by writing this again.
        let _ = std::fs::remove_file(self.dir.path().join("admin.json"));
        self.child = spawn(self.dir.path(), &self.env);
        relay.point_to(port_of(&self.url("Gadgets connect to:")));
        self.gadgets = Some(relay);
    }

    pub fn herald(&self, args: &[&str]) -> Output {
        herald_in(self.dir.path(), args)
    }

    /// The URL `herald info` prints after `label`.
    pub fn url(&self, label: &str) -> String {
        let info = stdout(&self.herald(&["info"]));
        info.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|u| u.trim().to_owned())
            .unwrap_or_else(|| panic!("no {label} in {info}"))
    }
}

/// The port of a `ws://HOST:PORT/…` URL.
pub fn port_of(url: &str) -> u16 {
    let authority = url.split('/').nth(2).unwrap();
    authority.rsplit(':').next().unwrap().parse().unwrap()
}

fn spawn(dir: &Path, env: &[(String, String)]) -> Child {
    let child = serve_command(dir)
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_started(dir);
    child
}

/// `herald serve` on loopback with free mobile and admin ports, none of the machine's
/// settings or secrets; the caller adds its own and spawns it.
pub fn serve_command(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--host", "127.0.0.1", "--gadget-port", "0"])
        .args(["--mobile-port", "0", "--admin-port", "0", "--data-dir"])
        .arg(dir)
        .env_remove("MOBILE_TOKEN")
        .env_remove("HERALD_CONFIG")
        // No config file of the machine's user: each test brings its own.
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .env_remove("GADGET_ACCESS_TOKEN");
    command
}

/// Until the server in `dir` has written its admin endpoint (20 s at most).
pub fn wait_started(dir: &Path) {
    let started = Instant::now();
    while !dir.join("admin.json").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn herald_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("MOBILE_TOKEN")
        .env_remove("HERALD_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .output()
        .unwrap()
}

/// Standard output of a command that must have succeeded.
pub fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// How long a test waits for a line a client prints.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The lines a child process prints on a stream, read on a thread of their own so a
/// test can wait for one with a deadline.
pub struct Lines {
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line read so far, for the message of a failed wait.
    pub seen: Vec<String>,
}

impl Lines {
    pub fn of(stream: impl std::io::Read + Send + 'static) -> Lines {
        use std::io::BufRead;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line from now on that contains `needle`; panics after [`PATIENCE`].
    pub fn line_with(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no {needle:?} in:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// The lines still to come once the process has ended (its pipe closes).
    pub fn drain(&mut self, wait: Duration) {
        while let Ok(line) = self.lines.recv_timeout(wait) {
            self.seen.push(line);
        }
    }
}

/// Run `command` with `input` on its standard input, to its end.
pub fn run_with_input(command: &mut Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// `herald chat` on the data directory `dir` with `args`, its stdin and stdout piped:
/// the child, its stdin, and its output line by line.
pub fn chat_in(dir: &Path, args: &[&str]) -> (Child, std::process::ChildStdin, Lines) {
    let mut chat = Command::new(BIN)
        .arg("chat")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("MOBILE_TOKEN")
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = chat.stdin.take().unwrap();
    let lines = Lines::of(chat.stdout.take().unwrap());
    (chat, input, lines)
}
