//! Effective sample size and R-hat.
//!
//! Three estimators are provided:
//! - [`ess_geyer`]: Geyer's initial monotone sequence estimator on one chain (the F-KAMH
//!   thesis' ESS, as R's `mcmc::initseq`);
//! - [`ess_multi_chain`]: the multi-chain estimator of Vehtari et al. (2021) on the raw values;
//! - [`ess_bulk`], [`ess_tail`], [`rhat_split`] and [`rhat_rank`]: the rank-normalised split
//!   diagnostics of Vehtari et al. (2021), as reported by Stan and ArviZ.
//!
//! Chains are scalar series `&[f64]`; several chains are `&[&[f64]]` of equal length. For
//! multivariate draws stored row-major (n rows of d values), use [`column`] or
//! [`per_dimension`]. Draws that are all equal have no defined ESS or R-hat and give
//! [`DiagnosticsError::ZeroVariance`]; chains that are each constant but at different points have
//! a small ESS and an infinite R-hat.

use crate::autocov::autocovariance;
use crate::error::{DiagnosticsError, Result, check_finite, rows};
use crate::normal::normal_quantile;
use crate::quantile::quantile_unsorted;
use crate::scale::{far_exponent, scaled};

/// Minimum draws per chain accepted by the ESS and R-hat functions.
pub const MIN_DRAWS: usize = 4;

fn check_len(n: usize, what: &'static str) -> Result<()> {
    if n < MIN_DRAWS {
        return Err(DiagnosticsError::TooFewDraws {
            what,
            needed: MIN_DRAWS,
            got: n,
        });
    }
    Ok(())
}

/// Validates a set of chains: non-empty, equal lengths ≥ [`MIN_DRAWS`], finite. Returns the
/// common length.
fn check_chains(chains: &[&[f64]], what: &'static str) -> Result<usize> {
    let first = chains.first().ok_or(DiagnosticsError::Empty(what))?;
    let n = first.len();
    if chains.iter().any(|c| c.len() != n) {
        return Err(DiagnosticsError::DimensionMismatch(format!(
            "{what}: chains must have equal lengths"
        )));
    }
    check_len(n, what)?;
    for c in chains {
        check_finite(c, what)?;
    }
    Ok(n)
}

/// Single-chain ESS by Geyer's initial monotone sequence estimator.
///
/// With autocovariances γ̂_k (divisor n) and pair sums Γ̂_m = γ̂_{2m} + γ̂_{2m+1}, the pairs are
/// kept up to (excluding) the first Γ̂_m ≤ 0, made non-increasing by a running minimum, and
/// σ̂² = −γ̂₀ + 2 Σ Γ̂_m; then τ̂ = σ̂²/γ̂₀ and ESS = n/τ̂. For antithetic chains the ESS can
/// exceed n; τ̂ is capped below at 1/log₁₀(n) (ESS ≤ n·log₁₀ n), which also covers a truncated
/// σ̂² ≤ 0 of an almost perfectly alternating series.
/// Needs at least [`MIN_DRAWS`] finite draws with positive variance.
pub fn ess_geyer(x: &[f64]) -> Result<f64> {
    check_len(x.len(), "ess_geyer")?;
    check_finite(x, "ess_geyer")?;
    if let Some(unit) = rescaled(&[x]) {
        return ess_geyer(&unit[0]);
    }
    let n = x.len();
    let acov = autocovariance(x)?;
    let g0 = acov[0];
    if g0 <= 0.0 {
        return Err(DiagnosticsError::ZeroVariance("ess_geyer"));
    }
    let mut sum = 0.0;
    let mut prev = f64::INFINITY;
    for pair in acov.chunks_exact(2) {
        let gamma = pair[0] + pair[1];
        if gamma <= 0.0 {
            break;
        }
        let gamma = gamma.min(prev);
        sum += gamma;
        prev = gamma;
    }
    // For strongly antithetic chains the truncated estimate of σ² can be ≤ 0; cap τ̂ below at
    // 1/log₁₀(n) like the multi-chain estimator, so ESS ≤ n·log₁₀(n).
    let tau = ((-g0 + 2.0 * sum) / g0).max(1.0 / (n as f64).log10());
    Ok(n as f64 / tau)
}

/// Multi-chain ESS of Vehtari et al. (2021) on the given chains as they are (no splitting,
/// no rank normalisation; see [`ess_bulk`] for the recommended diagnostic).
///
/// Uses the within-chain and pooled variances to form ρ̂₀ = 1 and
/// ρ̂_t = 1 − (W − mean_m γ̂_{m,t})/var⁺ for t ≥ 1, then Geyer's initial positive sequence on
/// the pairs (ρ̂_{2k}, ρ̂_{2k+1}): the next pair (ρ̂_{2k+2}, ρ̂_{2k+3}) is formed while the sum of
/// pair k is positive and 2k + 3 < N − 1, every pair but the last formed is summed in full, and of
/// the last, pair K, only ρ̂_{2K} counts (if the pair sum is ≥ 0 or ρ̂_{2K} > 0). The full pairs are made
/// monotone by a running minimum, and ESS = M·N / max(τ̂, 1/log₁₀(M·N)) with
/// τ̂ = −1 + 2·Σ pairs + ρ̂_{2K} (the cap bounds antithetic chains). This is the sum Stan and
/// ArviZ compute, step for step. All chains must have the same length N ≥ [`MIN_DRAWS`]; chains
/// that are each constant but differ from each other give a small ESS, all draws equal give
/// [`DiagnosticsError::ZeroVariance`].
pub fn ess_multi_chain(chains: &[&[f64]]) -> Result<f64> {
    check_chains(chains, "ess_multi_chain")?;
    match rescaled(chains) {
        Some(unit) => vehtari_ess(&as_slices(&unit), "ess_multi_chain"),
        None => vehtari_ess(chains, "ess_multi_chain"),
    }
}

/// The chains times a power of two that brings their largest magnitude to [1, 2), when it lies
/// outside 2^±64 ([`far_exponent`]): beyond that the squares and products of draws that the
/// autocovariances and variances sum can overflow (a wrong ESS) or underflow (a false zero
/// variance). `None` otherwise, and for draws that are all 0. ESS and R̂ do not depend on the
/// scale, and a power of two scales exactly.
fn rescaled(chains: &[&[f64]]) -> Option<Vec<Vec<f64>>> {
    let e = far_exponent(chains)?;
    Some(chains.iter().map(|c| scaled(c, -e)).collect())
}

/// [`ess_multi_chain`] on chains already checked to be finite, non-empty and of one length
/// (split halves may hold as few as two draws).
fn vehtari_ess(chains: &[&[f64]], what: &'static str) -> Result<f64> {
    let n = chains[0].len();
    let m = chains.len();
    let nf = n as f64;
    let mut acov_mean = vec![0.0; n];
    let mut means = Vec::with_capacity(m);
    for c in chains {
        let acov = autocovariance(c)?;
        for (a, v) in acov_mean.iter_mut().zip(&acov) {
            *a += v / m as f64;
        }
        means.push(c.iter().sum::<f64>() / nf);
    }
    let w = acov_mean[0] * nf / (nf - 1.0);
    let between = if m > 1 { sample_variance(&means) } else { 0.0 };
    let var_plus = w * (nf - 1.0) / nf + between;
    if var_plus <= 0.0 {
        return Err(DiagnosticsError::ZeroVariance(what));
    }
    let rho = |t: usize| 1.0 - (w - acov_mean[t]) / var_plus;
    // (even, odd) is the last pair formed; pair 0 is (1, ρ̂₁).
    let (mut even, mut odd) = (1.0, rho(1));
    let mut k = 0;
    let mut sum = 0.0;
    let mut prev = f64::INFINITY;
    while 2 * k + 4 < n && even + odd > 0.0 {
        let pair = (even + odd).min(prev);
        sum += pair;
        prev = pair;
        k += 1;
        (even, odd) = (rho(2 * k), rho(2 * k + 1));
    }
    let last = if even + odd >= 0.0 {
        even
    } else {
        even.max(0.0)
    };
    let total = (m * n) as f64;
    let tau = (-1.0 + 2.0 * sum + last).max(1.0 / total.log10());
    Ok(total / tau)
}

/// Unbiased sample variance (divisor len − 1); 0 for fewer than two values. The values are
/// shifted by the first one before averaging, so a constant series has variance exactly 0
/// (not the square of a rounding error of its mean).
fn sample_variance(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let shift = x[0];
    let mean = x.iter().map(|v| v - shift).sum::<f64>() / x.len() as f64;
    x.iter().map(|v| (v - shift - mean).powi(2)).sum::<f64>() / (x.len() - 1) as f64
}

/// Splits each chain of length n into its first ⌊n/2⌋ and last ⌊n/2⌋ draws (the middle draw of
/// an odd-length chain is dropped), turning M chains into 2M.
pub fn split_chains(chains: &[&[f64]]) -> Result<Vec<Vec<f64>>> {
    split_checked(chains, "split_chains")
}

/// [`split_chains`] with errors naming the diagnostic `what`.
fn split_checked(chains: &[&[f64]], what: &'static str) -> Result<Vec<Vec<f64>>> {
    let n = check_chains(chains, what)?;
    let half = n / 2;
    Ok(chains
        .iter()
        .flat_map(|c| [c[..half].to_vec(), c[n - half..].to_vec()])
        .collect())
}

/// Rank-normalises pooled draws: each value is replaced by Φ⁻¹((r − 3/8)/(S + 1/4)) where r is
/// its 1-based rank among all S draws of all chains (ties get their average rank, Blom's offset).
/// The chain structure is preserved.
pub fn rank_normalize(chains: &[&[f64]]) -> Result<Vec<Vec<f64>>> {
    let pooled: Vec<f64> = chains.iter().flat_map(|c| c.iter().copied()).collect();
    if pooled.is_empty() {
        return Err(DiagnosticsError::Empty("rank_normalize"));
    }
    check_finite(&pooled, "rank_normalize")?;
    let s = pooled.len();
    // (value, position) pairs sorted by value: equal values end up next to
    // each other in some order, and share one average rank whatever it is
    let mut order: Vec<(f64, usize)> = pooled.iter().copied().zip(0..).collect();
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut z = vec![0.0; s];
    BLOM_SCORES.with(|cache| -> Result<()> {
        let mut cache = cache.borrow_mut();
        let scores = cache.scores(s);
        let mut i = 0;
        while i < s {
            let mut j = i;
            while j + 1 < s && order[j + 1].0 == order[i].0 {
                j += 1;
            }
            // 1-based ranks i+1 … j+1 share their average.
            let value = if (i + j) % 2 == 0 {
                scores.of_rank((i + j) / 2 + 1)?
            } else {
                blom_score((i + j) as f64 / 2.0 + 1.0, s)?
            };
            for &(_, k) in &order[i..=j] {
                z[k] = value;
            }
            i = j + 1;
        }
        Ok(())
    })?;
    let mut out = Vec::with_capacity(chains.len());
    let mut offset = 0;
    for c in chains {
        out.push(z[offset..offset + c.len()].to_vec());
        offset += c.len();
    }
    Ok(out)
}

/// Φ⁻¹((r − 3/8)/(S + 1/4)), the normal score of rank r among S draws.
fn blom_score(rank: f64, s: usize) -> Result<f64> {
    normal_quantile((rank - 0.375) / (s as f64 + 0.25))
}

/// The normal scores of the integer ranks 1…S for one S, each computed when
/// first asked for.
struct BlomScores {
    s: usize,
    /// Score of rank r at r − 1; NaN until computed.
    scores: Vec<f64>,
}

impl BlomScores {
    fn of_rank(&mut self, rank: usize) -> Result<f64> {
        let cached = self.scores[rank - 1];
        if !cached.is_nan() {
            return Ok(cached);
        }
        let score = blom_score(rank as f64, self.s)?;
        self.scores[rank - 1] = score;
        Ok(score)
    }
}

/// The scores of the last few draw counts S: a run's diagnostics rank the
/// same S draws again and again (bulk ESS, both R-hats, every parameter),
/// and each score costs an inverse normal CDF.
#[derive(Default)]
struct BlomCache {
    /// Most recently used last.
    tables: Vec<BlomScores>,
}

impl BlomCache {
    /// How many draw counts are kept (a run's pooled and per-chain counts).
    const SIZES: usize = 4;

    fn scores(&mut self, s: usize) -> &mut BlomScores {
        let table = match self.tables.iter().position(|t| t.s == s) {
            Some(at) => self.tables.remove(at),
            None => {
                if self.tables.len() == Self::SIZES {
                    self.tables.remove(0);
                }
                BlomScores {
                    s,
                    scores: vec![f64::NAN; s],
                }
            }
        };
        self.tables.push(table);
        self.tables.last_mut().expect("just pushed")
    }
}

thread_local! {
    static BLOM_SCORES: std::cell::RefCell<BlomCache> = std::cell::RefCell::new(BlomCache::default());
}

fn as_slices(chains: &[Vec<f64>]) -> Vec<&[f64]> {
    chains.iter().map(Vec::as_slice).collect()
}

/// Bulk ESS of Vehtari et al. (2021): [`ess_multi_chain`] of the rank-normalised split chains.
/// One chain is allowed (it is split into two); each chain needs [`MIN_DRAWS`] draws (its halves
/// may have two). Below about ten draws per half-chain the autocorrelation sum has hardly a pair
/// to work with and the result is mostly the cap M·N·log₁₀(M·N) of [`ess_multi_chain`].
pub fn ess_bulk(chains: &[&[f64]]) -> Result<f64> {
    let z = rank_normalize(&as_slices(&split_checked(chains, "ess_bulk")?))?;
    vehtari_ess(&as_slices(&z), "ess_bulk")
}

/// Tail ESS of Vehtari et al. (2021): the smaller of the ESS of the indicators I[x ≤ q̂₀.₀₅] and
/// I[x ≤ q̂₀.₉₅] on the split chains, q̂ being the empirical quantiles (R type 7) of all draws
/// given (with the middle draw of odd-length chains, as ArviZ). An indicator that is the same
/// for every draw (q̂₀.₉₅ equal to the largest draw, as for discrete draws with more than 5 % of
/// them at their maximum) carries no tail information and counts as all S split draws, as in
/// ArviZ. Errors as [`ess_bulk`], and on draws that are all equal.
pub fn ess_tail(chains: &[&[f64]]) -> Result<f64> {
    let split = split_checked(chains, "ess_tail")?;
    let mut pooled: Vec<f64> = chains.iter().flat_map(|c| c.iter().copied()).collect();
    if pooled.iter().all(|&v| v == pooled[0]) {
        return Err(DiagnosticsError::ZeroVariance("ess_tail"));
    }
    let draws = split.iter().map(Vec::len).sum::<usize>() as f64;
    let mut worst = f64::INFINITY;
    for prob in [0.05, 0.95] {
        let q = quantile_unsorted(&mut pooled, prob)?;
        let ind: Vec<Vec<f64>> = split
            .iter()
            .map(|c| c.iter().map(|&v| if v <= q { 1.0 } else { 0.0 }).collect())
            .collect();
        let constant = ind.iter().flatten().all(|&v| v == ind[0][0]);
        let ess = if constant {
            draws
        } else {
            vehtari_ess(&as_slices(&ind), "ess_tail")?
        };
        worst = worst.min(ess);
    }
    Ok(worst)
}

/// Potential scale reduction of chains already checked to be finite and of one length (at least
/// two chains of at least two draws, as split chains are):
/// R̂ = √(((N−1)/N·W + B/N)/W) with B/N the variance of the chain means (divisor M − 1) and W the
/// mean within-chain variance (divisor N − 1). Chains that are each constant but not all at one
/// point (W = 0 < B) give +∞; all draws equal give [`DiagnosticsError::ZeroVariance`].
fn rhat_of(chains: &[&[f64]], what: &'static str) -> Result<f64> {
    let nf = chains[0].len() as f64;
    let means: Vec<f64> = chains.iter().map(|c| c.iter().sum::<f64>() / nf).collect();
    let w = chains.iter().map(|c| sample_variance(c)).sum::<f64>() / chains.len() as f64;
    let b_over_n = sample_variance(&means);
    if w <= 0.0 {
        return if b_over_n > 0.0 {
            Ok(f64::INFINITY)
        } else {
            Err(DiagnosticsError::ZeroVariance(what))
        };
    }
    Ok((((nf - 1.0) / nf * w + b_over_n) / w).sqrt())
}

/// Classic split-R̂ on the raw values (Gelman et al. BDA3): chains are split in halves, then
/// R̂ = √(((N′−1)/N′·W + B/N′)/W). One chain is allowed (its halves are compared); each chain
/// needs [`MIN_DRAWS`] draws.
pub fn rhat_split(chains: &[&[f64]]) -> Result<f64> {
    let split = split_checked(chains, "rhat_split")?;
    let halves = as_slices(&split);
    match rescaled(&halves) {
        Some(unit) => rhat_of(&as_slices(&unit), "rhat_split"),
        None => rhat_of(&halves, "rhat_split"),
    }
}

/// Rank-normalised split-R̂ (Vehtari et al. 2021, what Stan reports): the maximum of the split-R̂
/// of the rank-normalised draws (location) and of the rank-normalised folded draws
/// |x − median| (scale). Values above 1.01 indicate non-convergence. Each chain needs
/// [`MIN_DRAWS`] draws. Chains that are each constant but not all at one point give +∞; all
/// draws equal give [`DiagnosticsError::ZeroVariance`].
pub fn rhat_rank(chains: &[&[f64]]) -> Result<f64> {
    let split = split_checked(chains, "rhat_rank")?;
    let z = rank_normalize(&as_slices(&split))?;
    rhat_rank_of(&split, &z)
}

/// [`rhat_rank`] and [`ess_bulk`] of the same chains, which share the rank
/// normalisation of the split chains: each figure is the one its own
/// function gives, bit for bit, with that ranking done once instead of
/// twice. An error of the shared part (too few draws, non-finite ones) is
/// the error of both.
pub fn rhat_rank_and_ess_bulk(chains: &[&[f64]]) -> (Result<f64>, Result<f64>) {
    let shared = split_checked(chains, "rhat_rank_and_ess_bulk").and_then(|split| {
        let z = rank_normalize(&as_slices(&split))?;
        Ok((split, z))
    });
    match shared {
        Ok((split, z)) => (
            rhat_rank_of(&split, &z),
            vehtari_ess(&as_slices(&z), "ess_bulk"),
        ),
        Err(e) => (Err(e.clone()), Err(e)),
    }
}

/// [`rhat_rank`] of the split chains `split`, whose rank normalisation is `z`.
fn rhat_rank_of(split: &[Vec<f64>], z: &[Vec<f64>]) -> Result<f64> {
    let bulk = rhat_of(&as_slices(z), "rhat_rank")?;
    let mut pooled: Vec<f64> = split.iter().flatten().copied().collect();
    let median = quantile_unsorted(&mut pooled, 0.5)?;
    let folded: Vec<Vec<f64>> = split
        .iter()
        .map(|c| c.iter().map(|v| (v - median).abs()).collect())
        .collect();
    // Folded draws that are all equal (two values symmetric about the median, as binary draws
    // split half and half) have no scale to compare: the location R̂ stands alone.
    match rhat_of(
        &as_slices(&rank_normalize(&as_slices(&folded))?),
        "rhat_rank",
    ) {
        Ok(tail) => Ok(bulk.max(tail)),
        Err(DiagnosticsError::ZeroVariance(_)) => Ok(bulk),
        Err(e) => Err(e),
    }
}

/// Column `j` of row-major draws with `d` values per row.
pub fn column(samples: &[f64], d: usize, j: usize) -> Result<Vec<f64>> {
    rows(samples, d, "column")?;
    if j >= d {
        return Err(DiagnosticsError::InvalidArgument(format!(
            "column {j} out of range for d = {d}"
        )));
    }
    Ok(samples.iter().skip(j).step_by(d).copied().collect())
}

/// Applies a scalar multi-chain diagnostic (e.g. [`ess_bulk`], [`rhat_rank`]) to every dimension
/// of row-major chains (each chain n rows × d values, d ≥ 1), returning one value per dimension.
///
/// ```
/// use kameleon_diagnostics::{ess_bulk, per_dimension};
/// let chain: Vec<f64> = (0..400).map(|i| ((i * 7919) % 101) as f64).collect(); // 200 × 2
/// let ess = per_dimension(&[&chain], 2, ess_bulk).unwrap();
/// assert_eq!(ess.len(), 2);
/// ```
pub fn per_dimension<F>(chains: &[&[f64]], d: usize, diagnostic: F) -> Result<Vec<f64>>
where
    F: Fn(&[&[f64]]) -> Result<f64>,
{
    if chains.is_empty() {
        return Err(DiagnosticsError::Empty("per_dimension chains"));
    }
    for c in chains {
        rows(c, d, "per_dimension chains")?;
    }
    (0..d)
        .map(|j| {
            let cols = chains
                .iter()
                .map(|c| column(c, d, j))
                .collect::<Result<Vec<_>>>()?;
            diagnostic(&as_slices(&cols))
        })
        .collect()
}

/// Geyer ESS ([`ess_geyer`]) of every dimension of one row-major chain (n rows × d values).
pub fn ess_geyer_per_dim(samples: &[f64], d: usize) -> Result<Vec<f64>> {
    per_dimension(&[samples], d, |c| ess_geyer(c[0]))
}

/// Minimum and mean of per-dimension ESS values.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EssSummary {
    /// Smallest ESS over dimensions (the usual headline number).
    pub min: f64,
    /// Mean ESS over dimensions.
    pub mean: f64,
}

/// Summarises per-dimension ESS values into their minimum and mean.
pub fn ess_summary(ess: &[f64]) -> Result<EssSummary> {
    if ess.is_empty() {
        return Err(DiagnosticsError::Empty("ess_summary"));
    }
    check_finite(ess, "ess_summary")?;
    Ok(EssSummary {
        min: ess.iter().copied().fold(f64::INFINITY, f64::min),
        mean: ess.iter().sum::<f64>() / ess.len() as f64,
    })
}

/// ESS per second of wall-clock time; `seconds` must be positive and finite.
pub fn ess_per_second(ess: f64, seconds: f64) -> Result<f64> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(DiagnosticsError::InvalidArgument(format!(
            "ess_per_second: seconds = {seconds} must be positive and finite"
        )));
    }
    if !ess.is_finite() {
        return Err(DiagnosticsError::NonFinite("ess_per_second"));
    }
    Ok(ess / seconds)
}
