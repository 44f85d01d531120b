//! `herald ota`: send a firmware image to a gadget and follow the update.
//!
//! The server does the work (checks, staging, streaming, retries); this only asks it to
//! start and then polls the update's status, drawing a progress bar on stderr.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Subcommand;
use herald_admin_api::{AdminClient, OtaRequest, OtaStatus, OtaView};
use herald_host::print_table;

use crate::commands::{admin, ago, now_ms};
use crate::Global;

/// How often `--wait` asks the server how the update goes.
const POLL: Duration = Duration::from_millis(250);
/// Characters of the progress bar between its brackets.
const BAR_WIDTH: usize = 30;

#[derive(Debug, Subcommand)]
pub enum OtaCommand {
    /// Send a firmware image (an ESP-IDF app .bin) to a connected gadget
    Push {
        /// The device id (hg-…)
        device_id: String,
        /// The image file
        image: PathBuf,
        /// Show a progress bar until the update ends; exit non-zero if it fails
        #[arg(long)]
        wait: bool,
    },
    /// Show firmware updates: every device's latest, or one device's
    Status {
        /// The device id (hg-…)
        device_id: Option<String>,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
}

pub fn run(global: &Global, command: OtaCommand) -> anyhow::Result<()> {
    let client = admin(global)?;
    match command {
        OtaCommand::Push {
            device_id,
            image,
            wait,
        } => push(&client, device_id, image, wait),
        OtaCommand::Status { device_id, json } => status(&client, device_id.as_deref(), json),
    }
}

fn push(client: &AdminClient, device_id: String, image: PathBuf, wait: bool) -> anyhow::Result<()> {
    // The server opens the file itself, from its own working directory.
    let image = std::fs::canonicalize(&image)
        .with_context(|| format!("cannot find {}", image.display()))?;
    let started: OtaView = client.post("/v1/ota", &OtaRequest { device_id, image })?;
    let update = &started.update;
    eprintln!(
        "Sending firmware {} ({} bytes) to {}.",
        update.image.version, update.image.size, update.device_id
    );
    if !wait {
        println!("Follow it with `herald ota status {}`.", update.device_id);
        return Ok(());
    }
    follow(client, &started)
}

/// Poll until the update ends, drawing its progress.
fn follow(client: &AdminClient, started: &OtaView) -> anyhow::Result<()> {
    let path = format!("/v1/ota/{}", started.update.device_id);
    let terminal = std::io::stderr().is_terminal();
    let mut shown = String::new();
    loop {
        let view: OtaView = client.get(&path)?;
        if view.update.id != started.update.id {
            bail!(
                "another update of {} replaced this one",
                view.update.device_id
            );
        }
        let line = progress_line(&view);
        if line != shown {
            // On a terminal the bar redraws in place; in a log, each change is a line.
            let mut err = std::io::stderr().lock();
            if terminal {
                let _ = write!(err, "\r{line}\x1b[K");
            } else {
                let _ = writeln!(err, "{line}");
            }
            let _ = err.flush();
            shown = line;
        }
        let update = &view.update;
        match update.progress.status {
            OtaStatus::Done => {
                if terminal {
                    eprintln!();
                }
                println!(
                    "Installed {} on {}; it restarts into it now.",
                    update.image.version, update.device_id
                );
                return Ok(());
            }
            OtaStatus::Failed => {
                if terminal {
                    eprintln!();
                }
                let error = update
                    .progress
                    .error
                    .as_deref()
                    .unwrap_or("no reason given");
                bail!("the update of {} failed: {error}", update.device_id);
            }
            OtaStatus::Sending | OtaStatus::Retrying => std::thread::sleep(POLL),
        }
    }
}

/// `[#######-------]  50%  97/195 KiB  attempt 1/3`, or what the update waits for.
fn progress_line(view: &OtaView) -> String {
    let update = &view.update;
    let progress = &update.progress;
    let size = update.image.size.max(1);
    let sent = progress.bytes_sent.min(size);
    let filled = usize::try_from(sent * BAR_WIDTH as u64 / size).unwrap_or(BAR_WIDTH);
    let bar = format!("{}{}", "#".repeat(filled), "-".repeat(BAR_WIDTH - filled));
    let attempt = format!("attempt {}/{}", progress.attempts, view.max_attempts);
    let state = match (progress.status, view.online) {
        (OtaStatus::Retrying, false) => {
            format!(
                "{attempt} failed; waiting for {} to reconnect",
                update.device_id
            )
        }
        (OtaStatus::Retrying, true) => format!("{attempt} failed; retrying"),
        _ => attempt,
    };
    format!(
        "[{bar}] {:>3}%  {}/{} KiB  {state}",
        sent * 100 / size,
        sent / 1024,
        update.image.size / 1024
    )
}

fn status(client: &AdminClient, device_id: Option<&str>, json: bool) -> anyhow::Result<()> {
    let views: Vec<OtaView> = match device_id {
        Some(id) => vec![client.get(&format!("/v1/ota/{id}"))?],
        None => client.get("/v1/ota")?,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&views)?);
        return Ok(());
    }
    if views.is_empty() {
        println!("No firmware updates yet. Send one with `herald ota push DEVICE IMAGE`.");
        return Ok(());
    }
    let now = now_ms();
    let rows: Vec<[String; 7]> = views
        .iter()
        .map(|view| {
            let update = &view.update;
            let progress = &update.progress;
            let size = update.image.size.max(1);
            [
                update.device_id.clone(),
                update.image.version.clone(),
                progress.status.as_str().to_owned(),
                format!("{}%", progress.bytes_sent.min(size) * 100 / size),
                format!("{}/{}", progress.attempts, view.max_attempts),
                ago(now - update.updated_at),
                progress.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    print_table(
        &[
            "DEVICE", "VERSION", "STATUS", "PROGRESS", "ATTEMPTS", "UPDATED", "ERROR",
        ],
        &rows,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use herald_store::{OtaImage, OtaProgress, OtaUpdate};

    use super::*;

    fn view(status: OtaStatus, bytes_sent: u64, online: bool) -> OtaView {
        OtaView {
            update: OtaUpdate {
                id: 1,
                device_id: "hg-0123456789abcdef".into(),
                image: OtaImage {
                    file: "/data/ota/x.bin".into(),
                    sha256: "ab".repeat(32),
                    size: 200 * 1024,
                    version: "0.2.0".into(),
                },
                progress: OtaProgress {
                    status,
                    attempts: 2,
                    bytes_sent,
                    error: None,
                },
                created_at: 0,
                updated_at: 0,
            },
            online,
            max_attempts: 3,
        }
    }

    #[test]
    fn the_bar_fills_with_progress() {
        assert_eq!(
            progress_line(&view(OtaStatus::Sending, 0, true)),
            format!("[{}]   0%  0/200 KiB  attempt 2/3", "-".repeat(30))
        );
        assert_eq!(
            progress_line(&view(OtaStatus::Sending, 100 * 1024, true)),
            format!(
                "[{}{}]  50%  100/200 KiB  attempt 2/3",
                "#".repeat(15),
                "-".repeat(15)
            )
        );
        assert_eq!(
            progress_line(&view(OtaStatus::Done, 200 * 1024, false)),
            format!("[{}] 100%  200/200 KiB  attempt 2/3", "#".repeat(30))
        );
    }

    #[test]
    fn a_retry_says_what_it_waits_for() {
        let line = progress_line(&view(OtaStatus::Retrying, 16 * 1024, false));
        assert!(
            line.ends_with("attempt 2/3 failed; waiting for hg-0123456789abcdef to reconnect"),
            "{line}"
        );
        let line = progress_line(&view(OtaStatus::Retrying, 16 * 1024, true));
        assert!(line.ends_with("attempt 2/3 failed; retrying"), "{line}");
    }

    #[test]
    fn views_round_trip_through_the_api_json() {
        let json = serde_json::to_value(view(OtaStatus::Retrying, 4096, true)).unwrap();
        assert_eq!(json["status"], "retrying");
        assert_eq!(json["bytes_sent"], 4096);
        assert_eq!(json["version"], "0.2.0");
        let back: OtaView = serde_json::from_value(json).unwrap();
        assert_eq!(back.update, view(OtaStatus::Retrying, 4096, true).update);
    }
}
