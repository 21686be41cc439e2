//! Fastfood: kernel approximation against dense features, derivatives
//! against finite differences, the transposed transform, batch embedding.

use crate::common;

use common::*;
use faer::Mat;
use kameleon_features::{
    Embedding, Fastfood, FeatureError, FeatureMap, RadialSpectralDensity, RandomFourierFeatures,
};
use kameleon_kernels::{Gaussian, InverseMultiquadric, Kernel, Matern, RationalQuadratic};

const EMBEDDINGS: [Embedding; 2] = [Embedding::CosPhase, Embedding::SinCos];

/// A radial kernel together with its spectral density.
trait RadialKernel: Kernel + RadialSpectralDensity {}
impl<T: Kernel + RadialSpectralDensity> RadialKernel for T {}

/// Every kernel Fastfood supports.
fn radial_kernels() -> Vec<(&'static str, Box<dyn RadialKernel>)> {
    vec![
        ("gaussian", Box::new(Gaussian::new(1.3).unwrap())),
        ("matern 3/2", Box::new(Matern::new(1.5, 1.3).unwrap())),
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

fn pairs(seed: u64, d: usize, n: usize) -> Vec<(Vec<f64>, Vec<f64>)> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| (random_point(&mut r, d, 1.0), random_point(&mut r, d, 1.0)))
        .collect()
}

/// Same statistics as the dense test (see the `rff` module): 10 feature draws
/// per D (which dominate the noise; 50 pairs keep the test fast), slope
/// standard error ≈ 0.05, window ±0.15 around −1/2. d = 5 pads to p = 8, so
/// padding is exercised.
#[test]
fn fastfood_error_shrinks_like_inverse_sqrt_d() {
    let d = 5;
    let dims: Vec<usize> = (6..=12).map(|p| 1 << p).collect();
    let pairs = pairs(21, d, 50);
    for (name, kernel) in radial_kernels() {
        for embedding in EMBEDDINGS {
            let mut r = rng(22);
            let errors: Vec<f64> = dims
                .iter()
                .map(|&big_d| {
                    (0..10)
                        .map(|_| {
                            let phi = Fastfood::new(&*kernel, d, big_d, embedding, &mut r).unwrap();
                            mean_abs_error(&phi, &*kernel, &pairs)
                        })
                        .sum::<f64>()
                        / 10.0
                })
                .collect();
            let xs: Vec<f64> = dims.iter().map(|&v| v as f64).collect();
            let slope = log_log_slope(&xs, &errors);
            eprintln!("fastfood {name} {embedding:?}: slope {slope:.3}");
            assert!(
                (-0.65..=-0.35).contains(&slope),
                "{name} {embedding:?}: slope {slope}, errors {errors:?}"
            );
        }
    }
}

/// At D = 1024 the mean absolute error of each method, averaged over 20
/// feature draws, has a relative standard error ≈ 0.5/√20 ≈ 0.11; a ratio
/// within [1/1.6, 1.6] (> 3 combined standard errors in log scale,
/// √2·0.11·3 ≈ 0.47 ≈ ln 1.6) means "the same order".
#[test]
fn fastfood_error_is_of_the_same_order_as_dense_features() {
    let (d, big_d) = (6, 1024);
    let pairs = pairs(31, d, 100);
    for (name, kernel) in radial_kernels() {
        for embedding in EMBEDDINGS {
            let mut r = rng(32);
            let (mut dense, mut fast) = (0.0, 0.0);
            for _ in 0..20 {
                let f = Fastfood::new(&*kernel, d, big_d, embedding, &mut r).unwrap();
                fast += mean_abs_error(&f, &*kernel, &pairs);
                let g = RandomFourierFeatures::new(&*kernel, d, big_d, embedding, &mut r).unwrap();
                dense += mean_abs_error(&g, &*kernel, &pairs);
            }
            let ratio = fast / dense;
            eprintln!("{name} {embedding:?}: fastfood/dense error ratio {ratio:.3}");
            assert!(
                (1.0 / 1.6..=1.6).contains(&ratio),
                "{name} {embedding:?}: {ratio}"
            );
        }
    }
}

/// Finite-difference tolerances as in the `rff` module; dimensions chosen so
/// that d is and is not a power of two and the last block is truncated.
#[test]
fn derivatives_match_finite_differences() {
    let kernel = Gaussian::new(0.8).unwrap();
    for embedding in EMBEDDINGS {
        for (d, big_d) in [(1, 6), (3, 22), (8, 20)] {
            let mut r = rng(7);
            let phi = Fastfood::new(&kernel, d, big_d, embedding, &mut r).unwrap();
            let x = random_point(&mut r, d, 1.0);
            let mut jac = Mat::zeros(big_d, d);
            phi.jacobian(&x, jac.as_mut());
            let err = max_abs_diff(&jac, &fd_jacobian(&phi, &x, 1e-5));
            assert!(err < 1e-7, "{embedding:?} d={d}: jacobian error {err}");

            let mut second = Mat::zeros(big_d, d);
            phi.second_derivatives(&x, second.as_mut());
            let err = max_abs_diff(&second, &fd_second_derivatives(&phi, &x, 1e-5));
            assert!(
                err < 1e-7,
                "{embedding:?} d={d}: second-derivative error {err}"
            );

            // Jᵀw through the transposed transform against the Jacobian.
            let w = random_point(&mut r, big_d, 1.0);
            let mut jtw = vec![0.0; d];
            phi.jacobian_transpose_mul(&x, &w, &mut jtw);
            for l in 0..d {
                let direct: f64 = (0..big_d).map(|i| jac[(i, l)] * w[i]).sum();
                assert!((jtw[l] - direct).abs() < 1e-12, "{embedding:?} d={d}: Jᵀw");
            }
        }
    }
}

/// The materialised frequencies reproduce the fast features: the forward
/// transform of x agrees with the dot products of the transformed basis
/// vectors.
#[test]
fn dense_equivalent_gives_the_same_features() {
    let kernel = Gaussian::new(1.1).unwrap();
    for embedding in EMBEDDINGS {
        let (d, big_d) = (5, 40);
        let mut r = rng(8);
        let fast = Fastfood::new(&kernel, d, big_d, embedding, &mut r).unwrap();
        let dense = fast.to_dense().unwrap();
        assert_eq!((dense.dim_in(), dense.dim_out()), (d, big_d));
        let x = random_point(&mut r, d, 1.0);
        let (mut a, mut b) = (vec![0.0; big_d], vec![0.0; big_d]);
        fast.embed(&x, &mut a);
        dense.embed(&x, &mut b);
        for i in 0..big_d {
            assert!((a[i] - b[i]).abs() < 1e-12, "{embedding:?} feature {i}");
        }
    }
}

#[test]
fn explicit_scratch_matches_the_trait_methods() {
    let kernel = Gaussian::new(1.0).unwrap();
    let (d, big_d) = (3, 16);
    let phi = Fastfood::new(&kernel, d, big_d, Embedding::SinCos, &mut rng(1)).unwrap();
    let mut scratch = phi.scratch();
    let x = [0.2, -0.4, 1.0];
    let (mut a, mut b) = (vec![0.0; big_d], vec![0.0; big_d]);
    phi.embed(&x, &mut a);
    phi.embed_with(&x, &mut b, &mut scratch);
    assert_eq!(a, b);
    let (mut ja, mut jb) = (Mat::zeros(big_d, d), Mat::zeros(big_d, d));
    phi.second_derivatives(&x, ja.as_mut());
    phi.second_derivatives_with(&x, jb.as_mut(), &mut scratch);
    assert_eq!(ja, jb);
}

#[test]
fn bad_dimensions_are_typed_errors() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut r = rng(0);
    assert_eq!(
        Fastfood::new(&kernel, 3, 9, Embedding::SinCos, &mut r).unwrap_err(),
        FeatureError::OddOutputDimension { dim_out: 9 }
    );
    assert!(matches!(
        Fastfood::new(&kernel, 0, 8, Embedding::CosPhase, &mut r),
        Err(FeatureError::ZeroDimension { .. })
    ));
}

/// Sizes beyond memory are errors, not aborts: 2⁵² frequencies (four
/// parameters each, 32 PiB apiece: beyond any address space) and an input
/// dimension whose padding to a power of two overflows.
#[test]
fn sizes_beyond_memory_are_errors() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut r = rng(0);
    for embedding in EMBEDDINGS {
        let err = Fastfood::new(&kernel, 2, 1 << 52, embedding, &mut r).unwrap_err();
        assert!(matches!(err, FeatureError::BufferTooLarge(_)), "{err}");
        assert!(err.to_string().contains("Fastfood"), "{err}");
    }
    let err = Fastfood::new(&kernel, usize::MAX, 2, Embedding::SinCos, &mut r).unwrap_err();
    assert!(err.to_string().contains("dim_in"), "{err}");
    assert!(Fastfood::new(&kernel, (1 << 40) + 1, 2, Embedding::SinCos, &mut r).is_err());
}

#[test]
fn parallel_batch_equals_sequential_rows() {
    let kernel = Gaussian::new(1.0).unwrap();
    let (n, d, big_d) = (400, 5, 512);
    assert!(n * d * big_d > kameleon_features::PARALLEL_WORK_THRESHOLD);
    let phi = Fastfood::new(&kernel, d, big_d, Embedding::CosPhase, &mut rng(2)).unwrap();
    let mut r = rng(4);
    let points = Mat::from_fn(n, d, |_, _| random_point(&mut r, 1, 1.0)[0]);
    let mut batch = Mat::zeros(n, big_d);
    phi.embed_batch(points.as_ref(), batch.as_mut()).unwrap();
    let mut row = vec![0.0; big_d];
    for i in 0..n {
        let x: Vec<f64> = (0..d).map(|l| points[(i, l)]).collect();
        phi.embed(&x, &mut row);
        for j in 0..big_d {
            assert_eq!(batch[(i, j)].to_bits(), row[j].to_bits());
        }
    }
}

/// A Fastfood map survives a serde round trip exactly (postcard and JSON),
/// and a damaged serialised map is refused with an error, not a panic.
#[test]
fn serde_round_trips_and_rejects_damaged_maps() {
    let kernel = Gaussian::new(1.3).unwrap();
    for embedding in EMBEDDINGS {
        let phi = Fastfood::new(&kernel, 3, 10, embedding, &mut rng(4)).unwrap();
        let bytes = postcard::to_stdvec(&phi).unwrap();
        let back: Fastfood = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, phi);
        let x = [0.3, -1.2, 0.7];
        let (mut a, mut b) = (vec![0.0; 10], vec![0.0; 10]);
        phi.embed(&x, &mut a);
        back.embed(&x, &mut b);
        assert_eq!(a, b);
        let json = serde_json::to_string(&phi).unwrap();
        assert_eq!(serde_json::from_str::<Fastfood>(&json).unwrap(), phi);

        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        // a swap out of its Fisher–Yates range would index out of bounds
        value["swaps"][1] = serde_json::json!(7);
        assert!(serde_json::from_value::<Fastfood>(value.clone()).is_err());
        // a sign that is not ±1, a wrong length, a non-finite scale
        let mut signs = serde_json::from_str::<serde_json::Value>(&json).unwrap();
        signs["signs"][0] = serde_json::json!(0.5);
        assert!(serde_json::from_value::<Fastfood>(signs).is_err());
        let mut short = serde_json::from_str::<serde_json::Value>(&json).unwrap();
        short["gaussian"].as_array_mut().unwrap().pop();
        assert!(serde_json::from_value::<Fastfood>(short).is_err());
        let mut odd = serde_json::from_str::<serde_json::Value>(&json).unwrap();
        odd["dim_out"] = serde_json::json!(11);
        assert!(serde_json::from_value::<Fastfood>(odd).is_err());
    }
}
