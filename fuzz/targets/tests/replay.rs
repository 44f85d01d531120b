//! Replays every file under `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/`
//! through its target on stable Rust, so a crash once found stays fixed without nightly.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use herald_fuzz_targets::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_and_regression_passes_its_target() {
    let mut failures = Vec::new();
    for (name, target) in TARGETS {
        let seeds = files(&fuzz_dir().join("seeds").join(name));
        assert!(!seeds.is_empty(), "no seeds for {name}");
        let regressions = files(&fuzz_dir().join("regressions").join(name));
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap();
            if catch_unwind(AssertUnwindSafe(|| target(&data))).is_err() {
                failures.push(file.display().to_string());
            }
        }
    }
    assert!(failures.is_empty(), "failing inputs: {failures:#?}");
}

#[test]
fn every_folder_names_a_target() {
    for folder in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(folder)) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert!(
                TARGETS.iter().any(|(t, _)| *t == name),
                "{folder}/{name} is not a target"
            );
        }
    }
}
