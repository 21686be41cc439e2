//! `cargo xtask`: the command line of the `xtask` library, which reproduces
//! the experiments of the kernel adaptive MCMC papers.

fn main() -> anyhow::Result<()> {
    xtask::main()
}
