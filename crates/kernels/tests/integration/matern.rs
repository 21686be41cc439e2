//! The Matérn family: the K_ν path against the closed forms, and the KAMH
//! paper's gradient identity.

use kameleon_kernels::{Kernel, Matern};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

fn normal_vec(rng: &mut impl Rng, d: usize) -> Vec<f64> {
    use rand::RngExt;
    (0..d)
        .map(|_| rng.sample::<f64, _>(StandardNormal))
        .collect()
}

fn assert_relative(what: &str, got: f64, want: f64, tol: f64) {
    let ok = if want.is_infinite() {
        got == want
    } else {
        (got - want).abs() <= tol * want.abs().max(1e-300)
    };
    assert!(ok, "{what}: {got} vs {want}");
}

/// Value, gradient and Hessian diagonal through K_ν agree with the closed
/// forms at ν = 1/2, 3/2, 5/2, over distances from 1e-6 ℓ to 700 ℓ (the
/// largest exercise the asymptotic expansion of K_ν, u > 500) and at x = y.
#[test]
fn bessel_path_matches_closed_forms() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    let d = 3;
    for nu in [0.5, 1.5, 2.5] {
        let length_scale = 1.3;
        let closed = Matern::new(nu, length_scale).unwrap();
        let bessel = Matern::with_bessel(nu, length_scale).unwrap();
        for distance in [
            0.0, 1e-6, 1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 100.0, 300.0, 700.0,
        ] {
            let x = normal_vec(&mut rng, d);
            let dir = normal_vec(&mut rng, d);
            let norm = dir.iter().map(|v| v * v).sum::<f64>().sqrt();
            let y: Vec<f64> = x
                .iter()
                .zip(&dir)
                .map(|(a, v)| a + distance * length_scale * v / norm)
                .collect();
            let what = format!("ν = {nu}, r = {distance}ℓ");
            assert_relative(
                &format!("{what}: k"),
                bessel.eval(&x, &y),
                closed.eval(&x, &y),
                1e-12,
            );
            let (mut g1, mut g2, mut h1, mut h2) =
                (vec![0.0; d], vec![0.0; d], vec![0.0; d], vec![0.0; d]);
            closed.grad_x(&x, &y, &mut g1);
            bessel.grad_x(&x, &y, &mut g2);
            closed.hessian_diag_x(&x, &y, &mut h1);
            bessel.hessian_diag_x(&x, &y, &mut h2);
            for l in 0..d {
                assert_relative(&format!("{what}: ∇k_{l}"), g2[l], g1[l], 1e-10);
                // Relative to the largest entry: a + b·Δ² cancels near x = y.
                let scale = h1.iter().map(|v| v.abs()).fold(0.0, f64::max);
                let ok = h1[l] == h2[l] || (h1[l] - h2[l]).abs() <= 1e-9 * scale;
                assert!(ok, "{what}: ∂²k_{l}: {} vs {}", h2[l], h1[l]);
            }
        }
    }
}

/// KAMH: ∇ₓk_{ν,ρ}(x, x′) = k_{ν−1,ρ}(x, x′)(x′ − x) / (2ρ²(ν − 1)) in the
/// paper's ρ convention, for closed-form and K_ν orders.
#[test]
fn kamh_gradient_identity() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(22);
    let d = 4;
    for nu in [1.5, 1.6, 2.5, 2.7, 4.0] {
        for rho in [0.4, 1.0, 2.3] {
            let k = Matern::from_kamh_rho(nu, rho).unwrap();
            let rougher = Matern::from_kamh_rho(nu - 1.0, rho).unwrap();
            assert_relative("ρ round trip", k.kamh_rho(), rho, 1e-14);
            for _ in 0..10 {
                let x = normal_vec(&mut rng, d);
                let y = normal_vec(&mut rng, d);
                let mut grad = vec![0.0; d];
                k.grad_x(&x, &y, &mut grad);
                let factor = rougher.eval(&x, &y) / (2.0 * rho * rho * (nu - 1.0));
                for l in 0..d {
                    let want = factor * (y[l] - x[l]);
                    assert!(
                        (grad[l] - want).abs() <= 1e-11 * (1.0 + want.abs()),
                        "ν = {nu}, ρ = {rho}: {} vs {want}",
                        grad[l]
                    );
                }
            }
        }
    }
}

/// `(k, a, b)` of the Matérn kernel at squared distance `s` by quadrature of
/// its scale-mixture form, independent of `K_ν`: with
/// `g ~ Gamma(shape ν, rate ν)`, `k = E[e^{−s/(2ℓ²g)}]`, so
/// `a = 2 dk/ds = −E[e^{−s/(2ℓ²g)}/(ℓ²g)]` and
/// `b = 4 d²k/ds² = E[e^{−s/(2ℓ²g)}/(ℓ⁴g²)]`. Simpson's rule over ±30
/// standard deviations (1/√ν) of g around its mode, with the density
/// normalised by the same rule; the integrands are smooth and the tails
/// beyond are below e^{−400}.
fn matern_by_quadrature(nu: f64, length_scale: f64, s: f64) -> (f64, f64, f64) {
    let l2 = length_scale * length_scale;
    let mode = (nu - 1.0) / nu;
    let ln_weight = |g: f64| (nu - 1.0) * (g / mode).ln() - nu * (g - mode);
    let (lo, hi) = ((mode - 30.0 / nu.sqrt()).max(1e-3), mode + 30.0 / nu.sqrt());
    let steps = 20_000;
    let h = (hi - lo) / steps as f64;
    let mut sums = [0.0; 4];
    for i in 0..=steps {
        let g = lo + h * i as f64;
        let simpson = if i == 0 || i == steps {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        let w = simpson * ln_weight(g).exp();
        let e = (-s / (2.0 * l2 * g)).exp();
        sums[0] += w;
        sums[1] += w * e;
        sums[2] -= w * e / (l2 * g);
        sums[3] += w * e / (l2 * l2 * g * g);
    }
    (sums[1] / sums[0], sums[2] / sums[0], sums[3] / sums[0])
}

/// Large smoothness: value, gradient and Hessian diagonal agree with the
/// scale-mixture quadrature, both close to `x = y` (where `K_ν` would
/// overflow and the power series is used) and farther out (through `K_ν`);
/// the largest accepted ν is within O(1/ν) of the Gaussian limit; larger ν
/// is rejected.
#[test]
fn large_smoothness_matches_the_scale_mixture_and_the_gaussian_limit() {
    let length_scale = 0.8;
    for nu in [50.0, 137.3, 200.0, Matern::MAX_NU] {
        let kernel = Matern::new(nu, length_scale).unwrap();
        for distance in [1e-3, 0.05, 0.2, 0.4, 0.7, 1.0, 1.5, 2.5] {
            let r = distance * length_scale;
            let (x, y) = ([0.3, -0.1], [0.3 + 0.6 * r, -0.1 - 0.8 * r]);
            let (k, a, b) = matern_by_quadrature(nu, length_scale, r * r);
            let what = format!("ν = {nu}, r = {distance}ℓ");
            assert_relative(&format!("{what}: k"), kernel.eval(&x, &y), k, 1e-10);
            let (mut grad, mut hess) = ([0.0; 2], [0.0; 2]);
            kernel.grad_x(&x, &y, &mut grad);
            kernel.hessian_diag_x(&x, &y, &mut hess);
            for l in 0..2 {
                let delta = x[l] - y[l];
                assert_relative(&format!("{what}: grad {l}"), grad[l], a * delta, 1e-9);
                assert_relative(
                    &format!("{what}: hessian {l}"),
                    hess[l],
                    a + b * delta * delta,
                    1e-9,
                );
            }
            // the Gaussian limit: E[e^{−c/g}] − e^{−c} ≈ e^{−c}(c²/2 − c)/ν
            // for c = r²/(2ℓ²), from the second-order expansion in g − 1
            if nu == Matern::MAX_NU {
                let c = 0.5 * distance * distance;
                let gaussian = (-c).exp();
                let bound = 2.0 * gaussian * (0.5 * c * c - c).abs() / nu + 1e-12;
                let gap = kernel.eval(&x, &y) - gaussian;
                assert!(gap.abs() <= bound, "{what}: {gap} vs bound {bound}");
            }
        }
    }
    for bad in [Matern::MAX_NU * (1.0 + 1e-15), 1e3, 1e20] {
        let message = Matern::new(bad, 1.0).unwrap_err().to_string();
        assert!(message.contains("Gaussian"), "{message}");
        assert!(Matern::with_bessel(bad, 1.0).is_err());
        assert!(Matern::from_kamh_rho(bad, 1.0).is_err());
    }
}
