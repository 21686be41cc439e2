//! Tests of `xtask::experiments::proposals`.

use xtask::experiments::proposals::*;

/// The closed-form principal axis against the definition Σv = λv,
/// and the eigenvalues against trace and determinant.
#[test]
fn principal_axis_is_the_top_eigenvector() {
    for &(a, b, c) in &[
        (4.0, 1.5, 1.0),
        (1.0, -0.3, 2.0),
        (2.0, 0.0, 1.0),
        (1.0, 0.0, 3.0),
    ] {
        let ((x, y), (l1, l2)) = principal_axis(a, b, c);
        assert!((a * x + b * y - l1 * x).abs() < 1e-12);
        assert!((b * x + c * y - l1 * y).abs() < 1e-12);
        assert!((x * x + y * y - 1.0).abs() < 1e-12);
        assert!((l1 + l2 - (a + c)).abs() < 1e-12 && (l1 * l2 - (a * c - b * b)).abs() < 1e-12);
        assert!(l1 >= l2);
    }
}

/// The polar ridge's tangent against a central finite difference.
#[test]
fn polar_tangent_matches_finite_differences() {
    let (theta, h) = (0.7, 1e-6);
    let (_, t) = polar_ridge(10.0, 6.0, 6.0, theta);
    let (p, _) = polar_ridge(10.0, 6.0, 6.0, theta + h);
    let (q, _) = polar_ridge(10.0, 6.0, 6.0, theta - h);
    assert!(((p.0 - q.0) / (2.0 * h) - t.0).abs() < 1e-5);
    assert!(((p.1 - q.1) / (2.0 * h) - t.1).abs() < 1e-5);
}
