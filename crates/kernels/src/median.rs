//! The median heuristic for the bandwidth.

use crate::KernelError;
use faer::MatRef;
use kameleon_core::PrefetchedWords;
use kameleon_core::buffer::{checked_len, reserve};
use rand::Rng;

/// The median of the pairwise Euclidean distances `‖z_i − z_j‖₂` (i < j)
/// between the rows of `points` (n × d).
///
/// If `n > max_points`, the median is taken over `max_points` rows drawn
/// without replacement by `rng` (so the result is deterministic given the
/// rng's state); otherwise all rows are used and `rng` is not touched. The
/// cost is O(m² d) time and O(m²) memory for `m = min(n, max_points)`. For
/// an even number of pairs the two middle distances are averaged.
///
/// This allocates its O(m²) buffer on every call; callers that recompute the
/// median repeatedly (a sampler refreshing its subsample) should keep a
/// [`MedianHeuristic`], which gives the same result and reuses its buffers.
///
/// How it maps to bandwidths: the KAMH paper sets the Gaussian kernel's
/// `σ` (ours `ℓ`, see [`crate::Gaussian::from_kamh_sigma`]) to this median,
/// so `Gaussian::new(median)`. Other kernels can take the same `ℓ` as a
/// scale of the data; no paper prescribes a conversion for them.
///
/// Errors: [`KernelError::TooFewPoints`] if fewer than 2 points are available
/// or `max_points < 2`, [`KernelError::NonFinitePoint`] if a used point has a
/// NaN or infinite coordinate, [`KernelError::ZeroMedianDistance`] if the
/// median is 0 (all points equal, or more than half of the pairs coincide —
/// possible for a chain history with many rejections),
/// [`KernelError::MedianDistanceOverflow`] if it overflows (coordinates
/// beyond about 1e154), [`KernelError::DimensionMismatch`] for points with
/// no coordinates, [`KernelError::BufferTooLarge`] if the m(m − 1)/2
/// distances cannot be allocated.
pub fn median_heuristic<R: Rng + ?Sized>(
    points: MatRef<'_, f64>,
    max_points: usize,
    rng: &mut R,
) -> Result<f64, KernelError> {
    MedianHeuristic::new().compute(points, max_points, rng)
}

/// [`median_heuristic`] with reusable buffers: after the first call at a
/// given size, [`MedianHeuristic::compute`] allocates nothing except, when
/// it subsamples (`n > max_points`), the O(m) index sample of
/// `rand::seq::index::sample` (kept so the rows drawn, and hence the
/// result, are exactly those of [`median_heuristic`]).
///
/// It also works on squared distances and takes only the one or two middle
/// square roots, computes the distances from each point to all later ones
/// at once from a column-major copy (SIMD across pairs), and selects the
/// median on the distances' bit patterns, between two pivots from a sample
/// (exact, see `PivotSelect`). The result is bit-identical to
/// the per-pair form (each distance sums its squared differences in the same
/// order; `sqrt` is correctly rounded and monotone, so the middle distances
/// are the roots of the middle squared distances).
///
/// ```
/// use faer::Mat;
/// use kameleon_kernels::{MedianHeuristic, median_heuristic};
/// use rand::SeedableRng;
/// let points = Mat::<f64>::from_fn(30, 2, |i, j| ((i * 7 + j * 3) % 11) as f64);
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
/// let mut median = MedianHeuristic::new();
/// let a = median.compute(points.as_ref(), 10, &mut rng.clone())?;
/// assert_eq!(a, median_heuristic(points.as_ref(), 10, &mut rng)?);
/// # Ok::<(), kameleon_kernels::KernelError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MedianHeuristic {
    /// The used rows, m × d row-major.
    rows: Vec<f64>,
    /// The same rows column-major (m values per coordinate, then
    /// `OVERHANG` entries of padding).
    columns: Vec<f64>,
    /// The m(m − 1)/2 squared distances.
    squared: Vec<f64>,
    /// The selection's buffers.
    select: PivotSelect,
    /// The words of the row sample, drawn ahead ([`PrefetchedWords`]).
    words: Vec<u64>,
}

impl MedianHeuristic {
    /// Empty buffers (they grow at the first call).
    pub fn new() -> Self {
        Self::default()
    }

    /// The median pairwise distance of the rows of `points`, exactly as
    /// [`median_heuristic`] (same rows drawn from `rng`, same result, same
    /// errors). The row sample's words are drawn from `rng` ahead, in one loop:
    /// for the generators of [`PrefetchedWords`] (such as the samplers'
    /// `Xoshiro256PlusPlus`) the rows are those `rand::seq::index::sample`
    /// draws from `rng` directly, and `rng` is left in the same state.
    pub fn compute<R: Rng + ?Sized>(
        &mut self,
        points: MatRef<'_, f64>,
        max_points: usize,
        rng: &mut R,
    ) -> Result<f64, KernelError> {
        let (n, d) = (points.nrows(), points.ncols());
        let m = n.min(max_points);
        if m < 2 {
            return Err(KernelError::TooFewPoints { got: m });
        }
        if d == 0 {
            return Err(KernelError::DimensionMismatch {
                expected: 1,
                got: 0,
            });
        }
        // the m(m − 1)/2 squared distances (and their padding) are the
        // caller-sized buffer: an error, not an abort, if it cannot be had
        let pairs = checked_len("the median heuristic's pairwise distances", &[m, m - 1])? / 2;
        grow(
            "the median heuristic's pairwise distances",
            &mut self.squared,
            pairs + OVERHANG,
        )?;
        self.rows.clear();
        let copy_row = |rows: &mut Vec<f64>, i: usize| {
            let row = points.row(i);
            if row.iter().any(|v| !v.is_finite()) {
                return Err(KernelError::NonFinitePoint { index: i });
            }
            rows.extend(row.iter().copied());
            Ok(())
        };
        if n > max_points {
            // the words drawn ahead: rand's index sampling takes at least
            // one per index
            self.words.resize(max_points, 0);
            let mut words = PrefetchedWords::new(rng, &mut self.words);
            for i in rand::seq::index::sample(&mut words, n, max_points) {
                copy_row(&mut self.rows, i)?;
            }
        } else {
            for i in 0..n {
                copy_row(&mut self.rows, i)?;
            }
        }
        self.median_of_rows(m, d, pairs)
    }

    /// The median pairwise distance of the m rows in `rows` (m × d
    /// row-major), `pairs` = m(m − 1)/2 of them, with `squared` sized for
    /// them. Not generic, unlike [`MedianHeuristic::compute`], so that its
    /// SIMD kernels (one per dimension up to 10 and instruction set) are
    /// compiled once, here, rather than in every crate that calls `compute`
    /// with its own generator.
    fn median_of_rows(&mut self, m: usize, d: usize, pairs: usize) -> Result<f64, KernelError> {
        // the coordinates of the m points, each contiguous and followed by
        // OVERHANG entries that a row's last SIMD vector may read, so that
        // the distances from one point to all later ones run over the later
        // points in SIMD lanes; each distance still sums its d squared
        // differences in coordinate order (the per-pair result is unchanged);
        // every entry of `columns` and `squared` that is used is overwritten,
        // so only a change of size touches them here
        let stride = m + OVERHANG;
        self.columns.resize(stride * d, 0.0);
        for (i, row) in self.rows.chunks_exact(d).enumerate() {
            for (l, &v) in row.iter().enumerate() {
                self.columns[l * stride + i] = v;
            }
        }
        self.squared.resize(pairs + OVERHANG, 0.0);
        let distances = (&self.rows[..], &self.columns[..], d, &mut self.squared[..]);
        match d {
            1 => pair_distances::<1>(distances),
            2 => pair_distances::<2>(distances),
            3 => pair_distances::<3>(distances),
            4 => pair_distances::<4>(distances),
            5 => pair_distances::<5>(distances),
            6 => pair_distances::<6>(distances),
            7 => pair_distances::<7>(distances),
            8 => pair_distances::<8>(distances),
            9 => pair_distances::<9>(distances),
            10 => pair_distances::<10>(distances),
            _ => pair_distances::<0>(distances),
        }
        let squared = &self.squared[..pairs];
        // squared distances are ≥ +0 (or +∞), where the order of the bit
        // patterns is the numeric order: the selection works on integers
        let mid = squared.len() / 2;
        let even = squared.len().is_multiple_of(2);
        let Some((below, upper)) = self.select.select(squared, mid) else {
            // unreachable: m ≥ 2 gives at least one pair
            return Err(KernelError::TooFewPoints { got: m });
        };
        let upper = f64::from_bits(upper);
        let median = if even {
            // mid ≥ 1 here, so the other middle value exists
            let below = below.map_or(0.0, f64::from_bits);
            0.5 * (below.sqrt() + upper.sqrt())
        } else {
            upper.sqrt()
        };
        if median.is_infinite() {
            Err(KernelError::MedianDistanceOverflow)
        } else if median > 0.0 {
            Ok(median)
        } else {
            Err(KernelError::ZeroMedianDistance)
        }
    }
}

/// Reserves room for `len` values in `buffer` (an error, not an abort, when
/// the allocator refuses); nothing happens once it has grown that far.
fn grow(what: &'static str, buffer: &mut Vec<f64>, len: usize) -> Result<(), KernelError> {
    let additional = len.saturating_sub(buffer.len());
    Ok(reserve(what, buffer, additional)?)
}

/// Exact order statistics of `f64` values by their bit patterns (the
/// numeric order for values in +0 … +∞, such as squared distances), by one
/// counting pass between two pivots taken from a sample (Floyd and Rivest's
/// idea).
///
/// The pivots are order statistics of every s-th pattern, a few standard
/// deviations of the sample rank below and above the wanted rank, so that
/// the wanted patterns almost always lie between them. One pass counts the
/// patterns below the lower pivot and copies those between the pivots
/// (inclusive); if the wanted ranks fall among the copies, a histogram over
/// the pivots' range narrows them to one bucket, selected among; otherwise
/// the ranks are selected among all patterns. Either way the result is
/// exact, for ties and any bit patterns; no call allocates once the buffers
/// have grown.
#[derive(Debug, Clone, Default)]
struct PivotSelect {
    /// The sampled patterns.
    sample: Vec<u64>,
    /// The patterns between the pivots (a prefix of it; it only grows).
    kept: Vec<u64>,
}

/// About this many patterns are sampled for the pivots.
const PIVOT_SAMPLE: usize = 256;
/// Inputs up to this length are selected among directly.
const DIRECT_SELECTION: usize = 2048;

impl PivotSelect {
    /// The bit patterns of the k-th smallest value (0-based) and, for k ≥ 1,
    /// of the (k − 1)-th, in the order of the bit patterns as `u64`; `None`
    /// if `k` is out of range.
    fn select(&mut self, values: &[f64], k: usize) -> Option<(Option<u64>, u64)> {
        let n = values.len();
        if k >= n {
            return None;
        }
        if n > DIRECT_SELECTION
            && let Some(found) = self.between_pivots(values, k)
        {
            return Some(found);
        }
        self.kept.clear();
        self.kept.extend(values.iter().map(|v| v.to_bits()));
        Some(select_pair(&mut self.kept, k))
    }

    /// The pair of [`PivotSelect::select`] if the wanted ranks lie between
    /// the sampled pivots, `None` otherwise (`values` longer than
    /// `DIRECT_SELECTION`).
    fn between_pivots(&mut self, values: &[f64], k: usize) -> Option<(Option<u64>, u64)> {
        let n = values.len();
        self.sample.clear();
        self.sample
            .extend(values.iter().step_by(n / PIVOT_SAMPLE).map(|v| v.to_bits()));
        // the wanted rank in the sample, and a margin of 4 standard
        // deviations of it at most (√(s p(1 − p)) ≤ √s / 2)
        let s = self.sample.len();
        let centre = k * s / n;
        let margin = 2 * s.isqrt();
        let high_rank = (centre + margin).min(s - 1);
        let low_rank = centre.saturating_sub(margin).min(high_rank - 1);
        let (below_high, &mut high, _) = self.sample.select_nth_unstable(high_rank);
        let (_, &mut low, _) = below_high.select_nth_unstable(low_rank);
        // the patterns in [low, high] (those whose offset from low wraps to
        // at most high − low), and how many lie below low: a store and two
        // counts per pattern, no branch, as the outcomes are random
        if self.kept.len() < n + KEPT_PER_STEP {
            self.kept.resize(n + KEPT_PER_STEP, 0);
        }
        let width = high - low;
        let (len, less) = keep_between(values, low, width, &mut self.kept);
        // both wanted ranks (k − 1 only for k ≥ 1) must be among the kept
        if less > k.saturating_sub(1) || less + len <= k {
            return None;
        }
        Some(select_in_range(&mut self.kept[..len], k - less, low, width))
    }
}

/// The patterns of `values` in `[low, low + width]` copied in order to the
/// front of `kept` (n + `KEPT_PER_STEP` entries), their number, and how many
/// patterns lie below `low`: with AVX2 four patterns a step, else
/// [`keep_between_scalar`].
fn keep_between(values: &[f64], low: u64, width: u64, kept: &mut [u64]) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return simd.vectorize(avx2::KeepBetween {
            simd,
            values,
            low,
            width,
            kept,
        });
    }
    keep_between_scalar(values, low, width, kept)
}

/// [`keep_between`] without SIMD: a store and two counts per pattern, no
/// branch, as the outcomes are random.
fn keep_between_scalar(values: &[f64], low: u64, width: u64, kept: &mut [u64]) -> (usize, usize) {
    let between = |key: u64| key.wrapping_sub(low) <= width;
    let (mut len, mut less) = (0, 0);
    let mut chunks = values.chunks_exact(KEPT_PER_STEP);
    for chunk in &mut chunks {
        let keys: [u64; KEPT_PER_STEP] = std::array::from_fn(|c| chunk[c].to_bits());
        less += keys
            .iter()
            .map(|&key| usize::from(key < low))
            .sum::<usize>();
        len = keep_where(kept, len, keys, between);
    }
    for v in chunks.remainder() {
        let key = v.to_bits();
        less += usize::from(key < low);
        len = keep_where(kept, len, [key], between);
    }
    (len, less)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! [`super::keep_between`] in AVX2: four patterns a step, compared as
    //! signed integers with the sign bits flipped (the unsigned order),
    //! the kept ones moved to the front of the vector by a permutation
    //! looked up from the comparison's bit mask, stored whole.

    use super::{KEPT_PER_STEP, keep_between_scalar};
    use std::arch::x86_64::__m256i;

    const SIGN: u64 = 1 << 63;

    /// For each 4-bit mask, the 32-bit lane indices that move the 64-bit
    /// lanes whose bit is set to the front, in order.
    const COMPRESS: [[i32; 8]; 16] = {
        let mut table = [[0; 8]; 16];
        let mut mask = 0;
        while mask < 16 {
            let (mut lane, mut to) = (0usize, 0);
            while lane < 4 {
                if mask & (1 << lane) != 0 {
                    table[mask][2 * to] = 2 * lane as i32;
                    table[mask][2 * to + 1] = 2 * lane as i32 + 1;
                    to += 1;
                }
                lane += 1;
            }
            mask += 1;
        }
        table
    };

    /// The arguments of [`super::keep_between`], run with AVX2 enabled.
    pub(super) struct KeepBetween<'a> {
        pub(super) simd: pulp::x86::V3,
        pub(super) values: &'a [f64],
        pub(super) low: u64,
        pub(super) width: u64,
        pub(super) kept: &'a mut [u64],
    }

    impl pulp::NullaryFnOnce for KeepBetween<'_> {
        type Output = (usize, usize);

        #[inline(always)]
        fn call(self) -> (usize, usize) {
            let Self {
                simd,
                values,
                low,
                width,
                kept,
            } = self;
            keep_between(simd, values, low, width, kept)
        }
    }

    #[inline(always)]
    fn keep_between(
        simd: pulp::x86::V3,
        values: &[f64],
        low: u64,
        width: u64,
        kept: &mut [u64],
    ) -> (usize, usize) {
        let splat = |v: u64| simd.avx._mm256_set1_epi64x(v as i64);
        let (sign, low_v) = (splat(SIGN), splat(low));
        // with the offset o = key − low (wrapping): the key is between the
        // bounds iff o ≤ width, and below low iff the subtraction wrapped,
        // i.e. o > !low (= 2⁶⁴ − 1 − low); both unsigned comparisons of o
        let (width_flipped, wrapped_flipped) = (splat(width ^ SIGN), splat(!low ^ SIGN));
        let mut len = 0;
        // per lane, minus the count of patterns below (a comparison's
        // true lanes are −1)
        let mut below_counts = simd.avx._mm256_setzero_si256();
        let mut chunks = values.chunks_exact(KEPT_PER_STEP);
        for chunk in &mut chunks {
            let keys: [u64; 4] = std::array::from_fn(|c| chunk[c].to_bits());
            let keys: __m256i = pulp::cast(keys);
            let offset = simd
                .avx2
                ._mm256_xor_si256(simd.avx2._mm256_sub_epi64(keys, low_v), sign);
            let outside = simd.avx2._mm256_cmpgt_epi64(offset, width_flipped);
            let below = simd.avx2._mm256_cmpgt_epi64(offset, wrapped_flipped);
            below_counts = simd.avx2._mm256_sub_epi64(below_counts, below);
            let inside = !simd
                .avx
                ._mm256_movemask_pd(simd.avx._mm256_castsi256_pd(outside))
                & 0xf;
            let order: __m256i = pulp::cast(COMPRESS[inside as usize]);
            let packed: [u64; 4] = pulp::cast(simd.avx2._mm256_permutevar8x32_epi32(keys, order));
            kept[len..len + 4].copy_from_slice(&packed);
            len += inside.count_ones() as usize;
        }
        let below_counts: [u64; 4] = pulp::cast(below_counts);
        let less = below_counts.iter().sum::<u64>() as usize;
        let (tail_len, tail_less) =
            keep_between_scalar(chunks.remainder(), low, width, &mut kept[len..]);
        (len + tail_len, less + tail_less)
    }
}

/// log₂ of the number of buckets of [`select_in_range`].
const RANGE_BITS: u32 = 8;

/// [`select_pair`] for keys in `[low, low + width]`: a histogram of their
/// offsets from `low` in 2⁸ buckets of equal width finds the bucket holding
/// rank `k`; its keys are moved to the front and selected among (every key
/// of a lower bucket is smaller, of a higher one larger).
fn select_in_range(keys: &mut [u64], k: usize, low: u64, width: u64) -> (Option<u64>, u64) {
    const BUCKETS: usize = 1 << RANGE_BITS;
    let shift = (u64::BITS - width.leading_zeros()).saturating_sub(RANGE_BITS);
    // an offset ≤ width shifted right by `shift` is below 2⁸ already: the
    // mask changes no bucket, it only spares the histogram's bounds checks
    let bucket = |key: u64| ((key - low) >> shift) as usize & (BUCKETS - 1);
    let mut counts = [0u32; BUCKETS];
    for &key in keys.iter() {
        counts[bucket(key)] += 1;
    }
    let mut below = 0;
    let mut target = 0;
    for (b, &count) in counts.iter().enumerate() {
        if below + count as usize > k {
            target = b;
            break;
        }
        below += count as usize;
    }
    // if rank k opens its bucket, rank k − 1 is the largest key below it
    let largest_below = (k == below && below >= 1).then(|| {
        keys.iter()
            .copied()
            .filter(|&key| bucket(key) < target)
            .fold(low, u64::max)
    });
    // the target bucket's keys to the front, branch-free (the keys a step
    // writes start at or before those it reads, which it has read already)
    let in_target = |key: u64| bucket(key) == target;
    let mut len = 0;
    let mut start = 0;
    while let Some(chunk) = keys.get(start..start + KEPT_PER_STEP) {
        let chunk: [u64; KEPT_PER_STEP] = std::array::from_fn(|c| chunk[c]);
        len = keep_where(keys, len, chunk, in_target);
        start += KEPT_PER_STEP;
    }
    for i in start..keys.len() {
        len = keep_where(keys, len, [keys[i]], in_target);
    }
    let (previous, kth) = select_pair(&mut keys[..len], k - below);
    (previous.or(largest_below), kth)
}

/// Keys handled per step of the compactions ([`keep_where`]).
const KEPT_PER_STEP: usize = 4;

/// Writes `keys` in order to `out[len..]`, each over the previous one unless
/// `keep` held for it, and returns the new `len`: a compaction step without
/// branches (the outcomes are random), with one bounds check for the N
/// stores. `out` must hold `len + N` entries; N is a power of two.
#[inline(always)]
fn keep_where<const N: usize>(
    out: &mut [u64],
    len: usize,
    keys: [u64; N],
    keep: impl Fn(u64) -> bool,
) -> usize {
    let slots: &mut [u64; N] = (&mut out[len..len + N])
        .try_into()
        .expect("a slice of length N");
    const { assert!(N.is_power_of_two()) };
    let mut kept = 0;
    for key in keys {
        // kept < N (it is at most the keys written before): the mask
        // changes nothing when N is a power of two, but spares the bounds
        // check
        slots[kept & (N - 1)] = key;
        kept += usize::from(keep(key));
    }
    len + kept
}

/// The k-th smallest of `keys` (k < len) and, for k ≥ 1, the (k − 1)-th.
fn select_pair(keys: &mut [u64], k: usize) -> (Option<u64>, u64) {
    let (lower, &mut kth, _) = keys.select_nth_unstable(k);
    (lower.iter().copied().max(), kth)
}

/// Entries past the end of each coordinate of `MedianHeuristic::columns`
/// and of its squared distances: the last SIMD vector of a point's row
/// reaches up to L − 1 entries past its later points (L ≤ 8 lanes).
const OVERHANG: usize = 8;

/// Runs [`PairDistances`] with `d = DIM` if `DIM > 0`, else with the
/// dimension of the rows.
fn pair_distances<const DIM: usize>(
    (rows, columns, dim, squared): (&[f64], &[f64], usize, &mut [f64]),
) {
    kameleon_core::simd::dispatch(PairDistances::<DIM> {
        rows,
        columns,
        dim,
        squared,
    });
}

/// The squared distances from each of m points to every later one, in the
/// order (0, 1), (0, 2), …, (1, 2), …: per point, the later points in whole
/// SIMD vectors, the last one running into the overhang (its extra lanes
/// land where the next point's distances, or the buffer's overhang, go, and
/// are overwritten or ignored). Each lane sums its squared differences over
/// the coordinates in coordinate order, a multiplication and an addition
/// each (the scalar sum's operations). With `DIM > 0` (d = DIM) the point's
/// coordinates and the sums stay in registers; otherwise the sums are
/// accumulated in the output, coordinate by coordinate.
struct PairDistances<'a, const DIM: usize> {
    /// m × d row-major.
    rows: &'a [f64],
    /// The same points column-major, each coordinate followed by
    /// [`OVERHANG`] entries.
    columns: &'a [f64],
    /// d.
    dim: usize,
    /// m(m − 1)/2 + [`OVERHANG`] entries; the first m(m − 1)/2 are
    /// overwritten with the squared distances.
    squared: &'a mut [f64],
}

impl<'a, const DIM: usize> pulp::WithSimd for PairDistances<'a, DIM> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            rows,
            columns,
            dim,
            squared,
        } = self;
        let lanes = S::F64_LANES;
        let d = if DIM > 0 { DIM } else { dim };
        let (m, stride) = (rows.len() / d, columns.len() / d);
        let add_square = |sum: S::f64s, u: S::f64s, v: S::f64s| {
            let t = simd.sub_f64s(u, v);
            simd.add_f64s(sum, simd.mul_f64s(t, t))
        };
        // the d columns, split once (each `stride` long): a row's later
        // points are then the same range of each, checked once
        let mut rest = columns;
        let split: [&[f64]; DIM] = std::array::from_fn(|_| {
            let (column, tail) = rest.split_at(stride);
            rest = tail;
            column
        });
        let mut start = 0;
        for a in 0..m.saturating_sub(1) {
            let point = &rows[a * d..(a + 1) * d];
            let count = m - 1 - a;
            let len = count.div_ceil(lanes) * lanes;
            // the later points' coordinate in `column`, as SIMD vectors
            let later = |column: &'a [f64]| S::as_simd_f64s(&column[a + 1..a + 1 + len]).0;
            let out = S::as_mut_simd_f64s(&mut squared[start..start + len]).0;
            if DIM > 0 {
                let u: [S::f64s; DIM] = std::array::from_fn(|l| simd.splat_f64s(point[l]));
                let v: [&[S::f64s]; DIM] = std::array::from_fn(|l| later(split[l]));
                for (j, o) in out.iter_mut().enumerate() {
                    let mut sum = simd.splat_f64s(0.0);
                    for l in 0..DIM {
                        sum = add_square(sum, u[l], v[l][j]);
                    }
                    *o = sum;
                }
            } else {
                out.fill(simd.splat_f64s(0.0));
                for (l, &u) in point.iter().enumerate() {
                    let u = simd.splat_f64s(u);
                    let column = &columns[l * stride..(l + 1) * stride];
                    for (o, &v) in out.iter_mut().zip(later(column)) {
                        *o = add_square(*o, u, v);
                    }
                }
            }
            start += count;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn brute_force_median(points: &[Vec<f64>]) -> f64 {
        let mut d = Vec::new();
        for i in 0..points.len() {
            for j in 0..i {
                d.push(
                    points[i]
                        .iter()
                        .zip(&points[j])
                        .map(|(a, b)| (a - b).powi(2))
                        .sum::<f64>()
                        .sqrt(),
                );
            }
        }
        d.sort_by(f64::total_cmp);
        let m = d.len();
        if m % 2 == 1 {
            d[m / 2]
        } else {
            0.5 * (d[m / 2 - 1] + d[m / 2])
        }
    }

    fn matrix(points: &[Vec<f64>]) -> Mat<f64> {
        Mat::from_fn(points.len(), points[0].len(), |i, j| points[i][j])
    }

    #[test]
    fn hand_computed_medians() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        // Distances 1, 1, 2: median 1 (odd count).
        let three = matrix(&[vec![0.0], vec![1.0], vec![2.0]]);
        assert_eq!(median_heuristic(three.as_ref(), 10, &mut rng), Ok(1.0));
        // Distances 1, 1, 1, 2, 2, 3: median (1 + 2)/2 (even count).
        let four = matrix(&[vec![0.0], vec![1.0], vec![2.0], vec![3.0]]);
        assert_eq!(median_heuristic(four.as_ref(), 10, &mut rng), Ok(1.5));
    }

    #[test]
    fn matches_brute_force_on_all_points_and_on_a_subsample() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let points: Vec<Vec<f64>> = (0..40)
            .map(|_| {
                (0..3)
                    .map(|_| rand::RngExt::random::<f64>(&mut rng) * 4.0)
                    .collect()
            })
            .collect();
        let z = matrix(&points);
        for n_used in [39, 40] {
            let got = median_heuristic(z.as_ref().subrows(0, n_used), 100, &mut rng).unwrap();
            assert!((got - brute_force_median(&points[..n_used])).abs() < 1e-14);
        }
        // Subsample of 17: the same rows as rand's index sampling with the
        // same seed, the generator left in the same state.
        let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(7);
        let got = median_heuristic(z.as_ref(), 17, &mut rng_a).unwrap();
        let rows = rand::seq::index::sample(&mut rng_b, 40, 17).into_vec();
        assert_eq!(rng_a, rng_b);
        let subset: Vec<Vec<f64>> = rows.iter().map(|&i| points[i].clone()).collect();
        assert!((got - brute_force_median(&subset)).abs() < 1e-14);
        // Deterministic given the seed, and a different seed picks other rows.
        let again =
            median_heuristic(z.as_ref(), 17, &mut Xoshiro256PlusPlus::seed_from_u64(7)).unwrap();
        assert_eq!(got, again);
        let other =
            median_heuristic(z.as_ref(), 17, &mut Xoshiro256PlusPlus::seed_from_u64(8)).unwrap();
        assert_ne!(got, other);
    }

    /// One reused `MedianHeuristic` over inputs of growing, shrinking and
    /// subsampled sizes gives exactly the brute-force medians of the rows
    /// `median_heuristic` uses (so stale buffer contents never leak in).
    #[test]
    fn reused_buffers_give_the_brute_force_median() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let points: Vec<Vec<f64>> = (0..60)
            .map(|_| {
                (0..4)
                    .map(|_| rand::RngExt::random::<f64>(&mut rng) * 3.0)
                    .collect()
            })
            .collect();
        let z = matrix(&points);
        let mut median = MedianHeuristic::new();
        for (n_used, max_points, seed) in [(60, 100, 0), (7, 100, 1), (60, 25, 2), (31, 30, 3)] {
            let view = z.as_ref().subrows(0, n_used);
            let got = median
                .compute(
                    view,
                    max_points,
                    &mut Xoshiro256PlusPlus::seed_from_u64(seed),
                )
                .unwrap();
            let rows: Vec<usize> = if n_used > max_points {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                rand::seq::index::sample(&mut rng, n_used, max_points).into_vec()
            } else {
                (0..n_used).collect()
            };
            let subset: Vec<Vec<f64>> = rows.iter().map(|&i| points[i].clone()).collect();
            assert_eq!(
                got,
                brute_force_median(&subset),
                "n = {n_used}, max = {max_points}"
            );
        }
        // errors are the same as the function's, and the struct stays usable
        let nan = matrix(&[vec![1.0, 2.0], vec![f64::NAN, 0.0], vec![0.0, 0.0]]);
        assert_eq!(
            median.compute(nan.as_ref(), 10, &mut rng),
            Err(KernelError::NonFinitePoint { index: 1 })
        );
        assert!(median.compute(z.as_ref(), 10, &mut rng).is_ok());
    }

    /// The row sample equals rand's `index::sample` from the same generator
    /// and leaves it in the same state, for each of rand's methods (Floyd's
    /// for few rows, the in-place shuffle, rejection for few of very many).
    #[test]
    fn row_sample_is_rands_index_sample() {
        let mut median = MedianHeuristic::new();
        for (n, max_points) in [(40, 5), (40, 17), (1000, 100), (50_000, 163)] {
            let points: Vec<Vec<f64>> = (0..n).map(|i| vec![(i as f64).sqrt()]).collect();
            let z = matrix(&points);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(n as u64);
            let mut direct = rng.clone();
            let got = median.compute(z.as_ref(), max_points, &mut rng).unwrap();
            let rows = rand::seq::index::sample(&mut direct, n, max_points).into_vec();
            assert_eq!(rng, direct, "n = {n}, max = {max_points}");
            let subset: Vec<Vec<f64>> = rows.iter().map(|&i| points[i].clone()).collect();
            assert_eq!(got, brute_force_median(&subset));
        }
    }

    /// The registers' path (d ≤ 10: 1, 5, 8) and the accumulating one
    /// (d = 12, 17), at numbers of points whose rows end anywhere in a SIMD
    /// vector, give exactly the brute-force median (each distance summed in
    /// coordinate order).
    #[test]
    fn every_dimension_path_gives_the_brute_force_median() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut median = MedianHeuristic::new();
        for d in [1, 5, 8, 12, 17] {
            for m in [2, 3, 9, 16, 37, 100] {
                let points: Vec<Vec<f64>> = (0..m)
                    .map(|_| {
                        (0..d)
                            .map(|_| rand::RngExt::random::<f64>(&mut rng) * 5.0 - 2.0)
                            .collect()
                    })
                    .collect();
                let z = matrix(&points);
                let got = median.compute(z.as_ref(), m, &mut rng).unwrap();
                assert_eq!(got, brute_force_median(&points), "d = {d}, m = {m}");
            }
        }
    }

    /// Every rank of `values` against a sort of the bit patterns.
    fn check_every_rank(select: &mut PivotSelect, values: &[f64]) {
        let mut sorted: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        sorted.sort_unstable();
        for k in 0..values.len() {
            let expected = ((k >= 1).then(|| sorted[k - 1]), sorted[k]);
            assert_eq!(select.select(values, k), Some(expected), "k = {k}");
        }
        assert_eq!(select.select(values, values.len()), None);
    }

    /// The compaction between two patterns (AVX2 where the CPU has it) keeps
    /// and counts exactly what the scalar one does, and what a filter does,
    /// at lengths ending anywhere in a vector and for windows that hold
    /// none, some or all of the patterns, including the extreme patterns.
    #[test]
    fn compaction_matches_the_scalar_one_and_a_filter() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
        let patterns: Vec<u64> = (0..1003)
            .map(|i| match i % 7 {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << 63,
                _ => rand::RngExt::random::<u64>(&mut rng) >> (i % 5),
            })
            .collect();
        let values: Vec<f64> = patterns.iter().map(|&p| f64::from_bits(p)).collect();
        let windows = [
            (0, u64::MAX),
            (0, 0),
            (u64::MAX, 0),
            (1 << 62, 1 << 61),
            (1 << 63, u64::MAX >> 1),
            (12345, 1 << 40),
        ];
        for len in [0, 1, 3, 4, 5, 8, 1003] {
            for &(low, width) in &windows {
                let values = &values[..len];
                let mut fast = vec![0; len + KEPT_PER_STEP];
                let mut slow = vec![0; len + KEPT_PER_STEP];
                let (kept, less) = keep_between(values, low, width, &mut fast);
                let expected: Vec<u64> = patterns[..len]
                    .iter()
                    .copied()
                    .filter(|p| p.wrapping_sub(low) <= width)
                    .collect();
                let below = patterns[..len].iter().filter(|&&p| p < low).count();
                assert_eq!((&fast[..kept], less), (&expected[..], below));
                let (kept, less) = keep_between_scalar(values, low, width, &mut slow);
                assert_eq!((&slow[..kept], less), (&expected[..], below));
            }
        }
    }

    /// Short inputs (selected directly) and long ones (between pivots, or
    /// directly when the sample misleads) against sorting, for every rank.
    #[test]
    fn pivot_selection_matches_sorting() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut select = PivotSelect::default();
        let mut random = |scale: f64| rand::RngExt::random::<f64>(&mut rng) * scale;
        let long = DIRECT_SELECTION + 700;
        // spread values and values sharing most leading bits
        let spread: Vec<f64> = (0..long).map(|_| random(1e3)).collect();
        let close: Vec<f64> = (0..long).map(|_| 1.0 + random(1e-12)).collect();
        // many ties, ±0, subnormals, +∞, the largest finite value and
        // arbitrary bit patterns (ordered as integers)
        let special: Vec<f64> = (0..long)
            .map(|i| match i % 11 {
                0 | 1 => 0.0,
                2 => -0.0,
                3 => f64::INFINITY,
                4 => f64::MIN_POSITIVE / 4.0,
                5 => f64::MAX,
                6 | 7 => 2.0,
                8 => f64::from_bits(1),
                9 => f64::from_bits((random(1.0) * u64::MAX as f64) as u64),
                _ => random(1.0),
            })
            .collect();
        let two_values: Vec<f64> = (0..long)
            .map(|i| if i % 3 == 0 { 4.0 } else { 3.0 })
            .collect();
        // the sampled positions all hold one large value, so the pivots miss
        // the middle ranks
        let step = long / PIVOT_SAMPLE;
        let misleading: Vec<f64> = (0..long)
            .map(|i| if i % step == 0 { 1e9 } else { random(1.0) })
            .collect();
        let ascending: Vec<f64> = (0..long).map(|i| i as f64).collect();
        for values in [
            &spread[..],
            &close,
            &special,
            &two_values,
            &misleading,
            &ascending,
            &spread[..301],
            &special[..300],
            &[7.0; 5],
            &[0.5],
            &[f64::INFINITY, 0.0],
        ] {
            check_every_rank(&mut select, values);
        }
        assert_eq!(select.select(&[], 0), None);
    }

    #[test]
    fn degenerate_inputs_are_errors() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let one = matrix(&[vec![1.0, 2.0]]);
        assert_eq!(
            median_heuristic(one.as_ref(), 10, &mut rng),
            Err(KernelError::TooFewPoints { got: 1 })
        );
        let two = matrix(&[vec![1.0, 2.0], vec![0.0, 0.0]]);
        assert_eq!(
            median_heuristic(two.as_ref(), 1, &mut rng),
            Err(KernelError::TooFewPoints { got: 1 })
        );
        let equal = matrix(&vec![vec![1.0, 2.0]; 5]);
        assert_eq!(
            median_heuristic(equal.as_ref(), 10, &mut rng),
            Err(KernelError::ZeroMedianDistance)
        );
        let nan = matrix(&[vec![1.0, 2.0], vec![f64::NAN, 0.0], vec![0.0, 0.0]]);
        assert_eq!(
            median_heuristic(nan.as_ref(), 10, &mut rng),
            Err(KernelError::NonFinitePoint { index: 1 })
        );
        let no_coordinates = Mat::<f64>::zeros(5, 0);
        assert_eq!(
            median_heuristic(no_coordinates.as_ref(), 10, &mut rng),
            Err(KernelError::DimensionMismatch {
                expected: 1,
                got: 0
            })
        );
        // finite points whose squared distances overflow
        let huge = matrix(&[vec![1e300], vec![-1e300], vec![1e300], vec![-1e300]]);
        assert_eq!(
            median_heuristic(huge.as_ref(), 10, &mut rng),
            Err(KernelError::MedianDistanceOverflow)
        );
        // the largest coordinates whose distances do not overflow still work
        let large = matrix(&[vec![1e153], vec![-1e153], vec![0.0]]);
        assert_eq!(median_heuristic(large.as_ref(), 10, &mut rng), Ok(1e153));
    }

    /// A subsample too large for memory is an error, not an abort: the
    /// distances of 2³² rows would need 2⁶³ values. A zero-stride view
    /// repeats one row that many times without storing it.
    #[test]
    fn distances_beyond_memory_are_an_error() {
        let row = [1.0, 2.0];
        let rows = 1usize << 32;
        let points = faer::MatRef::from_row_major_slice_with_stride(&row, rows, 2, 0);
        let err = MedianHeuristic::new()
            .compute(
                points,
                usize::MAX,
                &mut Xoshiro256PlusPlus::seed_from_u64(3),
            )
            .unwrap_err();
        assert!(matches!(err, KernelError::BufferTooLarge(_)), "{err}");
    }
}
