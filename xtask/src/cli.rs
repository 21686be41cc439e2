//! The command line: every subcommand, its arguments and their help, parsed
//! into a [`Command`].

use crate::Command;
use crate::benchmark::ReferenceName;
use crate::runner::Shard;
use crate::size::Size;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Arg, ArgAction, ArgMatches, value_parser};
use std::path::PathBuf;

/// Parses the process's arguments (printing help or an error and exiting
/// where clap does).
pub fn parse() -> Command {
    command_of(&definition().get_matches())
}

/// The command line's definition.
pub fn definition() -> clap::Command {
    clap::Command::new("xtask")
        .about("Reproduce the experiments of the kernel adaptive MCMC papers")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            clap::Command::new("list").about(
                "List every experiment with its source, sizes and whether it is implemented",
            ),
        )
        .subcommand(
            clap::Command::new("reproduce")
                .about("Run an experiment (or `all` implemented ones) and write its results")
                .arg(
                    experiment_arg("The experiment's name (see `list`), or `all`"),
                )
                .arg(size_arg().help(
                    "How large: `full` (the papers' size, reduced only where that is a cluster \
                     job: the Glass experiments), `paper` (the papers' size everywhere) or \
                     `quick` (seconds, for smoke tests and CI)",
                ))
                .arg(quick_arg())
                .arg(
                    seed_arg().help(
                        "Master seed; every chain's stream derives from it and the cell's name",
                    ),
                )
                .arg(
                    Arg::new("chains")
                        .long("chains")
                        .value_name("K")
                        .value_parser(value_parser!(usize))
                        .help(
                            "Chains per target × sampler × setting, or replicates of a study \
                             (default: the size's)",
                        ),
                )
                .arg(
                    path_arg("out", "results")
                        .help("Output root; results go to DIR/NAME/ for experiment NAME"),
                )
                .arg(
                    Arg::new("references")
                        .long("references")
                        .value_name("DIR")
                        .value_parser(value_parser!(PathBuf))
                        .help(
                            "Where reference samples (the Glass benchmark, the ABC reference) \
                             are read from or computed into (default: the output root), e.g. \
                             one that `xtask reference` filled before the shards started. A \
                             reference there made with another plan (seed, size) is an error, \
                             never recomputed over; in the default directory it is recomputed",
                        ),
                )
                .arg(threads_arg())
                .arg(
                    Arg::new("shard")
                        .long("shard")
                        .value_name("i/N")
                        .value_parser(|s: &str| s.parse::<Shard>())
                        .help(
                            "Run only the i-th of N disjoint parts of the chain grid or of a \
                             study's replicates (1-based, round robin), e.g. 3/8",
                        ),
                )
                .arg(flag("shard-from-env").conflicts_with("shard").help(
                    "Take the shard from Slurm's environment. In a job array \
                     (SLURM_ARRAY_TASK_ID set): shard 1 + (SLURM_ARRAY_TASK_ID − \
                     SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP of SLURM_ARRAY_TASK_COUNT, \
                     so 0- and 1-based arrays both work. Otherwise, in an srun step: shard \
                     SLURM_PROCID + 1 of SLURM_NTASKS. The array variables take precedence",
                ))
                .arg(
                    Arg::new("setting")
                        .long("setting")
                        .value_name("SETTING")
                        .action(ArgAction::Append)
                        .help(
                            "Run only the cells with this setting (repeatable; exactly as in \
                             summary.md, e.g. \"D=50, adapt=always\"); like a shard, the run writes \
                             records and chains only, and `fold` adds them to a summary",
                        ),
                )
                .arg(flag("no-chains").help(
                    "Do not write the raw chains (.npy); the chain files an earlier run left \
                     for the chains this one runs are removed",
                ))
                .arg(
                    flag("force")
                        .help("Rerun chains whose results already exist in the output directory"),
                ),
        )
        .subcommand(
            clap::Command::new("reference")
                .about(
                    "Compute a reference sample (the Glass benchmark or the ABC reference) into \
                     DIR/glass-benchmark/SIZE/ (or abc-benchmark), or check the one there; \
                     `reproduce --references DIR` then reads it. Its chains run in parallel",
                )
                .arg(
                    Arg::new("name")
                        .value_name("NAME")
                        .required(true)
                        .value_parser(PossibleValuesParser::new(["glass", "abc"]).map(|s| {
                            if s == "glass" {
                                ReferenceName::Glass
                            } else {
                                ReferenceName::Abc
                            }
                        }))
                        .help("Which: `glass` or `abc`"),
                )
                .arg(size_arg().help("How large (as for `reproduce`)"))
                .arg(quick_arg())
                .arg(seed_arg().help(
                    "Master seed (as for `reproduce`: the reference's stream derives from it)",
                ))
                .arg(path_arg("out", "results").help("The directory of reference samples"))
                .arg(threads_arg()),
        )
        .subcommand(
            clap::Command::new("merge")
                .about(
                    "Combine the outputs of shards (directories given to --out) into one summary",
                )
                .arg(
                    experiment_arg("The experiment's name"),
                )
                .arg(
                    output_dirs_arg("The shards' output directories (DIR or DIR/NAME)"),
                )
                .arg(path_arg("out", "results").help("Output root for the merged results")),
        )
        .subcommand(
            clap::Command::new("fold")
                .about(
                    "Add the cells of runs restricted with `reproduce --setting` to an \
                     experiment's summary: new cells are added, cells it holds must be \
                     reproduced bit for bit, every other cell stays as it was, the runs' records \
                     are copied beside it and the claims are decided again",
                )
                .arg(
                    experiment_arg("The experiment's name"),
                )
                .arg(
                    output_dirs_arg("The restricted runs' output directories (DIR or DIR/NAME)"),
                )
                .arg(
                    path_arg("out", "results")
                        .help("The results root holding the summary to fold into"),
                ),
        )
        .subcommand(
            clap::Command::new("recompute")
                .about(
                    "Add to an experiment's summary the metrics that are functions of the \
                     recorded draws alone (the ESS family) and that some cells lack, from the \
                     chains a run stored: each touched cell's chains must first reproduce the \
                     metrics it holds bit for bit; every other cell stays as it was, the claims \
                     are decided again and a run record says what was added from which chains",
                )
                .arg(
                    experiment_arg("The experiment's name"),
                )
                .arg(
                    Arg::new("chains")
                        .value_name("DIR")
                        .required(true)
                        .value_parser(value_parser!(PathBuf))
                        .help("The output directory of the run that stored the chains (DIR or DIR/NAME)"),
                )
                .arg(
                    path_arg("out", "results")
                        .help("The results root holding the summary to add the metrics to"),
                ),
        )
        .subcommand(
            clap::Command::new("regrade")
                .about(
                    "Decide an experiment's claims (or `all`) again from the per-chain values in \
                     its summary.json, without running a chain; rewrites summary.json, \
                     summary.md and the figures",
                )
                .arg(
                    experiment_arg("The experiment's name (see `list`), or `all` (those with results)"),
                )
                .arg(
                    path_arg("results", "results")
                        .help("The results root (as given to `reproduce --out`)"),
                ),
        )
        .subcommand(
            clap::Command::new("gallery")
                .about(
                    "Write RESULTS.md: every experiment's claims, verdicts, figures and run \
                     records, from the results directory",
                )
                .arg(
                    path_arg("results", "results")
                        .help("The results root (as given to `reproduce --out`)"),
                )
                .arg(path_arg("out", "RESULTS.md").help("The Markdown file to write")),
        )
        .subcommand(
            clap::Command::new("bench-report")
                .about(
                    "Time every hot path, frozen and adapting, against this machine's FMA peak \
                     and numpy peers run alongside; write DIR/bench-report.{md,json}",
                )
                .arg(
                    flag("quick")
                        .help("Few repetitions, shorter F-KAMH history and memory chain (CI)"),
                )
                .arg(path_arg("out", "results").help("Output directory"))
                .arg(flag("no-peers").help("Skip the numpy peers (no Python needed)"))
                .arg(
                    path_arg("results", "results")
                        .help("The experiments' results, for their recorded wall times"),
                )
                .arg(
                    Arg::new("memory-child")
                        .long("memory-child")
                        .value_name("N")
                        .hide(true)
                        .value_parser(value_parser!(u64))
                        .help("Internal: run the memory chain of N iterations and print VmHWM"),
                ),
        )
        .subcommand(
            clap::Command::new("peer-fixtures")
                .about(
                    "Write the inputs and Rust results the numpy peers are run and checked on \
                     (python/benchmarks/peers.py, python/tests/test_peers.py)",
                )
                .arg(
                    Arg::new("size")
                        .long("size")
                        .default_value("tiny")
                        .help("tiny, quick or full"),
                )
                .arg(
                    Arg::new("out")
                        .long("out")
                        .value_name("DIR")
                        .required(true)
                        .value_parser(value_parser!(PathBuf))
                        .help("Output directory"),
                ),
        )
}

/// A `--name` switch.
fn flag(name: &'static str) -> Arg {
    Arg::new(name).long(name).action(ArgAction::SetTrue)
}

/// The positional experiment name `NAME`, described by `help`.
fn experiment_arg(help: &'static str) -> Arg {
    Arg::new("name")
        .value_name("NAME")
        .required(true)
        .help(help)
}

/// The positional output directories `DIR…` of earlier runs, described by
/// `help`.
fn output_dirs_arg(help: &'static str) -> Arg {
    Arg::new("dirs")
        .required(true)
        .num_args(1..)
        .value_parser(value_parser!(PathBuf))
        .help(help)
}

/// A `--name DIR` path with a default.
fn path_arg(name: &'static str, default: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name(if default.ends_with(".md") {
            "FILE"
        } else {
            "DIR"
        })
        .default_value(default)
        .value_parser(value_parser!(PathBuf))
}

/// `--size quick|full|paper`, default `full`.
fn size_arg() -> Arg {
    Arg::new("size")
        .long("size")
        .value_name("SIZE")
        .default_value(Size::Full.name())
        .value_parser(
            PossibleValuesParser::new(Size::ALL.map(Size::name))
                .map(|name| Size::from_name(&name).expect("a possible value")),
        )
}

/// `--quick`, the same as `--size quick`.
fn quick_arg() -> Arg {
    flag("quick")
        .conflicts_with("size")
        .help("The same as `--size quick`")
}

/// `--seed S`, default 1.
fn seed_arg() -> Arg {
    Arg::new("seed")
        .long("seed")
        .value_name("S")
        .default_value("1")
        .value_parser(value_parser!(u64))
}

/// The most worker threads `--threads` takes: far more than chains could
/// use, and below what a system lets a process start (asked for more, the
/// pool's start hung).
pub const MAX_THREADS: u64 = 4096;

/// `--threads T`, from 1 to [`MAX_THREADS`].
fn threads_arg() -> Arg {
    Arg::new("threads")
        .long("threads")
        .value_name("T")
        .value_parser(
            value_parser!(u64)
                .range(1..=MAX_THREADS)
                .map(|t| usize::try_from(t).expect("at most MAX_THREADS")),
        )
        .help("Worker threads, 1 to 4096 (default: all cores)")
}

/// The parsed subcommand.
pub fn command_of(matches: &ArgMatches) -> Command {
    let (name, m) = matches.subcommand().expect("a subcommand is required");
    let one = |id: &str| m.get_one::<PathBuf>(id).cloned();
    let path = |id: &str| one(id).expect("the argument has a default");
    let text = |id: &str| {
        m.get_one::<String>(id)
            .cloned()
            .expect("a required argument")
    };
    let on = |id: &str| m.get_flag(id);
    let size = || *m.get_one::<Size>("size").expect("the size has a default");
    let seed = || *m.get_one::<u64>("seed").expect("the seed has a default");
    let threads = || m.get_one::<usize>("threads").copied();
    let dirs = || {
        m.get_many::<PathBuf>("dirs")
            .expect("a required argument")
            .cloned()
            .collect()
    };
    match name {
        "list" => Command::List,
        "reproduce" => Command::Reproduce {
            name: text("name"),
            size: size(),
            quick: on("quick"),
            seed: seed(),
            chains: m.get_one::<usize>("chains").copied(),
            out: path("out"),
            references: one("references"),
            threads: threads(),
            shard: m.get_one::<Shard>("shard").copied(),
            shard_from_env: on("shard-from-env"),
            settings: m
                .get_many::<String>("setting")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
            no_chains: on("no-chains"),
            force: on("force"),
        },
        "reference" => Command::Reference {
            name: *m
                .get_one::<ReferenceName>("name")
                .expect("a required argument"),
            size: if on("quick") { Size::Quick } else { size() },
            seed: seed(),
            out: path("out"),
            threads: threads(),
        },
        "merge" => Command::Merge {
            name: text("name"),
            dirs: dirs(),
            out: path("out"),
        },
        "fold" => Command::Fold {
            name: text("name"),
            dirs: dirs(),
            out: path("out"),
        },
        "recompute" => Command::Recompute {
            name: text("name"),
            chains: one("chains").expect("a required argument"),
            out: path("out"),
        },
        "regrade" => Command::Regrade {
            name: text("name"),
            results: path("results"),
        },
        "gallery" => Command::Gallery {
            results: path("results"),
            out: path("out"),
        },
        "bench-report" => Command::BenchReport {
            quick: on("quick"),
            out: path("out"),
            no_peers: on("no-peers"),
            results: path("results"),
            memory_child: m.get_one::<u64>("memory-child").copied(),
        },
        "peer-fixtures" => Command::PeerFixtures {
            size: text("size"),
            out: path("out"),
        },
        other => unreachable!("subcommand `{other}` is defined above"),
    }
}
