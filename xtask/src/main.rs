//! `cargo xtask`: the command line of the `xtask` library, which reproduces
//! the experiments of the kernel adaptive MCMC papers.

use std::process::ExitCode;

fn main() -> ExitCode {
    match xtask::main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", xtask::error_report(&e));
            ExitCode::FAILURE
        }
    }
}
