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
    assert!(matches!(
        parse_args(&["reference", "abc", "--size", "quick"]),
        Ok(Command::Reference {
            name: ReferenceName::Abc,
            size: Size::Quick,
            ..
        })
    ));
}
