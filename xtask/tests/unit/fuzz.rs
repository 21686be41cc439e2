//! Seeded random inputs for the never-panic tests of the file readers. The
//! generator is fixed, so every run tries the same cases, and a failing case
//! is named by its index and input (re-running it is deterministic).

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// The generator the cases are drawn from.
pub type CaseRng = Xoshiro256PlusPlus;

/// Draws `cases` inputs with `input` from a generator seeded with `seed` and
/// runs `check` on each; a panic in `check` is reported with the case's
/// index and input before it propagates.
pub fn for_each_case<T: Debug>(
    seed: u64,
    cases: usize,
    mut input: impl FnMut(&mut CaseRng) -> T,
    mut check: impl FnMut(&T),
) {
    let mut rng = CaseRng::seed_from_u64(seed);
    for case in 0..cases {
        let value = input(&mut rng);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&value))) {
            eprintln!("case {case} of seed {seed} failed on {value:?}");
            resume_unwind(panic);
        }
    }
}

/// Up to `max_len` bytes (the length uniform on 0..max_len), each drawn
/// uniformly from `alphabet`, or from every byte value when it is empty.
pub fn random_bytes(rng: &mut CaseRng, max_len: usize, alphabet: &[u8]) -> Vec<u8> {
    let len = rng.random_range(0..max_len);
    (0..len)
        .map(|_| match alphabet {
            [] => rng.random(),
            _ => alphabet[rng.random_range(0..alphabet.len())],
        })
        .collect()
}

/// `bytes` with 1..=`max_edits` random edits, each overwriting, inserting or
/// removing one byte at a random position (an edit of an empty input
/// inserts).
pub fn mutated(rng: &mut CaseRng, mut bytes: Vec<u8>, max_edits: usize) -> Vec<u8> {
    for _ in 0..rng.random_range(1..=max_edits) {
        let byte: u8 = rng.random();
        if bytes.is_empty() {
            bytes.push(byte);
            continue;
        }
        let at = rng.random_range(0..bytes.len());
        match rng.random_range(0..3) {
            0 => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            _ => {
                bytes.remove(at);
            }
        }
    }
    bytes
}
