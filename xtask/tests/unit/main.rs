//! xtask's unit tests, one module per module of the library they test. They
//! form one test binary beside the other integration tests, so the library
//! is compiled once, for the binary and the tests alike.
//!
//! The binary also runs the Python package's suite ([`all_python_tests`]),
//! so that libtest runs it beside the unit tests: its first minute (the
//! venvs and the extension's build) leaves a core free, which the unit tests
//! take instead of running after it. Its module's name sorts first, so it
//! starts first (libtest starts tests in the order of their names).

#[path = "../common/mod.rs"]
mod common;

mod all_python_tests;

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
