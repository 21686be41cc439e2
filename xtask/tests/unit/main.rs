//! xtask's unit tests, one module per module of the library they test. They
//! form one test binary beside the other integration tests, so the library
//! is compiled once, for the binary and the tests alike.

#[path = "../common/mod.rs"]
mod common;

mod bench_report;
mod benchmark;
mod cli;
mod experiment;
mod experiments;
mod files;
mod fuzz;
mod gallery;
mod machine;
mod npy;
mod plot;
mod provenance;
mod reference;
mod runner;
mod spec;
mod summary;
mod verdict;
