//! Tests of the hyperparameter search.

use crate::common;

use common::{Fourier, gaussian_points};
use faer::Mat;
use kameleon_score_matching::{
    CrossValidation, FiniteEstimator, GradientModel, Hyperparameters, LiteEstimator,
    ScoreMatchingError, cross_validate,
};

fn lite(h: Hyperparameters) -> Result<LiteEstimator, ScoreMatchingError> {
    LiteEstimator::new(h.sigma, h.lambda)
}

/// Equal mixture of N(±2·1, 0.5²I) in 2-d (well separated modes).
fn bimodal_points(n: usize, seed: u64) -> Mat<f64> {
    let unit = gaussian_points(n, &[0.0, 0.0], &Mat::identity(2, 2), seed);
    Mat::from_fn(n, 2, |i, l| {
        0.5 * unit[(i, l)] + if i % 2 == 0 { 2.0 } else { -2.0 }
    })
}

/// On a bimodal target the selected bandwidth lies inside the grid. (On a
/// single Gaussian the held-out Ĵ keeps improving as σ → ∞ with λ → 0: the
/// kernel expansion then tends to the exact quadratic log density, so there
/// is no interior optimum to find.)
#[test]
fn lite_cross_validation_picks_an_interior_bandwidth() {
    let points = bimodal_points(150, 3);
    let sigmas: Vec<f64> = (-4..=10).map(|k| 2f64.powi(k)).collect();
    let settings = CrossValidation::new(5, 42, &sigmas, &[1e-4, 1e-2, 1.0]).unwrap();
    let result = cross_validate(points.as_ref(), &settings, lite).unwrap();
    // The objective is finite and the chosen σ is well inside the grid
    // [2⁻⁴, 2¹⁰], at the scale of the data (within-mode variance 0.25,
    // squared distance between the modes 32); it selects σ ≈ 6.7.
    assert!(result.objective.is_finite());
    assert!(
        result.best.sigma > 0.5 && result.best.sigma < 64.0,
        "{:?}",
        result.best
    );
    // The refinement never ends worse than the best grid point, and the
    // reported objective is the minimum over everything evaluated.
    let grid_count = sigmas.len() * 3;
    let grid_best = result.evaluations[..grid_count]
        .iter()
        .map(|e| e.1)
        .fold(f64::INFINITY, f64::min);
    let overall = result
        .evaluations
        .iter()
        .map(|e| e.1)
        .fold(f64::INFINITY, f64::min);
    assert!(result.objective <= grid_best);
    assert_eq!(result.objective, overall);
    // A tiny bandwidth overfits: its held-out Ĵ is far worse.
    let tiny = result.evaluations[0].1;
    assert!(
        tiny > result.objective + 1.0,
        "{tiny} vs {}",
        result.objective
    );

    // Deterministic for a seed.
    let again = cross_validate(points.as_ref(), &settings, lite).unwrap();
    assert_eq!(again, result);
}

/// With one fold per point (leave-one-out) the folds do not depend on the
/// shuffle, so the objective can be recomputed by hand.
#[test]
fn leave_one_out_objective_equals_a_manual_average() {
    let points = gaussian_points(12, &[0.0, 0.0], &Mat::identity(2, 2), 9);
    let settings = CrossValidation::new(12, 7, &[2.0], &[0.1])
        .unwrap()
        .with_refinement_steps(0);
    let result = cross_validate(points.as_ref(), &settings, lite).unwrap();
    assert_eq!(result.evaluations.len(), 1);
    let mut manual = 0.0;
    for held in 0..12 {
        let train = Mat::from_fn(11, 2, |r, l| points[(if r < held { r } else { r + 1 }, l)]);
        let test = Mat::from_fn(1, 2, |_, l| points[(held, l)]);
        let mut model = LiteEstimator::new(2.0, 0.1).unwrap();
        model.fit(train.as_ref()).unwrap();
        manual += model.score_matching_objective(test.as_ref()).unwrap() / 12.0;
    }
    assert!((result.objective - manual).abs() < 1e-12 * manual.abs().max(1.0));
}

#[test]
fn finite_cross_validation_runs_with_fixed_features() {
    let points = gaussian_points(120, &[0.0, 0.0], &Mat::identity(2, 2), 5);
    let settings = CrossValidation::new(3, 1, &[0.5, 2.0, 8.0], &[1e-3, 1e-1])
        .unwrap()
        .with_refinement_steps(2);
    // σ is the Gaussian length-scale here; features from a fixed seed.
    let result = cross_validate(points.as_ref(), &settings, |h| {
        FiniteEstimator::new(Fourier::new(2, 60, h.sigma, 17), h.lambda)
    })
    .unwrap();
    assert!(result.objective.is_finite() && result.objective < 0.0);
    assert_eq!(result.evaluations.len(), 6 + 2 * 4);
    let mut model = FiniteEstimator::new(
        Fourier::new(2, 60, result.best.sigma, 17),
        result.best.lambda,
    )
    .unwrap();
    model.fit(points.as_ref()).unwrap();
    assert_eq!(model.count(), 120);
}

#[test]
fn cross_validation_rejects_bad_settings() {
    assert!(CrossValidation::new(1, 0, &[1.0], &[1.0]).is_err());
    assert!(CrossValidation::new(3, 0, &[], &[1.0]).is_err());
    assert!(CrossValidation::new(3, 0, &[1.0], &[-1.0]).is_err());
    let settings = CrossValidation::new(5, 0, &[1.0], &[1.0]).unwrap();
    let few = Mat::<f64>::zeros(3, 2);
    assert!(matches!(
        cross_validate(few.as_ref(), &settings, lite),
        Err(ScoreMatchingError::TooFewPoints { needed: 5, got: 3 })
    ));
}

/// The compass search may step beyond the range a model accepts: from
/// σ = 2.5·10¹⁵⁴ (near the largest σ the lite estimator takes) a step up,
/// and from λ = 1.7·10³⁰⁸ (with a grid spacing whose ratio overflows) any
/// step up. Those candidates score +∞ instead of failing the whole search
/// with an error about a value the caller never gave.
#[test]
fn refinement_beyond_the_accepted_range_rules_candidates_out() {
    let points = gaussian_points(10, &[0.0, 0.0], &Mat::identity(2, 2), 4);
    for (sigmas, lambdas) in [(&[2.5e154][..], &[1e-3][..]), (&[1.0], &[1e-3, 1.7e308])] {
        let settings = CrossValidation::new(2, 0, sigmas, lambdas).unwrap();
        let result = cross_validate(points.as_ref(), &settings, lite).unwrap();
        assert!(
            result.evaluations.iter().any(|(_, j)| *j == f64::INFINITY),
            "{sigmas:?}, {lambdas:?}: the search never left the range"
        );
        assert!(result.objective.is_finite(), "{sigmas:?}, {lambdas:?}");
    }
}

/// When no candidate gives a finite objective (every fit fails, here
/// because the points' coordinates overflow the lite system), there is
/// nothing to select: the search errors with the fits' error instead of
/// returning the first grid point as "best" with an infinite objective.
#[test]
fn a_search_where_every_fit_fails_is_an_error() {
    let points = Mat::from_fn(6, 2, |i, l| 1e200 * (i * 2 + l) as f64);
    let settings = CrossValidation::new(2, 0, &[1.0, 2.0], &[1e-3])
        .unwrap()
        .with_refinement_steps(2);
    let result = cross_validate(points.as_ref(), &settings, lite);
    assert_eq!(result, Err(ScoreMatchingError::NotPositiveDefinite));
}
