//! `examples/systemd/herald.service`, checked by systemd itself: `systemd-analyze
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

fn documented_unit() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/systemd/herald.service");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether systemd-analyze can run here; `false` (with the reason printed) skips.
fn systemd_analyze_available() -> bool {
    match Command::new("systemd-analyze").arg("--version").output() {
        Ok(out) if out.status.success() => true,
        _ if std::env::var_os("CI").is_some() => panic!(
            "systemd-analyze is not installed: CI must install Debian's systemd (apt-get install systemd)"
        ),
        _ => {
            eprintln!(
                "skipped: systemd-analyze is not installed (apt-get install systemd to run this test)"
            );
            false
        }
    }
}

/// The unit, running the binary under test, written where systemd-analyze can read it.
fn unit_for_test(dir: &Path) -> std::path::PathBuf {
    let unit = documented_unit();
    let exec = format!("ExecStart={INSTALLED} serve");
    assert_eq!(
        unit.lines().filter(|l| l.starts_with("ExecStart=")).count(),
        1,
        "one ExecStart"
    );
    assert!(unit.lines().any(|l| l == exec), "the unit runs `{exec}`");
    let path = dir.join("herald.service");
    std::fs::write(&path, unit.replace(INSTALLED, BIN)).unwrap();
    path
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
    if !systemd_analyze_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_for_test(dir.path());
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let said = text(&output);
    assert!(output.status.success(), "systemd-analyze verify:\n{said}");
    // Unknown keys and bad values are only warnings: any line about the unit fails.
    let about_the_unit: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("herald.service"))
        .collect();
    assert!(
        about_the_unit.is_empty(),
        "systemd-analyze verify:\n{}",
        about_the_unit.join("\n")
    );
}

#[test]
fn the_unit_runs_herald_in_a_tight_sandbox() {
    let unit = documented_unit();
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
    if !systemd_analyze_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = unit_for_test(dir.path());
    let output = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&unit)
        .output()
        .unwrap();
    let said = text(&output);
    // "→ Overall exposure level for herald.service: 1.5 OK 🙂" (0 is best, 10 worst).
    let exposure: f64 = said
        .lines()
        .find_map(|l| l.split("herald.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{said}"));
    assert!(exposure <= 2.0, "exposure {exposure}:\n{said}");
}
