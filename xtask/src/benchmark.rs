//! Reference samples of targets without exact draws (the pseudo-marginal
//! Glass posterior, the ABC skew-normal posterior): pooled long chains of a
//! random walk, computed once and cached on disk (in the output root, or
//! the directory `--references` names) in
//! `<dir>/<name>/<quick|full|paper>/` (see [`crate::reference`]). Every experiment on the same target and size reuses it
//! (`kamh-glass` and `kmc-glass` share the Glass benchmark); a cached file is
//! used only if its recorded plan equals the current one (one of another
//! plan is recomputed, unless it is in a directory `--references` names,
//! where it is never replaced).

use crate::reference::{
    Cached, Reference, ReferenceDiagnostics, ReferencePlan, ReferenceRecord, load, save,
};
use crate::size::Size;
use crate::spec::{BuiltTarget, SamplerSpec, TargetSpec};
use anyhow::{Result, bail};
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
        keep_cached: false,
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
                .wrapping_mul(PLAN_SEED_FACTOR)
                .wrapping_add(PLAN_SEED_OFFSET),
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

/// A reference's seed is `master · PLAN_SEED_FACTOR + PLAN_SEED_OFFSET`
/// (mod 2⁶⁴) of the run's master seed; the factor is odd, so the master
/// seed can be read back from a stored plan (see [`master_seed`]).
const PLAN_SEED_FACTOR: u64 = 0x9E37_79B9_7F4A_7C15;
const PLAN_SEED_OFFSET: u64 = 0x5EED;

/// The master seed (`--seed`) whose reference plan has the seed `plan_seed`.
pub fn master_seed(plan_seed: u64) -> u64 {
    // the inverse of the odd factor mod 2⁶⁴ by Newton's iteration: x = f is
    // right in the low 3 bits, and each step doubles the right bits
    let mut inverse = PLAN_SEED_FACTOR;
    for _ in 0..5 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(PLAN_SEED_FACTOR.wrapping_mul(inverse)));
    }
    plan_seed
        .wrapping_sub(PLAN_SEED_OFFSET)
        .wrapping_mul(inverse)
}

/// How the plan `stored` differs from `wanted`, field by field, in words
/// (the seeds as the `--seed` that gives them).
pub fn plan_differences(stored: &ReferencePlan, wanted: &ReferencePlan) -> Vec<String> {
    let fields = [
        ("target", stored.target.clone(), wanted.target.clone()),
        ("sampler", stored.sampler.clone(), wanted.sampler.clone()),
        (
            "chains",
            stored.chains.to_string(),
            wanted.chains.to_string(),
        ),
        (
            "burn-in",
            stored.burn_in.to_string(),
            wanted.burn_in.to_string(),
        ),
        (
            "iterations",
            stored.iterations.to_string(),
            wanted.iterations.to_string(),
        ),
        ("thinning", stored.thin.to_string(), wanted.thin.to_string()),
        (
            "seed",
            format!("--seed {}", master_seed(stored.seed)),
            format!("--seed {}", master_seed(wanted.seed)),
        ),
        (
            "paper's benchmark",
            stored.paper.clone(),
            wanted.paper.clone(),
        ),
    ];
    fields
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("{name}: stored {a}, wanted {b}"))
        .collect()
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
    /// Whether a reference cached there is never replaced (the directory
    /// was given explicitly): one made with another plan, or damaged, is
    /// then an error instead of being recomputed over.
    pub keep_cached: bool,
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
/// plan matches, otherwise computed (chains in parallel) and cached. A
/// cached reference of another plan, or a damaged one, is recomputed over
/// (saying why on stderr), unless `env.keep_cached`: then it is an error
/// that names what differs and what to do.
pub fn load_or_compute(key: ReferenceKey, env: &RunEnv) -> Result<Arc<Reference>> {
    let plan = key.plan(env.size, env.seed);
    let dir = key.dir(env);
    let kept = "it is kept, as it is in the directory --references names";
    match load(&dir, &plan) {
        Ok(Cached::Found(reference)) => return Ok(Arc::new(reference)),
        Ok(Cached::Absent) => {}
        Ok(Cached::Other(stored)) => {
            let differences = plan_differences(&stored, &plan).join("; ");
            if env.keep_cached {
                bail!(
                    "the {} reference sample in {} was made with another plan than this run's \
                     ({differences}); {kept}: point --references at a directory holding the \
                     reference of this plan (or one without any, to compute it there), rerun \
                     with the --seed and --size it was made with, or delete {} to recompute it",
                    plan.target,
                    dir.display(),
                    dir.display()
                );
            }
            say_err!(
                "recomputing the cached {} reference sample in {}: it was made with another \
                 plan ({differences})",
                plan.target,
                dir.display()
            );
        }
        Err(e) if env.keep_cached => {
            return Err(e.context(format!(
                "the cached reference sample in {} is damaged; {kept}: delete {} to recompute \
                 it, or point --references at another directory",
                dir.display(),
                dir.display()
            )));
        }
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
