//! The Python package's suite as part of `cargo test --workspace`, so that
//! one command runs every test, Rust and Python.
//!
//! `python/run-tests.sh` creates or reuses the project-local virtual
//! environment `.venv/` (filled from `python/requirements-dev.txt` with
//! Python 3.11, or `$PYTHON`), builds the extension into it with maturin and
//! runs pytest on `python/tests/`; then, when a Python 3.12 is found, the
//! ArviZ and sampling subset in `.venv312/` (ArviZ 1.x, from
//! `python/requirements-dev-312.txt`) with the same abi3 wheel; it also
//! makes `.venv-elfi/` (ELFI, from `python/requirements-elfi.txt`) for the
//! Ricker comparison's test. pytest's
//! reports go straight to the terminal. The numpy peers' tests get this package's `xtask` binary, to
//! write the fixtures they compare with. Cargo releases its build lock before it runs test binaries, so
//! the nested maturin build does not wait on this one.

use std::path::Path;
use std::process::Command;

#[test]
fn the_python_package_passes_its_pytest_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root");
    let script = root.join("python").join("run-tests.sh");
    let status = Command::new("bash")
        .arg(&script)
        .current_dir(root)
        // the peers' tests compare with fixtures this binary writes
        .env("KAMELEON_XTASK", env!("CARGO_BIN_EXE_xtask"))
        .status()
        .unwrap_or_else(|e| panic!("could not start {}: {e}", script.display()));
    assert!(
        status.success(),
        "{} failed ({status}); its output is above",
        script.display()
    );
}
