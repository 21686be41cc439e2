//! The hot paths users wait for, built as the experiments build them, and
//! each path's operation count.
//!
//! Every path has a *frozen* form (adaptation off: the per-iteration cost
//! once a chain is tuned) and, for the adaptive samplers, an *adapting* form
//! (the burn-in, which dominates every KAMH experiment): KAMH with its
//! subsample redrawn and bandwidth re-estimated at every step and ν learned,
//! F-KAMH with its Welford update, KMC lite with its surrogate refitted on
//! the paper's schedule, KMC finite with an online update per step.
//!
//! Flop counts charge one multiply-add as 2 flops and one `exp`, `sin` or
//! `cos` as [`TRANSCENDENTAL_FLOPS`]; they count the arithmetic the
//! algorithm needs, not what an implementation happens to do, so that
//! `time / floor` says how far a path runs from the machine's peak.

use super::Sizes;
use super::timing::{TimerSettings, Timing};
use anyhow::{Result, bail};
use faer::Mat;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, Bandwidth, FKamh, FKamhConfig, FiniteSurrogate, FiniteSurrogateConfig, Gamma,
    Kamh, KamhConfig, KmcConfig, KmcFinite, KmcLite, LiteSurrogate, LiteSurrogateConfig,
    MetropolisHastings, Proposal, Refresh, RobbinsMonro, Scale, StepSchedule, SubsampleConfig,
    chain_rng,
};
use kameleon_score_matching::{FiniteEstimator, GradientModel, LiteEstimator, RidgeSchedule};
use kameleon_targets::{Banana, GpClassification, Target, glass_posterior};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::hint::black_box;

/// Flops charged for one `exp`, `sin` or `cos` (a vectorised polynomial
/// evaluation after range reduction costs about this many operations).
pub const TRANSCENDENTAL_FLOPS: f64 = 15.0;
/// The dimension of every banana path.
pub const DIM: usize = 8;
/// The banana B(b, V) of every path.
pub const BANANA: (f64, f64) = (0.03, 100.0);
/// The KAMH paper's γ (proposal noise) for the frozen step.
pub const KAMH_GAMMA: f64 = 0.2;
/// The frozen KAMH step's fixed scale ν.
pub const KAMH_NU: f64 = 2.0;
/// The frozen KAMH step's Gaussian kernel parameter.
pub const KAMH_SIGMA: f64 = 10.0;
/// The experiments' median heuristic: over 100 of the subsample's points.
pub const MEDIAN_POINTS: usize = 100;
/// KMC leapfrog step size range (the number of steps is fixed per size).
pub const KMC_STEP_SIZE: (f64, f64) = (0.3, 0.6);
/// KMC lite's kernel parameter on the banana.
pub const LITE_SIGMA: f64 = 200.0;
/// KMC lite's ridge on the banana.
pub const LITE_LAMBDA: f64 = 1.0;
/// The refit schedule of adapting KMC lite: p_t = t^−κ (the KMC Glass
/// experiment's κ).
pub const LITE_REFIT_KAPPA: f64 = 0.75;
/// The lite fit's kernel parameter and ridge.
pub const FIT_LITE: (f64, f64) = (8.0, 1e-3);
/// The finite fit's feature kernel parameter.
pub const FIT_FINITE_SIGMA: f64 = 2.0;
/// The finite fit's ridge.
pub const FIT_FINITE_LAMBDA: f64 = 1e-3;
/// KMC finite's feature kernel parameter on the banana.
pub const KMC_FINITE_SIGMA: f64 = 5.0;
/// KMC finite's ridge on the banana.
pub const KMC_FINITE_LAMBDA: f64 = 1e-4;

/// One timed Rust path.
#[derive(Debug, Clone)]
pub struct RustPath {
    /// Short identifier (a peer of the same name is compared with it).
    pub name: String,
    /// What one call does.
    pub description: String,
    /// The measurement.
    pub timing: Timing,
    /// Flops per call.
    pub flops: f64,
    /// The memory traffic per call, for a path whose data outgrow the
    /// caches close to the core.
    pub traffic: Option<Traffic>,
    /// For an adapting path, the name of its frozen form.
    pub frozen_form: Option<String>,
    /// The public Python implementation's recorded figure, if any.
    pub python_original_secs: Option<f64>,
    /// Whether the path's time is dense factorisations and products, which
    /// its numpy peer runs through the same kind of LAPACK and BLAS kernels:
    /// judged against its floor only, the peer shown for information.
    pub blas_bound: bool,
}

/// Bytes a path must move per call, and the footprint they come from (its
/// streaming rate is measured at that size).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Bytes read or written per call (at least once each).
    pub bytes: f64,
    /// The bytes of the data they are read from.
    pub working_set: usize,
}

impl RustPath {
    /// Marks an adapting path and names its frozen form.
    fn adapting_from(&mut self, frozen: &str) -> &mut Self {
        self.frozen_form = Some(frozen.into());
        self
    }

    /// The public Python implementation's recorded seconds per call.
    fn original(&mut self, secs: f64) -> &mut Self {
        self.python_original_secs = Some(secs);
        self
    }

    /// The memory traffic per call.
    fn traffic(&mut self, bytes: f64, working_set: usize) -> &mut Self {
        self.traffic = Some(Traffic { bytes, working_set });
        self
    }

    /// Marks a path bound by dense linear algebra (see
    /// [`RustPath::blas_bound`]).
    fn blas_bound(&mut self) -> &mut Self {
        self.blas_bound = true;
        self
    }
}

/// The paths timed so far.
#[derive(Default)]
struct PathLog {
    paths: Vec<RustPath>,
}

impl PathLog {
    fn add(
        &mut self,
        name: &str,
        description: String,
        timing: Timing,
        flops: f64,
    ) -> &mut RustPath {
        self.paths.push(RustPath {
            name: name.into(),
            description,
            timing,
            flops,
            traffic: None,
            frozen_form: None,
            python_original_secs: None,
            blas_bound: false,
        });
        self.paths.last_mut().expect("just pushed")
    }
}

/// The timers of the paths: per-call steps, fits (few, long calls), and
/// amortised adapting steps (repetitions long enough to include the rare
/// expensive adaptations at their average rate).
pub struct Timers {
    /// Steps and gradients.
    pub step: TimerSettings,
    /// Batch fits.
    pub fit: TimerSettings,
    /// Adapting steps whose cost comes in rare bursts (refits).
    pub amortised: TimerSettings,
}

impl Timers {
    /// The timers for `s`.
    pub fn new(s: &Sizes) -> Self {
        Self {
            step: TimerSettings {
                warmup: s.warmup,
                repetitions: s.repetitions,
                min_secs: s.min_sample_secs,
            },
            fit: TimerSettings {
                warmup: 1,
                repetitions: (s.repetitions / 3).max(3),
                min_secs: s.min_sample_secs,
            },
            amortised: TimerSettings {
                warmup: s.warmup,
                repetitions: (s.repetitions / 3).max(3),
                min_secs: s.amortised_secs,
            },
        }
    }
}

/// Times every path at sizes `s`.
pub fn measure(s: &Sizes) -> Result<Vec<RustPath>> {
    let timers = Timers::new(s);
    let target = banana()?;
    let (n, d, m) = (s.n, DIM as f64, s.m);
    let mut log = PathLog::default();

    say_err!("bench-report: KAMH step");
    let mut kamh = frozen(&target, kamh_proposal(&iid_draws(&target, n, 1)?)?, 2)?;
    log.add(
        "kamh_step",
        format!("KAMH iteration, frozen (cached factor at x), n = {n}, Gaussian kernel"),
        timers.step.time(|| {
            black_box(kamh.step(&target));
        }),
        kamh_step_flops(n as f64, d),
    )
    .original(1.69e-3);

    say_err!("bench-report: adapting KAMH step");
    let mut kamh = kamh_adapting_sampler(&target, n)?;
    log.add(
        "kamh_adapting_step",
        format!(
            "KAMH iteration while adapting (the paper's protocol): z redrawn from the history, \
             median-heuristic bandwidth over {MEDIAN_POINTS} of its points, ν learned, n = {n}"
        ),
        timers.step.time(|| {
            black_box(kamh.step(&target));
        }),
        kamh_adapting_step_flops(n as f64, d, MEDIAN_POINTS as f64),
    )
    .adapting_from("kamh_step");

    let big = s.fkamh_features;
    // the D × D feature covariance: read by the proposal, read and written
    // by the Welford update
    let covariance = (big * big * 8) as f64;
    say_err!("bench-report: F-KAMH step");
    let mut fkamh = fkamh_sampler(&target, big, s.fkamh_histories[0], false)?;
    log.add(
        "fkamh_step",
        format!("F-KAMH iteration, frozen, D = {big} random Fourier features"),
        timers.step.time(|| {
            black_box(fkamh.step(&target));
        }),
        fkamh_step_flops(big as f64, d),
    )
    .traffic(covariance, covariance as usize);
    for history in s.fkamh_histories {
        say_err!("bench-report: adapting F-KAMH step, history {history}");
        let mut fkamh = fkamh_sampler(&target, big, history, true)?;
        log.add(
            &format!("fkamh_adapting_step_t{history}"),
            format!(
                "F-KAMH iteration while adapting (Welford update of the feature covariance, \
                 η learned), D = {big}, history t = {history}"
            ),
            timers.step.time(|| {
                black_box(fkamh.step(&target));
            }),
            fkamh_step_flops(big as f64, d) + welford_flops(big as f64, d),
        )
        .adapting_from("fkamh_step")
        .traffic(3.0 * covariance, covariance as usize);
    }

    say_err!("bench-report: KMC lite and finite gradients");
    let points = iid_draws(&target, GRADIENT_POINTS, 13)?;
    let (mut lite, _) = kmc_lite_oracle(&target, n)?;
    log.add(
        "kmc_lite_gradient",
        format!("KMC lite surrogate gradient ∇f(x) at one point, n = {n}"),
        time_gradient(&timers.step, &mut lite, &points),
        lite_gradient_flops(n as f64, d),
    );
    let (mut finite, _) = kmc_finite_oracle(&target, m)?;
    log.add(
        "kmc_finite_gradient",
        format!("KMC finite surrogate gradient ∇f(x) at one point, m = {m}"),
        time_gradient(&timers.step, &mut finite, &points),
        finite_gradient_flops(m as f64, d),
    );

    let steps = s.leapfrog_steps;
    let step_flops = |gradient: f64| f64::from(steps + 1) * gradient + 6.0 * d * f64::from(steps);
    say_err!("bench-report: KMC lite step");
    let mut lite = frozen(&target, kmc_lite_frozen(&target, n, steps)?, 4)?;
    log.add(
        "kmc_lite_step",
        format!("KMC lite iteration, {steps} leapfrog steps, n = {n}, frozen surrogate"),
        timers.step.time(|| {
            black_box(lite.step(&target));
        }),
        step_flops(lite_gradient_flops(n as f64, d)),
    )
    .original(2.38e-3);

    say_err!("bench-report: adapting KMC lite step");
    let (mut lite, t0) = kmc_lite_adapting_sampler(&target, n, steps)?;
    let refit = (t0 as f64).powf(-LITE_REFIT_KAPPA);
    log.add(
        "kmc_lite_adapting_step",
        format!(
            "KMC lite iteration while adapting: refit on {n} history points with probability \
             t^−{LITE_REFIT_KAPPA} (≈ {refit:.4} at t ≈ {t0}), {steps} leapfrog steps; \
             averaged over repetitions of ≥ {} s (a refit's solve runs on faer's {} threads, \
             so this path can beat its single-core floor)",
            s.amortised_secs,
            rayon::current_num_threads()
        ),
        timers.amortised.time(|| {
            black_box(lite.step(&target));
        }),
        step_flops(lite_gradient_flops(n as f64, d)) + refit * lite_fit_flops(n as f64, d),
    )
    .adapting_from("kmc_lite_step");

    say_err!("bench-report: KMC finite step");
    let mut finite = frozen(&target, kmc_finite_frozen(&target, m, steps)?, 5)?;
    log.add(
        "kmc_finite_step",
        format!("KMC finite iteration, {steps} leapfrog steps, m = {m}, frozen surrogate"),
        timers.step.time(|| {
            black_box(finite.step(&target));
        }),
        step_flops(finite_gradient_flops(m as f64, d)),
    )
    .original(7.07e-3);

    say_err!("bench-report: adapting KMC finite step");
    let mut finite = adapting(&target, kmc_finite_frozen(&target, m, steps)?, 6)?;
    log.add(
        "kmc_finite_adapting_step",
        format!(
            "KMC finite iteration while adapting: the online update by the current state \
             (default ridge) at every step, {steps} leapfrog steps, m = {m}; averaged over \
             repetitions of ≥ {} s",
            s.amortised_secs
        ),
        timers.amortised.time(|| {
            black_box(finite.step(&target));
        }),
        step_flops(finite_gradient_flops(m as f64, d)) + finite_update_flops(m as f64, d),
    )
    .adapting_from("kmc_finite_step")
    .traffic(finite_update_bytes(m as f64), finite_working_set(m));

    say_err!("bench-report: finite online update");
    // fitted on 2m points: refactorisation is due only after m/4 more
    // points, more than the warm-up and repetitions add, so each call is the
    // O(dm²) rank-d update plus the preconditioned solve
    let x = [0.1; DIM];
    let updates = s.warmup + s.repetitions;
    if updates >= m / 4 {
        bail!("too many repetitions ({updates}) for the online update at m = {m}");
    }
    let one_by_one = TimerSettings {
        min_secs: 0.0,
        ..timers.step
    };
    let mut model = fit_finite_estimator(m)?;
    model.fit(uniform_points(2 * m, 4).as_ref())?;
    log.add(
        "finite_online_update",
        format!("finite estimator: add one point, m = {m} (default ridge tλ on the sums)"),
        one_by_one.time(|| {
            model.update(black_box(&x)).expect("online update");
        }),
        finite_update_flops(m as f64, d),
    )
    .traffic(finite_update_bytes(m as f64), finite_working_set(m));

    say_err!("bench-report: finite online update, fixed ridge on the sums");
    // RidgeSchedule::FixedOnSums with λ₀ = 2m · 10⁻³ (the default's ridge at
    // the fitted count 2m): a rank-d Cholesky update and two triangular
    // solves, no iteration
    let features = fit_finite_estimator(m)?.features().clone();
    let mut model = FiniteEstimator::new(features, 2.0 * m as f64 * FIT_FINITE_LAMBDA)?
        .with_ridge_schedule(RidgeSchedule::FixedOnSums)?;
    model.fit(uniform_points(2 * m, 4).as_ref())?;
    log.add(
        "finite_online_update_fixed_ridge",
        format!("finite estimator: add one point, m = {m} (RidgeSchedule::FixedOnSums)"),
        one_by_one.time(|| {
            model.update(black_box(&x)).expect("online update");
        }),
        finite_fixed_ridge_update_flops(m as f64, d),
    )
    .traffic(
        finite_fixed_ridge_update_bytes(m as f64),
        finite_working_set(m),
    );

    say_err!("bench-report: lite fit");
    let points = uniform_points(n, 2);
    log.add(
        "lite_fit",
        format!(
            "lite estimator fit, n = {n} (faer's global parallelism: {} rayon threads)",
            rayon::current_num_threads()
        ),
        timers.fit.time(|| {
            let mut model = LiteEstimator::new(FIT_LITE.0, FIT_LITE.1).expect("valid parameters");
            model.fit(black_box(points.as_ref())).expect("lite fit");
            black_box(model);
        }),
        lite_fit_flops(n as f64, d),
    )
    .original(410e-3)
    .blas_bound();

    say_err!("bench-report: finite fit");
    let mut model = fit_finite_estimator(m)?;
    let points = uniform_points(m, 3);
    log.add(
        "finite_fit",
        format!("finite estimator batch fit, m = {m} features on n = {m} points"),
        timers.fit.time(|| {
            model.fit(black_box(points.as_ref())).expect("finite fit");
        }),
        finite_fit_flops(m as f64, m as f64, d),
    )
    .original(261e-3)
    .blas_bound();

    say_err!("bench-report: Glass likelihood estimate");
    let glass = glass_posterior(s.glass_importance)?;
    let newton_steps = GpClassification::glass(s.glass_importance)?
        .laplace(&[0.0; 9])?
        .newton_steps();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let theta = [0.0; 9];
    log.add(
        "glass_estimate",
        format!(
            "one Glass log-likelihood estimate (N = 214, n_imp = {}, θ = 0, {newton_steps} \
             Newton steps)",
            s.glass_importance
        ),
        timers.step.time(|| {
            black_box(glass.log_density(black_box(&theta), &mut rng));
        }),
        glass_flops(214.0, 9.0, s.glass_importance as f64, newton_steps as f64),
    )
    .blas_bound();
    Ok(log.paths)
}

/// Points at which the surrogate gradients are timed (and compared with
/// the peers).
pub const GRADIENT_POINTS: usize = 16;

/// Times one gradient per call, cycling through the rows of `points`.
fn time_gradient(
    timer: &TimerSettings,
    model: &mut dyn GradientModel,
    points: &Mat<f64>,
) -> Timing {
    let rows: Vec<Vec<f64>> = (0..points.nrows())
        .map(|i| (0..points.ncols()).map(|j| points[(i, j)]).collect())
        .collect();
    let mut grad = vec![0.0; DIM];
    let mut next = rows.iter().cycle();
    timer.time(|| {
        let x = next.next().expect("a cycle never ends");
        model.grad_log_density(black_box(x), &mut grad);
        black_box(&grad);
    })
}

/// The banana every path samples.
pub fn banana() -> Result<Banana> {
    Ok(Banana::new(DIM, BANANA.0, BANANA.1)?)
}

/// `n` exact draws from the banana (one per row).
pub fn iid_draws(target: &Banana, n: usize, seed: u64) -> Result<Mat<f64>> {
    let mut rng = chain_rng(seed, 0);
    let mut x = [0.0; DIM];
    let mut z = Mat::<f64>::zeros(n, DIM);
    for i in 0..n {
        target.sample_iid(&mut rng, &mut x)?;
        for (j, v) in x.iter().enumerate() {
            z[(i, j)] = *v;
        }
    }
    Ok(z)
}

/// `n` points uniform on [−2, 2]^d.
pub fn uniform_points(n: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, DIM, |_, _| rng.random_range(-2.0..2.0))
}

/// The frozen KAMH proposal on subsample `z`: fixed γ, ν and kernel.
pub fn kamh_proposal(z: &Mat<f64>) -> Result<Kamh<Gaussian>> {
    let config = KamhConfig::default()
        .with_subsample(
            SubsampleConfig::default()
                .with_subsample_size(z.nrows())?
                .with_gamma(Gamma::Fixed(KAMH_GAMMA))?
                .with_refresh(Refresh::Never)?
                .with_bandwidth(Bandwidth::Fixed)?
                .with_warmup_scale(1.0)?,
        )?
        .with_scale(Scale::fixed(KAMH_NU)?)?;
    let mut kamh = Kamh::new(DIM, Gaussian::new(KAMH_SIGMA)?, config)?;
    kamh.set_subsample(z.as_ref())?;
    Ok(kamh)
}

/// The experiments' adapting KAMH-LS configuration for subsample size `n`.
pub fn kamh_adapting_config(n: usize) -> Result<KamhConfig> {
    let mut config = KamhConfig::paper(n)?;
    config.subsample.bandwidth = Bandwidth::MedianHeuristic {
        max_points: MEDIAN_POINTS,
    };
    Ok(config)
}

/// KAMH-LS adapting, after 2n steps (so the history holds n states and the
/// kernel proposal runs).
fn kamh_adapting_sampler(target: &Banana, n: usize) -> Result<MetropolisHastings<Kamh<Gaussian>>> {
    let kamh = Kamh::new(DIM, Gaussian::new(1.0)?, kamh_adapting_config(n)?)?;
    let start = iid_draws(target, 1, 7)?;
    let mut sampler = MetropolisHastings::new(
        target,
        kamh,
        start.row(0).iter().copied().collect::<Vec<_>>().as_slice(),
        chain_rng(7, 0),
        None,
    )?;
    for _ in 0..2 * n {
        sampler.step(target);
    }
    Ok(sampler)
}

/// A sampler with adaptation off from the start, 200 steps in.
fn frozen<P: Proposal>(target: &Banana, proposal: P, seed: u64) -> Result<MetropolisHastings<P>> {
    warmed(target, proposal, Some(0), seed, 200)
}

/// A sampler adapting throughout, 200 steps in.
fn adapting<P: Proposal>(target: &Banana, proposal: P, seed: u64) -> Result<MetropolisHastings<P>> {
    warmed(target, proposal, None, seed, 200)
}

fn warmed<P: Proposal>(
    target: &Banana,
    proposal: P,
    adapt_until: Option<u64>,
    seed: u64,
    steps: u64,
) -> Result<MetropolisHastings<P>> {
    let mut sampler = MetropolisHastings::new(
        target,
        proposal,
        &[0.0; DIM],
        chain_rng(seed, 0),
        adapt_until,
    )?;
    for _ in 0..steps {
        sampler.step(target);
    }
    Ok(sampler)
}

/// The F-KAMH features: D random Fourier features of the Gaussian kernel
/// with parameter 10.
pub fn fkamh_features(big: usize) -> Result<RandomFourierFeatures> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(big as u64);
    Ok(RandomFourierFeatures::new(
        &Gaussian::new(KAMH_SIGMA)?,
        DIM,
        big,
        Embedding::CosPhase,
        &mut rng,
    )?)
}

fn fkamh_sampler(
    target: &Banana,
    big: usize,
    history: usize,
    adapts: bool,
) -> Result<MetropolisHastings<FKamh<RandomFourierFeatures>>> {
    let eta = Scale::Adaptive(RobbinsMonro::new(
        1.0,
        0.234,
        StepSchedule::Power { kappa: 0.7 },
    )?);
    let mut proposal = FKamh::new(
        fkamh_features(big)?,
        FKamhConfig::default()
            .with_gamma(KAMH_GAMMA)?
            .with_eta(eta)?,
    )?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(big as u64 + 1);
    let mut x = [0.0; DIM];
    for _ in 0..history {
        target.sample_iid(&mut rng, &mut x)?;
        proposal.push_history(&x)?;
    }
    target.sample_iid(&mut rng, &mut x)?;
    let adapt_until = if adapts { None } else { Some(0) };
    Ok(MetropolisHastings::new(
        target,
        proposal,
        &x,
        rng,
        adapt_until,
    )?)
}

/// The `n` exact draws the KMC paths' surrogates are fitted on (the oracle
/// basis).
fn oracle_points(target: &Banana, n: usize) -> Result<Mat<f64>> {
    iid_draws(target, n, 3)
}

/// The lite estimator of the frozen KMC lite path, fitted on the oracle
/// points.
pub fn kmc_lite_oracle(target: &Banana, n: usize) -> Result<(LiteEstimator, Mat<f64>)> {
    let points = oracle_points(target, n)?;
    let mut model = LiteEstimator::new(LITE_SIGMA, LITE_LAMBDA)?;
    model.fit(points.as_ref())?;
    Ok((model, points))
}

fn kmc_lite_frozen(target: &Banana, n: usize, steps: u32) -> Result<KmcLite> {
    let points = oracle_points(target, n)?;
    let lite = LiteSurrogate::new(
        LiteEstimator::new(LITE_SIGMA, LITE_LAMBDA)?,
        DIM,
        LiteSurrogateConfig::default()
            .with_subsample_size(n)?
            .with_refit(AdaptProbability::Always)?,
    )?;
    Ok(KmcLite::new(
        lite,
        KmcConfig::default()
            .with_step_size(KMC_STEP_SIZE)?
            .with_steps((steps, steps))?,
    )?
    .with_oracle_points(points.as_ref())?)
}

/// KMC lite learning its basis from the history, refitted with probability
/// t^−κ; returned after 3n adapting steps, with that step count.
fn kmc_lite_adapting_sampler(
    target: &Banana,
    n: usize,
    steps: u32,
) -> Result<(MetropolisHastings<KmcLite>, u64)> {
    let lite = LiteSurrogate::new(
        LiteEstimator::new(LITE_SIGMA, LITE_LAMBDA)?,
        DIM,
        LiteSurrogateConfig::default()
            .with_subsample_size(n)?
            .with_refit(AdaptProbability::Power {
                kappa: LITE_REFIT_KAPPA,
            })?,
    )?;
    let walk = RobbinsMonro::new(Scale::optimal_for(DIM), 0.234, StepSchedule::InverseSqrt)?;
    let kmc = KmcLite::new(
        lite,
        KmcConfig::default()
            .with_step_size(KMC_STEP_SIZE)?
            .with_steps((steps, steps))?
            .with_walk_scale(Scale::Adaptive(walk))?,
    )?;
    let warm = 3 * n as u64;
    Ok((warmed(target, kmc, None, 8, warm)?, warm))
}

/// The random features of the frozen and adapting KMC finite paths.
pub fn kmc_finite_features(m: usize) -> Result<RandomFourierFeatures> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    Ok(RandomFourierFeatures::new(
        &Gaussian::new(KMC_FINITE_SIGMA)?,
        DIM,
        m,
        Embedding::CosPhase,
        &mut rng,
    )?)
}

/// The finite estimator of the KMC finite paths fitted on `m` exact draws.
pub fn kmc_finite_oracle(
    target: &Banana,
    m: usize,
) -> Result<(FiniteEstimator<RandomFourierFeatures>, Mat<f64>)> {
    let points = oracle_points(target, m)?;
    let mut model = FiniteEstimator::new(kmc_finite_features(m)?, KMC_FINITE_LAMBDA)?;
    model.fit(points.as_ref())?;
    Ok((model, points))
}

fn kmc_finite_frozen(
    target: &Banana,
    m: usize,
    steps: u32,
) -> Result<KmcFinite<RandomFourierFeatures>> {
    let points = oracle_points(target, m)?;
    let model = FiniteEstimator::new(kmc_finite_features(m)?, KMC_FINITE_LAMBDA)?;
    Ok(KmcFinite::new(
        FiniteSurrogate::new(model, FiniteSurrogateConfig::default().with_min_points(1)?)?,
        KmcConfig::default()
            .with_step_size(KMC_STEP_SIZE)?
            .with_steps((steps, steps))?,
    )?
    .with_oracle_points(points.as_ref())?)
}

/// The estimator of the finite fit and online-update paths.
pub fn fit_finite_estimator(m: usize) -> Result<FiniteEstimator<RandomFourierFeatures>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let features = RandomFourierFeatures::new(
        &Gaussian::new(FIT_FINITE_SIGMA)?,
        DIM,
        m,
        Embedding::CosPhase,
        &mut rng,
    )?;
    Ok(FiniteEstimator::new(features, FIT_FINITE_LAMBDA)?)
}

/// The finite estimator's sums S and factor L (m × m each).
fn finite_working_set(m: usize) -> usize {
    2 * m * m * 8
}

/// One online update: S and L each read and written once (their lower
/// triangles), one product with S for the first residual, and per solver
/// iteration two triangular solves with L and one product with S.
fn finite_update_bytes(m: f64) -> f64 {
    let triangle = m * m / 2.0 * 8.0;
    triangle * (2.0 + 2.0 + 1.0 + 3.0 * PCG_ITERATIONS)
}

/// One update with the ridge fixed on the sums: S and L read and written,
/// two triangular solves.
fn finite_fixed_ridge_update_bytes(m: f64) -> f64 {
    let triangle = m * m / 2.0 * 8.0;
    triangle * (2.0 + 2.0 + 2.0)
}

/// One KAMH step: the gradient matrix at x* (per point: difference, squared
/// norm, one exp, scaling: 4d + exp), the lower triangle of MMᵀ and the row
/// sums (n d(d + 1) + nd), a d × d Cholesky, one draw and two Gaussian log
/// densities (triangular solves).
fn kamh_step_flops(n: f64, d: f64) -> f64 {
    n * (4.0 * d + TRANSCENDENTAL_FLOPS) + n * d * (d + 1.0) + n * d + d.powi(3) / 3.0 + 3.0 * d * d
}

/// One adapting KAMH step: a frozen step, then after the refresh the factor
/// at the current state again (the kernel changed), and the median of the
/// p(p − 1)/2 pairwise squared distances of p points (3d each; selecting
/// the median is comparisons, not flops).
fn kamh_adapting_step_flops(n: f64, d: f64, p: f64) -> f64 {
    2.0 * kamh_step_flops(n, d) + p * (p - 1.0) / 2.0 * 3.0 * d
}

/// One frozen F-KAMH step: the feature Jacobian at x* (D(3d + sin)), the
/// proposal covariance γ²I + η² Jᵀ C J (D²d + 2Dd²) and two d × d
/// factorisations with their log densities.
fn fkamh_step_flops(big: f64, d: f64) -> f64 {
    let jacobian = big * (3.0 * d + TRANSCENDENTAL_FLOPS);
    let form = big * big * d + 2.0 * big * d * d;
    jacobian + form + 2.0 * d.powi(3) / 3.0 + 4.0 * d * d
}

/// The Welford update of the D × D feature covariance by one state.
fn welford_flops(big: f64, d: f64) -> f64 {
    big * big + big * (2.0 * d + TRANSCENDENTAL_FLOPS)
}

fn lite_gradient_flops(n: f64, d: f64) -> f64 {
    n * (4.0 * d + TRANSCENDENTAL_FLOPS)
}

fn finite_gradient_flops(m: f64, d: f64) -> f64 {
    m * (4.0 * d + TRANSCENDENTAL_FLOPS + 1.0)
}

/// The iterations the preconditioned solve of the default ridge takes.
const PCG_ITERATIONS: f64 = 4.0;

fn finite_update_flops(m: f64, d: f64) -> f64 {
    sums_update_flops(m, d) + rank_update_flops(m, d) + (1.0 + 2.0 * PCG_ITERATIONS) * 2.0 * m * m
}

fn finite_fixed_ridge_update_flops(m: f64, d: f64) -> f64 {
    sums_update_flops(m, d) + rank_update_flops(m, d) + 2.0 * m * m
}

fn rank_update_flops(m: f64, d: f64) -> f64 {
    3.0 * d * m * m
}

fn sums_update_flops(m: f64, d: f64) -> f64 {
    d * m * m
}

fn lite_fit_flops(n: f64, d: f64) -> f64 {
    0.5 * n * n * (3.0 * d + TRANSCENDENTAL_FLOPS) + 3.0 * n.powi(3) + n.powi(3) / 3.0
}

fn finite_fit_flops(n: f64, m: f64, d: f64) -> f64 {
    n * m * m + d * m * m + n * m * (2.0 * d + 2.0 * TRANSCENDENTAL_FLOPS) + m.powi(3) / 3.0
}

/// The kernel matrix's lower triangle; per Newton step, the factor of B
/// and two matrix-vector products; the factors of `K + ρI` and of C, C's
/// product of two triangles (`n³/3` each); the triangular solve and product
/// over the m draws, and the solve for `L_K⁻¹f̂`.
fn glass_flops(big_n: f64, d: f64, m: f64, newton_steps: f64) -> f64 {
    let (n2, n3) = (big_n * big_n, big_n.powi(3));
    0.5 * n2 * (3.0 * d + TRANSCENDENTAL_FLOPS)
        + newton_steps * (n3 / 3.0 + 4.0 * n2)
        + n3
        + 2.0 * n2 * m
        + n2
}
