//! The median heuristic for the bandwidth.

use crate::KernelError;
use faer::MatRef;
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
/// How it maps to bandwidths: the KAMH paper sets the Gaussian kernel's
/// `σ` (ours `ℓ`, see [`crate::Gaussian::from_kamh_sigma`]) to this median,
/// so `Gaussian::new(median)`. Other kernels can take the same `ℓ` as a
/// scale of the data; no paper prescribes a conversion for them.
///
/// Errors: [`KernelError::TooFewPoints`] if fewer than 2 points are available
/// or `max_points < 2`, [`KernelError::NonFinitePoint`] if a used point has a
/// NaN or infinite coordinate, [`KernelError::ZeroMedianDistance`] if the
/// median is 0 (all points equal, or more than half of the pairs coincide —
/// possible for a chain history with many rejections).
pub fn median_heuristic<R: Rng + ?Sized>(
    points: MatRef<'_, f64>,
    max_points: usize,
    rng: &mut R,
) -> Result<f64, KernelError> {
    let n = points.nrows();
    let m = n.min(max_points);
    if m < 2 {
        return Err(KernelError::TooFewPoints { got: m });
    }
    let rows: Vec<usize> = if n > max_points {
        rand::seq::index::sample(rng, n, max_points).into_vec()
    } else {
        (0..n).collect()
    };
    for &i in &rows {
        if points.row(i).iter().any(|v| !v.is_finite()) {
            return Err(KernelError::NonFinitePoint { index: i });
        }
    }
    let mut distances = Vec::with_capacity(m * (m - 1) / 2);
    for (a, &i) in rows.iter().enumerate() {
        for &j in &rows[a + 1..] {
            let s: f64 = points
                .row(i)
                .iter()
                .zip(points.row(j).iter())
                .map(|(p, q)| (p - q) * (p - q))
                .sum();
            distances.push(s.sqrt());
        }
    }
    let mid = distances.len() / 2;
    let even = distances.len().is_multiple_of(2);
    let (lower, &mut upper, _) = distances.select_nth_unstable_by(mid, f64::total_cmp);
    let median = if even {
        // The largest of the lower half is the other middle value.
        let below = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        0.5 * (below + upper)
    } else {
        upper
    };
    if median > 0.0 {
        Ok(median)
    } else {
        Err(KernelError::ZeroMedianDistance)
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
        // Subsample of 17: the same rows as rand's index sampling with the same seed.
        let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(7);
        let got = median_heuristic(z.as_ref(), 17, &mut rng_a).unwrap();
        let rows = rand::seq::index::sample(&mut rng_b, 40, 17).into_vec();
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
    }
}
