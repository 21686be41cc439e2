//! Tests of `xtask::experiment`.

use kameleon_samplers::chain_rng;
use rand::Rng;
use xtask::experiment::*;
use xtask::spec::TargetSpec;

/// A cell's start: the target's, the origin, or a fixed point of the
/// target's dimension (another length is an error, not a panic).
#[test]
fn cells_start_where_they_say() {
    let spec = TargetSpec::CkamBimodal;
    let built = spec.build().unwrap();
    let mut rng = chain_rng(1, 0);
    let start = |s: Start, rng: &mut dyn Rng| s.point(&spec, &built, rng);
    assert_eq!(start(Start::Target, &mut rng).unwrap(), vec![-8.0, 0.0]);
    assert_eq!(start(Start::Origin, &mut rng).unwrap(), vec![0.0, 0.0]);
    assert_eq!(
        start(Start::At(&[8.0, 1.0]), &mut rng).unwrap(),
        vec![8.0, 1.0]
    );
    let err = start(Start::At(&[1.0, 2.0, 3.0]), &mut rng).unwrap_err();
    assert!(err.to_string().contains("3 coordinates"), "{err}");
}
