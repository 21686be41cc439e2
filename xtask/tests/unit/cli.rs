//! Tests of `xtask::cli`.

use std::path::PathBuf;
use xtask::Command;
use xtask::benchmark::ReferenceName;
use xtask::cli::*;
use xtask::size::Size;

fn parse_args(args: &[&str]) -> Result<Command, clap::Error> {
    definition()
        .try_get_matches_from(std::iter::once("xtask").chain(args.iter().copied()))
        .map(|m| command_of(&m))
}

/// clap's own consistency checks of the definition (conflicting ids,
/// defaults outside the possible values, …).
#[test]
fn the_definition_is_consistent() {
    definition().debug_assert();
}

#[test]
fn reproduce_takes_every_option_and_its_defaults() {
    let Ok(Command::Reproduce {
        name,
        size,
        quick,
        seed,
        chains,
        out,
        shard,
        no_chains,
        ..
    }) = parse_args(&["reproduce", "kamh-banana"])
    else {
        panic!("not parsed as reproduce");
    };
    assert_eq!(
        (name.as_str(), size, quick, seed, chains, shard, no_chains),
        ("kamh-banana", Size::Full, false, 1, None, None, false)
    );
    assert_eq!(out, PathBuf::from("results"));
    let Ok(Command::Reproduce {
        size,
        seed,
        chains,
        shard,
        no_chains,
        threads,
        out,
        ..
    }) = parse_args(&[
        "reproduce",
        "all",
        "--size",
        "paper",
        "--seed",
        "9",
        "--chains",
        "3",
        "--shard",
        "2/5",
        "--no-chains",
        "--threads",
        "2",
        "--out",
        "x",
    ])
    else {
        panic!("not parsed as reproduce");
    };
    assert_eq!(
        (size, seed, chains, no_chains, threads),
        (Size::Paper, 9, Some(3), true, Some(2))
    );
    let shard = shard.unwrap();
    assert_eq!((shard.index, shard.count), (2, 5));
    assert_eq!(out, PathBuf::from("x"));
}

#[test]
fn bad_arguments_are_errors() {
    for args in [
        &["reproduce", "x", "--size", "huge"][..],
        &["reproduce", "x", "--quick", "--size", "full"],
        &["reproduce", "x", "--shard", "3/2"],
        // no workers, or more than the system would start (it hung)
        &["reproduce", "x", "--threads", "0"],
        &["reproduce", "x", "--threads", "100000"],
        &["reference", "glass", "--threads", "0"],
        &["reference", "glass", "--quick", "--size", "paper"],
        &["reproduce", "x", "--shard", "1/2", "--shard-from-env"],
        &["reference", "nothing"],
        &["merge", "x"],
        &["fold", "x"],
        &["recompute", "x"],
        &["frobnicate"],
    ] {
        assert!(parse_args(args).is_err(), "{args:?} was accepted");
    }
    let Ok(Command::Recompute { name, chains, out }) =
        parse_args(&["recompute", "kmc-glass", "/runs"])
    else {
        panic!("not parsed as recompute");
    };
    assert_eq!(
        (name.as_str(), chains, out),
        (
            "kmc-glass",
            PathBuf::from("/runs"),
            PathBuf::from("results")
        )
    );
    // `--quick` is `--size quick` for `reference` too, as for `reproduce`
    assert!(matches!(
        parse_args(&["reference", "glass", "--quick"]),
        Ok(Command::Reference {
            name: ReferenceName::Glass,
            size: Size::Quick,
            ..
        })
    ));
    assert!(matches!(
        parse_args(&["reference", "abc", "--size", "quick"]),
        Ok(Command::Reference {
            name: ReferenceName::Abc,
            size: Size::Quick,
            ..
        })
    ));
}

/// An error of the user's (here an unknown experiment) is its message and
/// its causes on stderr and exit code 1, never a stack backtrace, even
/// with RUST_BACKTRACE set (as it often is where Rust is developed).
#[test]
fn an_error_is_reported_without_a_backtrace() {
    let out = std::env::temp_dir().join(format!("xtask-cli-error-{}", std::process::id()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["reproduce", "kamh-banan", "--quick", "--out"])
        .arg(&out)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("Error: unknown experiment `kamh-banan`: did you mean `kamh-banana`?"),
        "{stderr}"
    );
    assert!(!stderr.contains("backtrace"), "{stderr}");
    assert!(!out.exists());
    // the causes follow the message, as anyhow lists them
    let error = anyhow::anyhow!("the cause").context("the message");
    assert_eq!(
        xtask::error_report(&error),
        "Error: the message\n\nCaused by:\n    the cause"
    );
    let error = error.context("the outer message");
    assert_eq!(
        xtask::error_report(&error),
        "Error: the outer message\n\nCaused by:\n    0: the message\n    1: the cause"
    );
}

/// Output into a pipe whose reader has quit (`xtask list | head -1`) ends
/// nothing early and panics nowhere: the command finishes with its own
/// exit code, whatever its stdout and stderr are.
#[test]
fn a_closed_output_pipe_is_no_panic() {
    use std::process::{Command, Stdio};
    let out = std::env::temp_dir().join(format!("xtask-cli-pipe-{}", std::process::id()));
    for args in [
        vec!["list"],
        vec!["reproduce", "nothing", "--out", out.to_str().unwrap()],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(&args)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // the reader quits before the first line arrives
        drop(child.stdout.take());
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        let expected = if args[0] == "list" { 0 } else { 1 };
        assert_eq!(status.code(), Some(expected), "{args:?}: {status}");
    }
}

/// On a log (stderr not a terminal) a run prints one line per finished
/// chain: the count done, the cell (target, sampler and its setting if it
/// has one, single-spaced) and the chain.
#[test]
fn progress_lines_name_each_finished_chain() {
    let out = std::env::temp_dir().join(format!("xtask-cli-progress-{}", std::process::id()));
    let output = smallest_run(&out).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(" done (")).collect();
    assert_eq!(lines.len(), 18, "{stderr}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/18 done (8-d B(0.03, 100) SM #0, ")),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/18 done (8-d B(0.1, 100) AM-LS code #0, ")),
        "{stderr}"
    );
    assert!(lines.iter().all(|l| !l.contains("  ")), "{stderr}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// `xtask reproduce kamh-banana` at its smallest, into `out`: quick size,
/// one chain of each cell, no chain files, one thread.
pub(crate) fn smallest_run(out: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"));
    command
        .args(["reproduce", "kamh-banana", "--quick", "--chains", "1"])
        .args(["--no-chains", "--threads", "1", "--out"])
        .arg(out);
    command
}
