//! `herald bench` through the real binary at tiny sizes: it starts its own server and
//! baseline, runs the scenario against both and prints its table. These tests check
//! that the table has its rows and that load got through; they assert nothing about
//! speed.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_herald");

fn bench(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("bench")
        .args(args)
        .env_remove("HERALD_DATA_DIR")
        .env_remove("HERALD_CONFIG")
        .env_remove("MOBILE_TOKEN")
        .output()
        .unwrap()
}

/// The table a successful run printed.
fn table(args: &[&str]) -> String {
    let output = bench(args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "bench {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The HERALD and BARE cells of the row named `metric` (the soak's: VALUE and GOAL).
fn row<'a>(table: &'a str, metric: &str) -> (&'a str, &'a str) {
    let cells: Vec<&str> = table
        .lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.first() == Some(&metric))
        .unwrap_or_else(|| panic!("no row {metric:?} in\n{table}"));
    (cells[1], cells.get(2).copied().unwrap_or(""))
}

/// The number a cell starts with ("123/s", "0.4 ms", "20").
fn number(cell: &str) -> f64 {
    let end = cell
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(cell.len());
    cell[..end]
        .parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a figure"))
}

fn both_positive(table: &str, metric: &str) {
    let (herald, bare) = row(table, metric);
    assert!(number(herald) > 0.0, "{metric}: herald {herald}\n{table}");
    assert!(number(bare) > 0.0, "{metric}: bare {bare}\n{table}");
}

#[test]
fn connect_measures_handshakes_and_memory() {
    let out = table(&["connect", "--clients", "20", "--duration", "1"]);
    both_positive(&out, "first contact handshakes");
    both_positive(&out, "returning handshakes (32 at once)");
    for step in [
        "connect and upgrade p50",
        "hello to challenge p50",
        "auth to welcome p50",
    ] {
        both_positive(&out, step);
    }
    assert_eq!(row(&out, "connections held at rest"), ("20", "20"));
    let (memory, _) = row(&out, "server memory per connection");
    assert!(memory.ends_with("KiB"), "{out}");
    assert!(out.starts_with("machine: "), "{out}");
}

#[test]
fn talk_measures_turns_and_latency() {
    let out = table(&[
        "talk",
        "--clients",
        "10",
        "--duration",
        "1",
        "--rate",
        "50",
        "--media-every",
        "5",
    ]);
    both_positive(&out, "gadgets connected");
    both_positive(&out, "turns answered (offered 50/s)");
    both_positive(&out, "typed: first answer frame p50");
    both_positive(&out, "utterances answered");
}

#[test]
fn mobile_measures_messages_and_media() {
    // Just over one protocol chunk, so every upload is sent in two.
    let out = table(&[
        "mobile",
        "--clients",
        "4",
        "--duration",
        "1",
        "--media-every",
        "2",
        "--media-kib",
        "3100",
    ]);
    both_positive(&out, "phones connected");
    both_positive(&out, "messages");
    both_positive(&out, "media uploaded");
}

#[test]
fn phones_are_spread_over_users_so_their_caps_do_not_refuse_the_run() {
    // More phones than one user may have (32), with nothing refused.
    let out = table(&[
        "mobile",
        "--clients",
        "40",
        "--duration",
        "1",
        "--media-every",
        "0",
    ]);
    assert_eq!(row(&out, "phones connected"), ("40", "40"));
    assert_eq!(row(&out, "requests timed out or failed"), ("0", "0"));
}

#[test]
fn a_running_servers_one_token_is_held_to_one_users_phones() {
    let output = bench(&[
        "mobile",
        "--url",
        "ws://127.0.0.1:9/ws",
        "--token",
        "some-app-token",
        "--clients",
        "33",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("32 phones at most"), "{stderr}");
}

#[test]
fn a_running_server_s_phones_are_spread_over_the_tokens_given() {
    let output = bench(&[
        "mobile",
        "--url",
        "ws://127.0.0.1:9/ws",
        "--token",
        "first-app-token, second-app-token",
        "--clients",
        "65",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("2 app token(s) may have 64 phones"),
        "{stderr}"
    );
}

#[test]
fn speak_measures_paced_frames() {
    let out = table(&["speak", "--clients", "4", "--duration", "1"]);
    assert_eq!(row(&out, "streams started"), ("4", "4"));
    // One second of 40 ms frames, to every gadget.
    assert_eq!(row(&out, "frames received"), ("100", "100"));
    both_positive(&out, "largest burst (frames)");
}

#[test]
fn only_loopback_is_loaded() {
    let output = bench(&[
        "talk",
        "--url",
        "ws://192.0.2.1:8765/gadget",
        "--clients",
        "1",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("127.0.0.0/8"), "{stderr}");
}

#[test]
fn soak_samples_memory_and_drops_nothing() {
    let out = table(&[
        "soak",
        "--devices",
        "20",
        "--minutes",
        "0.08",
        "--sample",
        "1",
        "--warmup",
        "1",
        "--every",
        "1",
        "--typing",
        "25",
        "--speaking",
        "25",
        "--phones",
        "5",
    ]);
    // A sample line every second (the last at 4.8 s), none with a failure.
    let samples = out
        .lines()
        .filter(|l| l.contains(" MiB ") && l.ends_with(" 0"));
    assert_eq!(samples.count(), 5, "{out}");
    assert_eq!(row(&out, "devices connected").0, "20 of 20");
    assert_eq!(row(&out, "connections dropped").0, "0");
    assert_eq!(row(&out, "turns unanswered or refused").0, "0");
    assert_eq!(row(&out, "streams aborted or short").0, "0");
    for metric in [
        "typed turns answered",
        "voice turns answered",
        "speech streams ended",
        "phone turns answered",
    ] {
        let (answered, _) = row(&out, metric);
        assert!(number(answered) > 0.0, "{metric}: {answered}\n{out}");
    }
}
