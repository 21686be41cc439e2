//! Selection of (σ, λ) by k-fold cross-validation of the score-matching objective.

use crate::error::{check_points, positive};
use crate::{GradientModel, ScoreMatchingError};
use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A bandwidth and a ridge. What σ means (lite σ, a length-scale, …) is up to
/// the model factory given to [`cross_validate`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Hyperparameters {
    /// The kernel bandwidth.
    pub sigma: f64,
    /// The ridge λ.
    pub lambda: f64,
}

/// Settings of [`cross_validate`]: the folds, the seed of the fold
/// assignment, the search grids and the refinement budget.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "CrossValidationParts")]
pub struct CrossValidation {
    folds: usize,
    seed: u64,
    sigmas: Vec<f64>,
    lambdas: Vec<f64>,
    refinement_steps: usize,
}

/// The serialised form of [`CrossValidation`], validated by its constructor.
#[derive(serde::Deserialize)]
struct CrossValidationParts {
    folds: usize,
    seed: u64,
    sigmas: Vec<f64>,
    lambdas: Vec<f64>,
    refinement_steps: usize,
}

impl TryFrom<CrossValidationParts> for CrossValidation {
    type Error = ScoreMatchingError;
    fn try_from(p: CrossValidationParts) -> Result<Self, ScoreMatchingError> {
        Ok(Self::new(p.folds, p.seed, &p.sigmas, &p.lambdas)?
            .with_refinement_steps(p.refinement_steps))
    }
}

impl CrossValidation {
    /// `folds ≥ 2` folds assigned by a shuffle seeded with `seed`; the search
    /// starts on the grid `sigmas × lambdas` (values > 0) and then refines
    /// the best grid point by a compass search in (log σ, log λ) with 8 steps
    /// by default.
    pub fn new(
        folds: usize,
        seed: u64,
        sigmas: &[f64],
        lambdas: &[f64],
    ) -> Result<Self, ScoreMatchingError> {
        if folds < 2 {
            return Err(ScoreMatchingError::InvalidParameter {
                name: "folds",
                value: folds as f64,
                reason: "must be at least 2",
            });
        }
        let grid = |name, values: &[f64]| -> Result<Vec<f64>, ScoreMatchingError> {
            if values.is_empty() {
                return Err(ScoreMatchingError::InvalidParameter {
                    name,
                    value: 0.0,
                    reason: "the grid needs at least one value",
                });
            }
            let mut sorted = values
                .iter()
                .map(|&v| positive(name, v))
                .collect::<Result<Vec<_>, _>>()?;
            sorted.sort_by(f64::total_cmp);
            sorted.dedup();
            Ok(sorted)
        };
        Ok(Self {
            folds,
            seed,
            sigmas: grid("sigmas", sigmas)?,
            lambdas: grid("lambdas", lambdas)?,
            refinement_steps: 8,
        })
    }

    /// The same settings with another number of compass-search steps (0: grid only).
    pub fn with_refinement_steps(mut self, steps: usize) -> Self {
        self.refinement_steps = steps;
        self
    }
}

/// The outcome of [`cross_validate`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossValidationResult {
    /// The selected hyperparameters.
    pub best: Hyperparameters,
    /// Their mean held-out objective Ĵ over the folds.
    pub objective: f64,
    /// Every evaluated pair with its mean held-out Ĵ (+∞ where a fit failed),
    /// in evaluation order: the grid first (σ-major), then the refinement.
    pub evaluations: Vec<(Hyperparameters, f64)>,
}

/// Selects (σ, λ) minimising the k-fold cross-validated score-matching
/// objective: for each candidate, `make(candidate)` builds an unfitted model,
/// which is fitted on all folds but one and scored with
/// [`GradientModel::score_matching_objective`] on the held-out fold.
///
/// The search evaluates the whole grid, then runs a compass search from the
/// best grid point in (log σ, log λ): it tries the four neighbours at the
/// current step (initially half the grid spacing, or ln 2 for a one-value
/// grid), moves to the best improving one, and halves the step otherwise.
/// Candidates whose fit fails score +∞, and so do candidates of the
/// refinement that `make` refuses (it may step beyond the range of σ or λ
/// that a model accepts); `make` refusing a grid point is an error, and so
/// is a search in which no candidate scores finitely (the first failed
/// fit's error, if a fit failed).
/// Deterministic for a given seed (and a deterministic `make`; draw random
/// features from a fixed seed inside it).
pub fn cross_validate<M, F>(
    points: MatRef<'_, f64>,
    settings: &CrossValidation,
    mut make: F,
) -> Result<CrossValidationResult, ScoreMatchingError>
where
    M: GradientModel,
    F: FnMut(Hyperparameters) -> Result<M, ScoreMatchingError>,
{
    let (n, d) = (points.nrows(), points.ncols());
    check_points(points, d)?;
    if n < settings.folds {
        return Err(ScoreMatchingError::TooFewPoints {
            needed: settings.folds,
            got: n,
        });
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(settings.seed));
    let folds: Vec<(Mat<f64>, Mat<f64>)> = (0..settings.folds)
        .map(|f| {
            let pick = |keep_held: bool| -> Vec<usize> {
                (0..n)
                    .filter(|r| (r % settings.folds == f) == keep_held)
                    .map(|r| order[r])
                    .collect()
            };
            let (held, kept) = (pick(true), pick(false));
            let rows = |idx: &[usize]| Mat::from_fn(idx.len(), d, |r, c| points[(idx[r], c)]);
            (rows(&kept), rows(&held))
        })
        .collect();
    let mut evaluations = Vec::new();
    // the first failed fit's error, reported if no candidate is usable
    let mut first_failure = None;
    // `make` refusing a grid point is the caller's error; refusing a point
    // the refinement stepped to (beyond the range a model accepts, e.g. a σ
    // whose kernel overflows) only rules that point out
    let mut score = |h: Hyperparameters, refining: bool| -> Result<f64, ScoreMatchingError> {
        let mut total = 0.0;
        for (train, test) in &folds {
            let mut model = match make(h) {
                Ok(model) => model,
                Err(_) if refining => {
                    total = f64::INFINITY;
                    break;
                }
                Err(e) => return Err(e),
            };
            if let Err(e) = model.fit(train.as_ref()) {
                first_failure.get_or_insert(e);
                total = f64::INFINITY;
                break;
            }
            let j = model.score_matching_objective(test.as_ref())?;
            total += if j.is_finite() { j } else { f64::INFINITY };
        }
        let mean = total / folds.len() as f64;
        evaluations.push((h, mean));
        Ok(mean)
    };

    let mut best = (
        Hyperparameters {
            sigma: settings.sigmas[0],
            lambda: settings.lambdas[0],
        },
        f64::INFINITY,
    );
    for &sigma in &settings.sigmas {
        for &lambda in &settings.lambdas {
            let h = Hyperparameters { sigma, lambda };
            let j = score(h, false)?;
            if j < best.1 {
                best = (h, j);
            }
        }
    }
    let half_spacing = |grid: &[f64]| {
        if grid.len() < 2 {
            std::f64::consts::LN_2
        } else {
            let ratio = grid[grid.len() - 1] / grid[0];
            // the ratio of a grid spanning more than f64's range overflows
            let log_ratio = if ratio.is_finite() {
                ratio.ln()
            } else {
                grid[grid.len() - 1].ln() - grid[0].ln()
            };
            0.5 * log_ratio / (grid.len() - 1) as f64
        }
    };
    let mut steps = [
        half_spacing(&settings.sigmas),
        half_spacing(&settings.lambdas),
    ];
    for _ in 0..settings.refinement_steps {
        let mut improved: Option<(Hyperparameters, f64)> = None;
        for (axis, sign) in [(0, 1.0), (0, -1.0), (1, 1.0), (1, -1.0)] {
            let factor = (sign * steps[axis]).exp();
            let mut h = best.0;
            if axis == 0 {
                h.sigma *= factor;
            } else {
                h.lambda *= factor;
            }
            let j = score(h, true)?;
            if j < improved.map_or(best.1, |(_, v)| v) {
                improved = Some((h, j));
            }
        }
        match improved {
            Some(better) => best = better,
            None => steps = [0.5 * steps[0], 0.5 * steps[1]],
        }
    }
    if !best.1.is_finite() {
        return Err(
            first_failure.unwrap_or(ScoreMatchingError::InvalidParameter {
                name: "sigmas",
                value: settings.sigmas[0],
                reason: "no candidate (sigma, lambda) of the search gives a finite held-out \
                     objective: try other grids",
            }),
        );
    }
    Ok(CrossValidationResult {
        best: best.0,
        objective: best.1,
        evaluations,
    })
}
