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
