//! profiling only
use faer::Mat;
use kameleon_kernels::Gaussian;
use kameleon_samplers::*;
use kameleon_targets::{Banana, Target};
fn main() {
    let steps: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let target = Banana::new(8, 0.03, 100.0).unwrap();
    let mut rng = chain_rng(1, 0);
    let mut x = [0.0; 8];
    let mut z = Mat::<f64>::zeros(1000, 8);
    for i in 0..1000 {
        target.sample_iid(&mut rng, &mut x).unwrap();
        for j in 0..8 {
            z[(i, j)] = x[j];
        }
    }
    let config = KamhConfig {
        subsample: SubsampleConfig {
            subsample_size: 1000,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Never,
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        scale: Scale::fixed(2.38 / 8f64.sqrt()).unwrap(),
    };
    let mut kamh = Kamh::new(8, Gaussian::new(10.0).unwrap(), config).unwrap();
    kamh.set_subsample(z.as_ref()).unwrap();
    let mut mh =
        MetropolisHastings::new(&target, kamh, &[0.0; 8], chain_rng(2, 0), Some(0)).unwrap();
    for _ in 0..steps {
        mh.step(&target);
    }
    println!("{:?}", mh.position());
}
