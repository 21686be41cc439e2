//! The numpy peers, run side by side with the Rust paths: the fixtures are
//! written, `python/benchmarks/peers.py` times its vectorised reference
//! implementation of each path on them in the project venv with one BLAS
//! thread, and checks its results against the Rust ones.

use super::timing::Timing;
use super::{Sizes, fixtures};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The largest relative difference between a peer's result and ours that
/// the report accepts: both compute the same formulas in double precision,
/// so anything above this is a bug in one of them, not rounding.
pub const AGREEMENT: f64 = 1e-6;

/// What the peer script reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerRun {
    /// numpy's version.
    pub numpy: String,
    /// Python's version.
    pub python: String,
    /// BLAS threads the peers ran with.
    pub blas_threads: u32,
    /// Per path.
    pub paths: BTreeMap<String, PeerPath>,
}

/// One peer path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPath {
    /// Median seconds per call.
    pub median_secs: f64,
    /// 10% quantile.
    pub p10_secs: f64,
    /// 90% quantile.
    pub p90_secs: f64,
    /// Timed repetitions.
    pub repetitions: usize,
    /// Calls per repetition.
    pub calls_per_repetition: usize,
    /// Largest absolute difference from the Rust result (None: nothing
    /// deterministic to compare).
    pub max_abs_err: Option<f64>,
    /// Largest relative difference.
    pub max_rel_err: Option<f64>,
}

impl PeerPath {
    /// The peer's timing.
    pub fn timing(&self) -> Timing {
        Timing {
            median_secs: self.median_secs,
            p10_secs: self.p10_secs,
            p90_secs: self.p90_secs,
            repetitions: self.repetitions,
            calls_per_repetition: self.calls_per_repetition,
        }
    }
}

/// The repository root (xtask lives in it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// Writes the fixtures into `dir/fixtures`, runs the peers on them and
/// checks that they agree with the Rust results.
pub fn run(s: &Sizes, dir: &Path) -> Result<PeerRun> {
    let fixture_dir = dir.join("fixtures");
    say_err!("bench-report: peer fixtures in {}", fixture_dir.display());
    fixtures::write(s, &fixture_dir)?;
    let root = repo_root();
    say_err!("bench-report: the project venv (python/venv.sh)");
    let venv = Command::new("bash")
        .arg(root.join("python/venv.sh"))
        .output()
        .context("running python/venv.sh")?;
    if !venv.status.success() {
        bail!(
            "python/venv.sh failed: {}",
            String::from_utf8_lossy(&venv.stderr)
        );
    }
    let python = String::from_utf8(venv.stdout)?.trim().to_string();
    let out = dir.join("peers.json");
    say_err!("bench-report: numpy peers (one BLAS thread)");
    let status = Command::new(&python)
        .arg(root.join("python/benchmarks/peers.py"))
        .arg(&fixture_dir)
        .arg("--out")
        .arg(&out)
        .args(["--repetitions", &s.repetitions.to_string()])
        .args(["--warmup", &s.warmup.to_string()])
        .args(["--min-secs", &s.min_sample_secs.to_string()])
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1")
        .env("MKL_NUM_THREADS", "1")
        .status()
        .with_context(|| format!("starting {python}"))?;
    if !status.success() {
        bail!("the numpy peers failed ({status}); their output is above");
    }
    let text =
        std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    let peers: PeerRun =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", out.display()))?;
    let disagreeing: Vec<String> = peers
        .paths
        .iter()
        .filter(|(_, p)| p.max_rel_err.is_some_and(|e| e.is_nan() || e > AGREEMENT))
        .map(|(name, p)| format!("{name} ({:e})", p.max_rel_err.unwrap_or(f64::NAN)))
        .collect();
    if !disagreeing.is_empty() {
        bail!(
            "the numpy peers disagree with the Rust results beyond {AGREEMENT:e} (relative): {}",
            disagreeing.join(", ")
        );
    }
    Ok(peers)
}
