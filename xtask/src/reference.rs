//! A reference sample of a target without exact draws (pooled long chains;
//! see [`crate::benchmark`] for how one is made) and its on-disk cache:
//! `benchmark.npy` plus `benchmark.json` saying how it was made and what it
//! gave.

use crate::files::{create_dir, write_file};
use crate::npy::{read_chain, write_chain};
use anyhow::{Context, Result, bail, ensure};
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How a reference sample is made: reused from disk only if equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferencePlan {
    /// The target key.
    pub target: String,
    /// The sampler and its settings, in words.
    pub sampler: String,
    /// Number of chains (pooled).
    pub chains: usize,
    /// Burn-in per chain (discarded).
    pub burn_in: u64,
    /// Recorded iterations per chain (before thinning).
    pub iterations: u64,
    /// Every `thin`-th recorded draw is kept.
    pub thin: u64,
    /// The seed of the chains' streams.
    pub seed: u64,
    /// The paper's benchmark, for the deviation note.
    pub paper: String,
}

/// What the reference chains gave: written beside the sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceDiagnostics {
    /// Rows of the pooled sample.
    pub rows: usize,
    /// Largest rank-normalised split R̂ over dimensions (a reference sample
    /// must stay below 1.01).
    pub rhat_max: f64,
    /// Smallest bulk ESS over dimensions (criterion: > 1000).
    pub ess_bulk_min: f64,
    /// Mean acceptance rate of the chains.
    pub acceptance: f64,
    /// Wall-clock seconds summed over chains.
    pub wall_time_secs: f64,
}

/// `benchmark.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceRecord {
    /// How it was made.
    pub plan: ReferencePlan,
    /// What it gave.
    pub diagnostics: ReferenceDiagnostics,
}

/// A pooled reference sample (row-major, rows × dim).
#[derive(Debug, Clone)]
pub struct Reference {
    /// The dimension.
    pub dim: usize,
    /// The draws.
    pub samples: Vec<f64>,
    /// Their mean.
    pub mean: Vec<f64>,
    /// How it was made and its diagnostics.
    pub record: ReferenceRecord,
}

impl Reference {
    /// The reference of `samples` (rows of `dim` values) and its mean; an
    /// error unless they form at least one whole row.
    pub fn new(dim: usize, samples: Vec<f64>, record: ReferenceRecord) -> Result<Self> {
        ensure!(
            dim > 0 && !samples.is_empty() && samples.len().is_multiple_of(dim),
            "a reference sample needs whole rows of {dim} values"
        );
        let rows = samples.len() / dim;
        let mut mean = vec![0.0; dim];
        for x in samples.chunks_exact(dim) {
            mean.iter_mut()
                .zip(x)
                .for_each(|(m, v)| *m += v / rows as f64);
        }
        Ok(Self {
            dim,
            samples,
            mean,
            record,
        })
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.samples.len() / self.dim
    }

    /// `n` distinct rows drawn uniformly without replacement (row-major).
    pub fn random_rows(&self, n: usize, rng: &mut dyn Rng) -> Result<Vec<f64>> {
        let rows = self.rows();
        ensure!(
            n <= rows,
            "asked for {n} reference rows, the sample has {rows}"
        );
        // Partial Fisher–Yates over the row indices.
        let mut index: Vec<usize> = (0..rows).collect();
        for i in 0..n {
            let j = rng.random_range(i..rows);
            index.swap(i, j);
        }
        Ok(index[..n]
            .iter()
            .flat_map(|&r| &self.samples[r * self.dim..(r + 1) * self.dim])
            .copied()
            .collect())
    }

    /// The range [min, max] of coordinate `dim`, widened by 5% on each side.
    pub fn range(&self, dim: usize) -> Result<(f64, f64)> {
        ensure!(
            dim < self.dim,
            "coordinate {dim} of a {}-d sample",
            self.dim
        );
        let (lo, hi) = self
            .samples
            .iter()
            .skip(dim)
            .step_by(self.dim)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        let pad = 0.05 * (hi - lo).max(1e-12);
        Ok((lo - pad, hi + pad))
    }
}

/// What the cache directory of a reference holds.
#[derive(Debug)]
pub enum Cached {
    /// No reference.
    Absent,
    /// A reference made with another plan (this one).
    Other(ReferencePlan),
    /// The reference of the plan asked for.
    Found(Reference),
}

/// The reference in `dir` if its recorded plan equals `plan`; an error if
/// its files are damaged.
pub fn load(dir: &Path, plan: &ReferencePlan) -> Result<Cached> {
    let json = dir.join("benchmark.json");
    let Ok(text) = std::fs::read_to_string(&json) else {
        return Ok(Cached::Absent);
    };
    let record: ReferenceRecord =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))?;
    if record.plan != *plan {
        return Ok(Cached::Other(record.plan));
    }
    let npy = dir.join("benchmark.npy");
    let (samples, dim) = read_chain(&npy)?;
    if samples.len() / dim != record.diagnostics.rows {
        bail!(
            "{} has {} rows but {} says {}: delete both to recompute the reference",
            npy.display(),
            samples.len() / dim,
            json.display(),
            record.diagnostics.rows
        );
    }
    Ok(Cached::Found(Reference::new(dim, samples, record)?))
}

/// Writes the sample to `dir`, then the json (its presence marks a complete cache),
/// each atomically.
pub fn save(dir: &Path, reference: &Reference) -> Result<()> {
    create_dir(dir)?;
    write_chain(
        &dir.join("benchmark.npy"),
        &reference.samples,
        reference.dim,
    )?;
    let json = serde_json::to_string_pretty(&reference.record)?;
    write_file(&dir.join("benchmark.json"), json.as_bytes())
}
