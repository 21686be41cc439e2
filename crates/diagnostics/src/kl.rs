//! Symmetric KL (Jeffreys) divergence of samples against a reference density on a histogram,
//! with a sound estimator (empirical bin masses against exact ones, with an iid floor).
//!
//! - The reference bin probabilities p_i are **exact bin masses** (CDF differences or rectangle
//!   masses supplied by the caller), never density values at grid points.
//! - Everything outside the box goes to one **overflow bin** with mass 1 − Σ p_i (clamped at 0).
//! - The sample histogram is smoothed with the Krichevsky–Trofimov pseudo-count α = ½
//!   ([`KT_PSEUDO_COUNT`]) in every bin of positive reference mass:
//!   q̂_i = (n_i + α)/(N + α·B₊), B₊ the number of such bins. So both KL directions are finite
//!   and an unvisited mode is charged (unlike skipping empty bins).
//! - Bins of zero reference mass get no pseudo-count; a draw falling there makes KL(q̂‖p), hence
//!   J, infinite (+∞ is returned, which is the correct value: the sample put mass where the
//!   target has none).
//! - Even exact iid sampling gives E J > 0: to first order (B₊ − 1)/N_eff, plus a smoothing
//!   bias of about (α/N)·log(α/(N·p_i)) from every bin with N·p_i ≪ 1 (often the larger part
//!   when the box is generous). Report J beside the **iid floor**
//!   ([`ReferenceHistogram::iid_floor`]) computed on exact draws with the same grid and N:
//!   convergence means reaching the floor, not 0. Choose the number of bins so that
//!   B₊ ≲ N_eff/10.

use crate::error::{DiagnosticsError, Result, check_finite, rows};

/// The Krichevsky–Trofimov pseudo-count added to every bin of positive reference mass.
pub const KT_PSEUDO_COUNT: f64 = 0.5;

/// Tolerance for rounding in reference masses: negative masses above −this are set to 0, and
/// supplied probabilities must sum to 1 within this.
const MASS_TOLERANCE: f64 = 1e-9;

/// The most in-box bins a [`Grid`] may have, per axis and in all: 2²⁴ = 16 777 216. The
/// reference probabilities and the per-bin counts of [`ReferenceHistogram::divergence`] take 8
/// bytes a bin each (128 MiB apiece at the cap), and the advice B₊ ≲ N_eff/10 of the module docs
/// would ask for over 10⁸ effective draws beyond it. Larger grids are refused with an error
/// rather than left to fail allocating.
pub const MAX_BINS: usize = 1 << 24;

/// `bins` equal-width bins on [lo, hi) along one axis.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "AxisFields")]
pub struct Axis {
    lo: f64,
    hi: f64,
    bins: usize,
}

/// The serialised fields of an [`Axis`], checked by [`Axis::new`] when deserialised.
#[derive(serde::Deserialize)]
struct AxisFields {
    lo: f64,
    hi: f64,
    bins: usize,
}

impl TryFrom<AxisFields> for Axis {
    type Error = DiagnosticsError;

    fn try_from(f: AxisFields) -> Result<Self> {
        Self::new(f.lo, f.hi, f.bins)
    }
}

impl Axis {
    /// Creates the axis; errors unless lo < hi with a finite width hi − lo, 1 ≤ bins ≤
    /// [`MAX_BINS`], and every bin wider than the spacing of doubles there (distinct edges).
    pub fn new(lo: f64, hi: f64, bins: usize) -> Result<Self> {
        if !((hi - lo).is_finite() && lo < hi) || bins == 0 || bins > MAX_BINS {
            return Err(DiagnosticsError::InvalidArgument(format!(
                "axis needs lo < hi with a finite width hi - lo and 1 <= bins <= {MAX_BINS}, got [{lo:?}, {hi:?}) with {bins} bins"
            )));
        }
        let axis = Self { lo, hi, bins };
        if (1..=bins).any(|i| axis.edge(i) <= axis.edge(i - 1)) {
            return Err(DiagnosticsError::InvalidArgument(format!(
                "{bins} bins on [{lo:?}, {hi:?}) are narrower than the spacing of doubles there, so some have no width: use fewer bins"
            )));
        }
        Ok(axis)
    }

    /// Number of bins.
    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Edge i of the bins, lo + i·(hi − lo)/bins for i < bins and hi for i = bins.
    fn edge(&self, i: usize) -> f64 {
        if i == self.bins {
            self.hi
        } else {
            self.lo + i as f64 * ((self.hi - self.lo) / self.bins as f64)
        }
    }

    /// Bin edges e_0 = lo, …, e_bins = hi (bins + 1 values, strictly increasing).
    pub fn edges(&self) -> Vec<f64> {
        (0..=self.bins).map(|i| self.edge(i)).collect()
    }

    /// Index of the bin containing v, or `None` outside [lo, hi).
    fn index(&self, v: f64) -> Option<usize> {
        if !(v >= self.lo && v < self.hi) {
            return None;
        }
        let i = ((v - self.lo) / (self.hi - self.lo) * self.bins as f64) as usize;
        Some(i.min(self.bins - 1))
    }
}

/// Which coordinates of a draw are binned and how. Built by [`Grid::marginal`] or
/// [`Grid::joint`], which keep the number of bins within [`MAX_BINS`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "GridFields")]
pub enum Grid {
    /// A 1-d marginal: coordinate `dim` binned along `axis`.
    #[non_exhaustive]
    Marginal {
        /// The bins.
        axis: Axis,
        /// Which coordinate of the draw (0-based).
        dim: usize,
    },
    /// A 2-d joint histogram of coordinates `dims.0` (along `x`) and `dims.1` (along `y`);
    /// bin (i, j) has index i·y.bins + j.
    #[non_exhaustive]
    Joint {
        /// Bins of the first coordinate.
        x: Axis,
        /// Bins of the second coordinate.
        y: Axis,
        /// The two coordinates (0-based).
        dims: (usize, usize),
    },
}

/// The serialised form of a [`Grid`], checked by its constructors when deserialised.
#[derive(serde::Deserialize)]
enum GridFields {
    Marginal {
        axis: Axis,
        dim: usize,
    },
    Joint {
        x: Axis,
        y: Axis,
        dims: (usize, usize),
    },
}

impl TryFrom<GridFields> for Grid {
    type Error = DiagnosticsError;

    fn try_from(f: GridFields) -> Result<Self> {
        match f {
            GridFields::Marginal { axis, dim } => Ok(Self::marginal(axis, dim)),
            GridFields::Joint { x, y, dims } => Self::joint(x, y, dims),
        }
    }
}

impl Grid {
    /// The 1-d marginal of coordinate `dim` along `axis`.
    pub fn marginal(axis: Axis, dim: usize) -> Self {
        Self::Marginal { axis, dim }
    }

    /// The 2-d joint of coordinates `dims` on `x` × `y`; errors when x.bins·y.bins exceeds
    /// [`MAX_BINS`].
    pub fn joint(x: Axis, y: Axis, dims: (usize, usize)) -> Result<Self> {
        match x.bins.checked_mul(y.bins) {
            Some(n) if n <= MAX_BINS => Ok(Self::Joint { x, y, dims }),
            _ => Err(DiagnosticsError::InvalidArgument(format!(
                "a joint grid of {} x {} bins exceeds the {MAX_BINS} bins a grid may have: use fewer bins per axis",
                x.bins, y.bins
            ))),
        }
    }

    /// Number of in-box bins (without the overflow bin), at most [`MAX_BINS`].
    pub fn n_bins(&self) -> usize {
        match self {
            Grid::Marginal { axis, .. } => axis.bins,
            // No overflow: `Grid::joint` checked the product.
            Grid::Joint { x, y, .. } => x.bins * y.bins,
        }
    }

    fn max_dim(&self) -> usize {
        match self {
            Grid::Marginal { dim, .. } => *dim,
            Grid::Joint { dims, .. } => dims.0.max(dims.1),
        }
    }

    /// Bin of a draw, with index `n_bins()` for the overflow bin.
    fn bin_of(&self, row: &[f64]) -> usize {
        let inside = match self {
            Grid::Marginal { axis, dim } => axis.index(row[*dim]),
            Grid::Joint { x, y, dims } => x
                .index(row[dims.0])
                .zip(y.index(row[dims.1]))
                .map(|(i, j)| i * y.bins + j),
        };
        inside.unwrap_or(self.n_bins())
    }
}

/// Divergences between the reference bin probabilities p and the smoothed sample histogram q̂.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KlEstimate {
    /// Jeffreys divergence J = KL(p‖q̂) + KL(q̂‖p) (the "symmetric KL").
    pub jeffreys: f64,
    /// KL(p‖q̂): large when the sample misses reference mass.
    pub kl_reference_to_sample: f64,
    /// KL(q̂‖p): large when the sample puts mass where the reference has little.
    pub kl_sample_to_reference: f64,
}

/// Mean and spread of J over independent exact iid sample sets: the level a perfect sampler
/// reaches with the same number of draws.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IidFloor {
    /// Mean of J over the replicates.
    pub mean: f64,
    /// Standard deviation of J over the replicates (divisor r − 1; 0 for one replicate).
    pub sd: f64,
    /// Number of replicates r.
    pub replicates: usize,
}

/// Exact reference bin probabilities on a [`Grid`], plus the overflow bin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "ReferenceFields")]
pub struct ReferenceHistogram {
    grid: Grid,
    probs: Vec<f64>,
}

/// The serialised fields of a [`ReferenceHistogram`], checked by
/// [`ReferenceHistogram::from_probabilities`] when deserialised.
#[derive(serde::Deserialize)]
struct ReferenceFields {
    grid: Grid,
    probs: Vec<f64>,
}

impl TryFrom<ReferenceFields> for ReferenceHistogram {
    type Error = DiagnosticsError;

    fn try_from(f: ReferenceFields) -> Result<Self> {
        Self::from_probabilities(f.grid, f.probs)
    }
}

/// Clamps rounding-level negative masses to zero; errors on real negatives or non-finite ones.
fn clean_mass(m: f64) -> Result<f64> {
    if !m.is_finite() || m < -MASS_TOLERANCE {
        return Err(DiagnosticsError::InvalidArgument(format!(
            "invalid reference bin mass {m}"
        )));
    }
    Ok(m.max(0.0))
}

impl ReferenceHistogram {
    /// Uses given probabilities: `probs[i]` for in-box bin i (see [`Grid`] for the order) and
    /// `probs[n_bins]` for the overflow bin. They must be ≥ 0 and sum to 1 (within 1e-9).
    pub fn from_probabilities(grid: Grid, probs: Vec<f64>) -> Result<Self> {
        if probs.len() != grid.n_bins() + 1 {
            return Err(DiagnosticsError::DimensionMismatch(format!(
                "{} probabilities for {} bins plus overflow",
                probs.len(),
                grid.n_bins()
            )));
        }
        let total: f64 = probs.iter().sum();
        if probs.iter().any(|p| !p.is_finite() || *p < 0.0) || (total - 1.0).abs() > MASS_TOLERANCE
        {
            return Err(DiagnosticsError::InvalidArgument(format!(
                "reference probabilities must be >= 0 and sum to 1 (sum {total})"
            )));
        }
        Ok(Self { grid, probs })
    }

    /// 1-d marginal of coordinate `dim` from the reference marginal CDF `cdf`:
    /// p_i = cdf(e_{i+1}) − cdf(e_i), overflow = 1 − Σ p_i.
    pub fn marginal(axis: Axis, dim: usize, cdf: impl Fn(f64) -> f64) -> Result<Self> {
        let edges = axis.edges();
        let inside = edges
            .windows(2)
            .map(|e| clean_mass(cdf(e[1]) - cdf(e[0])))
            .collect::<Result<Vec<_>>>()?;
        Self::with_overflow(Grid::marginal(axis, dim), inside)
    }

    /// 2-d joint of coordinates `dims` from the reference mass of rectangles:
    /// `rect_mass(x_lo, x_hi, y_lo, y_hi)` = P(x_lo ≤ X < x_hi, y_lo ≤ Y < y_hi). For a mixture
    /// of axis-aligned Gaussians it is a weighted sum of products of normal-CDF differences
    /// ([`crate::normal_cdf`]). Overflow = 1 − Σ p_i. Errors as [`Grid::joint`] on too many bins.
    pub fn joint(
        x: Axis,
        y: Axis,
        dims: (usize, usize),
        rect_mass: impl Fn(f64, f64, f64, f64) -> f64,
    ) -> Result<Self> {
        let grid = Grid::joint(x, y, dims)?;
        let (ex, ey) = (x.edges(), y.edges());
        let mut inside = Vec::with_capacity(grid.n_bins());
        for xs in ex.windows(2) {
            for ys in ey.windows(2) {
                inside.push(clean_mass(rect_mass(xs[0], xs[1], ys[0], ys[1]))?);
            }
        }
        Self::with_overflow(grid, inside)
    }

    fn with_overflow(grid: Grid, mut inside: Vec<f64>) -> Result<Self> {
        let overflow = clean_mass(1.0 - inside.iter().sum::<f64>())?;
        inside.push(overflow);
        Self::from_probabilities(grid, inside)
    }

    /// The reference probabilities (in-box bins, then the overflow bin).
    pub fn probabilities(&self) -> &[f64] {
        &self.probs
    }

    /// The grid.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// Divergences of the draws `samples` (row-major, n rows × d values) from the reference,
    /// with KT smoothing as described in the module docs.
    pub fn divergence(&self, samples: &[f64], d: usize) -> Result<KlEstimate> {
        let n = rows(samples, d, "kl samples")?;
        if self.grid.max_dim() >= d {
            return Err(DiagnosticsError::DimensionMismatch(format!(
                "grid uses coordinate {} but draws have d = {d}",
                self.grid.max_dim()
            )));
        }
        check_finite(samples, "kl samples")?;
        let mut counts = vec![0usize; self.probs.len()];
        for row in samples.chunks_exact(d) {
            counts[self.grid.bin_of(row)] += 1;
        }
        let positive = self.probs.iter().filter(|&&p| p > 0.0).count() as f64;
        let denom = n as f64 + KT_PSEUDO_COUNT * positive;
        let (mut forward, mut backward) = (0.0, 0.0);
        for (&p, &c) in self.probs.iter().zip(&counts) {
            if p > 0.0 {
                let q = (c as f64 + KT_PSEUDO_COUNT) / denom;
                let log_ratio = (p / q).ln();
                forward += p * log_ratio;
                backward -= q * log_ratio;
            } else if c > 0 {
                backward = f64::INFINITY;
            }
        }
        Ok(KlEstimate {
            jeffreys: forward + backward,
            kl_reference_to_sample: forward,
            kl_sample_to_reference: backward,
        })
    }

    /// The iid floor: J of each of several independent sets of exact iid draws from the reference
    /// (each row-major, n rows × d, ideally with as many rows as the chain being judged), with its
    /// mean and standard deviation. Errors on a set with a draw where the reference has no mass
    /// (J = ∞), which exact draws never give.
    pub fn iid_floor(&self, iid_sets: &[&[f64]], d: usize) -> Result<IidFloor> {
        if iid_sets.is_empty() {
            return Err(DiagnosticsError::Empty("iid_floor sets"));
        }
        let js = iid_sets
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let j = self.divergence(s, d)?.jeffreys;
                if j.is_finite() {
                    Ok(j)
                } else {
                    Err(DiagnosticsError::InvalidArgument(format!(
                        "iid_floor set {k} has draws where the reference has no mass: it is not a set of exact draws from the reference"
                    )))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let r = js.len() as f64;
        let mean = js.iter().sum::<f64>() / r;
        let sd = if js.len() > 1 {
            (js.iter().map(|j| (j - mean).powi(2)).sum::<f64>() / (r - 1.0)).sqrt()
        } else {
            0.0
        };
        Ok(IidFloor {
            mean,
            sd,
            replicates: js.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normal::normal_cdf;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn formula_by_hand_on_two_bins() {
        // Uniform on [0, 1) with 2 bins, no overflow mass: p = (½, ½, 0). Draws: 3 in bin 0,
        // 1 in bin 1. q̂ = (3.5/5, 1.5/5) (B₊ = 2, N = 4).
        let reference =
            ReferenceHistogram::marginal(Axis::new(0.0, 1.0, 2).unwrap(), 0, |x| x.clamp(0.0, 1.0))
                .unwrap();
        let est = reference.divergence(&[0.1, 0.2, 0.3, 0.7], 1).unwrap();
        let (q0, q1) = (0.7, 0.3);
        let fwd = 0.5 * (0.5f64 / q0).ln() + 0.5 * (0.5f64 / q1).ln();
        let bwd = q0 * (q0 / 0.5f64).ln() + q1 * (q1 / 0.5f64).ln();
        assert!((est.kl_reference_to_sample - fwd).abs() < 1e-14);
        assert!((est.kl_sample_to_reference - bwd).abs() < 1e-14);
        assert!((est.jeffreys - fwd - bwd).abs() < 1e-14);
        // A draw where the reference has no mass (the overflow bin here) gives J = ∞.
        let out = reference.divergence(&[0.1, 1.5], 1).unwrap();
        assert!(out.jeffreys.is_infinite());
        // No exact draw from the reference falls there: such a set has no floor to give (its
        // J = ∞ made the floor's sd ∞ − ∞ = NaN).
        assert!(matches!(
            reference.iid_floor(&[&[0.1, 0.7], &[0.1, 1.5]], 1),
            Err(DiagnosticsError::InvalidArgument(_))
        ));
    }

    #[test]
    fn iid_floor_matches_chi_square_asymptotics() {
        // Uniform reference, B₊ = 10 equiprobable bins, N = 5000: to first order
        // N·J ~ χ²_{B₊−1}, so E[N·J] ≈ 9 and the mean of 20 replicates has sd √(2·9/20) ≈ 0.95.
        // Allow 4 sd plus O(B/N) higher-order terms: |N·mean − 9| < 4.
        let reference = ReferenceHistogram::marginal(Axis::new(0.0, 1.0, 10).unwrap(), 0, |x| {
            x.clamp(0.0, 1.0)
        })
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let sets: Vec<Vec<f64>> = (0..20)
            .map(|_| (0..5000).map(|_| rng.random::<f64>()).collect())
            .collect();
        let refs: Vec<&[f64]> = sets.iter().map(Vec::as_slice).collect();
        let floor = reference.iid_floor(&refs, 1).unwrap();
        assert_eq!(floor.replicates, 20);
        assert!(
            (floor.mean * 5000.0 - 9.0).abs() < 4.0,
            "N·J = {}",
            floor.mean * 5000.0
        );
    }

    /// Draws from ½N((−4, 0), I) + ½N((4, 0), I), or only the right mode.
    fn bimodal(rng: &mut Xoshiro256PlusPlus, n: usize, both: bool) -> Vec<f64> {
        let mut out = Vec::with_capacity(2 * n);
        for _ in 0..n {
            let (a, b): (f64, f64) = (StandardNormal.sample(rng), StandardNormal.sample(rng));
            let left = both && rng.random_bool(0.5);
            out.extend([a + if left { -4.0 } else { 4.0 }, b]);
        }
        out
    }

    #[test]
    fn joint_kl_near_floor_for_exact_draws_and_large_for_missing_mode() {
        let rect = |x0: f64, x1: f64, y0: f64, y1: f64| {
            let py = normal_cdf(y1) - normal_cdf(y0);
            0.5 * (normal_cdf(x1 + 4.0) - normal_cdf(x0 + 4.0) + normal_cdf(x1 - 4.0)
                - normal_cdf(x0 - 4.0))
                * py
        };
        let reference = ReferenceHistogram::joint(
            Axis::new(-12.0, 12.0, 30).unwrap(),
            Axis::new(-8.0, 8.0, 20).unwrap(),
            (0, 1),
            rect,
        )
        .unwrap();
        let total: f64 = reference.probabilities().iter().sum();
        assert!((total - 1.0).abs() < 1e-12);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        let n = 20_000;
        let sets: Vec<Vec<f64>> = (0..20).map(|_| bimodal(&mut rng, n, true)).collect();
        let refs: Vec<&[f64]> = sets.iter().map(Vec::as_slice).collect();
        let floor = reference.iid_floor(&refs, 2).unwrap();
        // A further independent exact sample lies within the floor's spread (4 sd, fixed seed).
        let fresh = reference
            .divergence(&bimodal(&mut rng, n, true), 2)
            .unwrap()
            .jeffreys;
        assert!(
            (fresh - floor.mean).abs() < 4.0 * floor.sd,
            "fresh {fresh}, floor {floor:?}"
        );
        // The floor here is ≈ 0.17: the χ² part (B₊ − 1)/N = 0.03 plus the KT bias of the ~400
        // bins of negligible mass (each q̂ = ½/N charged q̂·log(q̂/p)). Missing the left mode
        // charges about ½·log(½/(B_left·½/N)) ≈ 2 nats in KL(p‖q̂) alone, > 10× the floor.
        let missing = reference
            .divergence(&bimodal(&mut rng, n, false), 2)
            .unwrap();
        assert!(
            missing.jeffreys > 1.0 && missing.jeffreys > 10.0 * floor.mean,
            "{missing:?} {floor:?}"
        );
        assert!(missing.kl_reference_to_sample > missing.kl_sample_to_reference);
    }

    #[test]
    fn marginal_uses_the_chosen_coordinate_and_rejects_bad_input() {
        let reference =
            ReferenceHistogram::marginal(Axis::new(-6.0, 6.0, 24).unwrap(), 1, normal_cdf).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        // Column 0 is shifted by 3, column 1 is standard normal: only column 1 is judged.
        let draws: Vec<f64> = (0..4000)
            .flat_map(|_| {
                let (a, b): (f64, f64) = (
                    StandardNormal.sample(&mut rng),
                    StandardNormal.sample(&mut rng),
                );
                [a + 3.0, b]
            })
            .collect();
        let j = reference.divergence(&draws, 2).unwrap().jeffreys;
        // The first-order floor (B₊ − 1)/N ≈ 0.006 plus the KT bias of the ~8 far-tail bins
        // (each ≤ q̂·log(q̂/p) ≈ 1.2e-4·9 ≈ 1e-3) stays below 0.02.
        assert!(j < 0.02, "J = {j}");
        let on_shifted =
            ReferenceHistogram::marginal(Axis::new(-6.0, 6.0, 24).unwrap(), 0, normal_cdf).unwrap();
        let j_shifted = on_shifted.divergence(&draws, 2).unwrap().jeffreys;
        assert!(j_shifted > 1.0, "J of the shifted coordinate = {j_shifted}");
        assert!(reference.divergence(&draws, 1).is_err());
        assert!(reference.divergence(&[f64::NAN, 0.0], 2).is_err());
        assert!(Axis::new(1.0, 0.0, 3).is_err());
        // A width past the largest double made every edge but the ends +∞ and put every draw
        // in bin 0.
        assert!(Axis::new(-1e308, 1e308, 10).is_err());
        assert!(
            ReferenceHistogram::from_probabilities(reference.grid().clone(), vec![0.5; 25])
                .is_err()
        );
    }

    #[test]
    fn grids_too_large_to_allocate_are_refused() {
        // 2²⁰ × 2²⁰ = 2⁴⁰ bins: allocating their masses aborted the process.
        let wide = Axis::new(0.0, 1.0, 1 << 20).unwrap();
        let joint = ReferenceHistogram::joint(wide, wide, (0, 1), |_, _, _, _| 0.0);
        assert!(matches!(joint, Err(DiagnosticsError::InvalidArgument(_))));
        // An axis of usize::MAX bins overflowed the capacity of its edges.
        assert!(Axis::new(0.0, 1.0, usize::MAX).is_err());
        assert!(Axis::new(0.0, 1.0, MAX_BINS + 1).is_err());
        assert_eq!(Axis::new(0.0, 1.0, MAX_BINS).unwrap().bins(), MAX_BINS);
        // 2¹² × 2¹² = MAX_BINS bins is the largest joint grid.
        let (a, b) = (
            Axis::new(0.0, 1.0, 1 << 12).unwrap(),
            Axis::new(0.0, 1.0, (1 << 12) + 1).unwrap(),
        );
        assert_eq!(Grid::joint(a, a, (0, 1)).unwrap().n_bins(), MAX_BINS);
        assert!(Grid::joint(a, b, (0, 1)).is_err());
    }

    #[test]
    fn bins_narrower_than_the_double_spacing_are_refused() {
        // Near 1e300 a width of 1e285 holds about 7 doubles: 1000 bins had 993 of zero width,
        // zero reference mass, and a draw in one of them gave J = ∞.
        assert!(Axis::new(1e300, 1e300 + 1e285, 1000).is_err());
        assert!(Axis::new(0.0, 5e-324, 4).is_err());
        assert!(Axis::new(1e300, 1e300 + 1e285, 5).is_ok());
    }

    #[test]
    fn deserialisation_checks_like_the_constructors() {
        let axis = Axis::new(-1.0, 1.0, 4).unwrap();
        let reference =
            ReferenceHistogram::marginal(axis, 1, |x| (x + 1.0).clamp(0.0, 2.0) / 2.0).unwrap();
        let json = serde_json::to_string(&reference).unwrap();
        assert_eq!(
            json,
            r#"{"grid":{"Marginal":{"axis":{"lo":-1.0,"hi":1.0,"bins":4},"dim":1}},"probs":[0.25,0.25,0.25,0.25,0.0]}"#
        );
        let back: ReferenceHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, reference);
        // Each of these bypassed the checks; zero bins made bin lookup underflow.
        for bad in [
            r#"{"lo":0.0,"hi":1.0,"bins":0}"#,
            r#"{"lo":1.0,"hi":0.0,"bins":3}"#,
            r#"{"lo":0.0,"hi":1.0,"bins":18446744073709551615}"#,
        ] {
            assert!(serde_json::from_str::<Axis>(bad).is_err(), "{bad}");
        }
        let joint = Grid::joint(axis, axis, (0, 2)).unwrap();
        let joint_json = serde_json::to_string(&joint).unwrap();
        assert_eq!(
            joint_json,
            r#"{"Joint":{"x":{"lo":-1.0,"hi":1.0,"bins":4},"y":{"lo":-1.0,"hi":1.0,"bins":4},"dims":[0,2]}}"#
        );
        assert_eq!(serde_json::from_str::<Grid>(&joint_json).unwrap(), joint);
        let huge = r#"{"Joint":{"x":{"lo":0.0,"hi":1.0,"bins":1048576},"y":{"lo":0.0,"hi":1.0,"bins":1048576},"dims":[0,1]}}"#;
        assert!(serde_json::from_str::<Grid>(huge).is_err());
        // Probabilities that do not match the grid made `divergence` index past its counts.
        let short = json.replace("0.25,0.25,0.25,0.25,0.0", "0.5,0.5");
        assert!(serde_json::from_str::<ReferenceHistogram>(&short).is_err());
    }
}
