//! Loads and stores of short vectors (a point of dimension d, a column of a
//! d × n matrix) as SIMD blocks of the running CPU's width, for kernels
//! written against [`pulp::Simd`]: block b holds entries `b·L .. (b + 1)·L`
//! (L lanes), the last one zero-padded. With d a compile-time constant the
//! loops over blocks unroll and the partial loads become masked loads.
//!
//! ```
//! use kameleon_kernels::simd::{blocks, load_block, store_block};
//! struct Double<'a>(&'a mut [f64]);
//! impl pulp::WithSimd for Double<'_> {
//!     type Output = ();
//!     fn with_simd<S: pulp::Simd>(self, simd: S) {
//!         for b in 0..blocks::<S>(self.0.len()) {
//!             let v = load_block(simd, self.0, b);
//!             store_block(simd, self.0, b, simd.add_f64s(v, v));
//!         }
//!     }
//! }
//! let mut v = [1.0, 2.0, 3.0, 4.0, 5.0];
//! kameleon_core::simd::dispatch(Double(&mut v));
//! assert_eq!(v, [2.0, 4.0, 6.0, 8.0, 10.0]);
//! ```

/// The number of SIMD blocks of `len` entries.
#[inline(always)]
pub fn blocks<S: pulp::Simd>(len: usize) -> usize {
    len.div_ceil(S::F64_LANES)
}

/// Block `b` of `values`: entries `b·L .. min((b + 1)·L, len)`, zero-padded.
#[inline(always)]
pub fn load_block<S: pulp::Simd>(simd: S, values: &[f64], b: usize) -> S::f64s {
    let lanes = S::F64_LANES;
    match values.get(b * lanes..(b + 1) * lanes) {
        Some(full) => pulp::bytemuck::pod_read_unaligned(pulp::bytemuck::cast_slice(full)),
        None => simd.partial_load_f64s(&values[b * lanes..]),
    }
}

/// Writes the lanes of `block` that fall inside `values` (entries
/// `b·L .. min((b + 1)·L, len)`).
#[inline(always)]
pub fn store_block<S: pulp::Simd>(simd: S, values: &mut [f64], b: usize, block: S::f64s) {
    let lanes = S::F64_LANES;
    let len = values.len();
    match values.get_mut(b * lanes..(b + 1) * lanes) {
        Some(full) => {
            full.copy_from_slice(pulp::bytemuck::cast_slice(std::slice::from_ref(&block)))
        }
        None => simd.partial_store_f64s(&mut values[b * lanes..len], block),
    }
}
