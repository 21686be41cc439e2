//! The fast Walsh–Hadamard transform.

/// Replaces `x` by `H x`, where `H` is the unnormalised Sylvester–Hadamard
/// matrix of size `n = x.len()` (`H₁ = [1]`, `H₂ₖ = [[Hₖ, Hₖ], [Hₖ, −Hₖ]]`),
/// in place, in O(n log n). `n` must be a power of two (checked by the
/// callers when they build their transforms). `H` is symmetric and `H H = n I`.
pub(crate) fn fwht(x: &mut [f64]) {
    debug_assert!(x.len().is_power_of_two());
    let mut half = 1;
    while half < x.len() {
        for pair in x.chunks_exact_mut(2 * half) {
            let (lo, hi) = pair.split_at_mut(half);
            for (a, b) in lo.iter_mut().zip(hi.iter_mut()) {
                let (u, v) = (*a, *b);
                *a = u + v;
                *b = u - v;
            }
        }
        half *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::fwht;

    /// The Sylvester–Hadamard matrix built by its recursive definition.
    fn sylvester(n: usize) -> Vec<Vec<f64>> {
        let mut h = vec![vec![1.0]];
        while h.len() < n {
            let k = h.len();
            let mut next = vec![vec![0.0; 2 * k]; 2 * k];
            for i in 0..k {
                for j in 0..k {
                    next[i][j] = h[i][j];
                    next[i][j + k] = h[i][j];
                    next[i + k][j] = h[i][j];
                    next[i + k][j + k] = -h[i][j];
                }
            }
            h = next;
        }
        h
    }

    #[test]
    fn matches_the_explicit_hadamard_matrix_and_squares_to_n() {
        for log_n in 0..=10 {
            let n = 1usize << log_n;
            let h = sylvester(n);
            // Arbitrary non-symmetric input with entries of mixed signs.
            let x: Vec<f64> = (0..n).map(|i| ((i * 37 + 11) % 17) as f64 - 8.3).collect();
            let mut y = x.clone();
            fwht(&mut y);
            for i in 0..n {
                let direct: f64 = (0..n).map(|j| h[i][j] * x[j]).sum();
                // Integer-valued sums of ≤ 1024 terms of size ≤ 9: exact up to
                // a few ulps of the magnitude n·9.
                assert!(
                    (y[i] - direct).abs() <= 1e-12 * (n as f64) * 9.0,
                    "n={n} i={i}"
                );
            }
            fwht(&mut y);
            for i in 0..n {
                assert!((y[i] - n as f64 * x[i]).abs() <= 1e-12 * (n as f64) * 9.0);
            }
        }
    }
}
