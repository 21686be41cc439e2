//! Shared test helpers: a small random Fourier feature map and samplers.

use faer::{Mat, MatMut};
use kameleon_features::FeatureMap;
use kameleon_score_matching::{BaseMeasure, GradientModel};
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

/// `φ_i(x) = √(2/m) cos(ω_iᵀx + u_i)`, `ω_i ~ N(0, ℓ⁻²I)`: features of the
/// Gaussian kernel with length-scale ℓ, with analytic derivatives.
#[derive(Debug, Clone)]
pub struct Fourier {
    omega: Mat<f64>,
    phase: Vec<f64>,
}

impl Fourier {
    pub fn new(d: usize, m: usize, length_scale: f64, seed: u64) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let omega = Mat::from_fn(m, d, |_, _| {
            rng.sample::<f64, _>(StandardNormal) / length_scale
        });
        let phase = (0..m)
            .map(|_| rng.random_range(0.0..std::f64::consts::TAU))
            .collect();
        Self { omega, phase }
    }

    fn argument(&self, i: usize, x: &[f64]) -> f64 {
        self.phase[i]
            + x.iter()
                .enumerate()
                .map(|(l, v)| self.omega[(i, l)] * v)
                .sum::<f64>()
    }

    fn scale(&self) -> f64 {
        (2.0 / self.phase.len() as f64).sqrt()
    }
}

impl FeatureMap for Fourier {
    fn dim_in(&self) -> usize {
        self.omega.ncols()
    }
    fn dim_out(&self) -> usize {
        self.omega.nrows()
    }
    fn embed(&self, x: &[f64], out: &mut [f64]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.scale() * self.argument(i, x).cos();
        }
    }
    fn jacobian(&self, x: &[f64], mut out: MatMut<'_, f64>) {
        for i in 0..self.dim_out() {
            let s = -self.scale() * self.argument(i, x).sin();
            for l in 0..x.len() {
                out[(i, l)] = s * self.omega[(i, l)];
            }
        }
    }
    fn jacobian_transpose_mul(&self, x: &[f64], weights: &[f64], out: &mut [f64]) {
        out.fill(0.0);
        for (i, w) in weights.iter().enumerate() {
            let s = -self.scale() * self.argument(i, x).sin() * w;
            for (l, o) in out.iter_mut().enumerate() {
                *o += s * self.omega[(i, l)];
            }
        }
    }
    fn second_derivatives(&self, x: &[f64], mut out: MatMut<'_, f64>) {
        for i in 0..self.dim_out() {
            let c = -self.scale() * self.argument(i, x).cos();
            for l in 0..x.len() {
                out[(i, l)] = c * self.omega[(i, l)] * self.omega[(i, l)];
            }
        }
    }
}

/// `n` draws of N(μ, LLᵀ) (one per row).
pub fn gaussian_points(n: usize, mean: &[f64], chol: &Mat<f64>, seed: u64) -> Mat<f64> {
    let d = mean.len();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let z = Mat::from_fn(n, d, |_, _| rng.sample::<f64, _>(StandardNormal));
    Mat::from_fn(n, d, |i, l| {
        mean[l] + (0..d).map(|k| chol[(l, k)] * z[(i, k)]).sum::<f64>()
    })
}

/// Uniform points in [−2, 2]ᵈ.
pub fn uniform_points(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, d, |_, _| rng.random_range(-2.0..2.0))
}

/// Row `i` of `points` as a vector.
pub fn row(points: &Mat<f64>, i: usize) -> Vec<f64> {
    (0..points.ncols()).map(|l| points[(i, l)]).collect()
}

/// Checks a model's gradient and Laplacian at each of `points` against
/// central finite differences of its log density, and that
/// `grad_and_laplacian` and `grad_log_density` give the same gradient.
/// Truncation O(h²): ≈ 1e-10 (h = 1e-5) for the gradient and ≈ 1e-6
/// (h = 1e-3) for the Laplacian, relative to the O(1) scale of f.
pub fn check_derivatives(model: &mut impl GradientModel, points: &[[f64; 3]]) {
    for x in points {
        let mut grad = [0.0; 3];
        let laplacian = model.grad_and_laplacian(x, &mut grad);
        let mut other = [0.0; 3];
        model.grad_log_density(x, &mut other);
        assert_eq!(grad, other);
        let (fd_grad, fd_laplacian) = finite_differences(x, |y| model.log_density_unnormalised(y));
        assert!(
            relative_error(&grad, &fd_grad) < 1e-6,
            "{grad:?} vs {fd_grad:?}"
        );
        assert!((laplacian - fd_laplacian).abs() < 1e-4 * laplacian.abs().max(1.0));
    }
}

/// Central finite differences of `f` at `x`: (gradient, Laplacian).
pub fn finite_differences(x: &[f64], mut f: impl FnMut(&[f64]) -> f64) -> (Vec<f64>, f64) {
    let (h1, h2) = (1e-5, 1e-3);
    let f0 = f(x);
    let mut y = x.to_vec();
    let mut grad = vec![0.0; x.len()];
    let mut laplacian = 0.0;
    for l in 0..x.len() {
        y[l] = x[l] + h1;
        let p1 = f(&y);
        y[l] = x[l] - h1;
        let m1 = f(&y);
        grad[l] = (p1 - m1) / (2.0 * h1);
        y[l] = x[l] + h2;
        let p2 = f(&y);
        y[l] = x[l] - h2;
        let m2 = f(&y);
        laplacian += (p2 - 2.0 * f0 + m2) / (h2 * h2);
        y[l] = x[l];
    }
    (grad, laplacian)
}

/// Solves the SPD system `a x = b` (test-side brute force).
pub fn solve_spd(a: &Mat<f64>, b: &[f64]) -> Vec<f64> {
    use faer::linalg::solvers::Solve;
    let rhs = faer::Col::from_fn(b.len(), |i| b[i]);
    let x = a.llt(faer::Side::Lower).expect("SPD").solve(&rhs);
    (0..b.len()).map(|i| x[i]).collect()
}

/// max |a − b| / max |b|.
pub fn relative_error(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

/// Mean relative error of the fitted score against −Σ⁻¹(x − μ) at bulk points.
pub fn score_error(model: &mut impl GradientModel, n_test: usize) -> f64 {
    // Σ = L Lᵀ with L = [[1, 0], [0.6, 0.8]]: unit variances, correlation 0.6.
    let chol = Mat::from_fn(2, 2, |i, j| [[1.0, 0.0], [0.6, 0.8]][i][j]);
    let mean = [0.5, -1.0];
    let precision = {
        let det = 1.0 - 0.36;
        [[1.0 / det, -0.6 / det], [-0.6 / det, 1.0 / det]]
    };
    let test = gaussian_points(n_test * 4, &mean, &chol, 999);
    let (mut total, mut count) = (0.0, 0);
    for i in 0..test.nrows() {
        let x = row(&test, i);
        let c = [x[0] - mean[0], x[1] - mean[1]];
        let truth = [
            -(precision[0][0] * c[0] + precision[0][1] * c[1]),
            -(precision[1][0] * c[0] + precision[1][1] * c[1]),
        ];
        // Bulk: Mahalanobis distance below 1.5 (≈ 68 % of the mass).
        let maha2 = -(c[0] * truth[0] + c[1] * truth[1]);
        if maha2 > 1.5 * 1.5 || count == n_test {
            continue;
        }
        let mut grad = [0.0; 2];
        model.grad_log_density(&x, &mut grad);
        let diff = ((grad[0] - truth[0]).powi(2) + (grad[1] - truth[1]).powi(2)).sqrt();
        total += diff / (truth[0].powi(2) + truth[1].powi(2)).sqrt().max(1.0);
        count += 1;
    }
    total / count as f64
}

/// The base measure's constant in the score-matching objective of
/// `f + log q₀` on `points`: `mean_x (Δ log q₀ + ½‖∇ log q₀‖²)`, which is
/// 0 for the flat one and `mean_x (‖x‖²/2 − d)` for the standard normal.
pub fn base_measure_constant(base: BaseMeasure, points: &Mat<f64>) -> f64 {
    (0..points.nrows())
        .map(|k| {
            let x = row(points, k);
            let g = base_gradient(base, &x);
            base_laplacian(base, &x) + 0.5 * g.iter().map(|v| v * v).sum::<f64>()
        })
        .sum::<f64>()
        / points.nrows() as f64
}

/// `log q₀(x)` of the Student-t base measure with `dof` degrees of freedom,
/// written out: `−(m/2) ln(1 + ‖x‖²/m)` with `m = dof + d`.
pub fn student_log_density(dof: f64, x: &[f64]) -> f64 {
    let m = dof + x.len() as f64;
    -0.5 * m * (1.0 + x.iter().map(|v| v * v).sum::<f64>() / m).ln()
}

/// `∇ log q₀(x)` in closed form: 0, `−x`, and for the Student t
/// `−m x/(m + ‖x‖²)`.
pub fn base_gradient(base: BaseMeasure, x: &[f64]) -> Vec<f64> {
    match base {
        BaseMeasure::Flat => vec![0.0; x.len()],
        BaseMeasure::StandardNormal => x.iter().map(|v| -v).collect(),
        BaseMeasure::StudentT { dof } => {
            let m = dof + x.len() as f64;
            let r2: f64 = x.iter().map(|v| v * v).sum();
            x.iter().map(|v| -m * v / (m + r2)).collect()
        }
    }
}

/// `Δ log q₀(x)` in closed form: 0, `−d`, and for the Student t
/// `−d m/(m + r²) + 2 m r²/(m + r²)²`.
pub fn base_laplacian(base: BaseMeasure, x: &[f64]) -> f64 {
    let d = x.len() as f64;
    match base {
        BaseMeasure::Flat => 0.0,
        BaseMeasure::StandardNormal => -d,
        BaseMeasure::StudentT { dof } => {
            let m = dof + d;
            let r2: f64 = x.iter().map(|v| v * v).sum();
            -d * m / (m + r2) + 2.0 * m * r2 / ((m + r2) * (m + r2))
        }
    }
}
