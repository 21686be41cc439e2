//! `cargo xtask`: the command line of the `xtask` library, which reproduces
//! the experiments of the kernel adaptive MCMC papers.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    match xtask::main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // a closed stderr leaves the exit code to tell
            let _ = writeln!(std::io::stderr(), "{}", xtask::error_report(&e));
            ExitCode::FAILURE
        }
    }
}
