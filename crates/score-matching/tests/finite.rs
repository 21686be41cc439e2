//! Tests of the finite estimator against independent computations.

mod common;

use common::{
    Fourier, finite_differences, gaussian_points, relative_error, row, score_error, solve_spd,
    uniform_points,
};
use faer::Mat;
use kameleon_features::FeatureMap;
use kameleon_score_matching::{FiniteEstimator, GradientModel, ScoreMatchingError};

/// Ĵ(θ) = aᵀθ + ½θᵀQθ on `points` for `f = θᵀφ`, with the feature
/// derivatives taken by central finite differences of `embed` only (so the
/// feature map's analytic derivatives and the estimator's sums are both
/// checked): `∂_l f = θᵀ∂_lφ`, `∂²_l f = θᵀ∂²_lφ`.
fn objective_quadratic_form(features: &Fourier, points: &Mat<f64>) -> (Vec<f64>, Mat<f64>) {
    let (n, d, m) = (points.nrows(), points.ncols(), features.dim_out());
    let (h1, h2) = (1e-5, 1e-3);
    let mut linear = vec![0.0; m];
    let mut quadratic = Mat::<f64>::zeros(m, m);
    let embed = |y: &[f64]| {
        let mut out = vec![0.0; m];
        features.embed(y, &mut out);
        out
    };
    for k in 0..n {
        let x = row(points, k);
        let f0 = embed(&x);
        for l in 0..d {
            let shifted = |h: f64| {
                let mut y = x.clone();
                y[l] += h;
                embed(&y)
            };
            let (p1, m1, p2, m2) = (shifted(h1), shifted(-h1), shifted(h2), shifted(-h2));
            let first: Vec<f64> = (0..m).map(|i| (p1[i] - m1[i]) / (2.0 * h1)).collect();
            for i in 0..m {
                linear[i] += (p2[i] - 2.0 * f0[i] + m2[i]) / (h2 * h2) / n as f64;
                for j in 0..m {
                    quadratic[(i, j)] += first[i] * first[j] / n as f64;
                }
            }
        }
    }
    (linear, quadratic)
}

#[test]
fn theta_minimises_the_regularised_objective() {
    let lambda = 0.02;
    let features = Fourier::new(2, 30, 1.0, 7);
    let points = uniform_points(60, 2, 8);
    let (a, q) = objective_quadratic_form(&features, &points);
    let mut model = FiniteEstimator::new(features, lambda).unwrap();
    model.fit(points.as_ref()).unwrap();
    // Minimise aᵀθ + ½θᵀQθ + (λ/2)‖θ‖²: (Q + λI) θ = −a.
    let system = Mat::from_fn(q.nrows(), q.ncols(), |i, j| {
        q[(i, j)] + if i == j { lambda } else { 0.0 }
    });
    let minus_a: Vec<f64> = a.iter().map(|v| -v).collect();
    let brute = solve_spd(&system, &minus_a);
    // Finite-difference error: O(h²‖ω‖⁴) ≈ 1e-6 · 10 for the second
    // derivatives, amplified by at most ‖(Q + λI)⁻¹‖ ≤ 1/λ = 50 relative to
    // the O(1) entries: 1e-4 is a safe bound; round-off alone would be 1e-12.
    let err = relative_error(model.theta(), &brute);
    assert!(err < 1e-4, "relative error {err}");

    // The trait's Ĵ at θ̂ equals the quadratic form at θ̂.
    let theta = model.theta();
    let quad: f64 = (0..theta.len())
        .map(|i| {
            theta[i] * a[i]
                + 0.5 * theta[i] * (0..theta.len()).map(|j| q[(i, j)] * theta[j]).sum::<f64>()
        })
        .sum();
    let j = model.score_matching_objective(points.as_ref()).unwrap();
    assert!(
        (j - quad).abs() < 1e-5 * quad.abs().max(1.0),
        "{j} vs {quad}"
    );
}

#[test]
fn online_updates_equal_the_batch_fit() {
    let features = Fourier::new(3, 40, 1.2, 21);
    let points = uniform_points(400, 3, 22);
    let mut batch = FiniteEstimator::new(features.clone(), 1e-3).unwrap();
    let mut online = FiniteEstimator::new(features.clone(), 1e-3).unwrap();
    // Also: a batch fit on the first 50 points continued online.
    let mut continued = FiniteEstimator::new(features, 1e-3).unwrap();
    let first = Mat::from_fn(50, 3, |i, l| points[(i, l)]);
    continued.fit(first.as_ref()).unwrap();
    for i in 0..points.nrows() {
        online.update(&row(&points, i)).unwrap();
        if i >= 50 {
            continued.update(&row(&points, i)).unwrap();
        }
        if [0, 1, 9, 63, 199, 399].contains(&i) {
            let seen = Mat::from_fn(i + 1, 3, |r, l| points[(r, l)]);
            batch.fit(seen.as_ref()).unwrap();
            assert_eq!(online.count(), i + 1);
            // Both solve the same SPD system to a relative residual of
            // 1e-13; with cond(C + λI) ≲ 1e4 here the solutions agree to 1e-9.
            let err = relative_error(online.theta(), batch.theta());
            assert!(err < 1e-9, "after {} points: {err}", i + 1);
        }
    }
    let err = relative_error(continued.theta(), batch.theta());
    assert!(err < 1e-9, "continued: {err}");
}

#[test]
fn gradient_and_laplacian_match_finite_differences() {
    let features = Fourier::new(3, 25, 1.0, 3);
    let mut model = FiniteEstimator::new(features, 0.1).unwrap();
    model.fit(uniform_points(50, 3, 4).as_ref()).unwrap();
    for x in [[0.1, -0.4, 0.7], [1.5, 0.2, -1.0]] {
        let mut grad = [0.0; 3];
        let laplacian = model.grad_and_laplacian(&x, &mut grad);
        let (fd_grad, fd_laplacian) = finite_differences(&x, |y| model.log_density_unnormalised(y));
        // Truncation O(h²): ≈ 1e-10 (gradient), ≈ 1e-6 (Laplacian).
        assert!(
            relative_error(&grad, &fd_grad) < 1e-6,
            "{grad:?} vs {fd_grad:?}"
        );
        assert!((laplacian - fd_laplacian).abs() < 1e-4 * laplacian.abs().max(1.0));
    }
}

/// As n = m grows the fitted score approaches −Σ⁻¹(x − μ) in the bulk (a
/// fixed-seed convergence check)).
#[test]
fn finite_score_approaches_gaussian_score() {
    let chol = Mat::from_fn(2, 2, |i, j| [[1.0, 0.0], [0.6, 0.8]][i][j]);
    let errors: Vec<f64> = [25, 100, 400]
        .iter()
        .map(|&n| {
            let points = gaussian_points(n, &[0.5, -1.0], &chol, 11);
            let mut model = FiniteEstimator::new(Fourier::new(2, n, 3.0, 5), 1e-3).unwrap();
            model.fit(points.as_ref()).unwrap();
            score_error(&mut model, 200)
        })
        .collect();
    // Observed ≈ 0.63, 0.34, 0.13.
    assert!(errors[0] > errors[1] && errors[1] > errors[2], "{errors:?}");
    assert!(errors[2] < 0.2, "{errors:?}");
}

#[test]
fn finite_rejects_bad_input() {
    assert!(matches!(
        FiniteEstimator::new(Fourier::new(2, 5, 1.0, 1), -1.0),
        Err(ScoreMatchingError::InvalidParameter { name: "lambda", .. })
    ));
    let mut model = FiniteEstimator::new(Fourier::new(2, 5, 1.0, 1), 1.0).unwrap();
    assert_eq!(
        model.update(&[1.0, 2.0, 3.0]),
        Err(ScoreMatchingError::DimensionMismatch {
            expected: 2,
            got: 3
        })
    );
    assert_eq!(
        model.update(&[1.0, f64::NAN]),
        Err(ScoreMatchingError::NonFinitePoint { index: 0 })
    );
    assert_eq!(model.count(), 0);
    assert!(matches!(
        model.fit(uniform_points(4, 3, 1).as_ref()),
        Err(ScoreMatchingError::DimensionMismatch {
            expected: 2,
            got: 3
        })
    ));
}
