//! `herald console`: a link that logs the owner in to the console once.
//!
//! The running server mints a single-use code (two minutes; see
//! `herald_admin_api::LoginLink`) for the admin token this command reads from the data
//! directory. The code goes in the link's fragment (`/#login=…`), which a browser never
//! sends: the console page posts it to `/v1/login`, so no request line, log or proxy sees
//! it. The link is printed always and opened where a browser is at hand: `$BROWSER`, else
//! the desktop's opener when there is a display. Failing to open is never an error.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herald_admin_api::{AdminClient, LoginLink};

use crate::commands::{data_dir, load_config};
use crate::Global;

/// How long a browser command may take to say it failed; one still running then (a
/// browser started by `$BROWSER` that stays in the foreground) is taken as opened.
const OPEN_PATIENCE: Duration = Duration::from_secs(3);

pub fn run(global: &Global, no_open: bool) -> anyhow::Result<()> {
    let config = load_config(global)?;
    let dir = data_dir(global, &config)?;
    let client = AdminClient::connect(&dir)?;
    let link: LoginLink = client.post("/v1/console/link", &serde_json::json!({}))?;
    let endpoint = client.endpoint();
    let url = login_url(&endpoint.url, &link.code);
    let minutes = link.expires_in_ms / 60_000;
    println!("Open this link to log in to the console (it works once, for {minutes} minutes):");
    println!();
    println!("  {url}");
    println!();
    if no_open {
        return Ok(());
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let commands = openers(&url, &env);
    if commands.is_empty() {
        println!(
            "No browser here (no $BROWSER, no display). Open it in a browser on this machine; \
             from another one, tunnel first:\n  ssh -N -L {port}:127.0.0.1:{port} you@this-host",
            port = port_of(&endpoint.url).unwrap_or("8766")
        );
        return Ok(());
    }
    for argv in &commands {
        match open(argv) {
            Ok(()) => {
                println!("Opened it with {}.", argv[0]);
                return Ok(());
            }
            Err(why) => eprintln!("herald: could not open the link with {}: {why}", argv[0]),
        }
    }
    println!("Open the link yourself in a browser.");
    Ok(())
}

/// The console's address with the code in its fragment. A server listening on every
/// address is reached on loopback.
fn login_url(base: &str, code: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = if let Some(port) = base.strip_prefix("http://0.0.0.0:") {
        format!("http://127.0.0.1:{port}")
    } else if let Some(port) = base.strip_prefix("http://[::]:") {
        format!("http://[::1]:{port}")
    } else {
        base.to_owned()
    };
    format!("{base}/#login={code}")
}

fn port_of(url: &str) -> Option<&str> {
    url.rsplit_once(':')
        .map(|(_, port)| port.trim_end_matches('/'))
        .filter(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

/// The commands to try, in order, each a program and its arguments with the link in them.
///
/// `$BROWSER` first, as a list of commands separated by `:` (each may put `%s` where the
/// link goes, else it comes last); else `open` on macOS, `start` on Windows, and
/// `xdg-open` elsewhere only when there is a display (`DISPLAY` or `WAYLAND_DISPLAY`):
/// over SSH there is none, and a text browser would take the terminal.
fn openers(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<Vec<String>> {
    if let Some(browser) = env("BROWSER") {
        return browser
            .split(':')
            .filter_map(|entry| {
                let mut argv: Vec<String> = entry.split_whitespace().map(str::to_owned).collect();
                if argv.is_empty() {
                    return None;
                }
                if argv.iter().any(|a| a.contains("%s")) {
                    for arg in &mut argv {
                        *arg = arg.replace("%s", url);
                    }
                } else {
                    argv.push(url.to_owned());
                }
                Some(argv)
            })
            .collect();
    }
    let argv = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    if cfg!(target_os = "macos") {
        vec![argv(&["open", url])]
    } else if cfg!(windows) {
        vec![argv(&["cmd", "/C", "start", "", url])]
    } else if env("DISPLAY").is_some() || env("WAYLAND_DISPLAY").is_some() {
        vec![argv(&["xdg-open", url])]
    } else {
        Vec::new()
    }
}

/// Start `argv`, its output silenced; an error when it cannot start or soon fails.
fn open(argv: &[String]) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("no command")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    while started.elapsed() < OPEN_PATIENCE {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("it ended with {status}")),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
    // Still running: a browser in the foreground. It goes on after herald ends.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_code_goes_in_the_fragment_of_a_reachable_address() {
        assert_eq!(
            login_url("http://127.0.0.1:8766", "abc"),
            "http://127.0.0.1:8766/#login=abc"
        );
        assert_eq!(
            login_url("http://0.0.0.0:9000/", "abc"),
            "http://127.0.0.1:9000/#login=abc"
        );
        assert_eq!(
            login_url("http://[::]:8766", "abc"),
            "http://[::1]:8766/#login=abc"
        );
        assert_eq!(port_of("http://[::1]:8766"), Some("8766"));
    }

    #[test]
    fn browser_comes_first_and_may_place_the_link() {
        let url = "http://127.0.0.1:1/#login=c";
        let vars = [
            ("BROWSER", "firefox --new-window:lynx %s"),
            ("DISPLAY", ":0"),
        ];
        assert_eq!(
            openers(url, &env(&vars)),
            vec![
                vec![
                    "firefox".to_owned(),
                    "--new-window".to_owned(),
                    url.to_owned()
                ],
                vec!["lynx".to_owned(), url.to_owned()],
            ]
        );
    }

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn without_browser_only_a_display_opens() {
        let url = "http://127.0.0.1:1/#login=c";
        assert!(openers(url, &env(&[])).is_empty(), "over SSH: print only");
        for display in ["DISPLAY", "WAYLAND_DISPLAY"] {
            assert_eq!(
                openers(url, &env(&[(display, "x")])),
                vec![vec!["xdg-open".to_owned(), url.to_owned()]]
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_failing_or_missing_opener_is_an_error_not_a_panic() {
        assert!(open(&["false".to_owned()]).is_err());
        assert!(open(&["herald-no-such-browser".to_owned()]).is_err());
        assert!(open(&["true".to_owned()]).is_ok());
    }
}
