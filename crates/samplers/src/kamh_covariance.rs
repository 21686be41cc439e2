//! The KAMH proposal covariance γ²I + ν² M H Mᵀ at a point, in O(n d²).

use faer::{MatMut, MatRef};
use kameleon_kernels::Kernel;
use serde::{Deserialize, Serialize};

/// Builds the KAMH kernel term `M H Mᵀ` (and the full proposal covariance
/// `γ²I + ν² M H Mᵀ`) at a point `y` for a subsample `z` (n × d, one point
/// per row, in any layout), where `M = 2[∇ₓk(x, z_1), …, ∇ₓk(x, z_n)]|ₓ₌y` (d × n) and
/// `H = I − (1/n)11ᵀ` is the centring matrix.
///
/// `H` is never formed: `M H Mᵀ = M Mᵀ − (1/n)(M1)(M1)ᵀ`, with the lower
/// triangle of `M Mᵀ` and `M1` from [`Kernel::gradient_gram`]. For radial
/// kernels (the Gaussian of the experiments), d ≤ 10 and a column-major z
/// (faer's `Mat` layout; what [`crate::Kamh`] passes) that streams z once in
/// blocks without forming M; otherwise M is formed in a buffer here and
/// multiplied out. A build costs O(n d²) and allocates nothing. This is the
/// building block of [`crate::Kamh`]; cKAM
/// freezes the same matrix at its exploration/sampling switch.
///
/// ```
/// use faer::Mat;
/// use kameleon_kernels::Gaussian;
/// use kameleon_samplers::KamhCovariance;
/// let z = Mat::<f64>::from_fn(50, 2, |i, j| ((i * 7 + j * 3) % 11) as f64 / 5.0);
/// let mut builder = KamhCovariance::new(2, 50);
/// let mut cov = [0.0; 4];
/// builder.covariance_into(&Gaussian::new(1.0)?, &[0.5, 0.5], z.as_ref(), 0.2, 0.3, &mut cov);
/// assert!(cov[0] >= 0.04 && cov[3] >= 0.04 && cov[1] == cov[2]);
/// # Ok::<(), kameleon_kernels::KernelError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KamhCovariance {
    dim: usize,
    subsample_size: usize,
    /// M, d × n column-major.
    gradient: Vec<f64>,
    /// The lower triangle of M Mᵀ, d × d column-major.
    gram: Vec<f64>,
    /// M1, length d.
    row_sums: Vec<f64>,
}

impl KamhCovariance {
    /// A builder for points of dimension `dim` and subsamples of
    /// `subsample_size` points.
    pub fn new(dim: usize, subsample_size: usize) -> Self {
        Self {
            dim,
            subsample_size,
            gradient: vec![0.0; dim * subsample_size],
            gram: vec![0.0; dim * dim],
            row_sums: vec![0.0; dim],
        }
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The subsample size n.
    pub fn subsample_size(&self) -> usize {
        self.subsample_size
    }

    /// Computes `M` at `y` (d × n) and returns a view of it.
    ///
    /// Panics (debug) if `y` does not have length d or `z` is not n × d.
    pub fn gradient_matrix<K: Kernel + ?Sized>(
        &mut self,
        kernel: &K,
        y: &[f64],
        z: MatRef<'_, f64>,
    ) -> MatRef<'_, f64> {
        let (d, n) = (self.dim, self.subsample_size);
        debug_assert!(y.len() == d && z.nrows() == n && z.ncols() == d);
        kernel.gradient_matrix(
            y,
            z,
            MatMut::from_column_major_slice_mut(&mut self.gradient, d, n),
        );
        MatRef::from_column_major_slice(&self.gradient, d, n)
    }

    /// Writes `M H Mᵀ` at `y` into `out` (d × d, symmetric, so its storage
    /// order does not matter).
    pub fn kernel_term_into<K: Kernel + ?Sized>(
        &mut self,
        kernel: &K,
        y: &[f64],
        z: MatRef<'_, f64>,
        out: &mut [f64],
    ) {
        let (d, n) = (self.dim, self.subsample_size);
        debug_assert_eq!(out.len(), d * d);
        debug_assert!(y.len() == d && z.nrows() == n && z.ncols() == d);
        kernel.gradient_gram(y, z, &mut self.gradient, &mut self.gram, &mut self.row_sums);
        // M Mᵀ − (1/n)(M1)(M1)ᵀ from the lower triangle, mirrored
        let inv_n = 1.0 / n as f64;
        for j in 0..d {
            let sj = self.row_sums[j] * inv_n;
            for i in j..d {
                let v = self.gram[j * d + i] - self.row_sums[i] * sj;
                out[i * d + j] = v;
                out[j * d + i] = v;
            }
        }
    }

    /// Writes the KAMH proposal covariance `γ²I + ν² M H Mᵀ` at `y` into
    /// `out` (d × d).
    pub fn covariance_into<K: Kernel + ?Sized>(
        &mut self,
        kernel: &K,
        y: &[f64],
        z: MatRef<'_, f64>,
        gamma: f64,
        nu: f64,
        out: &mut [f64],
    ) {
        self.kernel_term_into(kernel, y, z, out);
        combine_in_place(out, self.dim, gamma * gamma, nu * nu);
    }
}

/// Turns a kernel term T (d × d) into `gamma2·I + nu2·T` in place.
pub(crate) fn combine_in_place(term: &mut [f64], dim: usize, gamma2: f64, nu2: f64) {
    for v in term.iter_mut() {
        *v *= nu2;
    }
    for i in 0..dim {
        term[i * dim + i] += gamma2;
    }
}

/// Writes `gamma2·I + nu2·term` into `out`.
pub(crate) fn combine_into(term: &[f64], dim: usize, gamma2: f64, nu2: f64, out: &mut [f64]) {
    out.copy_from_slice(term);
    combine_in_place(out, dim, gamma2, nu2);
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;
    use kameleon_kernels::Gaussian;

    /// Brute force: M from `grad_x` column by column, an explicit n × n H,
    /// and the triple product M H Mᵀ by plain loops.
    fn brute_force(kernel: &Gaussian, y: &[f64], z: &Mat<f64>) -> Vec<f64> {
        let (n, d) = (z.nrows(), z.ncols());
        let mut m = vec![vec![0.0; n]; d];
        let mut g = vec![0.0; d];
        for i in 0..n {
            let zi: Vec<f64> = (0..d).map(|l| z[(i, l)]).collect();
            kernel.grad_x(y, &zi, &mut g);
            for l in 0..d {
                m[l][i] = 2.0 * g[l];
            }
        }
        let h = |a: usize, b: usize| f64::from(u8::from(a == b)) - 1.0 / n as f64;
        let mut out = vec![0.0; d * d];
        for r in 0..d {
            for c in 0..d {
                let mut s = 0.0;
                for a in 0..n {
                    for b in 0..n {
                        s += m[r][a] * h(a, b) * m[c][b];
                    }
                }
                out[r * d + c] = s;
            }
        }
        out
    }

    /// For d = 3 (one panel, partial vector blocks), 8 (two panels), 10
    /// (three panels) and 12 (faer's product), against the brute force.
    #[test]
    fn kernel_term_matches_the_explicit_centring_matrix() {
        let n = 41;
        for d in [3, 8, 10, 12] {
            let z = Mat::<f64>::from_fn(n, d, |i, j| ((i * 13 + j * 7) % 17) as f64 / 4.0 - 2.0);
            let kernel = Gaussian::new(1.3 * (d as f64).sqrt()).unwrap();
            let y: Vec<f64> = (0..d).map(|l| 0.3 - 0.2 * l as f64).collect();
            let expected = brute_force(&kernel, &y, &z);
            let mut builder = KamhCovariance::new(d, n);
            let mut got = vec![0.0; d * d];
            builder.kernel_term_into(&kernel, &y, z.as_ref(), &mut got);
            let scale = expected.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            assert!(scale > 0.0);
            for (g, e) in got.iter().zip(&expected) {
                assert!((g - e).abs() < 1e-12 * scale, "d = {d}: {g} vs {e}");
            }
            let (gamma, nu) = (0.2, 0.7);
            let mut cov = vec![0.0; d * d];
            builder.covariance_into(&kernel, &y, z.as_ref(), gamma, nu, &mut cov);
            for i in 0..d {
                for j in 0..d {
                    let e =
                        nu * nu * expected[i * d + j] + if i == j { gamma * gamma } else { 0.0 };
                    assert!((cov[i * d + j] - e).abs() < 1e-12 * scale.max(1.0));
                }
            }
        }
    }
}
