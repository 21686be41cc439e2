//! Dense random Fourier features: kernel approximation rate, derivatives
//! against finite differences, validation, serde and batch embedding.

use crate::common;

use common::*;
use faer::Mat;
use kameleon_core::fastmath::SIN_COS_MAX_ARG;
use kameleon_features::{Embedding, FeatureError, FeatureMap, RandomFourierFeatures};
use kameleon_kernels::Gaussian;

const EMBEDDINGS: [Embedding; 2] = [Embedding::CosPhase, Embedding::SinCos];

/// The mean absolute error of `φ(x)ᵀφ(y)` is a Monte Carlo average over D
/// (or D/2) i.i.d. bounded terms, so its standard deviation — hence its mean
/// absolute value — scales like D^(−1/2). For each D ∈ {64, …, 4096} we
/// average over 100 pairs and 10 independent feature draws; the per-D
/// estimate then has a relative error of roughly 0.5/√10 ≈ 0.16 (pairs drawn
/// with one feature set are correlated, so only the 10 draws count), i.e.
/// ≈ 0.16 in log scale, and the least-squares slope over seven log-spaced
/// points (Σ(ln Dᵢ − mean)² = 28·(ln 2)² ≈ 13.5) has a standard error of about
/// 0.16/√13.5 ≈ 0.045. The window [−0.65, −0.35] is > 3 standard errors wide
/// on each side of −1/2.
#[test]
fn kernel_approximation_error_shrinks_like_inverse_sqrt_d() {
    let d = 3;
    let dims: Vec<usize> = (6..=12).map(|p| 1 << p).collect();
    for (name, kernel) in spectral_kernels() {
        for embedding in EMBEDDINGS {
            let mut rng = rng(11);
            let pairs: Vec<_> = (0..100)
                .map(|_| {
                    (
                        random_point(&mut rng, d, 1.0),
                        random_point(&mut rng, d, 1.0),
                    )
                })
                .collect();
            let errors: Vec<f64> = dims
                .iter()
                .map(|&big_d| {
                    (0..10)
                        .map(|_| {
                            let phi =
                                RandomFourierFeatures::new(&*kernel, d, big_d, embedding, &mut rng)
                                    .unwrap();
                            mean_abs_error(&phi, &*kernel, &pairs)
                        })
                        .sum::<f64>()
                        / 10.0
                })
                .collect();
            let xs: Vec<f64> = dims.iter().map(|&v| v as f64).collect();
            let slope = log_log_slope(&xs, &errors);
            eprintln!("{name} {embedding:?}: slope {slope:.3}");
            assert!(
                (-0.65..=-0.35).contains(&slope),
                "{name} {embedding:?}: slope {slope}, errors {errors:?}"
            );
        }
    }
}

/// Central differences with step h have truncation error h²/6·|φ'''| ≤
/// h²/6·√(2/D)·max|ω|³ ≈ 1e-10 for h = 1e-5 and |ω| ≲ 5, plus round-off
/// ≈ 1e-16/h = 1e-11; the tolerance 1e-7 leaves a wide margin.
#[test]
fn derivatives_match_finite_differences() {
    let kernel = Gaussian::new(0.8).unwrap();
    // D = 32 fits one tile of the implementation's loops, D = 150 spans three
    for (embedding, big_d) in EMBEDDINGS.into_iter().flat_map(|e| [(e, 32), (e, 150)]) {
        for d in [1, 4] {
            let mut rng = rng(3);
            let phi = RandomFourierFeatures::new(&kernel, d, big_d, embedding, &mut rng).unwrap();
            let x = random_point(&mut rng, d, 1.0);
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

            // The factored form J = diag(ψ') Ω, ∂²_lφ = ψ'' ω_l², against
            // the same (finite-difference-checked) matrices.
            let omega = phi.feature_frequencies().unwrap();
            let (mut first, mut second_arg) = (vec![0.0; big_d], vec![0.0; big_d]);
            assert!(phi.argument_derivatives(&x, &mut first, &mut second_arg));
            for r in 0..big_d {
                for l in 0..d {
                    let w = omega[(r, l)];
                    assert!((first[r] * w - jac[(r, l)]).abs() < 1e-15);
                    assert!((second_arg[r] * w * w - second[(r, l)]).abs() < 1e-15);
                }
            }

            // Jᵀw against the explicit product with the Jacobian.
            let w = random_point(&mut rng, big_d, 1.0);
            let mut jtw = vec![0.0; d];
            phi.jacobian_transpose_mul(&x, &w, &mut jtw);
            for l in 0..d {
                let direct: f64 = (0..big_d).map(|i| jac[(i, l)] * w[i]).sum();
                assert!((jtw[l] - direct).abs() < 1e-12, "{embedding:?}: Jᵀw");
            }
        }
    }
}

/// The embedding's explicit formula, evaluated independently of the crate
/// with libm's sine and cosine (to 1e-15 plus the rounding of the argument:
/// the crate's vectorised sine and cosine are within 2 ulp), for one and several tiles of frequencies, and
/// at a point so far out that some arguments leave the vectorised sine's
/// accurate range (the crate then falls back to libm).
#[test]
fn embed_follows_the_thesis_formulas() {
    let kernel = Gaussian::new(1.0).unwrap();
    let cases = EMBEDDINGS
        .into_iter()
        .flat_map(|e| [(e, 6), (e, 150)])
        .flat_map(|(e, big_d)| [(e, big_d, [0.3, -1.2]), (e, big_d, [3e7, -1e6])]);
    for (embedding, big_d, x) in cases {
        let phi = RandomFourierFeatures::new(&kernel, 2, big_d, embedding, &mut rng(5)).unwrap();
        let mut out = vec![0.0; big_d];
        phi.embed(&x, &mut out);
        let w = phi.frequencies();
        let s = (2.0 / big_d as f64).sqrt();
        for i in 0..phi.num_frequencies() {
            let a = w[(i, 0)] * x[0] + w[(i, 1)] * x[1];
            // the crate forms the argument with fused multiply-adds: in any
            // order the two evaluations differ by at most a few roundings of
            // the partial sums, ≤ 2ε Σ|terms|, and sin/cos are 1-Lipschitz
            let phase = phi.phases().get(i).copied().unwrap_or(0.0);
            let terms = (w[(i, 0)] * x[0]).abs() + (w[(i, 1)] * x[1]).abs() + phase;
            let tolerance = 1e-15 + s * 2.0 * f64::EPSILON * terms;
            match embedding {
                Embedding::CosPhase => {
                    assert!((out[i] - s * (a + phase).cos()).abs() < tolerance)
                }
                Embedding::SinCos => {
                    assert!((out[2 * i] - s * a.sin()).abs() < tolerance);
                    assert!((out[2 * i + 1] - s * a.cos()).abs() < tolerance);
                }
            }
        }
    }
}

#[test]
fn bad_dimensions_are_typed_errors() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut r = rng(0);
    assert_eq!(
        RandomFourierFeatures::new(&kernel, 2, 7, Embedding::SinCos, &mut r).unwrap_err(),
        FeatureError::OddOutputDimension { dim_out: 7 }
    );
    assert!(RandomFourierFeatures::new(&kernel, 2, 7, Embedding::CosPhase, &mut r).is_ok());
    assert!(matches!(
        RandomFourierFeatures::new(&kernel, 0, 8, Embedding::CosPhase, &mut r),
        Err(FeatureError::ZeroDimension { .. })
    ));
    assert!(matches!(
        RandomFourierFeatures::new(&kernel, 2, 0, Embedding::SinCos, &mut r),
        Err(FeatureError::ZeroDimension { .. })
    ));
    assert!(matches!(
        RandomFourierFeatures::from_parts(Embedding::CosPhase, 2, vec![1.0; 4], vec![0.0]),
        Err(FeatureError::DimensionMismatch { .. })
    ));
    assert!(matches!(
        RandomFourierFeatures::from_parts(Embedding::SinCos, 2, vec![1.0, f64::NAN], vec![]),
        Err(FeatureError::InvalidParameter { .. })
    ));
    let phi = RandomFourierFeatures::new(&kernel, 2, 8, Embedding::SinCos, &mut r).unwrap();
    assert!(matches!(
        phi.embed_batch(Mat::zeros(3, 3).as_ref(), Mat::zeros(3, 8).as_mut()),
        Err(FeatureError::DimensionMismatch { .. })
    ));
}

/// Sizes beyond memory are errors, not aborts: 2⁵⁰ × 2 frequencies (16 PiB,
/// beyond any address space) and a count of values that overflows `usize`.
#[test]
fn sizes_beyond_memory_are_errors() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut r = rng(0);
    for (dim_in, dim_out) in [(2, 1 << 50), (1 << 40, 1 << 40), (2, usize::MAX - 1)] {
        for embedding in EMBEDDINGS {
            let err = RandomFourierFeatures::new(&kernel, dim_in, dim_out, embedding, &mut r)
                .unwrap_err();
            assert!(matches!(err, FeatureError::BufferTooLarge(_)), "{err}");
            assert!(err.to_string().contains("frequencies"), "{err}");
        }
    }
}

#[test]
fn same_seed_same_features_and_serde_round_trip() {
    let kernel = Gaussian::new(2.0).unwrap();
    for embedding in EMBEDDINGS {
        let a = RandomFourierFeatures::new(&kernel, 3, 10, embedding, &mut rng(9)).unwrap();
        let b = RandomFourierFeatures::new(&kernel, 3, 10, embedding, &mut rng(9)).unwrap();
        assert_eq!(a, b);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            serde_json::from_str::<RandomFourierFeatures>(&json).unwrap(),
            a
        );
        let bytes = postcard::to_stdvec(&a).unwrap();
        assert_eq!(
            postcard::from_bytes::<RandomFourierFeatures>(&bytes).unwrap(),
            a
        );
        let rebuilt = RandomFourierFeatures::from_parts(
            embedding,
            3,
            row_major(a.frequencies()),
            a.phases().to_vec(),
        )
        .unwrap();
        assert_eq!(rebuilt, a);
    }
    // A corrupted file is refused, not silently accepted.
    let bad = r#"{"embedding":"SinCos","dim_in":3,"frequencies":[1.0,2.0],"phases":[]}"#;
    assert!(serde_json::from_str::<RandomFourierFeatures>(bad).is_err());
}

#[test]
fn parallel_batch_equals_sequential_rows() {
    let kernel = Gaussian::new(1.0).unwrap();
    let (n, d, big_d) = (500, 4, 256); // n·D·d above the parallel threshold
    assert!(n * d * big_d > kameleon_features::PARALLEL_WORK_THRESHOLD);
    let phi =
        RandomFourierFeatures::new(&kernel, d, big_d, Embedding::CosPhase, &mut rng(2)).unwrap();
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

/// The entries of `m` in row-major order.
fn row_major(m: faer::MatRef<'_, f64>) -> Vec<f64> {
    (0..m.nrows())
        .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
        .collect()
}

/// `Jᵀw = Σ_j ω_j g_j` against the explicit sum over the frequencies, with
/// `g_j = −s sin(a_j) w_j` ([`Embedding::CosPhase`]) or
/// `s (cos(a_j) w_{2j} − sin(a_j) w_{2j+1})` ([`Embedding::SinCos`]) from
/// libm, for numbers of frequencies around the implementation's blocks (32)
/// and tiles (64), fewer than one block, input dimensions 1 to 40 (its
/// coordinates are summed in groups of 30), and inputs of three spreads: 1,
/// 10⁴ (arguments up to ~10⁵, still the fast sine) and 10⁶, where some
/// arguments leave the fast sine's range (the implementation bounds the
/// arguments from the input and then uses libm throughout).
///
/// The reference forms `a_j` by the implementation's fused multiply-adds in
/// the same order, so the arguments agree to the bit. Each term `ω_{j,l} g_j`
/// then differs by the fast sine's error (≤ 2 ulp, or 2⁻⁵³ absolute) and the
/// summations by at most (m − 1)ε Σ|terms| whatever their order, so with
/// `B_l = Σ_j |ω_{j,l}| s (|w|'s of j)`, which bounds Σ|terms|, the
/// difference is below (m + 4)·2ε·B_l. A missing or doubled term (≈ B_l/m)
/// would exceed that by orders of magnitude.
#[test]
fn jacobian_transpose_mul_matches_the_explicit_sum() {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut rng = rng(17);
    let sizes = [1, 5, 31, 32, 33, 64, 65, 97, 150, 1000];
    // far inputs with arguments both inside and outside the fast range
    let mut mixed = 0;
    for (embedding, m, d) in EMBEDDINGS.into_iter().flat_map(|e| {
        sizes
            .into_iter()
            .flat_map(move |m| [1, 8, 10, 17, 40].map(|d| (e, m, d)))
    }) {
        let big_d = match embedding {
            Embedding::CosPhase => m,
            Embedding::SinCos => 2 * m,
        };
        let phi = RandomFourierFeatures::new(&kernel, d, big_d, embedding, &mut rng).unwrap();
        let w = random_point(&mut rng, big_d, 1.0);
        for spread in [1.0, 1e4, 1e6] {
            let x = random_point(&mut rng, d, spread);
            let mut jtw = vec![0.0; d];
            phi.jacobian_transpose_mul(&x, &w, &mut jtw);
            let (omega, s) = (phi.frequencies(), (2.0 / big_d as f64).sqrt());
            let (mut direct, mut bound) = (vec![0.0; d], vec![0.0; d]);
            let mut outside = 0;
            for j in 0..m {
                let phase = phi.phases().get(j).copied().unwrap_or(0.0);
                let a = (0..d).fold(phase, |a, l| omega[(j, l)].mul_add(x[l], a));
                outside += usize::from(a.abs() > SIN_COS_MAX_ARG);
                let (g, weight) = match embedding {
                    Embedding::CosPhase => (-s * a.sin() * w[j], s * w[j].abs()),
                    Embedding::SinCos => (
                        s * (a.cos() * w[2 * j] - a.sin() * w[2 * j + 1]),
                        s * (w[2 * j].abs() + w[2 * j + 1].abs()),
                    ),
                };
                for l in 0..d {
                    direct[l] += omega[(j, l)] * g;
                    bound[l] += omega[(j, l)].abs() * weight;
                }
            }
            for l in 0..d {
                let tolerance = (m + 4) as f64 * 2.0 * f64::EPSILON * bound[l];
                assert!(
                    (jtw[l] - direct[l]).abs() <= tolerance,
                    "{embedding:?} m={m} d={d} spread={spread} l={l}: {} vs {} (tolerance {tolerance:e})",
                    jtw[l],
                    direct[l]
                );
            }
            if spread == 1e6 {
                mixed += usize::from(outside > 0 && outside < m);
            }
        }
    }
    assert!(mixed >= 50, "only {mixed} inputs with mixed arguments");
}

/// A NaN input gives NaN, not a panic or a finite value.
#[test]
fn jacobian_transpose_mul_propagates_nan() {
    let kernel = Gaussian::new(1.0).unwrap();
    for embedding in EMBEDDINGS {
        let phi = RandomFourierFeatures::new(&kernel, 3, 100, embedding, &mut rng(2)).unwrap();
        let mut jtw = vec![0.0; 3];
        phi.jacobian_transpose_mul(&[0.1, f64::NAN, 0.2], &vec![1.0; 100], &mut jtw);
        assert!(jtw.iter().all(|v| v.is_nan()), "{embedding:?}: {jtw:?}");
    }
}

/// The Jacobian and the second derivatives written into a view whose
/// columns are strided (a transposed matrix) equal, to the bit, those written
/// into a plain column-major matrix; several tiles, both embeddings.
#[test]
fn derivatives_into_strided_views_match() {
    let kernel = Gaussian::new(1.0).unwrap();
    for embedding in EMBEDDINGS {
        let (d, big_d) = (3, 300);
        let phi = RandomFourierFeatures::new(&kernel, d, big_d, embedding, &mut rng(4)).unwrap();
        let x = [0.4, -0.2, 1.3];
        let (mut plain, mut transposed) = (Mat::zeros(big_d, d), Mat::<f64>::zeros(d, big_d));
        phi.jacobian(&x, plain.as_mut());
        phi.jacobian(&x, transposed.as_mut().transpose_mut());
        assert_eq!(plain, transposed.transpose().to_owned(), "{embedding:?}");
        phi.second_derivatives(&x, plain.as_mut());
        phi.second_derivatives(&x, transposed.as_mut().transpose_mut());
        assert_eq!(plain, transposed.transpose().to_owned(), "{embedding:?}");
    }
}
