//! Checks shared by the unit tests of the synthetic targets.

use crate::Target;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A seeded test generator.
pub(crate) fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// Compares `grad_log_density` at `x` with central finite differences of
/// `log_density`. With step h the truncation error is O(h²·|∂³ log π|) and the
/// rounding error O(ε|log π|/h); h = 1e-5 makes both ≲ 1e-7 for the O(1)–O(100)
/// log densities and derivatives used in the tests, so `tol` = 1e-5 relative to
/// max(1, |g|) leaves a wide margin while catching any formula error.
pub(crate) fn assert_gradient_matches_finite_differences(target: &dyn Target, x: &[f64]) {
    let h = 1e-5;
    let mut r = rng(0);
    let mut grad = vec![0.0; x.len()];
    target.grad_log_density(x, &mut grad).unwrap();
    let mut xp = x.to_vec();
    for i in 0..x.len() {
        xp[i] = x[i] + h;
        let up = target.log_density(&xp, &mut r);
        xp[i] = x[i] - h;
        let down = target.log_density(&xp, &mut r);
        xp[i] = x[i];
        let fd = (up - down) / (2.0 * h);
        assert!(
            (fd - grad[i]).abs() <= 1e-5 * grad[i].abs().max(1.0),
            "coordinate {i} at {x:?}: analytic {} vs finite difference {fd}",
            grad[i]
        );
    }
}

/// Midpoint-rule integral of `f` over `[a0, b0] × [a1(x0), b1(x0)]` with `n0`
/// and `n1` nodes per axis (the inner box may depend on the outer coordinate).
pub(crate) fn midpoint_2d(
    (a0, b0, n0): (f64, f64, usize),
    inner: impl Fn(f64) -> (f64, f64),
    n1: usize,
    mut f: impl FnMut(f64, f64) -> f64,
) -> f64 {
    let h0 = (b0 - a0) / n0 as f64;
    let mut total = 0.0;
    for i in 0..n0 {
        let x0 = a0 + (i as f64 + 0.5) * h0;
        let (a1, b1) = inner(x0);
        let h1 = (b1 - a1) / n1 as f64;
        let mut row = 0.0;
        for j in 0..n1 {
            row += f(x0, a1 + (j as f64 + 0.5) * h1);
        }
        total += row * h1;
    }
    total * h0
}

/// Draws `n` iid points from `target` into a row-major vector.
pub(crate) fn draw_iid(target: &dyn Target, n: usize, seed: u64) -> Vec<f64> {
    let d = target.dim();
    let mut r = rng(seed);
    let mut out = vec![0.0; n * d];
    for row in out.chunks_mut(d) {
        target.sample_iid(&mut r, row).unwrap();
    }
    out
}

/// Asserts `|estimate − expected| ≤ 5·sd/√n`: a 5-standard-error band, so a
/// correct sampler fails with probability < 6·10⁻⁷ per check (and the seeds are
/// fixed, so the outcome is deterministic).
pub(crate) fn assert_within_mc_error(what: &str, estimate: f64, expected: f64, sd: f64, n: usize) {
    let tol = 5.0 * sd / (n as f64).sqrt();
    assert!(
        (estimate - expected).abs() <= tol,
        "{what}: estimate {estimate} vs exact {expected} (tolerance {tol})"
    );
}
