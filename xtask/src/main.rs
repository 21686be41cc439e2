//! `cargo xtask`: reproduces the experiments of the kernel adaptive MCMC papers.

use clap::{Parser, Subcommand};

/// The experiments this project reproduces: name, source, what it shows.
const EXPERIMENTS: &[(&str, &str, &str)] = &[(
    "kamh-banana",
    "Sejdinovic et al. 2014, Fig. 5 top/middle",
    "SM, AM-FS, AM-LS, KAMH-LS on 8-d banana (not yet implemented)",
)];

#[derive(Parser)]
#[command(about = "Reproduce the experiments of the kernel adaptive MCMC papers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every experiment with its source.
    List,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List => {
            for (name, source, what) in EXPERIMENTS {
                println!("{name:<20} {source:<45} {what}");
            }
        }
    }
    Ok(())
}
