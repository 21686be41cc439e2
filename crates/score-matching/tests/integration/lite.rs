//! Tests of the lite estimator against independent computations.

use crate::common;

use common::{
    check_derivatives, gaussian_points, relative_error, row, score_error, solve_spd, uniform_points,
};
use faer::Mat;
use kameleon_kernels::{Gaussian, Kernel};
use kameleon_score_matching::{
    BaseMeasure, GradientModel, LiteEstimator, LiteRegulariser, ScoreMatchingError,
};

/// Ĵ(α) = aᵀα + ½αᵀQα on `points` for `f = Σ αᵢ k(zᵢ, ·)`, built from the
/// kernels crate's explicit derivatives (an independent implementation):
/// `∂_l f = Σ αᵢ ∂_l k(x, zᵢ)`, `∂²_l f = Σ αᵢ ∂²_l k(x, zᵢ)`. With the
/// base measure the objective of `f + log q₀` has the extra linear term
/// `mean_x ∇f(x)·∇ log q₀(x)` (and a constant, not included).
fn objective_quadratic_form(
    points: &Mat<f64>,
    sigma: f64,
    base: BaseMeasure,
) -> (Vec<f64>, Mat<f64>) {
    let (n, d) = (points.nrows(), points.ncols());
    let kernel = Gaussian::from_lite_sigma(sigma).unwrap();
    let mut linear = vec![0.0; n];
    let mut quadratic = Mat::<f64>::zeros(n, n);
    let (mut g, mut h) = (Mat::<f64>::zeros(n, d), vec![0.0; d]);
    for k in 0..n {
        let x = row(points, k);
        for i in 0..n {
            let z = row(points, i);
            let mut gi = vec![0.0; d];
            kernel.grad_x(&x, &z, &mut gi);
            kernel.hessian_diag_x(&x, &z, &mut h);
            linear[i] += h.iter().sum::<f64>() / n as f64;
            let pull = common::base_gradient(base, &x);
            linear[i] += (0..d).map(|l| gi[l] * pull[l]).sum::<f64>() / n as f64;
            for l in 0..d {
                g[(i, l)] = gi[l];
            }
        }
        for i in 0..n {
            for j in 0..n {
                quadratic[(i, j)] += (0..d).map(|l| g[(i, l)] * g[(j, l)]).sum::<f64>() / n as f64;
            }
        }
    }
    (linear, quadratic)
}

/// Both regularisers, both base measures; the standard normal one away from
/// the origin (points in [1, 3]²) so that its term is large.
#[test]
fn alpha_minimises_the_regularised_objective() {
    let (sigma, lambda) = (1.3, 0.05);
    let points = uniform_points(15, 2, 3);
    let shifted = Mat::from_fn(15, 2, |i, l| points[(i, l)] + 2.0);
    let kernel = Gaussian::from_lite_sigma(sigma).unwrap();
    let settings = [
        (LiteRegulariser::Identity, BaseMeasure::Flat, &points),
        (
            LiteRegulariser::KernelPlusIdentity,
            BaseMeasure::Flat,
            &points,
        ),
        (
            LiteRegulariser::Identity,
            BaseMeasure::StandardNormal,
            &shifted,
        ),
        (
            LiteRegulariser::KernelPlusIdentity,
            BaseMeasure::StandardNormal,
            &shifted,
        ),
        (
            LiteRegulariser::Identity,
            BaseMeasure::StudentT { dof: 3.0 },
            &shifted,
        ),
    ];
    for (regulariser, base, points) in settings {
        let n = points.nrows() as f64;
        let (a, q) = objective_quadratic_form(points, sigma, base);
        let mut model = LiteEstimator::new(sigma, lambda)
            .unwrap()
            .with_regulariser(regulariser)
            .with_base_measure(base)
            .unwrap();
        model.fit(points.as_ref()).unwrap();
        // Minimise aᵀα + ½αᵀQα + (2λ/(nσ²)) αᵀRα: (Q + (4λ/(nσ²))R) α = −a.
        let ridge = 4.0 * lambda / (n * sigma * sigma);
        let system = Mat::from_fn(q.nrows(), q.ncols(), |i, j| {
            let r = match regulariser {
                LiteRegulariser::Identity => 0.0,
                LiteRegulariser::KernelPlusIdentity => {
                    kernel.eval(&row(points, i), &row(points, j))
                }
            } + if i == j { 1.0 } else { 0.0 };
            q[(i, j)] + ridge * r
        });
        let minus_a: Vec<f64> = a.iter().map(|v| -v).collect();
        let brute = solve_spd(&system, &minus_a);
        let err = relative_error(model.alpha(), &brute);
        assert!(
            err < 1e-8,
            "{regulariser:?}, {base:?}: relative error {err}"
        );

        // The trait's Ĵ at α̂ equals the quadratic form at α̂, plus the base
        // measure's constant mean_x (Δ log q₀ + ½‖∇ log q₀‖²) = mean (‖x‖²/2 − d).
        let alpha = model.alpha().to_vec();
        let quad: f64 = (0..alpha.len())
            .map(|i| {
                alpha[i] * a[i]
                    + 0.5 * alpha[i] * (0..alpha.len()).map(|j| q[(i, j)] * alpha[j]).sum::<f64>()
            })
            .sum();
        let constant = common::base_measure_constant(base, points);
        let quad = quad + constant;
        let j = model.score_matching_objective(points.as_ref()).unwrap();
        assert!(
            (j - quad).abs() < 1e-10 * quad.abs().max(1.0),
            "{base:?}: {j} vs {quad}"
        );
    }
}

#[test]
fn gradient_and_laplacian_match_finite_differences() {
    let points = uniform_points(40, 3, 5);
    for base in [
        BaseMeasure::Flat,
        BaseMeasure::StandardNormal,
        BaseMeasure::StudentT { dof: 3.0 },
    ] {
        let mut model = LiteEstimator::new(2.0, 0.1)
            .unwrap()
            .with_base_measure(base)
            .unwrap();
        model.fit(points.as_ref()).unwrap();
        check_derivatives(
            &mut model,
            &[[0.1, -0.4, 0.7], [1.5, 0.2, -1.0], [-0.3, 0.0, 0.05]],
        );
    }
    // unfitted: the base measure alone
    let mut unfitted = LiteEstimator::new(2.0, 0.1)
        .unwrap()
        .with_base_measure(BaseMeasure::StandardNormal)
        .unwrap();
    check_derivatives(
        &mut unfitted,
        &[[0.1, -0.4, 0.7], [1.5, 0.2, -1.0], [-0.3, 0.0, 0.05]],
    );
}

/// On N(μ, Σ) samples the fitted score approaches −Σ⁻¹(x − μ) in the bulk
/// as n grows (a fixed-seed convergence check: with σ = 32, λ = 0.01 the
/// errors are ≈ 0.38, 0.21, 0.08; a wide kernel suits the quadratic log
/// density, and the bound 0.15 is about twice the largest-n error).
#[test]
fn lite_score_approaches_gaussian_score() {
    let chol = Mat::from_fn(2, 2, |i, j| [[1.0, 0.0], [0.6, 0.8]][i][j]);
    let errors: Vec<f64> = [50, 200, 800]
        .iter()
        .map(|&n| {
            let points = gaussian_points(n, &[0.5, -1.0], &chol, 11);
            let mut model = LiteEstimator::new(32.0, 1e-2).unwrap();
            model.fit(points.as_ref()).unwrap();
            score_error(&mut model, 200)
        })
        .collect();
    assert!(errors[0] > errors[1] && errors[1] > errors[2], "{errors:?}");
    assert!(errors[2] < 0.15, "{errors:?}");
}

/// Mean of ‖∇ log π̂(x) + x‖ / ‖x‖ over `n_test` fresh N(0, I) points
/// scaled by `radius`: the relative error of the fitted score against the
/// standard normal's, in the bulk (1) or beyond it (2).
fn standard_normal_score_error(
    model: &mut impl GradientModel,
    d: usize,
    n_test: usize,
    radius: f64,
) -> f64 {
    let identity = Mat::<f64>::identity(d, d);
    let test = gaussian_points(n_test, &vec![0.0; d], &identity, 4242);
    let mut grad = vec![0.0; d];
    (0..n_test)
        .map(|i| {
            let x: Vec<f64> = row(&test, i).iter().map(|v| v * radius).collect();
            model.grad_log_density(&x, &mut grad);
            let error: f64 = grad.iter().zip(&x).map(|(g, v)| (g + v).powi(2)).sum();
            let norm: f64 = x.iter().map(|v| v * v).sum();
            (error / norm).sqrt()
        })
        .sum::<f64>()
        / n_test as f64
}

/// Fitted on 200 N(0, I) draws in 20 dimensions (σ by the lite median rule
/// 4m², m² ≈ 2d; λ = 100), both models match the score in the bulk, but
/// beyond it, where the points are few, the flat model's score fades while
/// the standard normal base measure's correction stays small. Measured with
/// these seeds, relative errors in the bulk / at twice the radius: flat
/// 0.10 / 0.30, standard normal 0.09 / 0.04; the bounds leave a margin of
/// about two.
#[test]
fn standard_normal_base_measure_holds_the_score_beyond_the_points() {
    let d = 20;
    let identity = Mat::<f64>::identity(d, d);
    let points = gaussian_points(200, &vec![0.0; d], &identity, 77);
    let sigma = 4.0 * 2.0 * d as f64;
    let mut flat = LiteEstimator::new(sigma, 100.0).unwrap();
    let mut normal = flat
        .clone()
        .with_base_measure(BaseMeasure::StandardNormal)
        .unwrap();
    flat.fit(points.as_ref()).unwrap();
    normal.fit(points.as_ref()).unwrap();
    let bulk = standard_normal_score_error(&mut normal, d, 200, 1.0);
    let far_flat = standard_normal_score_error(&mut flat, d, 200, 2.0);
    let far_normal = standard_normal_score_error(&mut normal, d, 200, 2.0);
    assert!(bulk < 0.2, "standard normal, bulk: {bulk}");
    assert!(far_normal < 0.1, "standard normal, far: {far_normal}");
    assert!(far_flat > 0.2, "flat, far: {far_flat}");
}

/// Points without coordinates and a basis whose n × n system is beyond
/// memory are errors (a zero-stride view repeats one point 2²⁹ times: the
/// system would need 3·2⁵⁸ values, 6 EiB).
#[test]
fn lite_rejects_degenerate_shapes_and_sizes_beyond_memory() {
    let mut model = LiteEstimator::new(1.0, 1.0).unwrap();
    assert_eq!(
        model.fit(Mat::<f64>::zeros(5, 0).as_ref()),
        Err(ScoreMatchingError::DimensionMismatch {
            expected: 1,
            got: 0
        })
    );
    let point = [0.5, -0.5];
    let repeated = faer::MatRef::from_row_major_slice_with_stride(&point, 1 << 29, 2, 0);
    let err = model.fit(repeated).unwrap_err();
    assert!(
        matches!(err, ScoreMatchingError::BufferTooLarge(_)),
        "{err}"
    );
    assert!(err.to_string().contains("n × n"), "{err}");
}

/// As documented on the fit: n copies of one point give a Gaussian bump of
/// equal weights at it, whose gradient points back to the point from
/// anywhere near it.
#[test]
fn lite_fit_on_one_repeated_point_is_a_bump_there() {
    let (sigma, lambda) = (2.0, 1e-3);
    let centre = [1.5, -0.5];
    for n in [1, 7] {
        let points = Mat::from_fn(n, 2, |_, l| centre[l]);
        let mut model = LiteEstimator::new(sigma, lambda).unwrap();
        model.fit(points.as_ref()).unwrap();
        let alpha = model.alpha();
        assert!(alpha.iter().all(|&a| a > 0.0 && a == alpha[0]), "{alpha:?}");
        let mut grad = [0.0; 2];
        for offset in [[0.3, 0.0], [-0.2, 0.4], [0.0, -1.0]] {
            let x = [centre[0] + offset[0], centre[1] + offset[1]];
            model.grad_log_density(&x, &mut grad);
            let inward = -(grad[0] * offset[0] + grad[1] * offset[1]);
            assert!(inward > 0.0, "n = {n}, x = {x:?}: {grad:?}");
        }
    }
}

/// On one point the system is `λR` alone and `α̂ ∝ d/λ`: with a
/// subnormal λ that overflows, and the fit errors instead of giving a
/// model whose value is infinite and whose gradient is NaN everywhere. The
/// previous fit is kept.
#[test]
fn lite_fit_whose_alpha_overflows_is_an_error() {
    let point = Mat::from_fn(1, 2, |_, l| [0.5, -0.5][l]);
    let mut model = LiteEstimator::new(1.0, 1e-3).unwrap();
    model.fit(point.as_ref()).unwrap();
    let fitted = model.alpha().to_vec();
    model.set_lambda(1e-310).unwrap();
    assert_eq!(
        model.fit(point.as_ref()),
        Err(ScoreMatchingError::NotPositiveDefinite)
    );
    assert_eq!(model.alpha(), &fitted[..]);
}

/// The lite system is formed from the raw coordinates, so points far from
/// the origin (a spread of 3 at 10⁶) lose its positive definiteness to
/// rounding: the error says to centre them, not only to increase λ.
#[test]
fn lite_fit_far_from_the_origin_advises_centring() {
    let spread = Mat::from_fn(30, 2, |i, l| ((i * 7 + l * 3) % 11) as f64 * 0.3 - 1.5);
    let far = Mat::from_fn(30, 2, |i, l| spread[(i, l)] + 1e6);
    let mut model = LiteEstimator::new(2.0, 1e-3).unwrap();
    let message = model.fit(far.as_ref()).unwrap_err().to_string();
    assert!(message.contains("centre"), "{message}");
    model.fit(spread.as_ref()).unwrap();
}

#[test]
fn lite_rejects_bad_input() {
    assert!(matches!(
        LiteEstimator::new(0.0, 1.0),
        Err(ScoreMatchingError::InvalidParameter { name: "sigma", .. })
    ));
    assert!(matches!(
        LiteEstimator::new(1.0, f64::NAN),
        Err(ScoreMatchingError::InvalidParameter { name: "lambda", .. })
    ));
    let mut model = LiteEstimator::new(1.0, 1.0).unwrap();
    assert!(matches!(
        model.fit(Mat::<f64>::zeros(0, 2).as_ref()),
        Err(ScoreMatchingError::TooFewPoints { .. })
    ));
    let mut bad = uniform_points(5, 2, 1);
    bad[(3, 1)] = f64::INFINITY;
    assert_eq!(
        model.fit(bad.as_ref()),
        Err(ScoreMatchingError::NonFinitePoint { index: 3 })
    );
    model.fit(uniform_points(5, 2, 1).as_ref()).unwrap();
    assert!(matches!(
        model.score_matching_objective(uniform_points(5, 3, 1).as_ref()),
        Err(ScoreMatchingError::DimensionMismatch {
            expected: 2,
            got: 3
        })
    ));
}

/// The fast evaluation (expanded distances `‖z − c‖² + ‖x − c‖² − 2(z − c)ᵀ(x − c)`
/// about the basis mean `c`, and `∇f = (2/σ)[Σ wᵢ(zᵢ − c) − (x − c) Σ wᵢ]`)
/// agrees with the direct form `Σ αᵢ exp(−‖x − zᵢ‖²/σ)`,
/// `−(2/σ) Σ wᵢ (x − zᵢ)` and the Laplacian `Σ wᵢ ((4/σ²)‖x − zᵢ‖² − 2d/σ)`
/// (libm `exp`), on data far from the origin and at points on, between and
/// away from the basis; with n not a multiple of the block or chunk size,
/// in one chunk of the evaluation pass (n = 37, d = 1 and 5: partial sums
/// in registers) and in three (n = 150, d = 8 in registers, d = 11 in the
/// scratch slice). Rounding analysis: the
/// exponent's absolute error is a few ulp of `(‖zᵢ − c‖² + ‖x − c‖²)/σ`,
/// the gradient's cancellation error a few ulp of
/// `(2/σ) Σ |wᵢ| (‖zᵢ − c‖ + ‖x − c‖)`; the bound below is 10⁻¹³
/// (≈ 450 ulp, for sums of up to 150 terms) of their product scale, which
/// also bounds the Laplacian's error (its terms are the exponents times
/// `4wᵢ/σ` plus `2d wᵢ/σ`).
#[test]
fn fast_evaluation_matches_the_direct_form() {
    for (n, d) in [(37, 1), (37, 5), (150, 8), (150, 11)] {
        check_fast_evaluation(n, d);
    }
}

fn check_fast_evaluation(n: usize, d: usize) {
    let sigma = 3.0;
    let mut points = uniform_points(n, d, 9);
    for i in 0..n {
        for l in 0..d {
            points[(i, l)] += 300.0;
        }
    }
    let mut model = LiteEstimator::new(sigma, 0.1).unwrap();
    model.fit(points.as_ref()).unwrap();
    let centre: Vec<f64> = (0..d)
        .map(|l| (0..n).map(|i| points[(i, l)]).sum::<f64>() / n as f64)
        .collect();
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    let mut xs: Vec<Vec<f64>> = vec![row(&points, 0), row(&points, n - 1), centre.clone()];
    xs.push(
        (0..d)
            .map(|l| 0.5 * (points[(3, l)] + points[(8, l)]))
            .collect(),
    );
    xs.push(centre.iter().map(|c| c + 2.5).collect());
    for x in xs {
        let (mut direct_grad, mut direct_f, mut direct_laplacian, mut scale) =
            (vec![0.0; d], 0.0, 0.0, 0.0);
        let xc: Vec<f64> = x.iter().zip(&centre).map(|(a, c)| a - c).collect();
        for i in 0..n {
            let z = row(&points, i);
            let r2: f64 = x.iter().zip(&z).map(|(a, b)| (a - b).powi(2)).sum();
            let w = model.alpha()[i] * (-r2 / sigma).exp();
            direct_f += w;
            direct_laplacian += w * (4.0 * r2 / (sigma * sigma) - 2.0 * d as f64 / sigma);
            for l in 0..d {
                direct_grad[l] -= 2.0 / sigma * w * (x[l] - z[l]);
            }
            let zc: Vec<f64> = z.iter().zip(&centre).map(|(a, c)| a - c).collect();
            let (nz, nx) = (norm(&zc), norm(&xc));
            scale += 2.0 / sigma * w.abs() * (nz + nx + 1.0) * (1.0 + (nz * nz + nx * nx) / sigma);
        }
        let mut grad = vec![0.0; d];
        let laplacian = model.grad_and_laplacian(&x, &mut grad);
        assert!(
            (laplacian - direct_laplacian).abs() <= 1e-13 * scale * (1.0 + d as f64),
            "{laplacian} vs {direct_laplacian} (scale {scale})"
        );
        for l in 0..d {
            assert!(
                (grad[l] - direct_grad[l]).abs() <= 1e-13 * scale,
                "{grad:?} vs {direct_grad:?} (scale {scale})"
            );
        }
        let f = model.log_density_unnormalised(&x);
        assert!((f - direct_f).abs() <= 1e-13 * scale, "{f} vs {direct_f}");
    }
}

/// Far out, where ‖x‖² overflows, the Student-t base measure's Laplacian
/// is its limit 0 (it was ∞/∞ = NaN), next to the tiny values just inside.
#[test]
fn student_base_measure_laplacian_is_finite_where_the_norm_overflows() {
    let mut model = LiteEstimator::new(1.0, 1e-3)
        .unwrap()
        .with_base_measure(BaseMeasure::StudentT { dof: 3.0 })
        .unwrap();
    let mut grad = [0.0; 2];
    for (r, bound) in [(1e150, 1e-290), (1e155, 0.0), (f64::MAX, 0.0)] {
        let laplacian = model.grad_and_laplacian(&[r, -r], &mut grad);
        assert!(laplacian.abs() <= bound, "r = {r}: {laplacian}");
        assert!(grad.iter().all(|g| g.is_finite()), "r = {r}: {grad:?}");
    }
}

/// The Student-t base measure's closed-form gradient and Laplacian (used by
/// the objective checks above) against finite differences of its log
/// density, and an invalid ν refused.
#[test]
fn student_base_measure_derivatives_match_finite_differences() {
    let dof = 3.0;
    for x in [[0.1, -0.4, 0.7], [1.5, 0.2, -1.0], [4.0, -3.0, 2.5]] {
        let (grad, laplacian) =
            common::finite_differences(&x, |y| common::student_log_density(dof, y));
        let base = BaseMeasure::StudentT { dof };
        let exact = common::base_gradient(base, &x);
        assert!(
            relative_error(&exact, &grad) < 1e-6,
            "{exact:?} vs {grad:?}"
        );
        let exact = common::base_laplacian(base, &x);
        assert!((exact - laplacian).abs() < 1e-4, "{exact} vs {laplacian}");
    }
    for dof in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let estimator = LiteEstimator::new(2.0, 0.1).unwrap();
        assert!(
            estimator
                .with_base_measure(BaseMeasure::StudentT { dof })
                .is_err()
        );
    }
}

/// Every σ the estimator accepts has a kernel: `kernel()` must not panic.
/// A σ whose length-scale `√(σ/2)` the Gaussian kernel refuses (its fourth
/// power under- or overflows) is refused by `new` and `set_sigma` instead.
#[test]
fn sigma_without_a_gaussian_kernel_is_refused() {
    for sigma in [1e-300, 1e-160, 1e160, 1e300] {
        assert!(
            Gaussian::from_lite_sigma(sigma).is_err(),
            "the kernels crate refuses σ = {sigma}"
        );
        assert!(
            matches!(
                LiteEstimator::new(sigma, 1.0),
                Err(ScoreMatchingError::InvalidParameter { name: "sigma", .. })
            ),
            "σ = {sigma} accepted by new"
        );
        let mut model = LiteEstimator::new(1.0, 1.0).unwrap();
        assert!(
            model.set_sigma(sigma).is_err(),
            "σ = {sigma} accepted by set_sigma"
        );
        assert_eq!(model.sigma(), 1.0, "a refused σ leaves the old one");
    }
    for sigma in [1e-150, 1e-3, 2.0, 1e150] {
        let model = LiteEstimator::new(sigma, 1.0).unwrap();
        assert_eq!(model.kernel(), Gaussian::from_lite_sigma(sigma).unwrap());
    }
}
