//! Shared helpers of the integration tests: the list of spectral kernels,
//! finite differences and the log-log slope fit.

use faer::Mat;
use kameleon_features::FeatureMap;
use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, Laplacian, Matern, RationalQuadratic, SpectralDensity,
};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A kernel together with its spectral density.
pub trait SpectralKernel: Kernel + SpectralDensity {}
impl<T: Kernel + SpectralDensity> SpectralKernel for T {}

/// Every spectral kernel the kernels crate provides, with a name.
pub fn spectral_kernels() -> Vec<(&'static str, Box<dyn SpectralKernel>)> {
    vec![
        ("gaussian", Box::new(Gaussian::new(1.3).unwrap())),
        ("laplacian", Box::new(Laplacian::new(1.3).unwrap())),
        ("matern 1/2", Box::new(Matern::new(0.5, 1.3).unwrap())),
        ("matern 5/2", Box::new(Matern::new(2.5, 1.3).unwrap())),
        (
            "rational quadratic",
            Box::new(RationalQuadratic::new(1.3, 2.0).unwrap()),
        ),
        (
            "inverse multiquadric",
            Box::new(InverseMultiquadric::new(1.3).unwrap()),
        ),
    ]
}

pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// A point with N(0, s²) coordinates.
pub fn random_point(rng: &mut Xoshiro256PlusPlus, d: usize, s: f64) -> Vec<f64> {
    (0..d)
        .map(|_| s * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, rng))
        .collect()
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Least-squares slope of `ln y` against `ln x`.
pub fn log_log_slope(xs: &[f64], ys: &[f64]) -> f64 {
    let lx: Vec<f64> = xs.iter().map(|v| v.ln()).collect();
    let ly: Vec<f64> = ys.iter().map(|v| v.ln()).collect();
    let n = lx.len() as f64;
    let (mx, my) = (lx.iter().sum::<f64>() / n, ly.iter().sum::<f64>() / n);
    let sxy: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = lx.iter().map(|a| (a - mx) * (a - mx)).sum();
    sxy / sxx
}

/// Central-difference Jacobian of `embed` (D × d), step `h`.
pub fn fd_jacobian(map: &dyn FeatureMap, x: &[f64], h: f64) -> Mat<f64> {
    let (d, big_d) = (map.dim_in(), map.dim_out());
    let mut out = Mat::zeros(big_d, d);
    let (mut fp, mut fm) = (vec![0.0; big_d], vec![0.0; big_d]);
    let mut xs = x.to_vec();
    for l in 0..d {
        xs[l] = x[l] + h;
        map.embed(&xs, &mut fp);
        xs[l] = x[l] - h;
        map.embed(&xs, &mut fm);
        xs[l] = x[l];
        for i in 0..big_d {
            out[(i, l)] = (fp[i] - fm[i]) / (2.0 * h);
        }
    }
    out
}

/// Central difference of the analytic Jacobian's column l along x_l, i.e.
/// an approximation of `∂²φ/∂x_l²` (D × d), step `h`.
pub fn fd_second_derivatives(map: &dyn FeatureMap, x: &[f64], h: f64) -> Mat<f64> {
    let (d, big_d) = (map.dim_in(), map.dim_out());
    let mut out = Mat::zeros(big_d, d);
    let (mut jp, mut jm) = (Mat::zeros(big_d, d), Mat::zeros(big_d, d));
    let mut xs = x.to_vec();
    for l in 0..d {
        xs[l] = x[l] + h;
        map.jacobian(&xs, jp.as_mut());
        xs[l] = x[l] - h;
        map.jacobian(&xs, jm.as_mut());
        xs[l] = x[l];
        for i in 0..big_d {
            out[(i, l)] = (jp[(i, l)] - jm[(i, l)]) / (2.0 * h);
        }
    }
    out
}

/// Largest absolute entry-wise difference.
pub fn max_abs_diff(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut m: f64 = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    m
}

/// Mean absolute error of `φ(x)ᵀφ(y)` against `k(x, y)` over `pairs`.
pub fn mean_abs_error(
    map: &dyn FeatureMap,
    kernel: &dyn Kernel,
    pairs: &[(Vec<f64>, Vec<f64>)],
) -> f64 {
    let (mut fx, mut fy) = (vec![0.0; map.dim_out()], vec![0.0; map.dim_out()]);
    let total: f64 = pairs
        .iter()
        .map(|(x, y)| {
            map.embed(x, &mut fx);
            map.embed(y, &mut fy);
            (dot(&fx, &fy) - kernel.eval(x, y)).abs()
        })
        .sum();
    total / pairs.len() as f64
}
