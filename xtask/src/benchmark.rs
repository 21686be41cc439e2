//! Reference samples of targets without exact draws (the pseudo-marginal
//! Glass posterior, the ABC skew-normal posterior): pooled long chains of a
//! random walk, computed once and cached on disk (in the output root, or
//! the directory `--references` names) as
//! `<dir>/<name>/<quick|full|paper>/benchmark.npy` plus `benchmark.json`
//! saying how it was made. Every experiment on the same target and size reuses it
//! (`kamh-glass` and `kmc-glass` share the Glass benchmark); a cached file is
//! used only if its recorded plan equals the current one.

use crate::experiment::Size;
use crate::files::{create_dir, write_file};
use crate::npy::{read_chain, write_chain};
use crate::spec::{RunEnv, SamplerSpec, TargetSpec};
use anyhow::{Context, Result, bail, ensure};
use kameleon_diagnostics::{ess_bulk, per_dimension, rhat_rank};
use kameleon_samplers::RunConfig;
use rand::{Rng, RngExt};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which reference sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceKey {
    /// The Glass benchmark (long SM chains, KAMH §5.1).
    Glass {
        /// Importance draws per likelihood estimate.
        n_importance: usize,
    },
    /// The ABC ground truth (long isotropic random walks, KMC App. D.4).
    Abc,
}

/// The papers' importance draws per Glass likelihood estimate.
pub const GLASS_IMPORTANCE_DRAWS: usize = 100;

/// A reference sample by its command-line name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReferenceName {
    /// The Glass benchmark of `kamh-glass` and `kmc-glass`.
    Glass,
    /// The ABC reference of `kmc-abc`.
    Abc,
}

impl ReferenceName {
    fn key(self) -> ReferenceKey {
        match self {
            Self::Glass => ReferenceKey::Glass {
                n_importance: GLASS_IMPORTANCE_DRAWS,
            },
            Self::Abc => ReferenceKey::Abc,
        }
    }
}

/// `xtask reference`: computes the reference sample `name` at `size` into
/// `references` (or finds it there) and prints its diagnostics.
pub fn compute_into(name: ReferenceName, size: Size, seed: u64, references: PathBuf) -> Result<()> {
    let key = name.key();
    let env = RunEnv {
        references,
        size,
        seed,
    };
    let reference = load_or_compute(key, &env)?;
    let diag = &reference.record.diagnostics;
    println!(
        "{}: {} draws, max R̂ {:.4}, min bulk ESS {:.0}",
        key.dir(&env).display(),
        diag.rows,
        diag.rhat_max,
        diag.ess_bulk_min
    );
    Ok(())
}

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
    fn new(dim: usize, samples: Vec<f64>, record: ReferenceRecord) -> Result<Self> {
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

    /// A reference from given draws (tests of the metrics that use one).
    #[cfg(test)]
    pub fn new_for_test(dim: usize, samples: Vec<f64>, record: ReferenceRecord) -> Self {
        Self::new(dim, samples, record).expect("whole rows")
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

impl ReferenceKey {
    /// The target.
    fn target(self) -> TargetSpec {
        match self {
            Self::Glass { n_importance } => TargetSpec::GlassPosterior { n_importance },
            Self::Abc => TargetSpec::AbcSkewNormal,
        }
    }

    /// The directory under the output root.
    fn dir_name(self) -> &'static str {
        match self {
            Self::Glass { .. } => "glass-benchmark",
            Self::Abc => "abc-benchmark",
        }
    }

    fn sampler(self) -> SamplerSpec {
        match self {
            Self::Glass { .. } => SamplerSpec::Sm,
            Self::Abc => SamplerSpec::RwFixed { nu: 0.55, thin: 1 },
        }
    }

    /// The plan at `size`.
    pub fn plan(self, size: Size, master_seed: u64) -> ReferencePlan {
        let (chains, burn_in, iterations, thin, sampler, paper) = match (self, size) {
            (Self::Glass { .. }, Size::Paper) => (
                30,
                100_000,
                400_000,
                1000,
                "SM, N(x, (2.38²/9) I), from θ = 0",
                "KAMH: 30 SM chains × 500000 iterations, 100000 burn-in, thin 1000 (12000 draws)",
            ),
            (Self::Glass { .. }, Size::Full) => (
                GLASS_CHAINS,
                GLASS_BURN_IN,
                GLASS_ITERATIONS,
                GLASS_THIN,
                "SM, N(x, (2.38²/9) I), from θ = 0",
                "KAMH: 30 SM chains × 500000 iterations, 100000 burn-in, thin 1000 (12000 draws)",
            ),
            (Self::Glass { .. }, Size::Quick) => (
                2,
                50,
                150,
                1,
                "SM, N(x, (2.38²/9) I), from θ = 0",
                "KAMH: 30 SM chains × 500000 iterations, 100000 burn-in, thin 1000 (12000 draws)",
            ),
            // the KMC code's reference is no larger than this
            (Self::Abc, Size::Full | Size::Paper) => (
                100,
                1000,
                2000,
                10,
                "RW, N(x, 0.55² I), exact pseudo-marginal, from θ = 10·1",
                "KMC code: 100 RW chains (σ = 0.55) × 3000 iterations, 1000 warm-up, MCWM",
            ),
            (Self::Abc, Size::Quick) => (
                4,
                200,
                500,
                1,
                "RW, N(x, 0.55² I), exact pseudo-marginal, from θ = 10·1",
                "KMC code: 100 RW chains (σ = 0.55) × 3000 iterations, 1000 warm-up, MCWM",
            ),
        };
        ReferencePlan {
            target: self.target().key(),
            sampler: sampler.into(),
            chains,
            burn_in,
            iterations,
            thin,
            seed: master_seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(0x5EED),
            paper: paper.into(),
        }
    }

    /// The size whose plan `size` uses: the ABC reference is the same at
    /// full and paper size, so both share one cache.
    fn plan_size(self, size: Size) -> Size {
        match (self, size) {
            (Self::Abc, Size::Paper) => Size::Full,
            _ => size,
        }
    }

    fn dir(self, env: &RunEnv) -> PathBuf {
        env.references
            .join(self.dir_name())
            .join(self.plan_size(env.size).name())
    }
}

/// The default Glass benchmark: 10 SM chains of 5000 + 20000 iterations,
/// thinned by 20 (10000 draws; ~250000 pseudo-marginal evaluations, tens
/// of minutes on two cores instead of the paper's hours).
const GLASS_CHAINS: usize = 10;
const GLASS_BURN_IN: u64 = 5_000;
const GLASS_ITERATIONS: u64 = 20_000;
const GLASS_THIN: u64 = 20;

/// The reference sample of `key` for this run: read from the cache if its
/// plan matches, otherwise computed (chains in parallel) and cached.
pub fn load_or_compute(key: ReferenceKey, env: &RunEnv) -> Result<Arc<Reference>> {
    let plan = key.plan(env.size, env.seed);
    let dir = key.dir(env);
    match load(&dir, &plan) {
        Ok(Some(reference)) => return Ok(Arc::new(reference)),
        Ok(None) => {}
        Err(e) => eprintln!("warning: the cached reference is damaged ({e:#}); recomputing it"),
    }
    println!(
        "computing the {} reference sample: {} {} chains × {} + {} iterations (cached in {})",
        plan.target,
        plan.chains,
        plan.sampler,
        plan.burn_in,
        plan.iterations,
        dir.display()
    );
    let reference = compute(key, plan)?;
    save(&dir, &reference)?;
    let diag = &reference.record.diagnostics;
    println!(
        "  {} draws, max R̂ {:.4}, min bulk ESS {:.0}, acceptance {:.3}, {:.1} s of sampling",
        diag.rows, diag.rhat_max, diag.ess_bulk_min, diag.acceptance, diag.wall_time_secs
    );
    Ok(Arc::new(reference))
}

fn compute(key: ReferenceKey, plan: ReferencePlan) -> Result<Reference> {
    let spec = key.target();
    let built = spec.build()?;
    let target = built.target();
    let d = target.dim();
    let sampler = key.sampler();
    let config = RunConfig::new(plan.burn_in, plan.iterations).thin(plan.thin);
    // chain_rng jumps once per index: the start gets a stream of its own seed.
    let mut start_rng = kameleon_samplers::chain_rng(plan.seed ^ 0x57A7_u64, 0);
    let x0 = spec.start(&built, &mut start_rng)?;
    let chains = (0..plan.chains)
        .into_par_iter()
        .map(|k| {
            Ok(sampler
                .run(target, &x0, config, plan.seed, k as u64, &|_| {})?
                .chain)
        })
        .collect::<Result<Vec<_>>>()?;
    let slices: Vec<&[f64]> = chains.iter().map(|c| c.samples.as_slice()).collect();
    let rhat_max = if chains.len() >= 2 {
        per_dimension(&slices, d, rhat_rank)?
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max)
    } else {
        f64::NAN
    };
    let ess_bulk_min = per_dimension(&slices, d, ess_bulk)?
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    let acceptance = chains.iter().map(|c| c.acceptance_rate()).sum::<f64>() / chains.len() as f64;
    let wall_time_secs = chains.iter().map(|c| c.wall_time_secs).sum();
    let samples: Vec<f64> = slices.concat();
    let record = ReferenceRecord {
        plan,
        diagnostics: ReferenceDiagnostics {
            rows: samples.len() / d,
            rhat_max,
            ess_bulk_min,
            acceptance,
            wall_time_secs,
        },
    };
    Reference::new(d, samples, record)
}

fn load(dir: &Path, plan: &ReferencePlan) -> Result<Option<Reference>> {
    let json = dir.join("benchmark.json");
    let Ok(text) = std::fs::read_to_string(&json) else {
        return Ok(None);
    };
    let record: ReferenceRecord =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))?;
    if record.plan != *plan {
        println!(
            "the cached reference in {} was made with another plan; recomputing",
            dir.display()
        );
        return Ok(None);
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
    Ok(Some(Reference::new(dim, samples, record)?))
}

/// Writes the sample, then the json (its presence marks a complete cache),
/// each atomically.
fn save(dir: &Path, reference: &Reference) -> Result<()> {
    create_dir(dir)?;
    write_chain(
        &dir.join("benchmark.npy"),
        &reference.samples,
        reference.dim,
    )?;
    let json = serde_json::to_string_pretty(&reference.record)?;
    write_file(&dir.join("benchmark.json"), json.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn record(rows: usize) -> ReferenceRecord {
        ReferenceRecord {
            plan: ReferenceKey::Abc.plan(Size::Quick, 1),
            diagnostics: ReferenceDiagnostics {
                rows,
                rhat_max: 1.0,
                ess_bulk_min: 10.0,
                acceptance: 0.3,
                wall_time_secs: 0.0,
            },
        }
    }

    #[test]
    fn reference_rows_mean_and_range_match_direct_computations() {
        // Rows (0,10), (1,11), …, (9,19).
        let samples: Vec<f64> = (0..10).flat_map(|i| [i as f64, 10.0 + i as f64]).collect();
        let r = Reference::new(2, samples, record(10)).unwrap();
        assert_eq!(r.rows(), 10);
        assert_eq!(r.mean, vec![4.5, 14.5]);
        let (lo, hi) = r.range(1).unwrap();
        assert!((lo - (10.0 - 0.45)).abs() < 1e-12 && (hi - (19.0 + 0.45)).abs() < 1e-12);
        assert!(r.range(2).is_err());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let rows = r.random_rows(10, &mut rng).unwrap();
        // All ten rows, each once, each intact.
        let mut firsts: Vec<f64> = rows.chunks_exact(2).map(|x| x[0]).collect();
        assert!(rows.chunks_exact(2).all(|x| x[1] == x[0] + 10.0));
        firsts.sort_by(f64::total_cmp);
        assert_eq!(firsts, (0..10).map(f64::from).collect::<Vec<_>>());
        assert!(r.random_rows(11, &mut rng).is_err());
        assert!(Reference::new(2, vec![1.0; 3], record(1)).is_err());
    }

    /// A saved reference loads back equal, only under the same plan.
    #[test]
    fn cache_round_trips_and_checks_the_plan() {
        let dir = std::env::temp_dir().join(format!("xtask-ref-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let samples: Vec<f64> = (0..12).map(f64::from).collect();
        let r = Reference::new(3, samples.clone(), record(4)).unwrap();
        save(&dir, &r).unwrap();
        let back = load(&dir, &r.record.plan).unwrap().unwrap();
        assert_eq!(back.samples, samples);
        assert_eq!(back.record, r.record);
        let other = ReferenceKey::Abc.plan(Size::Quick, 2);
        assert!(load(&dir, &other).unwrap().is_none());
        assert!(load(&dir.join("absent"), &other).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The paper-size Glass benchmark is the KAMH paper's: 30 chains of
    /// 500 000 iterations, 100 000 of them burn-in, thinned to 12 000 draws;
    /// each size caches in its own directory, and the ABC reference (whose
    /// full size is already the KMC code's) is shared by full and paper.
    #[test]
    fn each_size_has_its_plan_and_cache() {
        let glass = ReferenceKey::Glass {
            n_importance: GLASS_IMPORTANCE_DRAWS,
        };
        let paper = glass.plan(Size::Paper, 1);
        assert_eq!(
            (paper.chains, paper.burn_in + paper.iterations),
            (30, 500_000)
        );
        assert_eq!(paper.burn_in, 100_000);
        assert_eq!(paper.chains as u64 * paper.iterations / paper.thin, 12_000);
        assert_ne!(glass.plan(Size::Full, 1), paper);
        let env = |size| RunEnv {
            references: PathBuf::from("refs"),
            size,
            seed: 1,
        };
        assert_eq!(
            glass.dir(&env(Size::Paper)),
            Path::new("refs/glass-benchmark/paper")
        );
        assert_eq!(
            glass.dir(&env(Size::Full)),
            Path::new("refs/glass-benchmark/full")
        );
        let abc = ReferenceKey::Abc;
        assert_eq!(abc.plan(Size::Paper, 1), abc.plan(Size::Full, 1));
        assert_eq!(abc.dir(&env(Size::Paper)), abc.dir(&env(Size::Full)));
    }
}
