//! Scripts: what a person does with the board, one command a line, for tests and demos.
//!
//! | command | what it does |
//! |---|---|
//! | `wait SCREEN[\|SCREEN...] [TIMEOUT]` | until one of the screens shows (TIMEOUT in seconds, default 10) |
//! | `text MSG` | types a message |
//! | `press`, `release`, `tap BUTTON` | `talk`, `cancel`, `up` or `down`; `tap` is a press and a release |
//! | `wav FILE` | holds TALK while the microphone hears FILE, then lets go |
//! | `sleep S` | waits S seconds |
//! | `expect TEXT` | until the screen's summary line contains TEXT (at most 5 s) |
//! | `screenshot FILE` | writes the screen as text |
//!
//! Lines starting with `#` are comments; relative paths are from the script's directory.
//! A failed command stops the script with an error that names its line.
//!
//! `wait` must not miss a screen that showed only briefly (a turn can go from `thinking`
//! to `ready` in a few milliseconds), so it reads the log of screens entered as well as
//! the screen shown: it is satisfied by the screen shown, or by one entered since the
//! last command or the screen the last `wait` matched. Every command returns only once
//! the board shows its effect, so a `wait` after it never sees the screen from before.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use herald_device::{Button, Screen};
use tokio::io::AsyncBufReadExt;

use super::audio::load_clip;
use super::runner::{Command, Handle, Snapshot};

/// How long `wait` waits unless told.
const WAIT_DEFAULT: Duration = Duration::from_secs(10);
/// How long `expect` waits for its text.
const EXPECT_WITHIN: Duration = Duration::from_secs(5);
/// The longest wait or sleep a script may ask for.
const LONGEST: f64 = 3600.0;

/// One command of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Wait {
        screens: Vec<Screen>,
        timeout: Duration,
    },
    Text(String),
    Press(Button),
    Release(Button),
    Tap(Button),
    Wav(PathBuf),
    Sleep(Duration),
    Expect(String),
    Screenshot(PathBuf),
}

/// A step and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub number: usize,
    pub text: String,
    pub step: Step,
}

/// Parses a whole script; paths are taken from `base`.
pub fn parse(source: &str, base: &Path) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (i, text) in source.lines().enumerate() {
        let number = i + 1;
        if let Some(step) = parse_line(text, base).map_err(|e| anyhow!("line {number}: {e}"))? {
            lines.push(Line {
                number,
                text: text.trim().to_owned(),
                step,
            });
        }
    }
    Ok(lines)
}

/// Parses one line; `None` for a blank line or a comment.
pub fn parse_line(line: &str, base: &Path) -> Result<Option<Step>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let (command, rest) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(c, r)| (c, r.trim()));
    let needs = |what: &str| {
        if rest.is_empty() {
            Err(format!("{command} needs {what}"))
        } else {
            Ok(rest)
        }
    };
    let step = match command {
        "wait" => {
            let mut words = needs("a screen")?.split_whitespace();
            let screens = words
                .next()
                .unwrap_or_default()
                .split('|')
                .map(screen)
                .collect::<Result<Vec<_>, _>>()?;
            let timeout = words.next().map_or(Ok(WAIT_DEFAULT), seconds)?;
            if let Some(extra) = words.next() {
                return Err(format!("unexpected {extra:?} after the timeout"));
            }
            Step::Wait { screens, timeout }
        }
        "text" => Step::Text(needs("a message")?.to_owned()),
        "press" => Step::Press(button(needs("a button")?)?),
        "release" => Step::Release(button(needs("a button")?)?),
        "tap" => Step::Tap(button(needs("a button")?)?),
        "wav" => Step::Wav(base.join(needs("a file")?)),
        "sleep" => Step::Sleep(seconds(needs("seconds")?)?),
        "expect" => Step::Expect(needs("the text to find")?.to_owned()),
        "screenshot" => Step::Screenshot(base.join(needs("a file")?)),
        other => {
            return Err(format!(
                "unknown command {other:?} (wait, text, press, release, tap, wav, sleep, \
                 expect, screenshot)"
            ))
        }
    };
    Ok(Some(step))
}

fn screen(name: &str) -> Result<Screen, String> {
    Screen::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Screen::ALL.iter().map(|s| s.name()).collect();
        format!("unknown screen {name:?} ({})", names.join(", "))
    })
}

fn button(name: &str) -> Result<Button, String> {
    Button::from_name(name)
        .ok_or_else(|| format!("unknown button {name:?} (talk, cancel, up, down)"))
}

fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=LONGEST).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to {LONGEST}"
        )),
    }
}

/// Runs a parsed script to its end or its first failure.
pub async fn run(handle: &Handle, lines: Vec<Line>) -> anyhow::Result<()> {
    let mut player = Player::new(handle);
    for line in lines {
        player
            .step(&line.step)
            .await
            .map_err(|e| anyhow!("line {} ({}): {e}", line.number, line.text))?;
    }
    Ok(())
}

/// Runs commands from standard input as they come, until it ends.
pub async fn run_stdin(handle: &Handle) -> anyhow::Result<()> {
    let base = std::env::current_dir()?;
    let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut player = Player::new(handle);
    let mut number = 0;
    while let Some(text) = input
        .next_line()
        .await
        .context("cannot read standard input")?
    {
        number += 1;
        let step = parse_line(&text, &base).map_err(|e| anyhow!("line {number}: {e}"))?;
        if let Some(step) = step {
            player
                .step(&step)
                .await
                .map_err(|e| anyhow!("line {number} ({}): {e}", text.trim()))?;
        }
    }
    Ok(())
}

/// Plays steps against the board.
struct Player<'a> {
    handle: &'a Handle,
    /// Screens entered before this number are already accounted for.
    cursor: u64,
}

impl<'a> Player<'a> {
    fn new(handle: &'a Handle) -> Player<'a> {
        Player { handle, cursor: 0 }
    }

    async fn step(&mut self, step: &Step) -> Result<(), String> {
        match step {
            Step::Wait { screens, timeout } => return self.wait(screens, *timeout).await,
            Step::Expect(text) => return self.expect(text).await,
            Step::Sleep(duration) => {
                tokio::time::sleep(*duration).await;
                return Ok(());
            }
            Step::Screenshot(path) => return self.screenshot(path),
            Step::Text(text) => self.handle.run(Command::Text(text.clone())).await?,
            Step::Press(button) => self.handle.run(Command::Press(*button)).await?,
            Step::Release(button) => self.handle.run(Command::Release(*button)).await?,
            Step::Tap(button) => {
                self.handle.run(Command::Press(*button)).await?;
                self.handle.run(Command::Release(*button)).await?;
            }
            Step::Wav(path) => {
                let rate = self
                    .handle
                    .config()
                    .mic_rate
                    .ok_or("this board has no microphone")?;
                let clip = load_clip(path, rate).map_err(|e| format!("{e:#}"))?;
                self.handle.run(Command::Say(clip)).await?;
            }
        }
        // What a command did starts the log `wait` reads.
        self.cursor = self.handle.snapshot().borrow().latest();
        Ok(())
    }

    async fn wait(&mut self, screens: &[Screen], timeout: Duration) -> Result<(), String> {
        let cursor = self.cursor;
        let n = self
            .until_shown(timeout, |now| matching(now, cursor, screens))
            .await?;
        self.cursor = n + 1;
        Ok(())
    }

    async fn expect(&self, text: &str) -> Result<(), String> {
        self.until_shown(EXPECT_WITHIN, |now| now.shown.contains(text).then_some(()))
            .await
    }

    /// Watch the simulator's screen until `check` finds what it looks for, at most
    /// `within`; the error says what the screen shows instead.
    async fn until_shown<T>(
        &self,
        within: Duration,
        mut check: impl FnMut(&Snapshot) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = tokio::time::Instant::now() + within;
        let mut snapshot = self.handle.snapshot();
        loop {
            if let Some(found) = check(&snapshot.borrow_and_update()) {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline, snapshot.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("the simulator stopped".to_owned()),
                Err(_) => {
                    let shown = snapshot.borrow().shown.summary();
                    return Err(format!(
                        "not shown within {} s; the screen shows: {shown}",
                        within.as_secs_f64()
                    ));
                }
            }
        }
    }

    fn screenshot(&self, path: &Path) -> Result<(), String> {
        let (cols, rows) = self.handle.config().display.as_ref().map_or((32, 4), |d| {
            (usize::from(d.text_cols), usize::from(d.text_rows))
        });
        let text = self.handle.snapshot().borrow().shown.screenshot(cols, rows);
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// The number of the first screen in `screens` entered at or after `cursor`, else of the
/// screen shown if it is one of them.
fn matching(snapshot: &Snapshot, cursor: u64, screens: &[Screen]) -> Option<u64> {
    snapshot
        .entered
        .iter()
        .find(|(n, screen)| *n >= cursor && screens.contains(screen))
        .map(|(n, _)| *n)
        .or_else(|| {
            screens
                .contains(&snapshot.shown.screen)
                .then(|| snapshot.latest())
        })
}

/// Parses a script file; its paths are from its own directory.
pub fn load(path: &Path) -> anyhow::Result<Vec<Line>> {
    let source = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the script {}", path.display()))?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    let lines = parse(&source, base).with_context(|| format!("in {}", path.display()))?;
    if lines.is_empty() {
        bail!("{} has no commands", path.display());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Result<Option<Step>, String> {
        parse_line(line, Path::new("/base"))
    }

    #[test]
    fn every_command_parses() {
        assert_eq!(
            one("wait ready|responding 2.5"),
            Ok(Some(Step::Wait {
                screens: vec![Screen::Ready, Screen::Responding],
                timeout: Duration::from_millis(2500),
            }))
        );
        assert_eq!(
            one("  wait pairing"),
            Ok(Some(Step::Wait {
                screens: vec![Screen::Pairing],
                timeout: WAIT_DEFAULT,
            }))
        );
        assert_eq!(
            one("text  /card Timer | Pasta "),
            Ok(Some(Step::Text("/card Timer | Pasta".into())))
        );
        assert_eq!(one("tap talk"), Ok(Some(Step::Tap(Button::Talk))));
        assert_eq!(one("press cancel"), Ok(Some(Step::Press(Button::Cancel))));
        assert_eq!(one("release down"), Ok(Some(Step::Release(Button::Down))));
        assert_eq!(
            one("wav hello.wav"),
            Ok(Some(Step::Wav("/base/hello.wav".into())))
        );
        assert_eq!(
            one("screenshot /tmp/s.txt"),
            Ok(Some(Step::Screenshot("/tmp/s.txt".into())))
        );
        assert_eq!(
            one("sleep 0.7"),
            Ok(Some(Step::Sleep(Duration::from_millis(700))))
        );
        assert_eq!(
            one("expect You said: hi"),
            Ok(Some(Step::Expect("You said: hi".into())))
        );
        assert_eq!(one("# a comment"), Ok(None));
        assert_eq!(one("   "), Ok(None));
    }

    #[test]
    fn mistakes_are_explained() {
        let err = |line: &str| one(line).unwrap_err();
        assert!(err("wait redy").contains("unknown screen \"redy\""));
        assert!(err("wait redy").contains("pairing"));
        assert!(err("wait ready soon").contains("not a number of seconds"));
        assert!(err("wait ready 5 6").contains("unexpected"));
        assert!(err("wait").contains("needs a screen"));
        assert!(err("tap left").contains("unknown button"));
        assert!(err("sleep -1").contains("not a number"));
        assert!(err("sleep 99999").contains("not a number"));
        assert!(err("text").contains("needs a message"));
        assert!(err("jump").contains("unknown command \"jump\""));
        let whole = parse("wait ready\n\nfly\n", Path::new(".")).unwrap_err();
        assert_eq!(whole.to_string(), "line 3: unknown command \"fly\" (wait, text, press, release, tap, wav, sleep, expect, screenshot)");
    }

    #[test]
    fn wait_takes_a_brief_screen_from_the_log_once() {
        use super::super::render::Shown;
        use herald_device::Phase;
        let shown = Shown {
            screen: Screen::Ready,
            status: "Ready".into(),
            title: None,
            lines: vec![],
            page: 0,
            pages: 1,
            notice: None,
            image: None,
        };
        let snapshot = Snapshot {
            shown,
            entered: [
                (4, Screen::Ready),
                (5, Screen::Thinking),
                (6, Screen::Ready),
            ]
            .into(),
            device_id: String::new(),
            firmware: String::new(),
            phase: Phase::Online,
            paired: true,
            volume: 80,
            brightness: 80,
            led: None,
            recording: false,
            note: None,
            replies: Default::default(),
        };
        // `thinking` came and went after the cursor: it counts, once.
        assert_eq!(matching(&snapshot, 5, &[Screen::Thinking]), Some(5));
        assert_eq!(matching(&snapshot, 6, &[Screen::Thinking]), None);
        // The oldest match after the cursor comes first; the screen shown always counts.
        assert_eq!(matching(&snapshot, 0, &[Screen::Ready]), Some(4));
        assert_eq!(matching(&snapshot, 7, &[Screen::Ready]), Some(6));
        assert_eq!(matching(&snapshot, 0, &[Screen::Card]), None);
    }
}
