//! The inputs and results the numpy peers (`python/benchmarks/peers.py`)
//! are run and checked on: the same subsamples, fitted models and states
//! as the Rust paths, written as `.npy` files with a `manifest.json` of the
//! scalar parameters, plus what the Rust code computes from them (gradients,
//! fitted coefficients, the KAMH log correction, the Laplace mode) for the
//! peers to reproduce.
//!
//! Layout: `DIR/manifest.json` = `{"dim", "banana": {"b", "v"}, "paths":
//! {NAME: {scalars}}}`, arrays in `DIR/NAME/*.npy` (points are rows;
//! scalars are shape-() arrays).

use super::Sizes;
use super::paths::{
    BANANA, DIM, FIT_FINITE_LAMBDA, FIT_LITE, GRADIENT_POINTS, KAMH_GAMMA, KAMH_NU, KAMH_SIGMA,
    KMC_STEP_SIZE, LITE_LAMBDA, LITE_SIGMA, MEDIAN_POINTS, banana, fit_finite_estimator, iid_draws,
    kamh_adapting_config, kamh_proposal, kmc_finite_oracle, kmc_lite_oracle, uniform_points,
};
use crate::npy::write_array;
use anyhow::{Context, Result, ensure};
use faer::{Mat, MatRef};
use kameleon_features::RandomFourierFeatures;
use kameleon_samplers::{Proposal, chain_rng};
use kameleon_score_matching::{FiniteEstimator, GradientModel, LiteEstimator};
use kameleon_targets::{GpClassification, Target};
use serde_json::{Map, json};
use std::path::Path;

/// Writes the fixtures of every peer path for sizes `s` into `dir`.
pub fn write(s: &Sizes, dir: &Path) -> Result<()> {
    let target = banana()?;
    let mut paths = Map::new();
    let mut rng = chain_rng(11, 0);

    // KAMH: the frozen step's subsample and kernel, one proposal from a
    // state and its log correction
    let z = iid_draws(&target, s.n, 1)?;
    let x = row(&iid_draws(&target, 1, 11)?, 0);
    let mut kamh = kamh_proposal(&z)?;
    kamh.initialise(&target, &x, false)?;
    let mut y = vec![0.0; DIM];
    let log_correction = kamh.propose(&target, &x, &mut y, &mut rng);
    ensure!(log_correction.is_finite(), "KAMH proposal rejected");
    let log_target = [
        target.log_density(&x, &mut rng),
        target.log_density(&y, &mut rng),
    ];
    let out = Fixture::new(dir, "kamh_step")?;
    out.matrix("z", z.as_ref())?;
    out.vector("x", &x)?;
    out.vector("y", &y)?;
    out.scalar("log_correction", log_correction)?;
    out.vector("log_target", &log_target)?;
    paths.insert(
        "kamh_step".into(),
        json!({"sigma": KAMH_SIGMA, "gamma": KAMH_GAMMA, "nu": KAMH_NU}),
    );

    // adapting KAMH: a history of exact draws to redraw subsamples from
    let config = kamh_adapting_config(s.n)?;
    let nu = config.scale.value();
    let out = Fixture::new(dir, "kamh_adapting_step")?;
    out.matrix("history", iid_draws(&target, 4 * s.n, 12)?.as_ref())?;
    out.vector("x", &x)?;
    paths.insert(
        "kamh_adapting_step".into(),
        json!({"sigma": 1.0, "gamma": KAMH_GAMMA, "nu": nu, "max_points": MEDIAN_POINTS,
               "subsample_size": s.n}),
    );

    // KMC lite: the oracle fit's basis and coefficients
    let points = iid_draws(&target, GRADIENT_POINTS, 13)?;
    let (mut lite, basis) = kmc_lite_oracle(&target, s.n)?;
    let out = Fixture::new(dir, "kmc_lite_gradient")?;
    out.matrix("basis", basis.as_ref())?;
    out.vector("alpha", lite.alpha())?;
    out.matrix("points", points.as_ref())?;
    out.matrix("gradients", gradients(&mut lite, points.as_ref()).as_ref())?;
    paths.insert(
        "kmc_lite_gradient".into(),
        json!({"sigma": LITE_SIGMA, "lambda": LITE_LAMBDA}),
    );
    let step = json!({"steps": s.leapfrog_steps, "step_size_low": KMC_STEP_SIZE.0,
                      "step_size_high": KMC_STEP_SIZE.1});
    Fixture::new(dir, "kmc_lite_step")?.vector("x", &x)?;
    paths.insert("kmc_lite_step".into(), step.clone());

    // KMC finite: the oracle fit's features and coefficients
    let (mut finite, _) = kmc_finite_oracle(&target, s.m)?;
    let out = Fixture::new(dir, "kmc_finite_gradient")?;
    out.features(finite.features())?;
    out.vector("theta", finite.theta())?;
    out.matrix("points", points.as_ref())?;
    out.matrix(
        "gradients",
        gradients(&mut finite, points.as_ref()).as_ref(),
    )?;
    paths.insert("kmc_finite_gradient".into(), json!({}));
    Fixture::new(dir, "kmc_finite_step")?.vector("x", &x)?;
    paths.insert("kmc_finite_step".into(), step);

    // the fits
    let points = uniform_points(s.n, 2);
    let mut lite = LiteEstimator::new(FIT_LITE.0, FIT_LITE.1)?;
    lite.fit(points.as_ref())?;
    let out = Fixture::new(dir, "lite_fit")?;
    out.matrix("points", points.as_ref())?;
    out.vector("alpha", lite.alpha())?;
    paths.insert(
        "lite_fit".into(),
        json!({"sigma": FIT_LITE.0, "lambda": FIT_LITE.1}),
    );
    let mut finite: FiniteEstimator<RandomFourierFeatures> = fit_finite_estimator(s.m)?;
    let points = uniform_points(s.m, 3);
    finite.fit(points.as_ref())?;
    let out = Fixture::new(dir, "finite_fit")?;
    out.features(finite.features())?;
    out.matrix("points", points.as_ref())?;
    out.vector("theta", finite.theta())?;
    paths.insert("finite_fit".into(), json!({"lambda": FIT_FINITE_LAMBDA}));

    // Glass: the data as the likelihood holds them, the Laplace mode at θ
    let gp = GpClassification::glass(s.glass_importance)?;
    let theta = [0.0; 9];
    let laplace = gp.laplace(&theta)?;
    let out = Fixture::new(dir, "glass_estimate")?;
    out.matrix("x", gp.data().x())?;
    out.vector("y", gp.data().y())?;
    out.vector("theta", &theta)?;
    out.vector("mode", laplace.mode())?;
    out.scalar("log_marginal_laplace", laplace.log_marginal_likelihood())?;
    paths.insert(
        "glass_estimate".into(),
        json!({"n_importance": s.glass_importance, "ridge": gp.ridge()}),
    );

    let manifest = json!({
        "dim": DIM,
        "banana": {"b": BANANA.0, "v": BANANA.1},
        "paths": paths,
    });
    crate::files::write_file(
        &dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )
}

/// One path's fixture directory.
struct Fixture {
    dir: std::path::PathBuf,
}

impl Fixture {
    fn new(root: &Path, name: &str) -> Result<Self> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self { dir })
    }

    fn file(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(format!("{name}.npy"))
    }

    fn scalar(&self, name: &str, value: f64) -> Result<()> {
        write_array(&self.file(name), &[value], &[])
    }

    fn vector(&self, name: &str, values: &[f64]) -> Result<()> {
        write_array(&self.file(name), values, &[values.len()])
    }

    fn matrix(&self, name: &str, m: MatRef<'_, f64>) -> Result<()> {
        let values: Vec<f64> = (0..m.nrows())
            .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
            .collect();
        write_array(&self.file(name), &values, &[m.nrows(), m.ncols()])
    }

    /// The random features as `RandomFourierFeatures` holds them.
    fn features(&self, phi: &RandomFourierFeatures) -> Result<()> {
        self.matrix("frequencies", phi.frequencies())?;
        self.vector("phases", phi.phases())
    }
}

fn row(m: &Mat<f64>, i: usize) -> Vec<f64> {
    (0..m.ncols()).map(|j| m[(i, j)]).collect()
}

/// ∇f at each row of `points`, one row each.
fn gradients(model: &mut dyn GradientModel, points: MatRef<'_, f64>) -> Mat<f64> {
    let mut out = Mat::zeros(points.nrows(), points.ncols());
    let mut grad = vec![0.0; points.ncols()];
    for i in 0..points.nrows() {
        let x: Vec<f64> = (0..points.ncols()).map(|j| points[(i, j)]).collect();
        model.grad_log_density(&x, &mut grad);
        for (j, g) in grad.iter().enumerate() {
            out[(i, j)] = *g;
        }
    }
    out
}
