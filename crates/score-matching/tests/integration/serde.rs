//! Estimators and cross-validation settings round-trip through serde, and
//! deserialisation refuses what the constructors and fits would never make.

use crate::common::uniform_points;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_score_matching::{CrossValidation, FiniteEstimator, GradientModel, LiteEstimator};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The message of the error deserialising `value` as a `T`.
fn refused<T: DeserializeOwned + std::fmt::Debug>(value: &Value) -> String {
    serde_json::from_value::<T>(value.clone())
        .unwrap_err()
        .to_string()
}

/// `value` with `field` set to `to`.
fn with(value: &Value, field: &str, to: Value) -> Value {
    let mut changed = value.clone();
    changed[field] = to;
    changed
}

/// The gradient of `model` at a fixed point.
fn gradient(model: &mut impl GradientModel) -> Vec<f64> {
    let mut out = vec![0.0; model.dim()];
    model.grad_log_density(&[0.3, -0.7], &mut out);
    out
}

#[test]
fn lite_estimators_round_trip_and_damaged_ones_are_refused() {
    let mut model = LiteEstimator::new(0.8, 1e-3).unwrap();
    let unfitted = serde_json::to_value(&model).unwrap();
    let back: LiteEstimator = serde_json::from_value(unfitted.clone()).unwrap();
    assert_eq!((back.dim(), back.alpha().len()), (0, 0));
    model.fit(uniform_points(30, 2, 1).as_ref()).unwrap();
    let fitted = serde_json::to_value(&model).unwrap();
    let mut back: LiteEstimator = serde_json::from_value(fitted.clone()).unwrap();
    assert_eq!(gradient(&mut back), gradient(&mut model));
    let bytes = postcard::to_stdvec(&model).unwrap();
    let mut back: LiteEstimator = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(gradient(&mut back), gradient(&mut model));

    for (field, bad) in [("sigma", json!(-1.0)), ("lambda", json!(0.0))] {
        let message = refused::<LiteEstimator>(&with(&fitted, field, bad));
        assert!(message.contains(&format!("`{field}`")), "{message}");
    }
    let message =
        refused::<LiteEstimator>(&with(&fitted, "base", json!({"StudentT": {"dof": -1.0}})));
    assert!(message.contains("`dof`"), "{message}");
    // a basis that is not n × d: one value short, a dimension without
    // points, points without a dimension
    let mut short = fitted.clone();
    short["basis"].as_array_mut().unwrap().pop();
    for damaged in [
        short,
        with(&unfitted, "dim", json!(2)),
        with(&fitted, "dim", json!(0)),
        with(&fitted, "dim", json!(3)),
    ] {
        let message = refused::<LiteEstimator>(&damaged);
        assert!(message.contains("`basis`"), "{message}");
    }
}

#[test]
fn finite_estimators_round_trip_and_damaged_ones_are_refused() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let kernel = Gaussian::new(1.0).unwrap();
    let features =
        RandomFourierFeatures::new(&kernel, 2, 10, Embedding::CosPhase, &mut rng).unwrap();
    let mut model = FiniteEstimator::new(features, 0.1).unwrap();
    model.fit(uniform_points(40, 2, 2).as_ref()).unwrap();
    model.update(&[0.1, 0.2]).unwrap();
    let value = serde_json::to_value(&model).unwrap();
    type Finite = FiniteEstimator<RandomFourierFeatures>;
    let mut back: Finite = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(back.theta(), model.theta());
    assert_eq!(gradient(&mut back), gradient(&mut model));
    // the next update continues identically
    back.update(&[-0.4, 0.5]).unwrap();
    model.update(&[-0.4, 0.5]).unwrap();
    assert_eq!(back.theta(), model.theta());

    let message = refused::<Finite>(&with(&value, "lambda", json!(-0.1)));
    assert!(message.contains("`lambda`"), "{message}");
    let message = refused::<Finite>(&with(&value, "base", json!({"StudentT": {"dof": 0.0}})));
    assert!(message.contains("`dof`"), "{message}");
    let one_by_one = json!({"nrows": 1, "ncols": 1, "entries": [1.0]});
    for field in ["c_sum", "cholesky"] {
        let message = refused::<Finite>(&with(&value, field, one_by_one.clone()));
        assert!(message.contains(&format!("`{field}`")), "{message}");
    }
    for field in ["b_sum", "theta"] {
        let message = refused::<Finite>(&with(&value, field, json!([0.0, 1.0])));
        assert!(message.contains(&format!("`{field}`")), "{message}");
    }
    let count = value["count"].as_u64().unwrap();
    let message = refused::<Finite>(&with(&value, "factor_count", json!(count + 1)));
    assert!(message.contains("`factor_count`"), "{message}");
}

#[test]
fn cross_validation_settings_round_trip_and_invalid_ones_are_refused() {
    let settings = CrossValidation::new(3, 7, &[0.5, 2.0], &[1e-3])
        .unwrap()
        .with_refinement_steps(2);
    let value = serde_json::to_value(&settings).unwrap();
    assert_eq!(
        value,
        json!({"folds": 3, "seed": 7, "sigmas": [0.5, 2.0], "lambdas": [1e-3], "refinement_steps": 2})
    );
    assert_eq!(
        serde_json::from_value::<CrossValidation>(value.clone()).unwrap(),
        settings
    );
    let message = refused::<CrossValidation>(&with(&value, "folds", json!(1)));
    assert!(message.contains("`folds`"), "{message}");
    let message = refused::<CrossValidation>(&with(&value, "sigmas", json!([])));
    assert!(message.contains("`sigmas`"), "{message}");
    let message = refused::<CrossValidation>(&with(&value, "lambdas", json!([1.0, -2.0])));
    assert!(message.contains("`lambdas`"), "{message}");
}
