//! Constructors reject non-positive and non-finite parameters.

use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, KernelError, Laplacian, Polynomial, RationalQuadratic,
};

const BAD: [f64; 5] = [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

fn is_invalid<T>(r: Result<T, KernelError>) -> bool {
    matches!(r, Err(KernelError::InvalidParameter { .. }))
}

#[test]
fn bandwidths_and_shapes_must_be_finite_and_positive() {
    for bad in BAD {
        assert!(is_invalid(Gaussian::new(bad)));
        assert!(is_invalid(Gaussian::from_kamh_sigma(bad)));
        assert!(is_invalid(Gaussian::from_lite_sigma(bad)));
        assert!(is_invalid(Laplacian::new(bad)));
        assert!(is_invalid(Laplacian::from_thesis_sigma(bad)));
        assert!(is_invalid(RationalQuadratic::new(bad, 1.0)));
        assert!(is_invalid(RationalQuadratic::new(1.0, bad)));
        assert!(is_invalid(InverseMultiquadric::new(bad)));
        assert!(is_invalid(InverseMultiquadric::with_exponent(1.0, bad)));
        assert!(is_invalid(InverseMultiquadric::from_thesis(bad, 0.5)));
    }
    assert!(Gaussian::new(1e-50).is_ok() && RationalQuadratic::new(2.0, 1e6).is_ok());
}

/// A paper's parameter that gives a refused length-scale is named in the
/// error with the value the caller gave (the error named `length_scale`
/// with a derived value, e.g. `inf` for the thesis' σ = 1e-310).
#[test]
fn named_constructors_report_the_parameter_given() {
    use kameleon_kernels::Matern;
    fn named<T: std::fmt::Debug>(r: Result<T, KernelError>) -> (&'static str, f64) {
        match r {
            Err(KernelError::InvalidParameter { name, value, .. }) => (name, value),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        named(Laplacian::from_thesis_sigma(1e-310)),
        ("sigma", 1e-310)
    );
    assert_eq!(named(Gaussian::from_lite_sigma(1e-300)), ("sigma", 1e-300));
    assert_eq!(named(Gaussian::from_kamh_sigma(1e200)), ("sigma", 1e200));
    assert_eq!(named(Matern::from_kamh_rho(1.5, 1e-200)), ("rho", 1e-200));
    assert_eq!(
        named(InverseMultiquadric::from_thesis(1e100, 0.5)),
        ("c", 1e100)
    );
    // other parameters keep their own names
    assert_eq!(named(Matern::from_kamh_rho(-1.0, 1.0)).0, "nu");
}

/// A length-scale whose square (or fourth power, or their inverses) under-
/// or overflows would make every kernel value degenerate (e.g. ℓ = 1e-200:
/// ℓ² = 0, every r²/ℓ² infinite, every KAMH proposal non-finite): refused.
#[test]
fn length_scales_whose_powers_are_not_finite_are_refused() {
    use kameleon_kernels::Matern;
    for bad in [1e-200, 1e-100, 1e-78, 1e78, 1e100, 1e200, 1e-300] {
        assert!(is_invalid(Gaussian::new(bad)), "{bad}");
        assert!(is_invalid(Laplacian::new(bad)), "{bad}");
        assert!(is_invalid(Matern::new(1.5, bad)), "{bad}");
        assert!(is_invalid(Matern::new(0.7, bad)), "{bad}");
        assert!(is_invalid(RationalQuadratic::new(bad, 1.0)), "{bad}");
        assert!(is_invalid(InverseMultiquadric::new(bad)), "{bad}");
    }
    // the shape's product with ℓ² must be finite too
    assert!(is_invalid(RationalQuadratic::new(1e70, 1e300)));
    assert!(is_invalid(Matern::new(1e300, 1e-70)));
    for good in [1e-70, 1e-10, 1.0, 1e10, 1e70] {
        assert!(Gaussian::new(good).is_ok(), "{good}");
        assert!(Laplacian::new(good).is_ok(), "{good}");
        assert!(Matern::new(2.5, good).is_ok(), "{good}");
        assert!(RationalQuadratic::new(good, 1.0).is_ok(), "{good}");
        assert!(InverseMultiquadric::new(good).is_ok(), "{good}");
    }
    // and the error names the parameter
    let message = Gaussian::new(1e-200).unwrap_err().to_string();
    assert!(message.contains("length_scale"), "{message}");
}

#[test]
fn polynomial_needs_a_non_negative_offset_and_a_positive_degree() {
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        assert!(is_invalid(Polynomial::new(bad, 2)));
    }
    assert!(is_invalid(Polynomial::new(1.0, 0)));
    assert!(Polynomial::new(0.0, 1).is_ok());
}

/// Degrees beyond `i32::MAX` cannot be raised to with `powi`: an error, not
/// a kernel that evaluates wrong powers.
#[test]
fn polynomial_degrees_beyond_i32_are_rejected() {
    for bad in [1u32 << 31, u32::MAX] {
        let message = Polynomial::new(1.0, bad).unwrap_err().to_string();
        assert!(message.contains("degree"), "{message}");
    }
    let largest = Polynomial::new(0.0, i32::MAX as u32).unwrap();
    assert_eq!(largest.eval(&[1.0], &[1.0]), 1.0);
}

/// The conversions to the papers' conventions give the same kernel values.
#[test]
fn paper_conventions_convert_exactly() {
    use kameleon_kernels::{Kernel, Matern};
    let (x, y) = ([0.3, -1.2], [1.1, 0.4]);
    let r2: f64 = x.iter().zip(&y).map(|(a, b)| (a - b) * (a - b)).sum();
    let r1: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, b): (&f64, &f64)| (a - b).abs())
        .sum();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b.abs();
    // KMC lite: exp(−r²/σ).
    let sigma = 1.7;
    assert!(close(
        Gaussian::from_lite_sigma(sigma).unwrap().eval(&x, &y),
        (-r2 / sigma).exp()
    ));
    assert!(close(
        Gaussian::from_lite_sigma(sigma).unwrap().lite_sigma(),
        sigma
    ));
    // KAMH: exp(−r²/(2σ²)).
    assert!(close(
        Gaussian::from_kamh_sigma(sigma).unwrap().eval(&x, &y),
        (-r2 / (2.0 * sigma * sigma)).exp()
    ));
    // Thesis Laplacian: exp(−σ‖·‖₁).
    assert!(close(
        Laplacian::from_thesis_sigma(sigma).unwrap().eval(&x, &y),
        (-sigma * r1).exp()
    ));
    // Thesis IMQ: (c² + r²)^{−β} = c^{−2β} × ours.
    let (c, beta) = (0.8, 0.5);
    let ours = InverseMultiquadric::from_thesis(c, beta)
        .unwrap()
        .eval(&x, &y);
    assert!(close(ours * c.powf(-2.0 * beta), (c * c + r2).powf(-beta)));
    // KAMH Matérn 3/2 in ρ: (1 + √3 r/ℓ) e^{−√3 r/ℓ} with ℓ = ρ√3, i.e. (1 + r/ρ)e^{−r/ρ}.
    let rho = 0.6;
    let r = r2.sqrt();
    let want = (1.0 + r / rho) * (-r / rho).exp();
    assert!(close(
        Matern::from_kamh_rho(1.5, rho).unwrap().eval(&x, &y),
        want
    ));
    // RQ tends to the Gaussian as α → ∞.
    let rq = RationalQuadratic::new(1.3, 1e9).unwrap().eval(&x, &y);
    assert!((rq - Gaussian::new(1.3).unwrap().eval(&x, &y)).abs() < 1e-8);
}
