//! The samplers' integration tests, one module per file, built as one test
//! binary (one link of the dependency tree instead of one per file).

mod common;

mod checkpoint;
mod ckam;
mod ckam_runner;
mod engine;
mod ensemble;
mod evaluation_limit;
mod fkamh;
mod habc;
mod kamh_adaptive;
mod kamh_invariance;
mod kamh_proposal;
mod kmc;
mod lockstep;
mod observe_chain;
mod pca_kameleon;
mod reliability;
mod resume;
mod shared_history;
mod simd_width;
mod validity;
mod whitening;
