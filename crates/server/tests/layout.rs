//! The server's top-level modules depend on each other without a cycle, so each can be
//! read (and moved to a crate of its own) knowing only what it names below it.
//!
//! An edge is a `crate::module` path in a module's code outside its tests. A module's
//! own children (`gadget::session` using `super::GadgetHub`) are not edges: a parent
//! and its children are one module here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `crate::name` references in `text`, before its first `#[cfg(test)]`.
fn references(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut found = BTreeSet::new();
    for line in code.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let preceded_by_word = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !preceded_by_word && !name.is_empty() {
                found.insert(name);
            }
            rest = after;
        }
        // `use crate::{a, b::C}`: the names in the braces.
        if let Some(list) = line.strip_prefix("use crate::{") {
            for item in list.trim_end_matches("};").split(',') {
                let name = item.trim().split("::").next().unwrap_or_default();
                if !name.is_empty() {
                    found.insert(name.to_owned());
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "tests") {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            into.push(path);
        }
    }
}

/// Each top-level module and the top-level modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let module_of = |path: &Path| {
        let first = path
            .strip_prefix(&src)
            .unwrap()
            .components()
            .next()
            .unwrap();
        let name = first.as_os_str().to_string_lossy();
        name.trim_end_matches(".rs").to_owned()
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let names = graph.entry(module.clone()).or_default();
        for name in references(&text) {
            if name != module && modules.contains(&name) {
                names.insert(name);
            }
        }
    }
    graph
}

/// A cycle through `from`, as the path that closes it.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    for next in graph.get(from).into_iter().flatten() {
        if let Some(at) = path.iter().position(|m| m == next) {
            let mut cycle = path[at..].to_vec();
            cycle.push(next.clone());
            return Some(cycle);
        }
        path.push(next.clone());
        if let Some(cycle) = cycle_from(graph, next, path) {
            return Some(cycle);
        }
        path.pop();
    }
    None
}

#[test]
fn the_top_level_modules_form_no_cycle() {
    let graph = graph();
    assert!(
        graph["gadget"].contains("hub") && graph["fleet"].contains("gadget"),
        "the scan sees the edges it should: {graph:?}"
    );
    for module in graph.keys() {
        let cycle = cycle_from(&graph, module, &mut vec![module.clone()]);
        assert!(cycle.is_none(), "a cycle: {}", cycle.unwrap().join(" -> "));
    }
}

#[test]
fn the_scan_finds_paths_in_uses_and_code_but_not_in_tests() {
    let text = "use crate::a::X;\nuse crate::{b, c::Y};\nlet z = crate::d::f();\n\
                // crate::e in a comment\nlet w = my_crate::g;\n#[cfg(test)]\nuse crate::h;\n";
    let found: Vec<_> = references(text).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d"]);
}

/// The packages a crate of the workspace names under `[dependencies]` (not its tests').
fn dependencies(crate_dir: &str) -> BTreeSet<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut in_dependencies = false;
    let mut found = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            found.insert(name.to_owned());
        }
    }
    found
}

/// Every package `package` builds with, through any path (normal dependencies only, with
/// the features it asks for itself), from `cargo tree`.
fn dependency_tree(package: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The cores are sans-IO all the way down: nothing in their dependency tree can reach a
/// runtime, a socket, a database, OS randomness or the file-writing crate (clippy's
/// `disallowed-methods` in their `clippy.toml` keeps clocks and files out of their own
/// code).
#[test]
fn the_cores_dependency_trees_hold_no_io() {
    let io = [
        "tokio",
        "mio",
        "tungstenite",
        "tokio-tungstenite",
        "axum",
        "hyper",
        "rusqlite",
        "getrandom",
        "ureq",
        "herald-files",
        "herald-store",
        "herald-server",
    ];
    for core in ["herald-session", "herald-device"] {
        let tree = dependency_tree(core);
        assert!(
            tree.contains("serde_json"),
            "the scan reads {core}'s tree: {tree:?}"
        );
        for name in io {
            assert!(!tree.contains(name), "{core} builds with {name}");
        }
    }
}

/// Each job in its crate: the session cores do no I/O, SQLite is the store's alone, the
/// store knows nothing of sockets or the web, the web framework is the admin API's
/// alone, the admin API reaches devices only through the server's `Fleet`, TLS and HTTP
/// parsing are the network edge's, the settings, the inbox and a gadget's speaker know
/// nothing of the store or the server, who may talk (access) and notifications know
/// nothing of sockets, the web or the admin API, the ledger of open questions knows
/// no runtime or store, and the gadget in a tab is the device core alone.
#[test]
fn crates_keep_to_their_jobs() {
    let rules: [(&str, &[&str]); 12] = [
        (
            "session",
            &[
                "tokio",
                "tokio-tungstenite",
                "axum",
                "rusqlite",
                "getrandom",
            ],
        ),
        (
            "server",
            &["rusqlite", "axum", "qrcode", "tokio-rustls", "httparse"],
        ),
        (
            "edge",
            &["rusqlite", "axum", "herald-store", "herald-server"],
        ),
        (
            "admin",
            &[
                "rusqlite",
                "tokio-tungstenite",
                "tokio-rustls",
                "herald-server",
            ],
        ),
        ("metrics", &["axum", "herald-store", "herald-server"]),
        ("config", &["tokio", "herald-store", "herald-server"]),
        (
            "inbox",
            &["herald-store", "herald-server", "tokio-tungstenite"],
        ),
        (
            "speaker",
            &["herald-store", "herald-session", "herald-server", "axum"],
        ),
        (
            "store",
            &["axum", "tokio-tungstenite", "tokio-rustls", "herald-server"],
        ),
        (
            "access",
            &["tokio-tungstenite", "axum", "herald-admin", "herald-server"],
        ),
        ("questions", &["tokio", "herald-store", "herald-server"]),
        (
            "notify",
            &["tokio-tungstenite", "axum", "herald-admin", "herald-server"],
        ),
    ];
    for (crate_dir, forbidden) in rules {
        let deps = dependencies(crate_dir);
        assert!(
            deps.len() >= 2,
            "the scan reads {crate_dir}'s dependencies: {deps:?}"
        );
        for name in forbidden {
            assert!(!deps.contains(*name), "{crate_dir} depends on {name}");
        }
    }
    assert!(dependencies("server").contains("herald-store"));
    assert!(dependencies("server").contains("herald-admin"));
    // The simulator knows nothing of GPIO or sound cards; the Linux gadget builds on it.
    let sim = dependency_tree("herald-sim");
    assert!(
        !sim.contains("gpiocdev") && !sim.contains("cpal"),
        "{sim:?}"
    );
    assert!(dependencies("linux-gadget").contains("herald-sim"));
    // The gadget in a tab is the device core and JSON: its clock, randomness and
    // sockets are the page's.
    let tab = dependency_tree("herald-tab-gadget");
    assert!(tab.contains("herald-device"), "{tab:?}");
    for name in ["tokio", "getrandom", "herald-sim", "herald-server"] {
        assert!(!tab.contains(name), "the tab gadget builds with {name}");
    }
}
