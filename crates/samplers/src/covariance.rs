//! A Gaussian proposal covariance kept as a Cholesky factor, with the jitter
//! fallback of the whole workspace (add εI, ε ×10 per retry, 10 retries,
//! counted).

use crate::error::{Result, SamplerError};
use faer::dyn_stack::MemStack;
use faer::linalg::cholesky::llt::factor::{
    LltRegularization, cholesky_in_place, cholesky_in_place_scratch,
};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{MatMut, MatRef, Par};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use std::mem::MaybeUninit;

/// Jitter retries after the plain attempt.
const JITTER_STEPS: i32 = 10;

/// A d × d covariance C held as its lower Cholesky factor L (C = L Lᵀ), with
/// draws from and log densities of N(m, s² C); allocation-free after the
/// first factorisation.
///
/// If C is not numerically positive definite, [`ProposalCovariance::factor`]
/// retries with C + εI, ε = 10⁻¹⁰ · max(mean |Cᵢᵢ|, 1) · 10ᵏ for
/// k = 0, …, 9, and counts one jitter per factorisation that needed it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProposalCovariance {
    dim: usize,
    /// L, column-major; only the lower triangle is meaningful.
    factor: Vec<f64>,
    candidate: Vec<f64>,
    log_det: f64,
    jitters: u64,
    work: Vec<f64>,
    #[serde(skip)]
    stack: Vec<MaybeUninit<f64>>,
}

impl ProposalCovariance {
    /// The identity covariance in dimension `dim`.
    pub fn identity(dim: usize) -> Self {
        let mut factor = vec![0.0; dim * dim];
        for i in 0..dim {
            factor[i * dim + i] = 1.0;
        }
        Self {
            dim,
            factor,
            candidate: vec![0.0; dim * dim],
            log_det: 0.0,
            jitters: 0,
            work: vec![0.0; dim],
            stack: Vec::new(),
        }
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Factors the symmetric d × d matrix `cov` (its storage order does not
    /// matter since it is symmetric), adding jitter if needed. If even the
    /// largest jitter fails (or `cov` has non-finite entries) the previous
    /// factor is kept and [`SamplerError::NotPositiveDefinite`] returned.
    pub fn factor(&mut self, cov: &[f64]) -> Result<()> {
        let d = self.dim;
        debug_assert_eq!(cov.len(), d * d);
        let req = cholesky_in_place_scratch::<f64>(d, Par::Seq, Default::default());
        let words = (req.size_bytes() + req.align_bytes()).div_ceil(8) + 1;
        if self.stack.len() < words {
            self.stack.resize(words, MaybeUninit::new(0.0));
        }
        let mean_diag = (0..d).map(|i| cov[i * d + i].abs()).sum::<f64>() / d.max(1) as f64;
        let base = 1e-10 * mean_diag.max(1.0);
        let finite = cov.iter().all(|v| v.is_finite());
        let mut jitter = 0.0;
        for k in 0..=JITTER_STEPS {
            if !finite {
                break;
            }
            jitter = if k == 0 {
                0.0
            } else {
                base * 10f64.powi(k - 1)
            };
            self.candidate.copy_from_slice(cov);
            for i in 0..d {
                self.candidate[i * d + i] += jitter;
            }
            let a = MatMut::from_column_major_slice_mut(&mut self.candidate, d, d);
            let stack = MemStack::new_any(&mut self.stack);
            let ok = cholesky_in_place(
                a,
                LltRegularization::default(),
                Par::Seq,
                stack,
                Default::default(),
            )
            .is_ok();
            if ok {
                if k > 0 {
                    self.jitters += 1;
                }
                std::mem::swap(&mut self.factor, &mut self.candidate);
                self.log_det = 2.0 * (0..d).map(|i| self.factor[i * d + i].ln()).sum::<f64>();
                return Ok(());
            }
        }
        Err(SamplerError::NotPositiveDefinite { jitter })
    }

    /// The lower Cholesky factor L (only its lower triangle is meaningful).
    pub fn lower_factor(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(&self.factor, self.dim, self.dim)
    }

    /// log det C (of the factored matrix, jitter included).
    pub fn log_det(&self) -> f64 {
        self.log_det
    }

    /// Factorisations that needed jitter so far.
    pub fn jitters(&self) -> u64 {
        self.jitters
    }

    /// Draws `out = mean + scale · L ξ`, ξ ~ N(0, I), i.e. out ~ N(mean, scale² C).
    pub fn sample_into(&mut self, mean: &[f64], scale: f64, rng: &mut dyn Rng, out: &mut [f64]) {
        for w in self.work.iter_mut() {
            *w = rng.sample(StandardNormal);
        }
        multiply_add(&self.factor, self.dim, mean, scale, &self.work, out);
    }

    /// `out = mean + L v` (the map from whitened to original coordinates).
    pub fn apply_into(&self, mean: &[f64], v: &[f64], out: &mut [f64]) {
        multiply_add(&self.factor, self.dim, mean, 1.0, v, out);
    }

    /// `out = L⁻¹ (x − mean)` (the map from original to whitened
    /// coordinates; allocation-free).
    pub fn solve_into(&self, x: &[f64], mean: &[f64], out: &mut [f64]) {
        let d = self.dim;
        for ((o, xi), mi) in out.iter_mut().zip(x).zip(mean) {
            *o = xi - mi;
        }
        let l = MatRef::from_column_major_slice(&self.factor, d, d);
        solve_lower_triangular_in_place(
            l,
            MatMut::from_column_major_slice_mut(out, d, 1),
            Par::Seq,
        );
    }

    /// log N(x; mean, scale² C), normalised.
    pub fn log_density(&mut self, x: &[f64], mean: &[f64], scale: f64) -> f64 {
        let d = self.dim;
        for ((w, xi), mi) in self.work.iter_mut().zip(x).zip(mean) {
            *w = (xi - mi) / scale;
        }
        let l = MatRef::from_column_major_slice(&self.factor, d, d);
        let rhs = MatMut::from_column_major_slice_mut(&mut self.work, d, 1);
        solve_lower_triangular_in_place(l, rhs, Par::Seq);
        let maha: f64 = self.work.iter().map(|v| v * v).sum();
        -0.5 * maha
            - d as f64 * scale.ln()
            - 0.5 * self.log_det
            - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln()
    }
}

/// `out = mean + scale · L v` for the lower factor L stored column-major.
fn multiply_add(factor: &[f64], d: usize, mean: &[f64], scale: f64, v: &[f64], out: &mut [f64]) {
    out.copy_from_slice(mean);
    for j in 0..d {
        let c = scale * v[j];
        let col = &factor[j * d..(j + 1) * d];
        for i in j..d {
            out[i] += col[i] * c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Dense C = A Aᵀ + 0.1 I for a fixed A.
    fn spd(d: usize) -> Vec<f64> {
        let a: Vec<f64> = (0..d * d)
            .map(|k| ((k * 7 + 3) % 11) as f64 / 11.0 - 0.4)
            .collect();
        let mut c = vec![0.0; d * d];
        for i in 0..d {
            for j in 0..d {
                c[i * d + j] = (0..d).map(|k| a[i * d + k] * a[j * d + k]).sum::<f64>();
            }
            c[i * d + i] += 0.1;
        }
        c
    }

    #[test]
    fn factor_reconstructs_and_log_density_matches_the_dense_formula() {
        let d = 4;
        let c = spd(d);
        let mut pc = ProposalCovariance::identity(d);
        pc.factor(&c).unwrap();
        let l = pc.lower_factor();
        for i in 0..d {
            for j in 0..d {
                let r: f64 = (0..=i.min(j)).map(|k| l[(i, k)] * l[(j, k)]).sum();
                assert!((r - c[i * d + j]).abs() < 1e-12);
            }
        }
        assert_eq!(pc.jitters(), 0);
        // independent check: inverse and determinant through faer's dense solvers
        let cm = faer::Mat::<f64>::from_fn(d, d, |i, j| c[i * d + j]);
        let lu = cm.partial_piv_lu();
        use faer::linalg::solvers::DenseSolveCore;
        let inv = lu.inverse();
        let det = cm.determinant();
        let (x, m, s) = ([0.3, -1.0, 2.0, 0.5], [0.1, 0.2, -0.3, 0.0], 1.7);
        let v: Vec<f64> = (0..d).map(|i| (x[i] - m[i]) / s).collect();
        let maha: f64 = (0..d)
            .map(|i| (0..d).map(|j| v[i] * inv[(i, j)] * v[j]).sum::<f64>())
            .sum();
        let expected = -0.5 * maha
            - 0.5 * (det * s.powi(2 * d as i32)).ln()
            - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln();
        assert!((pc.log_density(&x, &m, s) - expected).abs() < 1e-10);
    }

    #[test]
    fn draws_have_the_requested_covariance() {
        // Monte Carlo: the sample covariance of n draws has entrywise standard
        // error sqrt((C_ii C_jj + C_ij²)/n); allow 5 of them.
        let d = 3;
        let c = spd(d);
        let mut pc = ProposalCovariance::identity(d);
        pc.factor(&c).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let n = 40_000;
        let mut moments = crate::RunningMoments::new(d);
        let mut out = vec![0.0; d];
        for _ in 0..n {
            pc.sample_into(&[1.0, 2.0, 3.0], 2.0, &mut rng, &mut out);
            moments.push(&out);
        }
        let mut emp = vec![0.0; d * d];
        moments.covariance_into(&mut emp);
        for i in 0..d {
            for j in 0..d {
                let target = 4.0 * c[i * d + j];
                let se =
                    (4.0 * (c[i * d + i] * c[j * d + j] + c[i * d + j].powi(2)) / n as f64).sqrt();
                assert!((emp[i * d + j] - target).abs() < 5.0 * se, "({i},{j})");
            }
        }
    }

    #[test]
    fn singular_covariance_is_jittered_and_counted_and_nan_is_an_error() {
        let d = 3;
        // rank one: v vᵀ
        let v = [1.0, 2.0, -1.0];
        let c: Vec<f64> = (0..9).map(|k| v[k / 3] * v[k % 3]).collect();
        let mut pc = ProposalCovariance::identity(d);
        pc.factor(&c).unwrap();
        assert_eq!(pc.jitters(), 1);
        assert!(pc.log_det().is_finite());
        // zero matrix (zero-variance history)
        pc.factor(&[0.0; 9]).unwrap();
        assert_eq!(pc.jitters(), 2);
        let mut bad = c.clone();
        bad[4] = f64::NAN;
        assert!(pc.factor(&bad).is_err());
        // the previous factor is kept
        assert!(pc.log_det().is_finite());
        let neg: Vec<f64> = (0..9)
            .map(|k| if k % 4 == 0 { -1.0 } else { 0.0 })
            .collect();
        assert!(pc.factor(&neg).is_err());
    }
}
