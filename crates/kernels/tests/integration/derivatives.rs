//! Derivatives of every kernel against central finite differences, KAMH
//! Proposition 1, the gradient matrix against `grad_x`, and Gram matrices.

use faer::{Mat, Side};
use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, Laplacian, Linear, Matern, Polynomial, RationalQuadratic,
};
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

/// How smooth a kernel is at `x = y`.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Smoothness {
    /// Not differentiable at `x = y` (only tested away from it).
    Rough,
    /// Gradient at `x = y` exists (ν ∈ (1/2, 1] Matérn), Hessian does not.
    Differentiable,
    /// Twice differentiable everywhere.
    Smooth,
}

fn kernels() -> Vec<(&'static str, Box<dyn Kernel>, Smoothness)> {
    use Smoothness::*;
    vec![
        ("gaussian", Box::new(Gaussian::new(1.3).unwrap()), Smooth),
        ("laplacian", Box::new(Laplacian::new(1.7).unwrap()), Rough),
        (
            "matern-1/2",
            Box::new(Matern::new(0.5, 1.2).unwrap()),
            Rough,
        ),
        (
            "matern-3/2",
            Box::new(Matern::new(1.5, 0.9).unwrap()),
            Smooth,
        ),
        (
            "matern-5/2",
            Box::new(Matern::new(2.5, 1.4).unwrap()),
            Smooth,
        ),
        (
            "matern-0.3",
            Box::new(Matern::new(0.3, 1.1).unwrap()),
            Rough,
        ),
        (
            "matern-0.8",
            Box::new(Matern::new(0.8, 1.1).unwrap()),
            Differentiable,
        ),
        (
            "matern-1.7",
            Box::new(Matern::new(1.7, 1.0).unwrap()),
            Smooth,
        ),
        (
            "matern-3.3",
            Box::new(Matern::new(3.3, 1.6).unwrap()),
            Smooth,
        ),
        (
            "rational-quadratic",
            Box::new(RationalQuadratic::new(1.1, 0.7).unwrap()),
            Smooth,
        ),
        (
            "imq",
            Box::new(InverseMultiquadric::new(0.9).unwrap()),
            Smooth,
        ),
        (
            "imq-1.5",
            Box::new(InverseMultiquadric::with_exponent(1.2, 1.5).unwrap()),
            Smooth,
        ),
        ("linear", Box::new(Linear), Smooth),
        (
            "polynomial-1-3",
            Box::new(Polynomial::new(1.0, 3).unwrap()),
            Smooth,
        ),
        (
            "polynomial-0.2-2",
            Box::new(Polynomial::new(0.2, 2).unwrap()),
            Smooth,
        ),
        (
            "polynomial-0-1",
            Box::new(Polynomial::new(0.0, 1).unwrap()),
            Smooth,
        ),
    ]
}

fn normal_vec(rng: &mut impl Rng, d: usize, scale: f64) -> Vec<f64> {
    (0..d)
        .map(|_| scale * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

/// The finite-difference step away from the diagonal.
const H: f64 = 1e-5;

/// The step for stencils that straddle `x = y`. There the Hessian of e.g.
/// Matérn 3/2 is only Lipschitz (its FD error is O(h·c³), not O(h²)), but the
/// gradient is O(h) small so round-off stays at O(ε) and a tiny step is safe.
const H_DIAGONAL: f64 = 1e-8;

/// Central difference of `f` along coordinate `l` at `x` with step `h`: error
/// O(h² f‴) + O(ε f / h) ≈ 1e-10 + 1e-11 for the O(1) kernels here.
fn central_difference_with(h: f64, mut f: impl FnMut(&[f64]) -> f64, x: &[f64], l: usize) -> f64 {
    let (mut plus, mut minus) = (x.to_vec(), x.to_vec());
    plus[l] += h;
    minus[l] -= h;
    (f(&plus) - f(&minus)) / (2.0 * h)
}

fn central_difference(f: impl FnMut(&[f64]) -> f64, x: &[f64], l: usize) -> f64 {
    central_difference_with(H, f, x, l)
}

/// Tolerance for a finite-difference comparison: 1e-7 relative to the size of
/// the quantities involved (the FD error bound above with ample margin;
/// polynomial kernels reach values ~10³).
fn assert_close(name: &str, what: &str, got: f64, want: f64, scale: f64) {
    let tol = 1e-7 * (1.0 + scale.abs());
    assert!(
        (got - want).abs() <= tol,
        "{name}: {what}: analytic {got} vs finite difference {want} (tol {tol})"
    );
}

/// Checks gradient and (optionally) Hessian diagonal at (x, y) against
/// central differences of `eval` and `grad_x` respectively.
fn check_derivatives(name: &str, k: &dyn Kernel, x: &[f64], y: &[f64], hessian: bool) {
    // Near the diagonal the higher derivatives of rough Matérn kernels grow
    // like r^{2ν−3}: shrink the step with the distance r.
    let r = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let h = if x == y { H_DIAGONAL } else { H.min(1e-3 * r) };
    let d = x.len();
    let mut grad = vec![0.0; d];
    let value = k.grad_x(x, y, &mut grad);
    assert_eq!(value, k.eval(x, y), "{name}: grad_x must return k(x, y)");
    let scale = value.abs() + grad.iter().map(|g| g.abs()).fold(0.0, f64::max);
    for l in 0..d {
        let fd = central_difference_with(h, |p| k.eval(p, y), x, l);
        assert_close(name, &format!("∂k/∂x_{l}"), grad[l], fd, scale);
    }
    if hessian {
        let mut hess = vec![0.0; d];
        let value = k.hessian_diag_x(x, y, &mut hess);
        assert_eq!(
            value,
            k.eval(x, y),
            "{name}: hessian_diag_x must return k(x, y)"
        );
        let mut g = vec![0.0; d];
        for l in 0..d {
            let fd = central_difference_with(
                h,
                |p| {
                    k.grad_x(p, y, &mut g);
                    g[l]
                },
                x,
                l,
            );
            assert_close(
                name,
                &format!("∂²k/∂x_{l}²"),
                hess[l],
                fd,
                scale + hess[l].abs(),
            );
        }
    }
}

#[test]
fn derivatives_match_finite_differences_at_random_points() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for (name, k, _) in kernels() {
        for _ in 0..20 {
            let x = normal_vec(&mut rng, 4, 1.0);
            let y = normal_vec(&mut rng, 4, 1.0);
            check_derivatives(name, k.as_ref(), &x, &y, true);
        }
    }
}

#[test]
fn derivatives_match_finite_differences_near_the_diagonal() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    for (name, k, smoothness) in kernels() {
        if smoothness == Smoothness::Rough {
            continue;
        }
        for &distance in &[1e-1, 1e-2, 1e-3] {
            let x = normal_vec(&mut rng, 3, 1.0);
            let offset = normal_vec(&mut rng, 3, 1.0);
            let norm = offset.iter().map(|v| v * v).sum::<f64>().sqrt();
            let y: Vec<f64> = x
                .iter()
                .zip(&offset)
                .map(|(a, o)| a + distance * o / norm)
                .collect();
            check_derivatives(name, k.as_ref(), &x, &y, smoothness == Smoothness::Smooth);
        }
        // At x = y exactly: the FD stencil straddles the diagonal.
        let x = normal_vec(&mut rng, 3, 1.0);
        check_derivatives(name, k.as_ref(), &x, &x, smoothness == Smoothness::Smooth);
    }
}

#[test]
fn non_differentiable_points_return_the_documented_values() {
    let x = [0.3, -0.2, 1.0];
    let mut grad = [9.0; 3];
    let mut hess = [9.0; 3];
    // Matérn 1/2 at x = y: gradient 0, Hessian −∞.
    let m = Matern::new(0.5, 1.2).unwrap();
    m.grad_x(&x, &x, &mut grad);
    m.hessian_diag_x(&x, &x, &mut hess);
    assert_eq!(grad, [0.0; 3]);
    assert!(hess.iter().all(|&h| h == f64::NEG_INFINITY));
    // Laplacian with a vanishing coordinate: gradient 0 in it, Hessian k/ℓ²,
    // which is the one-sided second derivative (checked by a one-sided
    // second difference, error O(h)).
    let k = Laplacian::new(1.7).unwrap();
    let y = [0.3, 0.5, 0.2];
    let value = k.grad_x(&x, &y, &mut grad);
    k.hessian_diag_x(&x, &y, &mut hess);
    assert_eq!(grad[0], 0.0);
    assert!(grad[1] > 0.0 && grad[2] < 0.0);
    let h = 1e-4;
    let at = |t: f64| k.eval(&[x[0] + t, x[1], x[2]], &y);
    let one_sided = (at(2.0 * h) - 2.0 * at(h) + at(0.0)) / (h * h);
    assert!(
        (hess[0] - one_sided).abs() < 1e-3,
        "{} vs {one_sided}",
        hess[0]
    );
    assert!((hess[0] - value / (1.7 * 1.7)).abs() < 1e-15);
}

/// KAMH Proposition 1: ∇ₓ[k(x, x)] at y equals 2∇ₓk(x, y) at x = y.
#[test]
fn kamh_proposition_1_holds_for_differentiable_kernels() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for (name, k, smoothness) in kernels() {
        if smoothness == Smoothness::Rough {
            continue;
        }
        for _ in 0..5 {
            let y = normal_vec(&mut rng, 4, 1.0);
            let mut grad = vec![0.0; 4];
            k.grad_x(&y, &y, &mut grad);
            for l in 0..4 {
                let diagonal = central_difference(|p| k.eval(p, p), &y, l);
                let scale = diagonal.abs() + grad[l].abs();
                assert_close(
                    name,
                    &format!("Prop. 1, coordinate {l}"),
                    2.0 * grad[l],
                    diagonal,
                    scale,
                );
            }
        }
    }
}

/// `gradient_matrix` equals `2 grad_x(x, z_i)` column by column, for every
/// combination of column-major and row-major `z` and `out` (row-major `z`
/// with column-major `out` is the allocation-free path of the samplers).
#[test]
fn gradient_matrix_is_twice_the_gradients() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let (n, d) = (37, 5);
    let z_col_major = Mat::<f64>::from_fn(n, d, |_, _| rng.sample(StandardNormal));
    let z_row_major_storage = z_col_major.transpose().to_owned();
    let z_row_major = z_row_major_storage.transpose();
    let x = normal_vec(&mut rng, d, 1.0);
    for (name, k, _) in kernels() {
        for (z_layout, z) in [
            ("column-major z", z_col_major.as_ref()),
            ("row-major z", z_row_major),
        ] {
            let mut out_col_major = Mat::<f64>::zeros(d, n);
            let mut out_row_major_storage = Mat::<f64>::zeros(n, d);
            k.gradient_matrix(&x, z, out_col_major.as_mut());
            k.gradient_matrix(&x, z, out_row_major_storage.as_mut().transpose_mut());
            let mut grad = vec![0.0; d];
            for i in 0..n {
                let zi: Vec<f64> = (0..d).map(|l| z_col_major[(i, l)]).collect();
                k.grad_x(&x, &zi, &mut grad);
                for l in 0..d {
                    let want = 2.0 * grad[l];
                    let tol = 1e-13 * (1.0 + want.abs());
                    for (out_layout, got) in [
                        ("column-major out", out_col_major[(l, i)]),
                        ("row-major out", out_row_major_storage[(i, l)]),
                    ] {
                        assert!(
                            (got - want).abs() <= tol,
                            "{name} ({z_layout}, {out_layout}): M[{l},{i}] = {got}, 2∇k = {want}"
                        );
                    }
                }
            }
        }
    }
}

/// Gram matrices are exactly symmetric and positive semi-definite: smallest
/// eigenvalue ≥ −1e-10·n (relative to the largest entry for the unbounded
/// polynomial kernels). The point set includes a duplicated point.
#[test]
fn gram_matrices_are_symmetric_positive_semidefinite() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let (n, d) = (60, 3);
    let mut points: Vec<Vec<f64>> = (0..n - 1).map(|_| normal_vec(&mut rng, d, 1.5)).collect();
    points.push(points[0].clone());
    for (name, k, _) in kernels() {
        let gram = Mat::<f64>::from_fn(n, n, |i, j| k.eval(&points[i], &points[j]));
        let mut largest: f64 = 0.0;
        for i in 0..n {
            for j in 0..n {
                assert_eq!(
                    gram[(i, j)],
                    gram[(j, i)],
                    "{name}: Gram matrix not symmetric"
                );
                largest = largest.max(gram[(i, j)].abs());
            }
        }
        let eigen = gram.self_adjoint_eigen(Side::Lower).unwrap();
        let smallest = eigen.S()[0];
        assert!(
            smallest >= -1e-10 * n as f64 * largest.max(1.0),
            "{name}: smallest eigenvalue {smallest}"
        );
    }
}

/// A kernel that is not PSD must fail the eigenvalue check above: guards the
/// check itself (k(x, y) = −exp(−‖x − y‖²/2) has a negative diagonal).
#[test]
fn the_psd_check_detects_an_indefinite_matrix() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let k = Gaussian::new(1.0).unwrap();
    let points: Vec<Vec<f64>> = (0..20).map(|_| normal_vec(&mut rng, 2, 1.0)).collect();
    let gram = Mat::<f64>::from_fn(20, 20, |i, j| {
        let v = k.eval(&points[i], &points[j]);
        if i == j { v - 1.5 } else { v }
    });
    let smallest = gram.self_adjoint_eigen(Side::Lower).unwrap().S()[0];
    assert!(smallest < -1e-10 * 20.0);
}
