//! The service's own terminal, when it has one (`herald gadget run` typed in a shell):
//! lines typed there work the buttons and type messages, so a box without buttons wired
//! can still be tried. Under systemd there is no terminal and this does not start.
//!
//! | typed | does |
//! |---|---|
//! | an empty line (Enter) | TALK: starts recording, Enter again stops |
//! | `/cancel` | a short CANCEL |
//! | `/new` | CANCEL held: a new conversation |
//! | `/up`, `/down` | page |
//! | anything else | sent to the agent as typed on the device |

use std::time::Duration;

use herald_device::Button;
use tokio::io::{AsyncBufReadExt, BufReader};

use herald_sim::runner::{Command, Handle};

/// What to tell the person at the terminal.
pub const HINT: &str = "terminal: Enter talks (Enter again stops), /cancel, /new, /up, /down, \
                        or type a message";
/// How long `/new` holds CANCEL: past the core's 2 s.
const NEW_HOLD: Duration = Duration::from_millis(2_200);
/// How long a tap holds a button.
const TAP: Duration = Duration::from_millis(100);

/// A step of what a typed line does.
#[derive(Debug)]
pub enum Step {
    Run(Command),
    Wait(Duration),
}

/// What `line` does, given whether TALK is held (by an earlier Enter).
pub fn steps(line: &str, talking: bool) -> Result<Vec<Step>, String> {
    let tap = |button, hold| {
        vec![
            Step::Run(Command::Press(button)),
            Step::Wait(hold),
            Step::Run(Command::Release(button)),
        ]
    };
    Ok(match line.trim() {
        "" if talking => vec![Step::Run(Command::Release(Button::Talk))],
        "" => vec![Step::Run(Command::Press(Button::Talk))],
        "/cancel" => tap(Button::Cancel, TAP),
        "/new" => tap(Button::Cancel, NEW_HOLD),
        "/up" => tap(Button::Up, TAP),
        "/down" => tap(Button::Down, TAP),
        command if command.starts_with('/') => return Err(format!("unknown: {command}; {HINT}")),
        text => vec![Step::Run(Command::Text(text.to_owned()))],
    })
}

/// Reads standard input until it ends.
pub async fn run(handle: Handle) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut talking = false;
    while let Ok(Some(line)) = lines.next_line().await {
        let steps = match steps(&line, talking) {
            Ok(steps) => steps,
            Err(message) => {
                println!("{message}");
                continue;
            }
        };
        for step in steps {
            match step {
                Step::Wait(time) => tokio::time::sleep(time).await,
                Step::Run(command) => {
                    match &command {
                        Command::Press(Button::Talk) => talking = true,
                        Command::Release(Button::Talk) => talking = false,
                        _ => {}
                    }
                    if let Err(e) = handle.run(command).await {
                        println!("{e}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(steps: Vec<Step>) -> Vec<String> {
        steps
            .into_iter()
            .map(|s| match s {
                Step::Run(Command::Press(b)) => format!("press {}", b.name()),
                Step::Run(Command::Release(b)) => format!("release {}", b.name()),
                Step::Run(Command::Text(t)) => format!("text {t}"),
                Step::Run(other) => format!("{other:?}"),
                Step::Wait(d) => format!("wait {}", d.as_millis()),
            })
            .collect()
    }

    #[test]
    fn enter_talks_and_lines_work_the_buttons() {
        assert_eq!(names(steps("", false).unwrap()), ["press talk"]);
        assert_eq!(names(steps("  ", true).unwrap()), ["release talk"]);
        assert_eq!(
            names(steps("/cancel", false).unwrap()),
            ["press cancel", "wait 100", "release cancel"]
        );
        assert_eq!(
            names(steps("/new", false).unwrap()),
            ["press cancel", "wait 2200", "release cancel"]
        );
        assert_eq!(names(steps("/down", false).unwrap())[0], "press down");
        assert_eq!(
            names(steps("hello there", false).unwrap()),
            ["text hello there"]
        );
        assert!(steps("/jump", false)
            .unwrap_err()
            .contains("unknown: /jump"));
    }
}
