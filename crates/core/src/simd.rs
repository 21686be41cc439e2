//! The one place where kameleon's SIMD kernels pick their instruction set.
//!
//! Every kernel of the workspace is a [`pulp::WithSimd`] operation run
//! through [`dispatch`], which picks the widest vectors the running CPU has:
//! 512 bits with AVX-512 (pulp's `V4`), 256 bits with AVX2 and FMA (`V3`),
//! else whatever pulp offers on the platform (scalar code on x86-64 without
//! AVX2). [`set_max_width`] caps the width process-wide, for comparing the
//! two widths on one machine (the bench report does) and for the tests that
//! check that both give the same bits.
//!
//! **On x86-64 the width does not change results.** Every sum that crosses
//! the lanes of a vector runs over [`SUM_LANES`] lanes at both widths (two
//! 256-bit vectors or one 512-bit vector) and is reduced in one order
//! ([`reduce_accumulators`]), and everything else is lane-wise with the same
//! operations, so a chain drawn on an AVX2 machine and on an AVX-512 machine
//! is the same chain, bit for bit.
//!
//! ```
//! use kameleon_core::simd::{dispatch, max_width, set_max_width, Width};
//! struct Sum<'a>(&'a [f64]);
//! impl pulp::WithSimd for Sum<'_> {
//!     type Output = f64;
//!     #[inline(always)]
//!     fn with_simd<S: pulp::Simd>(self, _simd: S) -> f64 {
//!         self.0.iter().sum()
//!     }
//! }
//! assert_eq!(max_width(), Width::Widest);
//! let values = [1.0, 2.0, 3.0];
//! let widest = dispatch(Sum(&values));
//! set_max_width(Width::Bits256);
//! assert_eq!(dispatch(Sum(&values)), widest);
//! set_max_width(Width::Widest);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

/// The widest vectors [`dispatch`] may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// The widest the CPU has (the default).
    Widest,
    /// At most 256 bits (AVX2 and FMA on an AVX-512 CPU).
    Bits256,
}

/// Whether [`dispatch`] is capped at 256 bits.
static CAPPED_AT_256: AtomicBool = AtomicBool::new(false);

/// Caps (or uncaps) the vector width of every later [`dispatch`] in this
/// process. Results do not depend on it; only speed does.
pub fn set_max_width(width: Width) {
    CAPPED_AT_256.store(width == Width::Bits256, Ordering::Relaxed);
}

/// The cap [`set_max_width`] set last ([`Width::Widest`] if none).
pub fn max_width() -> Width {
    if CAPPED_AT_256.load(Ordering::Relaxed) {
        Width::Bits256
    } else {
        Width::Widest
    }
}

/// Runs `op` with the widest instruction set the CPU has, within the cap of
/// [`set_max_width`].
#[inline]
pub fn dispatch<Op: pulp::WithSimd>(op: Op) -> Op::Output {
    #[cfg(target_arch = "x86_64")]
    if !CAPPED_AT_256.load(Ordering::Relaxed)
        && let Some(simd) = pulp::x86::V4::try_new()
    {
        return pulp::Simd::vectorize(simd, op);
    }
    dispatch_at_most_256(op)
}

/// Runs `op` with vectors of at most 256 bits (AVX2 and FMA where the CPU
/// has them; on other platforms pulp's own choice): for kernels whose sums
/// are laid out for 4-lane vectors, which would give other bits at 512.
#[inline]
pub fn dispatch_at_most_256<Op: pulp::WithSimd>(op: Op) -> Op::Output {
    #[cfg(target_arch = "x86_64")]
    {
        use pulp::Simd;
        match pulp::x86::V3::try_new() {
            Some(simd) => Simd::vectorize(simd, op),
            None => Simd::vectorize(pulp::Scalar::new(), op),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        pulp::Arch::new().dispatch(op)
    }
}

/// The lanes every cross-lane sum of the kernels runs over on x86-64: lane
/// `j` sums the terms `j, j + 8, j + 16, …` in order, held in one AVX-512
/// vector or in [`MAX_ACCUMULATORS`] AVX2 vectors (term `i` in accumulator
/// `(i / 4) mod 2`).
pub const SUM_LANES: usize = 8;

/// The most vectors a kernel's sum is split over ([`accumulators`]).
pub const MAX_ACCUMULATORS: usize = 2;

/// How many vectors of `S` a sum over [`SUM_LANES`] lanes takes: 2 with
/// 4-lane vectors (AVX2), else 1 (AVX-512; and the scalar and 2-lane code
/// of other CPUs, which sum over their own lanes and so give their own
/// bits).
#[inline(always)]
pub const fn accumulators<S: pulp::Simd>() -> usize {
    if S::F64_LANES == 4 {
        MAX_ACCUMULATORS
    } else {
        1
    }
}

/// The sum of the lanes of a kernel's [`accumulators`] (the first
/// `accumulators::<S>()` entries of `parts`), in one order whatever the
/// width: lane `j + 4` added to lane `j`, then lane `j + 2` to lane `j`, then
/// lane 1 to lane 0 — with AVX-512 `pulp`'s reduction of the vector, with
/// AVX2 `pulp`'s reduction of `parts[0] + parts[1]`, the same additions.
#[inline(always)]
pub fn reduce_accumulators<S: pulp::Simd>(simd: S, parts: [S::f64s; MAX_ACCUMULATORS]) -> f64 {
    if accumulators::<S>() == 2 {
        simd.reduce_sum_f64s(simd.add_f64s(parts[0], parts[1]))
    } else {
        simd.reduce_sum_f64s(parts[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sum over [`SUM_LANES`] lanes with AVX2 and with AVX-512 (those
    /// the CPU has), against the halving order written out on scalars.
    #[test]
    fn lane_sums_do_not_depend_on_the_width() {
        // terms of very different sizes, so that another order of the
        // additions would round differently
        let lanes: [f64; SUM_LANES] = [1e16, 1.0, -1e16, 3.5, 0.1, 1e-3, 2.0 / 3.0, -7.25];
        let halves: Vec<f64> = (0..4).map(|j| lanes[j] + lanes[j + 4]).collect();
        let quarters = [halves[0] + halves[2], halves[1] + halves[3]];
        let expected = quarters[0] + quarters[1];
        assert_ne!(
            expected,
            lanes.iter().sum::<f64>(),
            "the order matters here"
        );

        struct Reduce<'a>(&'a [f64; SUM_LANES]);
        impl pulp::WithSimd for Reduce<'_> {
            type Output = f64;
            #[inline(always)]
            fn with_simd<S: pulp::Simd>(self, simd: S) -> f64 {
                let (vectors, _) = S::as_simd_f64s(self.0);
                let mut parts = [simd.splat_f64s(0.0); MAX_ACCUMULATORS];
                parts[..accumulators::<S>()].copy_from_slice(vectors);
                reduce_accumulators(simd, parts)
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            use pulp::Simd;
            if let Some(simd) = pulp::x86::V3::try_new() {
                assert_eq!(
                    Simd::vectorize(simd, Reduce(&lanes)).to_bits(),
                    expected.to_bits()
                );
            }
            if let Some(simd) = pulp::x86::V4::try_new() {
                assert_eq!(
                    Simd::vectorize(simd, Reduce(&lanes)).to_bits(),
                    expected.to_bits()
                );
            }
        }
    }
}
