//! docs/host.md's reverse proxy, for real: Debian's `caddy` runs the Caddyfile of
//! `examples/caddy/` (only its site address and upstream ports changed) in front of
//! `herald serve`, and a simulated gadget and `herald chat` talk to the demo agent
//! through it, pairing on the way: once over plain HTTP, once over TLS with a
//! certificate from caddy's own local authority, which the clients are told to trust.
//!
//! Without `caddy` the test is skipped with the reason, unless `CI` is set: there it
//! fails, because CI installs caddy for it.

mod common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use common::{port_of, stdout, Lines, Serve, BIN};

/// How long to wait for a line from a client, or for caddy to listen.
const PATIENCE: Duration = Duration::from_secs(20);

/// The documented Caddyfile, as the repository ships it.
fn documented_caddyfile() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/caddy/Caddyfile");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// docs/host.md shows the Caddyfile's site block; it must be the tested one.
#[test]
fn the_guide_shows_the_tested_caddyfile() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/host.md");
    let guide = std::fs::read_to_string(&path).unwrap();
    let shown = guide
        .split("```caddyfile\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a caddyfile block in docs/host.md");
    let file = documented_caddyfile();
    let site = file
        .find("herald.example.com {")
        .map(|at| &file[at..])
        .expect("a site block in examples/caddy/Caddyfile");
    assert_eq!(
        shown, site,
        "docs/host.md and examples/caddy/Caddyfile differ"
    );
}

/// Replaces the one occurrence of `from` in `text`: a second one, or none, means the
/// documented file changed shape and this test must change with it.
fn substitute(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "examples/caddy/Caddyfile should contain {from:?} once"
    );
    text.replacen(from, to, 1)
}

/// How the test site is served.
#[derive(Clone, Copy, PartialEq)]
enum Scheme {
    /// Plain HTTP: no certificate at all.
    Http,
    /// HTTPS with a certificate from caddy's local authority instead of Let's Encrypt.
    Https,
}

/// The documented Caddyfile for a site on `127.0.0.1:port`, proxying to herald's
/// ports. The global options keep caddy to itself: its admin API is off (the Debian
/// package may already run a caddy with one), and over HTTPS it neither listens on
/// port 80 for redirects nor installs its authority into the system's trust store.
fn test_caddyfile(scheme: Scheme, port: u16, gadget_port: u16, mobile_port: u16) -> String {
    let (site, options) = match scheme {
        Scheme::Http => ("http", "\tadmin off\n"),
        Scheme::Https => (
            "https",
            "\tadmin off\n\tlocal_certs\n\tskip_install_trust\n\tauto_https disable_redirects\n",
        ),
    };
    let text = documented_caddyfile();
    let text = substitute(
        &text,
        "herald.example.com {",
        &format!("{site}://127.0.0.1:{port} {{"),
    );
    let text = substitute(
        &text,
        "reverse_proxy 127.0.0.1:8765",
        &format!("reverse_proxy 127.0.0.1:{gadget_port}"),
    );
    let text = substitute(
        &text,
        "reverse_proxy 127.0.0.1:8787",
        &format!("reverse_proxy 127.0.0.1:{mobile_port}"),
    );
    format!("{{\n{options}}}\n\n{text}")
}

/// Caddy must be here: a missing one fails the test, never passes it unseen.
fn require_caddy() {
    let runs = Command::new("caddy").arg("version").output();
    assert!(
        runs.is_ok_and(|out| out.status.success()),
        "caddy is not installed: scripts/setup installs it (apt-get install caddy)"
    );
}

/// `caddy run` on a Caddyfile, its state in a directory of its own; killed on drop.
struct Caddy {
    child: Child,
    scheme: Scheme,
    port: u16,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Caddy {
    /// Caddy on a free port; another try on another port if someone took it first.
    fn start(scheme: Scheme, gadget_port: u16, mobile_port: u16) -> Caddy {
        let mut last = String::new();
        for _ in 0..3 {
            match Caddy::try_start(scheme, gadget_port, mobile_port) {
                Ok(caddy) => return caddy,
                Err(log) => last = log,
            }
        }
        panic!("caddy did not start:\n{last}");
    }

    fn try_start(scheme: Scheme, gadget_port: u16, mobile_port: u16) -> Result<Caddy, String> {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("Caddyfile");
        let text = test_caddyfile(scheme, port, gadget_port, mobile_port);
        std::fs::write(&config, text).unwrap();
        let log = dir.path().join("caddy.log");
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new("caddy")
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&config)
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut caddy = Caddy {
            child,
            scheme,
            port,
            log,
            dir,
        };
        let started = Instant::now();
        let ready = |caddy: &Caddy| {
            TcpStream::connect(("127.0.0.1", caddy.port)).is_ok()
                && (scheme == Scheme::Http || caddy.root_certificate().is_file())
        };
        while !ready(&caddy) {
            if let Some(status) = caddy.child.try_wait().unwrap() {
                return Err(format!("caddy exited ({status}):\n{}", caddy.log()));
            }
            assert!(
                started.elapsed() < PATIENCE,
                "caddy did not listen:\n{}",
                caddy.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        Ok(caddy)
    }

    /// A device URL through the proxy.
    fn url(&self, path: &str) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "ws",
            Scheme::Https => "wss",
        };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// An HTTP URL through the proxy.
    fn http_url(&self, path: &str) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// The root of caddy's local authority, which signs the HTTPS site's certificate.
    fn root_certificate(&self) -> PathBuf {
        self.dir
            .path()
            .join("data/caddy/pki/authorities/local/root.crt")
    }

    /// What a client needs to trust this caddy: the local authority, as the only root
    /// (rustls-native-certs reads `SSL_CERT_FILE`).
    fn client_env(&self) -> Vec<(&'static str, PathBuf)> {
        match self.scheme {
            Scheme::Http => Vec::new(),
            Scheme::Https => vec![("SSL_CERT_FILE", self.root_certificate())],
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Caddy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `herald` client process (`sim` or `chat`) whose output the test reads line by
/// line; killed on drop.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines,
}

impl Client {
    fn start(args: &[&str], data_dir: &Path, env: &[(&str, PathBuf)]) -> Client {
        let mut child = Command::new(BIN)
            .args(args)
            .arg("--data-dir")
            .arg(data_dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env_remove("MOBILE_TOKEN")
            .env_remove("GADGET_ACCESS_TOKEN")
            .env_remove("HERALD_CONFIG")
            // No config file of the machine's user, as for the server.
            .env("XDG_CONFIG_HOME", data_dir.join("no-config"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Lines::of(child.stdout.take().unwrap());
        Client {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn line_with(&mut self, needle: &str) -> String {
        self.lines.line_with(needle)
    }

    /// The pairing code in the next line that shows one.
    fn pairing_code(&mut self) -> String {
        let line = self.line_with("Pairing code: ");
        line.split("Pairing code: ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no code in {line:?}"))
            .to_owned()
    }

    fn type_line(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{text}").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes standard input and waits for the process to succeed.
    fn succeeds(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.lines.drain(Duration::from_secs(2));
                assert!(
                    status.success(),
                    "{status}:\n{}",
                    self.lines.seen.join("\n")
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "did not end:\n{}",
                self.lines.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_documented_caddyfile_carries_a_gadget_and_a_phone() {
    through_caddy(Scheme::Http);
}

#[test]
fn the_documented_caddyfile_carries_them_over_tls() {
    through_caddy(Scheme::Https);
}

fn through_caddy(scheme: Scheme) {
    require_caddy();
    let serve = Serve::start();
    let gadget_port = port_of(&serve.url("Gadgets connect to:"));
    let mobile_port = port_of(&serve.url("Phones connect to:"));
    let caddy = Caddy::start(scheme, gadget_port, mobile_port);
    let env = caddy.client_env();

    // Only the two device endpoints are public, with or without the trailing slash
    // people type: herald answers a request there that is not an upgrade with 426.
    // (The test's HTTP client speaks no TLS: the routes are the same either way.)
    if scheme == Scheme::Http {
        let http = |path: &str| http_status(&caddy.http_url(path));
        for path in ["/gadget", "/gadget/", "/ws", "/ws/"] {
            assert_eq!(http(path), 426, "{path}");
        }
        for path in ["/v1/info", "/healthz", "/gadgets"] {
            assert_eq!(http(path), 404, "{path}");
        }
    }

    // A gadget: handshake, a pairing code the owner approves, a typed turn.
    let state = serve.dir.path().join("proxied-gadget");
    let script = serve.dir.path().join("gadget.script");
    std::fs::write(
        &script,
        "wait pairing\n\
         wait ready\n\
         text hello through caddy\n\
         wait ready\n\
         expect You said: hello through caddy\n",
    )
    .unwrap();
    let (state, script) = (state.to_str().unwrap(), script.to_str().unwrap());
    let url = caddy.url("/gadget");
    let mut gadget = Client::start(
        &[
            "sim",
            "--headless",
            "--url",
            &url,
            "--state-dir",
            state,
            "--script",
            script,
        ],
        serve.dir.path(),
        &env,
    );
    let code = gadget.pairing_code();
    stdout(&serve.herald(&["pairing", "approve", "gadget", &code]));
    gadget.succeeds();

    // A phone: hello and ready, a pairing code, then a message the demo agent answers.
    let url = caddy.url("/ws");
    let mut phone = Client::start(
        &["chat", "--url", &url, "--device-id", "proxied-phone"],
        serve.dir.path(),
        &env,
    );
    phone.line_with("Connected (mobile:proxied-phone)");
    phone.type_line("hello");
    let code = phone.pairing_code();
    stdout(&serve.herald(&["pairing", "approve", "mobile", &code]));
    phone.type_line("hello through caddy");
    phone.line_with("< You said: hello through caddy");
    phone.type_line("/quit");
    phone.succeeds();
}

/// The status of a plain HTTP GET.
fn http_status(url: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    agent.get(url).call().unwrap().status().as_u16()
}
