//! `examples/systemd/herald.service` and `herald-gadget.service`, checked by systemd
//! itself: `systemd-analyze
//! verify` on a copy whose `ExecStart` runs the binary under test (verify insists the
//! program exists), with no warning about the unit, and `systemd-analyze security`
//! rating its sandbox.
//!
//! Without `systemd-analyze` the test is skipped with the reason, unless `CI` is set:
//! there it fails, because CI installs systemd for it.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::BIN;

/// Where the README installs the binary, and so where the unit runs it from.
const INSTALLED: &str = "/usr/local/bin/herald";

const SERVER: &str = "herald.service";
const GADGET: &str = "herald-gadget.service";

fn documented_unit(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/systemd")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// systemd-analyze must be here: a missing one fails the test, never passes it unseen.
fn require_systemd_analyze() {
    let runs = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        runs.is_ok_and(|out| out.status.success()),
        "systemd-analyze is not installed: scripts/setup installs it (apt-get install systemd)"
    );
}

/// The unit `name`, whose ExecStart runs `herald ARGS`, changed to run the binary under
/// test and written where systemd-analyze can read it.
fn unit_for_test(dir: &Path, name: &str, args: &str) -> std::path::PathBuf {
    let unit = documented_unit(name);
    let exec = format!("ExecStart={INSTALLED} {args}");
    assert_eq!(
        unit.lines().filter(|l| l.starts_with("ExecStart=")).count(),
        1,
        "one ExecStart"
    );
    assert!(unit.lines().any(|l| l == exec), "the unit runs `{exec}`");
    let path = dir.join(name);
    std::fs::write(&path, unit.replace(INSTALLED, BIN)).unwrap();
    path
}

/// `systemd-analyze verify` says nothing about the unit.
fn verify_quietly(unit: &Path, name: &str) {
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .unwrap();
    let said = text(&output);
    assert!(output.status.success(), "systemd-analyze verify:\n{said}");
    // Unknown keys and bad values are only warnings: any line about the unit fails.
    let about_the_unit: Vec<&str> = said.lines().filter(|l| l.contains(name)).collect();
    assert!(
        about_the_unit.is_empty(),
        "systemd-analyze verify:\n{}",
        about_the_unit.join("\n")
    );
}

/// The exposure `systemd-analyze security` rates the unit with (0 is best, 10 worst).
fn exposure(unit: &Path, name: &str) -> f64 {
    let output = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(unit)
        .output()
        .unwrap();
    let said = text(&output);
    // "→ Overall exposure level for herald.service: 1.5 OK 🙂".
    said.lines()
        .find_map(|l| l.split(&format!("{name}: ")).nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{said}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn systemd_accepts_the_unit_without_a_warning() {
    require_systemd_analyze();
    let dir = tempfile::tempdir().unwrap();
    verify_quietly(&unit_for_test(dir.path(), SERVER, "serve"), SERVER);
    let gadget = unit_for_test(
        dir.path(),
        GADGET,
        "gadget run --config /etc/herald/gadget.toml",
    );
    verify_quietly(&gadget, GADGET);
}

#[test]
fn the_unit_runs_herald_in_a_tight_sandbox() {
    let unit = documented_unit(SERVER);
    for setting in [
        "User=herald",
        "StateDirectory=herald",
        "Environment=HERALD_DATA_DIR=%S/herald",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "SystemCallFilter=@system-service",
        "CapabilityBoundingSet=",
        "LimitNOFILE=65536",
        "Restart=on-failure",
    ] {
        assert!(
            unit.lines().any(|l| l == setting),
            "{setting} missing from the unit"
        );
    }
    require_systemd_analyze();
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_for_test(dir.path(), SERVER, "serve");
    let exposure = exposure(&unit, SERVER);
    assert!(exposure <= 2.0, "exposure {exposure}");
}

#[test]
fn the_gadget_runs_as_its_own_user_with_gpio_and_audio_only() {
    let unit = documented_unit(GADGET);
    for setting in [
        "User=herald-gadget",
        "SupplementaryGroups=audio gpio",
        "StateDirectory=herald-gadget",
        "Environment=HERALD_DATA_DIR=%S/herald-gadget",
        "DevicePolicy=closed",
        "DeviceAllow=char-gpiochip rw",
        "DeviceAllow=char-alsa rw",
        "KillSignal=SIGTERM",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=",
        "Restart=on-failure",
    ] {
        assert!(
            unit.lines().any(|l| l == setting),
            "{setting} missing from the unit"
        );
    }
    require_systemd_analyze();
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_for_test(
        dir.path(),
        GADGET,
        "gadget run --config /etc/herald/gadget.toml",
    );
    let exposure = exposure(&unit, GADGET);
    assert!(exposure <= 2.0, "exposure {exposure}");
}
