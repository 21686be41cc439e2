//! The per-chain metrics ([`Metric`]) computed on the post-burn-in draws.

use super::*;
use crate::summary::Curve;
use anyhow::{Result, bail};
use kameleon_diagnostics::{
    MmdEstimator, PolynomialKernel, ReferenceHistogram, autocorrelation, column, ess_geyer_per_dim,
    ess_multi_chain, mmd2_polynomial, per_dimension, quantile_coverage_errors,
};
use kameleon_samplers::{Chain, chain_rng};

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
    /// `ess_min_after_warmup`: the smallest per-dimension ESS, as
    /// [`Metric::MinEss`], of the draws after a warm-up of ⌊n · `warmup` /
    /// `of`⌋ of the n recorded draws (an ensemble's: rounded up to whole
    /// sweeps), so that the same fraction is left out at every size.
    MinEssAfter {
        /// Draws left out …
        warmup: usize,
        /// … in every `of` recorded draws (at least 1).
        of: usize,
    },
    /// `ess_12`: the mean Geyer ESS of the first two dimensions (the F-KAMH
    /// thesis' measure), and `ess_12_per_s` per second of sampling.
    EssFirstTwo,
    /// Against the target's reference sample, on the recorded chain thinned
    /// by `thin` (every `thin`-th draw): the curves `mmd2` (squared MMD,
    /// polynomial kernel (1 + ⟨x, y⟩)³ of the papers' text) and `mean_norm`
    /// (‖mean − reference mean‖) on `checkpoints` evenly spaced prefixes,
    /// x = recorded iterations; and the scalar `mmd2` of the whole chain.
    BenchmarkTrace {
        /// Number of prefixes.
        checkpoints: usize,
        /// Thinning before the MMD.
        thin: usize,
        /// Unbiased (KAMH's code) or biased (KMC's code) MMD².
        estimator: MmdEstimator,
    },
    /// The curve `acf`: the autocorrelation at lags 0…`max_lag`, averaged
    /// over dimensions (a dimension that never moved counts as 1).
    Autocorrelation {
        /// The largest lag.
        max_lag: usize,
    },
    /// The marginal of coordinate `dim` (0-based; named θ_{dim+1}) against
    /// the reference sample: the curve `theta{k}_density` (a histogram with
    /// `bins` bins over the reference's range), the scalars `theta{k}_mean`
    /// and `theta{k}_ks` (Kolmogorov–Smirnov distance to the reference's
    /// marginal).
    Marginal {
        /// The coordinate.
        dim: usize,
        /// Histogram bins.
        bins: usize,
    },
    // ── Curve metrics of the cKAM experiments (need the run's timeline) ──
    /// The symmetric KL (Jeffreys divergence J) of the draws from the target
    /// on exact reference histograms ([`BuiltTarget::kl_reference`]),
    /// averaged over the histograms: the curves `kl` (J of the first n
    /// draws), `kl_floor` (the same J for n exact iid draws, mean over
    /// [`KL_FLOOR_REPLICATES`] sets) and `seconds` (wall time since the
    /// chain's start when it had n draws) at the [`checkpoints`] n, and the
    /// scalars `kl`, `kl_floor`, `kl_p_q` (KL(p‖q̂), the part charged for
    /// missed mass) of all draws.
    SymmetricKl,
    /// The curves `marginal_x1` (histogram density of the first coordinate
    /// on [`MARGINAL_BINS`] bins over the KL box) and `marginal_x1_exact`
    /// (the exact bin mass over the bin width), at the bin centres.
    MarginalFirst,
    /// `mass_x1_pos`: the fraction of draws with a positive first coordinate,
    /// and `mass_x1_pos_err`, its distance to the exact mass.
    PositiveMass,
}

/// Independent exact iid sample sets behind each point of the `kl_floor` curve.
pub const KL_FLOOR_REPLICATES: usize = 8;

/// Bins of the first-coordinate marginal histograms.
pub const MARGINAL_BINS: usize = 80;

/// What a metric family computes on one chain: scalars and curves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// (name, value) pairs.
    pub scalars: Vec<(String, f64)>,
    /// (name, curve) pairs.
    pub curves: Vec<(String, Curve)>,
}

impl Metric {
    /// Computes this metric family on a timed chain; `seed` is the cell's
    /// seed (the iid floor's draws come from a stream of it, the same for
    /// every chain of the cell).
    pub fn evaluate(
        &self,
        run: &TimedChain,
        target: &BuiltTarget,
        seed: u64,
    ) -> Result<Evaluation> {
        let chain = &run.chain;
        if chain.is_empty() {
            bail!("the chain recorded no post-burn-in draws");
        }
        match self {
            Self::SymmetricKl => symmetric_kl(run, target, seed),
            Self::MarginalFirst => marginal_first(chain, target),
            Self::MinEss | Self::MinEssAfter { .. } | Self::EssFirstTwo => Ok(Evaluation {
                scalars: self.ess(chain, run.walkers)?,
                curves: Vec::new(),
            }),
            _ => Ok(Evaluation {
                scalars: self.compute(chain, target)?,
                curves: self.compute_curves(chain, target)?,
            }),
        }
    }

    /// Computes a scalar metric family on a chain, as (name, value) pairs
    /// (curve metrics need [`Metric::evaluate`]).
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
                if target.target().exact_mean(&mut exact).is_err() {
                    exact.copy_from_slice(&target.require_reference()?.mean);
                }
                vec![("mean_norm".into(), distance(&chain.mean(), &exact))]
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
            Self::MinEss | Self::MinEssAfter { .. } | Self::EssFirstTwo => self.ess(chain, 1)?,
            Self::BenchmarkTrace {
                thin, estimator, ..
            } => {
                let reference = target.require_reference()?;
                let thinned = thinned_rows(&chain.samples, d, *thin);
                let kernel = PolynomialKernel::paper();
                let mmd = mmd2_polynomial(&thinned, &reference.samples, d, &kernel, *estimator)?;
                vec![("mmd2".into(), mmd)]
            }
            Self::Autocorrelation { .. } => Vec::new(),
            Self::Marginal { dim, .. } => {
                let reference = target.require_reference()?;
                let ours = column(&chain.samples, d, *dim)?;
                let theirs = column(&reference.samples, d, *dim)?;
                let mean = ours.iter().sum::<f64>() / ours.len() as f64;
                let k = dim + 1;
                vec![
                    (format!("theta{k}_mean"), mean),
                    (format!("theta{k}_ks"), ks_distance(&ours, &theirs)),
                ]
            }
            Self::PositiveMass => {
                let Some(cdf) = target.marginal_cdf(0) else {
                    bail!("mass_x1_pos needs the exact marginal of the first coordinate");
                };
                let positive = chain.samples.chunks_exact(d).filter(|x| x[0] > 0.0).count();
                let fraction = positive as f64 / chain.len() as f64;
                vec![
                    ("mass_x1_pos".into(), fraction),
                    (
                        "mass_x1_pos_err".into(),
                        (fraction - (1.0 - cdf(0.0))).abs(),
                    ),
                ]
            }
            Self::SymmetricKl | Self::MarginalFirst => {
                bail!("{self:?} is a curve metric: use Metric::evaluate")
            }
        })
    }

    /// The name of this family's value that is a function of the recorded
    /// draws alone (`ess_min`, `ess_min_after_warmup`, `ess_12`), if it has
    /// one: [`Metric::on_draws`] computes it from a stored chain. Its other
    /// values, if any, depend on the clock.
    pub fn draw_statistic(&self) -> Option<&'static str> {
        match self {
            Self::MinEss => Some("ess_min"),
            Self::MinEssAfter { .. } => Some("ess_min_after_warmup"),
            Self::EssFirstTwo => Some("ess_12"),
            _ => None,
        }
    }

    /// The ESS metrics ([`Metric::MinEss`], [`Metric::MinEssAfter`],
    /// [`Metric::EssFirstTwo`]) of a chain: the value of
    /// [`Metric::draw_statistic`] and, for `ess_min` and `ess_12`, that value
    /// per second of sampling (`<name>_per_s`).
    fn ess(&self, chain: &Chain, walkers: usize) -> Result<Vec<(String, f64)>> {
        let Some(name) = self.draw_statistic() else {
            bail!("{self:?} is not an ESS metric");
        };
        let value = self.on_draws(&chain.samples, chain.dim, walkers)?;
        let mut out = vec![(name.to_string(), value)];
        if !matches!(self, Self::MinEssAfter { .. }) {
            out.push((
                format!("{name}_per_s"),
                value / chain.wall_time_secs.max(1e-9),
            ));
        }
        Ok(out)
    }

    /// The value named by [`Metric::draw_statistic`] of the recorded draws
    /// `samples` (n × `d`, row-major) of a Markov chain (`walkers` = 1:
    /// Geyer's ESS per dimension) or of an ensemble's pooled chain
    /// (`walkers` = W: the multi-chain ESS with the walkers as chains, which
    /// counts their correlation over sweeps; Geyer's on the interleaved
    /// sequence would take neighbouring walkers for independent draws). An
    /// error for a family without such a value.
    pub fn on_draws(&self, samples: &[f64], d: usize, walkers: usize) -> Result<f64> {
        if d == 0 || samples.is_empty() || !samples.len().is_multiple_of(d) {
            bail!(
                "{} numbers are no chain of whole draws of dimension {d}",
                samples.len()
            );
        }
        let n = samples.len() / d;
        let walkers = walkers.max(1);
        // the warm-up in whole sweeps (of one draw for a Markov chain)
        let skip = match self {
            Self::MinEssAfter { warmup, of } => {
                (n * warmup / of.max(&1)).div_ceil(walkers) * walkers
            }
            Self::MinEss | Self::EssFirstTwo => 0,
            _ => bail!("{self:?} is not a function of the draws alone"),
        };
        if n <= skip {
            bail!("the chain has {n} draws: none left after a warm-up of {skip}");
        }
        let samples = &samples[skip * d..];
        let ess = if walkers == 1 {
            ess_geyer_per_dim(samples, d)?
        } else {
            // whole sweeps only: the walkers' chains must have equal lengths
            let whole = (n - skip) / walkers * walkers;
            let split = split_walkers(&samples[..whole * d], d, walkers);
            let views: Vec<&[f64]> = split.iter().map(Vec::as_slice).collect();
            per_dimension(&views, d, ess_multi_chain)?
        };
        Ok(match self {
            Self::EssFirstTwo => {
                if d < 2 {
                    bail!("ess_12 needs at least two dimensions");
                }
                0.5 * (ess[0] + ess[1])
            }
            _ => ess.iter().copied().fold(f64::INFINITY, f64::min),
        })
    }

    /// Computes this metric family's curves on a chain (empty for scalar
    /// metrics), as (name, curve) pairs.
    pub fn compute_curves(
        &self,
        chain: &Chain,
        target: &BuiltTarget,
    ) -> Result<Vec<(String, Curve)>> {
        let d = chain.dim;
        if chain.is_empty() {
            bail!("the chain recorded no post-burn-in draws");
        }
        Ok(match self {
            Self::Acceptance
            | Self::MeanNorm
            | Self::QuantileErrors
            | Self::MinEss
            | Self::MinEssAfter { .. }
            | Self::EssFirstTwo
            | Self::PositiveMass => Vec::new(),
            Self::SymmetricKl | Self::MarginalFirst => {
                bail!("{self:?} needs the run's timeline: use Metric::evaluate")
            }
            Self::BenchmarkTrace {
                checkpoints,
                thin,
                estimator,
            } => {
                let reference = target.require_reference()?;
                let thinned = thinned_rows(&chain.samples, d, *thin);
                let rows = thinned.len() / d;
                let kernel = PolynomialKernel::paper();
                let mut mmd = Curve::default();
                let mut norm = Curve::default();
                for c in 1..=*checkpoints {
                    let prefix = (c * rows).div_ceil(*checkpoints).clamp(2.min(rows), rows);
                    let part = &thinned[..prefix * d];
                    let x = (prefix * thin) as f64;
                    let value = mmd2_polynomial(part, &reference.samples, d, &kernel, *estimator)?;
                    mmd.push(x, value);
                    norm.push(x, distance(&row_mean(part, d), &reference.mean));
                }
                vec![("mmd2".into(), mmd), ("mean_norm".into(), norm)]
            }
            Self::Autocorrelation { max_lag } => {
                let lags = (*max_lag).min(chain.len().saturating_sub(1));
                let mut acf = vec![0.0; lags + 1];
                for j in 0..d {
                    let x = column(&chain.samples, d, j)?;
                    match autocorrelation(&x, lags) {
                        Ok(rho) => acf.iter_mut().zip(rho).for_each(|(a, r)| *a += r),
                        // A coordinate that never moved is perfectly correlated.
                        Err(_) => acf.iter_mut().for_each(|a| *a += 1.0),
                    }
                }
                let mut curve = Curve::default();
                for (lag, a) in acf.into_iter().enumerate() {
                    curve.push(lag as f64, a / d as f64);
                }
                vec![("acf".into(), curve)]
            }
            Self::Marginal { dim, bins } => {
                let reference = target.require_reference()?;
                let ours = column(&chain.samples, d, *dim)?;
                let (lo, hi) = reference.range(*dim)?;
                let curve = histogram_density(&ours, lo, hi, *bins);
                vec![(format!("theta{}_density", dim + 1), curve)]
            }
        })
    }
}

/// Euclidean distance.
pub fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// The mean of the rows of a row-major n × d sample.
pub fn row_mean(samples: &[f64], d: usize) -> Vec<f64> {
    let mut mean = vec![0.0; d];
    let n = samples.len() / d;
    for x in samples.chunks_exact(d) {
        mean.iter_mut().zip(x).for_each(|(m, v)| *m += v);
    }
    mean.iter_mut().for_each(|m| *m /= n.max(1) as f64);
    mean
}

/// Rows thin−1, 2·thin−1, … (the last of each block of `thin`), or all rows
/// if the chain is shorter than two blocks.
pub fn thinned_rows(samples: &[f64], d: usize, thin: usize) -> Vec<f64> {
    let rows = samples.len() / d;
    if thin <= 1 || rows < 2 * thin {
        return samples.to_vec();
    }
    samples
        .chunks_exact(d)
        .skip(thin - 1)
        .step_by(thin)
        .flatten()
        .copied()
        .collect()
}

/// The Kolmogorov–Smirnov distance sup_t |F_a(t) − F_b(t)| of two samples'
/// empirical distribution functions.
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut sup) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        // Step past every copy of the smaller value in both samples, so ties
        // are compared after both jumps.
        let t = a[i].min(b[j]);
        while i < a.len() && a[i] <= t {
            i += 1;
        }
        while j < b.len() && b[j] <= t {
            j += 1;
        }
        sup = sup.max((i as f64 / n - j as f64 / m).abs());
    }
    sup
}

/// A histogram of `x` on `bins` equal bins over [lo, hi] as a density
/// (count / (n · width); draws outside the range are counted in n only).
pub fn histogram_density(x: &[f64], lo: f64, hi: f64, bins: usize) -> Curve {
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0usize; bins];
    for &v in x {
        if v >= lo && v <= hi {
            let b = (((v - lo) / width) as usize).min(bins - 1);
            counts[b] += 1;
        }
    }
    let mut curve = Curve::default();
    for (b, c) in counts.into_iter().enumerate() {
        curve.push(
            lo + (b as f64 + 0.5) * width,
            c as f64 / (x.len() as f64 * width),
        );
    }
    curve
}

/// J and KL(p‖q̂) of draws, averaged over the reference histograms.
pub(crate) fn mean_divergence(
    references: &[ReferenceHistogram],
    draws: &[f64],
    d: usize,
) -> Result<(f64, f64)> {
    let (mut j, mut p_q) = (0.0, 0.0);
    for r in references {
        let e = r.divergence(draws, d)?;
        j += e.jeffreys;
        p_q += e.kl_reference_to_sample;
    }
    let m = references.len() as f64;
    Ok((j / m, p_q / m))
}

/// [`Metric::SymmetricKl`].
pub(crate) fn symmetric_kl(
    run: &TimedChain,
    target: &BuiltTarget,
    seed: u64,
) -> Result<Evaluation> {
    let (chain, timeline) = (&run.chain, &run.timeline);
    let d = chain.dim;
    if timeline.draws.last() != Some(&(chain.len() as u64)) {
        bail!("the timeline does not end at the chain's last draw");
    }
    let references = target.kl_reference()?;
    let mut kl = Vec::with_capacity(timeline.draws.len());
    let mut kl_p_q = 0.0;
    for &n in &timeline.draws {
        let (j, p_q) = mean_divergence(&references, &chain.samples[..n as usize * d], d)?;
        kl.push(j);
        kl_p_q = p_q;
    }
    // The floor: nested prefixes of independent exact iid sets, one stream
    // per cell (so every chain of a cell gets the same floor).
    let mut rng = chain_rng(seed ^ 0x0F10_0F10_u64, 0);
    let mut iid = vec![0.0; chain.samples.len()];
    let mut floor = vec![0.0; timeline.draws.len()];
    for _ in 0..KL_FLOOR_REPLICATES {
        for x in iid.chunks_exact_mut(d) {
            target.target().sample_iid(&mut rng, x)?;
        }
        for (f, &n) in floor.iter_mut().zip(&timeline.draws) {
            *f += mean_divergence(&references, &iid[..n as usize * d], d)?.0
                / KL_FLOOR_REPLICATES as f64;
        }
    }
    let x: Vec<f64> = timeline.draws.iter().map(|&n| n as f64).collect();
    let curve = |y: Vec<f64>| Curve { x: x.clone(), y };
    Ok(Evaluation {
        scalars: vec![
            ("kl".into(), *kl.last().expect("non-empty")),
            ("kl_floor".into(), *floor.last().expect("non-empty")),
            ("kl_p_q".into(), kl_p_q),
        ],
        curves: vec![
            ("kl".into(), curve(kl)),
            ("kl_floor".into(), curve(floor)),
            ("seconds".into(), curve(timeline.seconds.clone())),
        ],
    })
}

/// [`Metric::MarginalFirst`].
pub(crate) fn marginal_first(chain: &Chain, target: &BuiltTarget) -> Result<Evaluation> {
    let Some(cdf) = target.marginal_cdf(0) else {
        bail!("the marginal needs the exact CDF of the first coordinate");
    };
    let (lo, hi) = (quantile(&cdf, 1e-6), quantile(&cdf, 1.0 - 1e-6));
    let width = (hi - lo) / MARGINAL_BINS as f64;
    let mut counts = vec![0usize; MARGINAL_BINS];
    for x in chain.samples.chunks_exact(chain.dim) {
        let bin = ((x[0] - lo) / width).floor();
        if bin >= 0.0 && bin < MARGINAL_BINS as f64 {
            counts[bin as usize] += 1;
        }
    }
    let n = chain.len() as f64;
    let edge = |i: usize| lo + i as f64 * width;
    let centres = (0..MARGINAL_BINS)
        .map(|i| edge(i) + 0.5 * width)
        .collect::<Vec<_>>();
    let density = counts.iter().map(|&c| c as f64 / (n * width)).collect();
    let exact = (0..MARGINAL_BINS)
        .map(|i| (cdf(edge(i + 1)) - cdf(edge(i))) / width)
        .collect();
    Ok(Evaluation {
        scalars: Vec::new(),
        curves: vec![
            (
                "marginal_x1".into(),
                Curve {
                    x: centres.clone(),
                    y: density,
                },
            ),
            (
                "marginal_x1_exact".into(),
                Curve {
                    x: centres,
                    y: exact,
                },
            ),
        ],
    })
}

/// The metric name of the coverage error at level `q`, e.g. `q0.3`.
pub fn quantile_metric_name(q: f64) -> String {
    format!("q{q}")
}
