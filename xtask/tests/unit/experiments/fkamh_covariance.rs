//! Tests of `xtask::experiments::fkamh_covariance`.

use faer::Mat;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{Target, chain_rng};
use kameleon_targets::Banana;
use xtask::experiments::fkamh_covariance::*;

/// The fitted slope of an exact power law is its exponent, whatever the
/// constant.
#[test]
fn slope_of_a_power_law_is_its_exponent() {
    let x = [10.0, 20.0, 50.0, 300.0];
    let y: Vec<f64> = x.iter().map(|v: &f64| 3.5 * v.powf(-0.6)).collect();
    assert!((log_log_slope(&x, &y) + 0.6).abs() < 1e-12);
}

/// n exact draws of the strongly twisted banana.
fn draws(n: usize, rng: &mut rand_xoshiro::Xoshiro256PlusPlus) -> Mat<f64> {
    let target = Banana::new(DIM, 0.1, VARIANCE).unwrap();
    let mut z = Mat::zeros(n, DIM);
    let mut x = vec![0.0; DIM];
    for i in 0..n {
        target.sample_iid(rng, &mut x).unwrap();
        for j in 0..DIM {
            z[(i, j)] = x[j];
        }
    }
    z
}

/// The batch form equals the sampler's own covariance after pushing the
/// same history (Welford moments, J at the point), for both embeddings.
#[test]
fn batch_covariances_match_the_sampler() {
    use kameleon_samplers::{FKamh, FKamhConfig, Scale};
    let mut rng = chain_rng(4, 0);
    let z = draws(150, &mut rng);
    let kernel = Gaussian::new(9.0).unwrap();
    let (ridge, far) = points(0.1);
    let ys: Vec<&[f64]> = [ridge[0].as_slice(), ridge[7].as_slice(), far.as_slice()].into();
    for (embedding, _) in EMBEDDINGS {
        let phi = RandomFourierFeatures::new(&kernel, DIM, 40, embedding, &mut rng).unwrap();
        let batch = fkamh_covariances(&phi, &z, &ys).unwrap();
        let mut sampler = FKamh::new(
            phi,
            FKamhConfig::default()
                .with_gamma(GAMMA)
                .unwrap()
                .with_eta(Scale::Fixed(ETA))
                .unwrap(),
        )
        .unwrap();
        for i in 0..z.nrows() {
            let row: Vec<f64> = (0..DIM).map(|j| z[(i, j)]).collect();
            sampler.push_history(&row).unwrap();
        }
        for (y, b) in ys.iter().zip(&batch) {
            let direct = sampler.proposal_covariance_at(y).unwrap();
            let scale = direct.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert!(frobenius(&direct, b) <= 1e-10 * scale, "{embedding:?}");
        }
    }
}

/// With D → ∞ random features the F-KAMH covariance tends to KAMH's on
/// the same points (thesis eq. 4.8): the error at D = 4000 is well below
/// the error at D = 40 (Monte Carlo rate D^{-1/2} or faster: a factor 10
/// in expectation; 3 leaves room for the randomness of one draw of the
/// frequencies).
#[test]
fn fkamh_covariance_approaches_kamh_as_d_grows() {
    let mut rng = chain_rng(5, 0);
    let z = draws(200, &mut rng);
    let kernel = Gaussian::new(12.0).unwrap();
    let (ridge, _) = points(0.1);
    let ys: Vec<&[f64]> = ridge.iter().map(Vec::as_slice).collect();
    let reference = kamh_covariances(&kernel, &z, consistent_nu(z.nrows()), &ys);
    let mut error = |big: usize| {
        let phi =
            RandomFourierFeatures::new(&kernel, DIM, big, Embedding::CosPhase, &mut rng).unwrap();
        let covs = fkamh_covariances(&phi, &z, &ys).unwrap();
        covs.iter()
            .zip(&reference)
            .map(|(c, r)| frobenius(c, r))
            .sum::<f64>()
    };
    let (coarse, fine) = (error(40), error(4000));
    assert!(fine * 3.0 < coarse, "{fine} vs {coarse}");
}
