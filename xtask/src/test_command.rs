//! `cargo xtask test`: every test of the project, Rust and Python.
//!
//! Runs `cargo test --workspace` (every crate's unit, integration and doc
//! tests), then `python/run-tests.sh`, which creates or reuses the
//! project-local virtual environment `.venv/`, builds the Python extension
//! into it and runs pytest on `python/tests/`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which parts of the suite to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// Rust, then Python.
    All,
    /// `cargo test --workspace` only.
    Rust,
    /// The Python package's build and pytest only.
    Python,
}

/// Runs the chosen suites from the repository root; fails on the first
/// failing one.
pub fn main(suite: Suite) -> Result<()> {
    let root = repository_root()?;
    if matches!(suite, Suite::All | Suite::Rust) {
        run(
            Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
                .args(["test", "--workspace"])
                .current_dir(&root),
            "cargo test --workspace",
        )?;
    }
    if matches!(suite, Suite::All | Suite::Python) {
        run(
            Command::new("bash")
                .arg(root.join("python").join("run-tests.sh"))
                .current_dir(&root),
            "python/run-tests.sh",
        )?;
    }
    Ok(())
}

/// The workspace root: the parent of this crate's manifest directory.
fn repository_root() -> Result<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .context("the xtask crate has no parent directory")
}

fn run(command: &mut Command, what: &str) -> Result<()> {
    eprintln!("==> {what}");
    let status = command
        .status()
        .with_context(|| format!("could not start `{what}`"))?;
    if !status.success() {
        bail!("`{what}` failed ({status})");
    }
    Ok(())
}
