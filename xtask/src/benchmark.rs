//! Reference samples of targets without exact draws (the pseudo-marginal
//! Glass posterior, the ABC skew-normal posterior): pooled long chains of a
//! random walk, computed once and cached on disk (in the output root, or
//! the directory `--references` names) in
//! `<dir>/<name>/<quick|full|paper>/` (see [`crate::reference`]). Every experiment on the same target and size reuses it
//! (`kamh-glass` and `kmc-glass` share the Glass benchmark); a cached file is
//! used only if its recorded plan equals the current one.

use crate::reference::{
    Reference, ReferenceDiagnostics, ReferencePlan, ReferenceRecord, load, save,
};
use crate::size::Size;
use crate::spec::{BuiltTarget, SamplerSpec, TargetSpec};
use anyhow::Result;
use kameleon_diagnostics::{ess_bulk, per_dimension, rhat_rank};
use kameleon_samplers::RunConfig;
use rayon::prelude::*;
use std::path::PathBuf;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    say!(
        "{}: {} draws, max R̂ {:.4}, min bulk ESS {:.0}",
        key.dir(&env).display(),
        diag.rows,
        diag.rhat_max,
        diag.ess_bulk_min
    );
    Ok(())
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

    /// The directory of this reference's cache at `env`'s size.
    pub fn dir(self, env: &RunEnv) -> PathBuf {
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

/// Where and at which size a run happens: what targets with a cached
/// reference sample need to find or compute it.
#[derive(Debug, Clone)]
pub struct RunEnv {
    /// Where reference samples are cached (`--references`, by default the
    /// output root): in `<references>/<reference>/<size>/`.
    pub references: PathBuf,
    /// The run's size.
    pub size: Size,
    /// The master seed.
    pub seed: u64,
}

/// Constructs `target` with its reference sample when it needs one (targets
/// without exact draws: loaded from, or computed once into,
/// `env.references`).
pub fn prepare(target: TargetSpec, env: &RunEnv) -> Result<BuiltTarget> {
    let mut built = target.build()?;
    let key = match target {
        TargetSpec::GlassPosterior { n_importance } => Some(ReferenceKey::Glass { n_importance }),
        TargetSpec::AbcSkewNormal => Some(ReferenceKey::Abc),
        TargetSpec::Banana { .. }
        | TargetSpec::Flower { .. }
        | TargetSpec::CkamBimodal
        | TargetSpec::CkamFiveComponents
        | TargetSpec::CkamGrid32 => None,
    };
    if let Some(key) = key {
        let loaded = load_or_compute(key, env)?;
        match &mut built {
            BuiltTarget::Glass { reference, .. } | BuiltTarget::Abc { reference, .. } => {
                *reference = Some(loaded);
            }
            BuiltTarget::Banana(_)
            | BuiltTarget::Flower(_)
            | BuiltTarget::Mixture(_)
            | BuiltTarget::Grid(_) => {}
        }
    }
    Ok(built)
}

/// The reference sample of `key` for this run: read from the cache if its
/// plan matches, otherwise computed (chains in parallel) and cached.
pub fn load_or_compute(key: ReferenceKey, env: &RunEnv) -> Result<Arc<Reference>> {
    let plan = key.plan(env.size, env.seed);
    let dir = key.dir(env);
    match load(&dir, &plan) {
        Ok(Some(reference)) => return Ok(Arc::new(reference)),
        Ok(None) => {}
        Err(e) => say_err!("warning: the cached reference is damaged ({e:#}); recomputing it"),
    }
    say!(
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
    say!(
        "  {} draws, max R̂ {:.4}, min bulk ESS {:.0}, acceptance {:.3}, {:.1} s of sampling",
        diag.rows,
        diag.rhat_max,
        diag.ess_bulk_min,
        diag.acceptance,
        diag.wall_time_secs
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
