//! Tests of the finite estimator against independent computations.

use crate::common;

use common::{
    Fourier, check_derivatives, gaussian_points, relative_error, row, score_error, solve_spd,
    uniform_points,
};
use faer::{Mat, MatMut};
use kameleon_features::{Embedding, FeatureMap, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_score_matching::{
    BaseMeasure, FiniteEstimator, GradientModel, RidgeSchedule, ScoreMatchingError,
};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Ĵ(θ) = aᵀθ + ½θᵀQθ on `points` for `f = θᵀφ`, with the feature
/// derivatives taken by central finite differences of `embed` only (so the
/// feature map's analytic derivatives and the estimator's sums are both
/// checked): `∂_l f = θᵀ∂_lφ`, `∂²_l f = θᵀ∂²_lφ`. With the standard normal
/// base measure the objective of `f − ‖x‖²/2` has the extra linear term
/// `mean_x ∇f(x)·(−x)` (and a constant, not included).
fn objective_quadratic_form(
    features: &Fourier,
    points: &Mat<f64>,
    base: BaseMeasure,
) -> (Vec<f64>, Mat<f64>) {
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
        let pull = common::base_gradient(base, &x);
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
                linear[i] += first[i] * pull[l] / n as f64;
                for j in 0..m {
                    quadratic[(i, j)] += first[i] * first[j] / n as f64;
                }
            }
        }
    }
    (linear, quadratic)
}

/// Both base measures; the standard normal one away from the origin
/// (points in [1, 3]²) so that its term is large.
#[test]
fn theta_minimises_the_regularised_objective() {
    let points = uniform_points(60, 2, 8);
    let shifted = Mat::from_fn(60, 2, |i, l| points[(i, l)] + 2.0);
    check_theta_minimises(BaseMeasure::Flat, &points);
    check_theta_minimises(BaseMeasure::StandardNormal, &shifted);
    check_theta_minimises(BaseMeasure::StudentT { dof: 3.0 }, &shifted);
}

fn check_theta_minimises(base: BaseMeasure, points: &Mat<f64>) {
    let lambda = 0.02;
    let features = Fourier::new(2, 30, 1.0, 7);
    let (a, q) = objective_quadratic_form(&features, points, base);
    let mut model = FiniteEstimator::new(features, lambda)
        .unwrap()
        .with_base_measure(base)
        .unwrap();
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
    assert!(err < 1e-4, "{base:?}: relative error {err}");

    // The trait's Ĵ at θ̂ equals the quadratic form at θ̂, plus the base
    // measure's constant mean_x (Δ log q₀ + ½‖∇ log q₀‖²) = mean (‖x‖²/2 − d).
    let theta = model.theta();
    let quad: f64 = (0..theta.len())
        .map(|i| {
            theta[i] * a[i]
                + 0.5 * theta[i] * (0..theta.len()).map(|j| q[(i, j)] * theta[j]).sum::<f64>()
        })
        .sum();
    let constant = common::base_measure_constant(base, points);
    let quad = quad + constant;
    let j = model.score_matching_objective(points.as_ref()).unwrap();
    assert!(
        (j - quad).abs() < 1e-5 * quad.abs().max(1.0),
        "{base:?}: {j} vs {quad}"
    );
}

#[test]
fn online_updates_equal_the_batch_fit() {
    for base in [
        BaseMeasure::Flat,
        BaseMeasure::StandardNormal,
        BaseMeasure::StudentT { dof: 3.0 },
    ] {
        check_online_updates(base);
    }
}

fn check_online_updates(base: BaseMeasure) {
    let features = Fourier::new(3, 40, 1.2, 21);
    let points = uniform_points(400, 3, 22);
    let estimator = |features: Fourier| {
        FiniteEstimator::new(features, 1e-3)
            .unwrap()
            .with_base_measure(base)
            .unwrap()
    };
    let mut batch = estimator(features.clone());
    let mut online = estimator(features.clone());
    // Also: a batch fit on the first 50 points continued online.
    let mut continued = estimator(features);
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
            assert!(err < 1e-9, "{base:?}, after {} points: {err}", i + 1);
        }
    }
    let err = relative_error(continued.theta(), batch.theta());
    assert!(err < 1e-9, "{base:?}, continued: {err}");
}

/// Dense random Fourier features with their factored structure
/// (`FeatureMap::feature_frequencies`) hidden, so the estimator takes the
/// generic path through the full Jacobians.
#[derive(Debug, Clone)]
struct Unstructured(RandomFourierFeatures);

impl FeatureMap for Unstructured {
    fn dim_in(&self) -> usize {
        self.0.dim_in()
    }
    fn dim_out(&self) -> usize {
        self.0.dim_out()
    }
    fn embed(&self, x: &[f64], out: &mut [f64]) {
        self.0.embed(x, out)
    }
    fn jacobian(&self, x: &[f64], out: MatMut<'_, f64>) {
        self.0.jacobian(x, out)
    }
    fn second_derivatives(&self, x: &[f64], out: MatMut<'_, f64>) {
        self.0.second_derivatives(x, out)
    }
    fn jacobian_transpose_mul(&self, x: &[f64], weights: &[f64], out: &mut [f64]) {
        self.0.jacobian_transpose_mul(x, weights, out)
    }
}

fn rff(d: usize, m: usize, embedding: Embedding, seed: u64) -> RandomFourierFeatures {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    RandomFourierFeatures::new(&Gaussian::new(1.5).unwrap(), d, m, embedding, &mut rng).unwrap()
}

/// The factored batch fit `S = (Σ ψ'ψ'ᵀ) ∘ (ΩΩᵀ)` of random Fourier
/// features equals the generic fit through the full Jacobians (the same
/// sums in another order: agreement to round-off, amplified by
/// cond(S + tλI) ≲ 10⁴ here), for both embeddings and with n spanning
/// several blocks of points.
#[test]
fn factored_batch_fit_equals_the_generic_fit() {
    let settings = [Embedding::CosPhase, Embedding::SinCos]
        .into_iter()
        .flat_map(|e| {
            [
                (e, BaseMeasure::Flat),
                (e, BaseMeasure::StandardNormal),
                (e, BaseMeasure::StudentT { dof: 3.0 }),
            ]
        });
    for (embedding, base) in settings {
        let features = rff(3, 60, embedding, 31);
        let points = uniform_points(700, 3, 32);
        let mut factored = FiniteEstimator::new(features.clone(), 1e-3)
            .unwrap()
            .with_base_measure(base)
            .unwrap();
        let mut generic = FiniteEstimator::new(Unstructured(features), 1e-3)
            .unwrap()
            .with_base_measure(base)
            .unwrap();
        factored.fit(points.as_ref()).unwrap();
        generic.fit(points.as_ref()).unwrap();
        let err = relative_error(factored.theta(), generic.theta());
        assert!(err < 1e-9, "{embedding:?}, {base:?}: {err}");
    }
}

/// `RidgeSchedule::FixedOnSums` with λ solves `(S + λI)θ = s`, the system of
/// the default schedule with λ/t after t points — checked against that
/// independent fit — and its exact rank-d online updates equal its batch
/// fit, from scratch and continued from a batch fit.
#[test]
fn fixed_ridge_on_the_sums_is_updated_exactly_online() {
    let lambda = 0.5;
    let features = rff(3, 50, Embedding::CosPhase, 41);
    let points = uniform_points(300, 3, 42);
    let fixed = |f: RandomFourierFeatures| {
        FiniteEstimator::new(f, lambda)
            .unwrap()
            .with_ridge_schedule(RidgeSchedule::FixedOnSums)
            .unwrap()
    };
    let mut online = fixed(features.clone());
    let mut continued = fixed(features.clone());
    let first = Mat::from_fn(40, 3, |i, l| points[(i, l)]);
    continued.fit(first.as_ref()).unwrap();
    for i in 0..points.nrows() {
        online.update(&row(&points, i)).unwrap();
        if i >= 40 {
            continued.update(&row(&points, i)).unwrap();
        }
        if [0, 4, 99, 299].contains(&i) {
            let t = i + 1;
            let seen = Mat::from_fn(t, 3, |r, l| points[(r, l)]);
            let mut batch = fixed(features.clone());
            batch.fit(seen.as_ref()).unwrap();
            let mut on_means = FiniteEstimator::new(features.clone(), lambda / t as f64).unwrap();
            on_means.fit(seen.as_ref()).unwrap();
            // direct solves of one system (batch) and rank-d updates of its
            // factor (online): round-off times cond ≲ 10⁵
            let err = relative_error(online.theta(), batch.theta());
            assert!(err < 1e-9, "after {t} points: online {err}");
            let err = relative_error(batch.theta(), on_means.theta());
            assert!(err < 1e-9, "after {t} points: λ/t on the means {err}");
        }
    }
    let err = relative_error(continued.theta(), online.theta());
    assert!(err < 1e-9, "continued: {err}");
    assert_eq!(online.ridge_schedule(), RidgeSchedule::FixedOnSums);
}

#[test]
fn gradient_and_laplacian_match_finite_differences() {
    for base in [
        BaseMeasure::Flat,
        BaseMeasure::StandardNormal,
        BaseMeasure::StudentT { dof: 3.0 },
    ] {
        let features = Fourier::new(3, 25, 1.0, 3);
        let mut model = FiniteEstimator::new(features, 0.1)
            .unwrap()
            .with_base_measure(base)
            .unwrap();
        model.fit(uniform_points(50, 3, 4).as_ref()).unwrap();
        check_derivatives(&mut model, &[[0.1, -0.4, 0.7], [1.5, 0.2, -1.0]]);
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

/// A feature map that only reports its dimensions: 2³⁰ features, so that
/// the estimator's m × m system (2⁶⁰ values) is beyond memory.
#[derive(Debug)]
struct HugeMap;

impl FeatureMap for HugeMap {
    fn dim_in(&self) -> usize {
        2
    }
    fn dim_out(&self) -> usize {
        1 << 30
    }
    fn embed(&self, _: &[f64], _: &mut [f64]) {
        unreachable!("the estimator is refused before any evaluation")
    }
    fn jacobian(&self, _: &[f64], _: MatMut<'_, f64>) {
        unreachable!("the estimator is refused before any evaluation")
    }
    fn second_derivatives(&self, _: &[f64], _: MatMut<'_, f64>) {
        unreachable!("the estimator is refused before any evaluation")
    }
    fn jacobian_transpose_mul(&self, _: &[f64], _: &[f64], _: &mut [f64]) {
        unreachable!("the estimator is refused before any evaluation")
    }
}

#[test]
fn finite_system_beyond_memory_is_an_error() {
    let err = FiniteEstimator::new(HugeMap, 1.0).unwrap_err();
    assert!(
        matches!(err, ScoreMatchingError::BufferTooLarge(_)),
        "{err}"
    );
    assert!(err.to_string().contains("m × m"), "{err}");
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
    // the base measure is part of the sums: it cannot change once points are in
    model.update(&[0.5, 0.5]).unwrap();
    assert!(matches!(
        model.with_base_measure(BaseMeasure::StandardNormal),
        Err(ScoreMatchingError::InvalidParameter {
            name: "base_measure",
            ..
        })
    ));
}

/// A finite point so large that the features' arguments overflow (their
/// sines and cosines are NaN) is refused by `update` without touching the
/// estimator: the next ordinary point updates it exactly as if the bad one
/// had never been offered (the NaN derivatives used to go into the sums,
/// after which every update failed). A batch fit on such points errors and
/// leaves no points behind, so that updates start afresh.
#[test]
fn points_whose_features_overflow_are_refused_without_damage() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let features =
        RandomFourierFeatures::new(&kernel, 2, 50, Embedding::CosPhase, &mut rng).unwrap();
    let points = uniform_points(5, 2, 3);
    let huge = [1e308, 1e308];
    for base in [BaseMeasure::Flat, BaseMeasure::StandardNormal] {
        for schedule in [RidgeSchedule::GrowingWithCount, RidgeSchedule::FixedOnSums] {
            let mut model = FiniteEstimator::new(features.clone(), 1e-3)
                .unwrap()
                .with_base_measure(base)
                .unwrap()
                .with_ridge_schedule(schedule)
                .unwrap();
            model.fit(points.as_ref()).unwrap();
            let mut reference = model.clone();
            assert_eq!(
                model.update(&huge),
                Err(ScoreMatchingError::NonFiniteFeatures)
            );
            assert_eq!(model.count(), 5);
            model.update(&[0.5, -0.5]).unwrap();
            reference.update(&[0.5, -0.5]).unwrap();
            assert_eq!(model.theta(), reference.theta(), "{base:?}, {schedule:?}");

            let mut bad = points.clone();
            bad[(2, 0)] = huge[0];
            bad[(2, 1)] = huge[1];
            assert_eq!(
                model.fit(bad.as_ref()),
                Err(ScoreMatchingError::NonFiniteFeatures)
            );
            assert_eq!(model.count(), 0);
            model.update(&[0.5, -0.5]).unwrap();
            assert!(model.theta().iter().all(|t| t.is_finite()));
        }
    }
}

/// A ridge λ whose product with the number of points overflows is reported
/// as a too-large λ (it was "not positive definite (increase lambda)").
#[test]
fn an_overflowing_ridge_names_lambda() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let features =
        RandomFourierFeatures::new(&kernel, 2, 20, Embedding::CosPhase, &mut rng).unwrap();
    let mut model = FiniteEstimator::new(features, 1e308).unwrap();
    match model.fit(uniform_points(5, 2, 3).as_ref()) {
        Err(ScoreMatchingError::InvalidParameter { name: "lambda", .. }) => {}
        other => panic!("{other:?}"),
    }
}
