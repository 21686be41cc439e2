//! The extension's build (`maturin develop`, which builds only the
//! `kameleon-python` package) must ask for every dependency with exactly the
//! features that `cargo test --workspace` unified across the workspace, dev
//! dependencies included: then it reuses the test build's artifacts instead
//! of compiling faer and everything above it a second time. This compares
//! the two feature resolutions that `cargo tree` reports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Each package (name and version) of a resolution with its feature sets.
fn resolution(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "--offline", "--prefix", "none", "-f", "{p}|{f}"])
        .args(args)
        .current_dir(root)
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let line = line.trim_end_matches(" (*)");
        if let Some((package, features)) = line.split_once('|') {
            // a workspace member's path is not part of its identity here
            let package = package.split(" (").next().unwrap_or(package);
            packages
                .entry(package.to_string())
                .or_default()
                .insert(features.to_string());
        }
    }
    packages
}

#[test]
fn the_extension_build_reuses_the_test_builds_dependencies() {
    let workspace = resolution(&["--workspace", "-e", "normal,build,dev"]);
    let extension = resolution(&["-p", "kameleon-python", "-e", "normal,build"]);
    assert!(extension.len() > 20, "too few packages: {extension:?}");
    let differing: Vec<String> = extension
        .iter()
        .filter_map(|(package, features)| {
            let unified = workspace.get(package)?;
            (unified != features)
                .then(|| format!("{package}: test build {unified:?}, extension build {features:?}"))
        })
        .collect();
    assert!(
        differing.is_empty(),
        "the extension's build would compile these (and what depends on them) again; \
         request the test build's features in crates/python/Cargo.toml:\n{}",
        differing.join("\n")
    );
}
