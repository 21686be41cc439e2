//! What a grid cell runs: a target, a sampler with its settings, and the
//! per-chain metrics computed on its post-burn-in draws.

use anyhow::{Result, bail};
use kameleon_diagnostics::{ess_geyer_per_dim, quantile_coverage_errors};
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptiveMetropolis, Bandwidth, Chain, FKamh, Gamma, Hmc, Kamh, KamhConfig, ProgressFn,
    Proposal, RandomWalk, RobbinsMonro, Run, RunConfig, Scale, StepSchedule, Target, chain_rng,
};
use kameleon_targets::{Banana, Flower, QuantileRegions};

/// A target of the papers, by its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TargetSpec {
    /// The banana B(b, v) in `dim` dimensions.
    Banana {
        /// Dimension d.
        dim: usize,
        /// Bananicity b.
        b: f64,
        /// Variance v of the first coordinate.
        v: f64,
    },
    /// The flower F(r₀, A, ω, σ) in `dim` dimensions.
    Flower {
        /// Dimension d.
        dim: usize,
        /// Radius r₀.
        radius: f64,
        /// Amplitude A.
        amplitude: f64,
        /// Number of petals ω.
        petals: u32,
        /// Width σ.
        sigma: f64,
    },
}

impl TargetSpec {
    /// A file-system-safe key, e.g. `banana-b0.03-v100-d8`.
    pub fn key(&self) -> String {
        match *self {
            Self::Banana { dim, b, v } => format!("banana-b{b}-v{v}-d{dim}"),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => format!("flower-r{radius}-a{amplitude}-w{petals}-s{sigma}-d{dim}"),
        }
    }

    /// The paper's notation, e.g. `8-d B(0.03, 100)`.
    pub fn label(&self) -> String {
        match *self {
            Self::Banana { dim, b, v } => format!("{dim}-d B({b}, {v})"),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => format!("{dim}-d F({radius}, {amplitude}, {petals}, {sigma})"),
        }
    }

    /// Constructs the target.
    pub fn build(&self) -> Result<BuiltTarget> {
        Ok(match *self {
            Self::Banana { dim, b, v } => BuiltTarget::Banana(Banana::new(dim, b, v)?),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => BuiltTarget::Flower(Flower::new(dim, radius, amplitude, petals, sigma)?),
        })
    }
}

/// A constructed target, keeping the concrete type for optional capabilities.
pub enum BuiltTarget {
    /// A banana.
    Banana(Banana),
    /// A flower or ring.
    Flower(Flower),
}

impl BuiltTarget {
    /// The target as the samplers see it.
    pub fn target(&self) -> &dyn Target {
        match self {
            Self::Banana(t) => t,
            Self::Flower(t) => t,
        }
    }

    /// Its exactly known quantile regions, if it has them.
    pub fn regions(&self) -> Option<&dyn QuantileRegions> {
        match self {
            Self::Banana(t) => Some(t),
            Self::Flower(t) => Some(t),
        }
    }
}

/// A sampler with its settings, named as in the papers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SamplerSpec {
    /// Standard Metropolis N(x, ν²I), ν = 2.38/√d.
    Sm,
    /// Random walk N(x, ν²I) with ν learned toward acceptance 0.234 during
    /// burn-in (steps 1/√t, from 2.38/√d): the KMC paper's tuned RW.
    RwTuned,
    /// HMC on the true gradient, ε ~ U[ε₀, ε₁), L ~ U{L₀, …, L₁}.
    Hmc {
        /// Step-size range.
        step_size: (f64, f64),
        /// Leapfrog-step range.
        steps: (u32, u32),
    },
    /// KAMH on an oracle subsample of n exact target draws with hand-tuned
    /// ν and γ (the KMC paper's baseline).
    KamhOracle {
        /// Subsample size n.
        n: usize,
    },
    /// KMC finite (random features, m = n) with HMC's parameters.
    KmcFinite {
        /// Number of random features m (= n).
        m: usize,
        /// Step-size range.
        step_size: (f64, f64),
        /// Leapfrog-step range.
        steps: (u32, u32),
    },
    /// F-KAMH on D random Fourier features of a Gaussian kernel whose
    /// length-scale is the median distance of 1000 exact target draws
    /// (thesis §5), with γ and η learned toward 0.234 from η₀.
    FKamh {
        /// Number of features D.
        features: usize,
        /// The embedding (thesis eq. 2.4 or 2.5).
        embedding: Embedding,
        /// Exploration noise γ.
        gamma: f64,
        /// Initial η.
        eta: f64,
    },
    /// Adaptive Metropolis with fixed scale 2.38/√d (Haario et al. 2001).
    AmFs,
    /// Adaptive Metropolis with learned global scale (Andrieu & Thoms Alg. 4),
    /// step sizes 1/√t as in the KAMH code.
    AmLs,
    /// KAMH with learned scale: subsample size `n`, exploration γ.
    KamhLs {
        /// Subsample size n.
        n: usize,
        /// Isotropic exploration term γ.
        gamma: f64,
    },
}

impl SamplerSpec {
    /// The name used in the papers' figures (also the directory name).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sm => "SM",
            Self::RwTuned => "RW",
            Self::Hmc { .. } => "HMC",
            Self::KmcFinite { .. } => "KMC",
            Self::KamhOracle { .. } => "KAMH",
            Self::FKamh {
                embedding: Embedding::CosPhase,
                ..
            } => "F-KAMH-cos",
            Self::FKamh {
                embedding: Embedding::SinCos,
                ..
            } => "F-KAMH-sincos",
            Self::AmFs => "AM-FS",
            Self::AmLs => "AM-LS",
            Self::KamhLs { .. } => "KAMH-LS",
        }
    }

    /// `None` when the sampler exists in `kameleon-samplers`, otherwise why
    /// the cell is pending.
    pub fn pending(&self) -> Option<&'static str> {
        match self {
            Self::Sm
            | Self::RwTuned
            | Self::Hmc { .. }
            | Self::FKamh { .. }
            | Self::KamhLs { .. }
            | Self::AmFs
            | Self::AmLs => None,
            Self::KmcFinite { .. } => Some(
                "KMC is on main; its kmc-banana setup (kernel width, λ, oracle points) is not wired yet",
            ),
            Self::KamhOracle { .. } => Some("KAMH with an oracle subsample is not wired yet"),
        }
    }

    /// Runs chain `chain` of base `seed` from `x0`.
    pub fn run(
        &self,
        target: &dyn Target,
        x0: &[f64],
        config: RunConfig,
        seed: u64,
        chain: u64,
        progress: ProgressFn<'_>,
    ) -> Result<Chain> {
        let d = target.dim();
        match self {
            Self::Sm => run(
                target,
                RandomWalk::new(d)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::AmFs => run(
                target,
                AdaptiveMetropolis::fixed_scale(d)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::AmLs => run(
                target,
                AdaptiveMetropolis::learned_scale(d, StepSchedule::InverseSqrt)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::RwTuned => {
                let scale =
                    RobbinsMonro::new(Scale::optimal_for(d), 0.234, StepSchedule::InverseSqrt)?;
                let proposal = RandomWalk::with_scale(d, Scale::Adaptive(scale))?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::Hmc { step_size, steps } => run(
                target,
                Hmc::new(d, *step_size, *steps)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::FKamh {
                features,
                embedding,
                gamma,
                eta,
            } => {
                let length_scale = median_distance_of_draws(target, seed, 1000)?;
                // Chain k's frequencies come from a stream of their own.
                let mut rng = chain_rng(seed ^ 0xF4A7_u64, chain);
                let phi = RandomFourierFeatures::new(
                    &Gaussian::new(length_scale)?,
                    d,
                    *features,
                    *embedding,
                    &mut rng,
                )?;
                let eta = RobbinsMonro::new(*eta, 0.234, StepSchedule::InverseSqrt)?;
                let proposal = FKamh::new(phi, *gamma, Scale::Adaptive(eta))?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::KamhLs { n, gamma } => {
                let mut kamh = KamhConfig::paper(*n)?;
                kamh.subsample.gamma = Gamma::Fixed(*gamma);
                kamh.subsample.bandwidth = Bandwidth::MedianHeuristic {
                    max_points: (*n).min(KAMH_MEDIAN_POINTS),
                };
                // The median heuristic replaces this length-scale at the
                // first subsample.
                let proposal = Kamh::new(d, Gaussian::new(1.0)?, kamh)?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::KmcFinite { .. } | Self::KamhOracle { .. } => {
                bail!(
                    "{} is pending: {}",
                    self.label(),
                    self.pending().unwrap_or("")
                )
            }
        }
    }
}

/// The median pairwise distance of `n` exact draws from the target (one
/// stream per cell seed, so every chain of a cell gets the same value).
fn median_distance_of_draws(target: &dyn Target, seed: u64, n: usize) -> Result<f64> {
    let d = target.dim();
    let mut rng = chain_rng(seed ^ 0x003E_D1A4_u64, 0);
    let mut draws = vec![0.0; n * d];
    for x in draws.chunks_exact_mut(d) {
        target.sample_iid(&mut rng, x)?;
    }
    let mut distances = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in 0..i {
            let (a, b) = (&draws[i * d..(i + 1) * d], &draws[j * d..(j + 1) * d]);
            distances.push(
                a.iter()
                    .zip(b)
                    .map(|(u, v)| (u - v).powi(2))
                    .sum::<f64>()
                    .sqrt(),
            );
        }
    }
    let mid = distances.len() / 2;
    let (_, median, _) = distances.select_nth_unstable_by(mid, f64::total_cmp);
    Ok(*median)
}

fn run<P: Proposal>(
    target: &dyn Target,
    proposal: P,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<Chain> {
    Ok(Run::new(target, proposal, x0, config, seed, chain)?.finish(target, Some(progress)))
}

/// KAMH's median heuristic uses at most this many points of each new
/// subsample (itself a random draw from the history): the median of their
/// 4950 pairwise distances, recomputed at every adapting step. Over all
/// n = 1000 points (the paper) that median costs O(n²d) per step and
/// dominates the run (perf, quick kamh-banana: ~75% of the time already at
/// 200 points).
pub const KAMH_MEDIAN_POINTS: usize = 100;

/// The quantile levels of the KAMH coverage metric.
pub const QUANTILE_LEVELS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// A per-chain metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// `accept`: the post-burn-in acceptance rate.
    Acceptance,
    /// `mean_norm`: ‖mean of the post-burn-in draws − exact mean‖₂.
    MeanNorm,
    /// `q0.1` … `q0.9`: |fraction inside the exact q-region − q|, and
    /// `q_avg`, their average over the nine levels (KMC's summary).
    QuantileErrors,
    /// `ess_min`: the smallest per-dimension Geyer ESS, and `ess_min_per_s`
    /// per second of sampling (burn-in included).
    MinEss,
    /// `ess_12`: the mean Geyer ESS of the first two dimensions (the F-KAMH
    /// thesis' measure), and `ess_12_per_s` per second of sampling.
    EssFirstTwo,
}

impl Metric {
    /// Computes this metric family on a chain, as (name, value) pairs.
    pub fn compute(&self, chain: &Chain, target: &BuiltTarget) -> Result<Vec<(String, f64)>> {
        let d = chain.dim;
        if chain.is_empty() {
            bail!("the chain recorded no post-burn-in draws");
        }
        Ok(match self {
            Self::Acceptance => {
                let accepted = chain.accepted.iter().filter(|&&a| a).count();
                vec![("accept".into(), accepted as f64 / chain.len() as f64)]
            }
            Self::MeanNorm => {
                let mut exact = vec![0.0; d];
                target.target().exact_mean(&mut exact)?;
                let dist = chain
                    .mean()
                    .iter()
                    .zip(&exact)
                    .map(|(m, e)| (m - e).powi(2))
                    .sum::<f64>()
                    .sqrt();
                vec![("mean_norm".into(), dist)]
            }
            Self::QuantileErrors => {
                let Some(regions) = target.regions() else {
                    bail!("the target has no exact quantile regions");
                };
                let statistic: Vec<f64> = chain
                    .samples
                    .chunks_exact(d)
                    .map(|x| regions.region_statistic(x))
                    .collect();
                let thresholds = QUANTILE_LEVELS
                    .iter()
                    .map(|&q| regions.region_threshold(q))
                    .collect::<Result<Vec<_>, _>>()?;
                let errors = quantile_coverage_errors(&statistic, &thresholds, &QUANTILE_LEVELS)?;
                let avg = errors.iter().sum::<f64>() / errors.len() as f64;
                let mut out: Vec<(String, f64)> = QUANTILE_LEVELS
                    .iter()
                    .zip(errors)
                    .map(|(q, e)| (quantile_metric_name(*q), e))
                    .collect();
                out.push(("q_avg".into(), avg));
                out
            }
            Self::MinEss => {
                let ess = ess_geyer_per_dim(&chain.samples, d)?;
                let min = ess.iter().copied().fold(f64::INFINITY, f64::min);
                vec![
                    ("ess_min".into(), min),
                    ("ess_min_per_s".into(), min / chain.wall_time_secs.max(1e-9)),
                ]
            }
            Self::EssFirstTwo => {
                if d < 2 {
                    bail!("ess_12 needs at least two dimensions");
                }
                let ess = ess_geyer_per_dim(&chain.samples, d)?;
                let mean = 0.5 * (ess[0] + ess[1]);
                vec![
                    ("ess_12".into(), mean),
                    ("ess_12_per_s".into(), mean / chain.wall_time_secs.max(1e-9)),
                ]
            }
        })
    }
}

/// The metric name of the coverage error at level `q`, e.g. `q0.3`.
pub fn quantile_metric_name(q: f64) -> String {
    format!("q{q}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kameleon_samplers::{AdaptationSummary, RunConfig};

    fn chain_from(samples: Vec<f64>, dim: usize, accepted: Vec<bool>) -> Chain {
        let n = accepted.len();
        Chain {
            dim,
            samples,
            accepted,
            log_densities: vec![0.0; n],
            wall_time_secs: 2.0,
            adaptation: AdaptationSummary::default(),
            seed: 0,
            chain_index: 0,
            config: RunConfig::new(0, n as u64),
            accepted_total: 0,
            rejected_non_finite: 0,
            covariance_jitters: 0,
        }
    }

    /// Metrics against hand computations on a tiny 2-d banana chain.
    #[test]
    fn metrics_match_direct_computations() {
        let spec = TargetSpec::Banana {
            dim: 2,
            b: 0.1,
            v: 1.0,
        };
        let target = spec.build().unwrap();
        let BuiltTarget::Banana(banana) = &target else {
            unreachable!()
        };
        // Four draws: mean (0.5, 1.0) → norm √1.25.
        let samples = vec![0.0, 0.0, 1.0, 2.0, 0.0, 2.0, 1.0, 0.0];
        let chain = chain_from(samples.clone(), 2, vec![true, false, true, true]);
        let acc = Metric::Acceptance.compute(&chain, &target).unwrap();
        assert_eq!(acc, vec![("accept".to_string(), 0.75)]);
        let norm = Metric::MeanNorm.compute(&chain, &target).unwrap();
        assert!((norm[0].1 - 1.25f64.sqrt()).abs() < 1e-15);
        let q = Metric::QuantileErrors.compute(&chain, &target).unwrap();
        assert_eq!(q.len(), 10);
        let mut sum = 0.0;
        for (level, (name, err)) in QUANTILE_LEVELS.iter().zip(&q) {
            let inside = samples
                .chunks_exact(2)
                .filter(|x| banana.in_region(x, *level).unwrap())
                .count() as f64;
            assert_eq!(name, &quantile_metric_name(*level));
            assert!((err - (inside / 4.0 - level).abs()).abs() < 1e-15);
            sum += err;
        }
        assert!((q[9].1 - sum / 9.0).abs() < 1e-15);
    }

    #[test]
    fn min_ess_is_the_smallest_dimension_and_scaled_by_time() {
        let target = TargetSpec::Banana {
            dim: 2,
            b: 0.03,
            v: 100.0,
        }
        .build()
        .unwrap();
        // Dimension 0 alternates (antithetic, large ESS); dimension 1 is a
        // slow ramp (tiny ESS), so the minimum is dimension 1's Geyer ESS.
        let n = 200;
        let mut samples = Vec::with_capacity(2 * n);
        for t in 0..n {
            samples.push(if t % 2 == 0 { 1.0 } else { -1.0 });
            samples.push(t as f64);
        }
        let chain = chain_from(samples.clone(), 2, vec![true; n]);
        let out = Metric::MinEss.compute(&chain, &target).unwrap();
        let per_dim = ess_geyer_per_dim(&samples, 2).unwrap();
        assert_eq!(out[0].1, per_dim[0].min(per_dim[1]));
        assert_eq!(out[1].1, out[0].1 / 2.0);
        let two = Metric::EssFirstTwo.compute(&chain, &target).unwrap();
        assert_eq!(two[0].1, 0.5 * (per_dim[0] + per_dim[1]));
        assert_eq!(two[1].1, two[0].1 / 2.0);
    }

    /// The median distance against a brute-force sort, on a target whose
    /// draws we can reproduce.
    #[test]
    fn median_distance_matches_a_sorted_brute_force() {
        let target = TargetSpec::Banana {
            dim: 3,
            b: 0.1,
            v: 4.0,
        }
        .build()
        .unwrap();
        let t = target.target();
        let n = 41;
        let got = median_distance_of_draws(t, 5, n).unwrap();
        let mut rng = chain_rng(5 ^ 0x003E_D1A4_u64, 0);
        let draws: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                let mut x = vec![0.0; 3];
                t.sample_iid(&mut rng, &mut x).unwrap();
                x
            })
            .collect();
        let mut all = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                let s: f64 = (0..3).map(|k| (draws[i][k] - draws[j][k]).powi(2)).sum();
                all.push(s.sqrt());
            }
        }
        all.sort_by(f64::total_cmp);
        // 820 distances: the upper median, index 410.
        assert_eq!(got, all[all.len() / 2]);
    }

    #[test]
    fn empty_chains_and_pending_samplers_are_errors() {
        let target = TargetSpec::Banana {
            dim: 2,
            b: 0.03,
            v: 100.0,
        }
        .build()
        .unwrap();
        let chain = chain_from(vec![], 2, vec![]);
        assert!(Metric::Acceptance.compute(&chain, &target).is_err());
        let pending = [
            SamplerSpec::AmFs,
            SamplerSpec::AmLs,
            SamplerSpec::KamhOracle { n: 10 },
            SamplerSpec::KmcFinite {
                m: 10,
                step_size: (0.1, 0.2),
                steps: (1, 2),
            },
        ];
        for s in pending.into_iter().filter(|s| s.pending().is_some()) {
            let r = s.run(
                target.target(),
                &[0.0, 0.0],
                RunConfig::new(1, 1),
                0,
                0,
                &|_| {},
            );
            assert!(r.is_err());
        }
    }
}
