//! A generator's words drawn ahead ([`PrefetchedWords`]).

use rand::{Rng, TryRng};
use std::convert::Infallible;

/// A generator's next words, drawn ahead into a buffer and then handed out
/// one at a time (`next_u64` a whole word, `next_u32` its high half)
/// before the generator itself is asked again.
///
/// A draw through a `&mut dyn Rng` (rand's `random_range`,
/// `seq::index::sample`, …) runs rand's sampling code out of line around a
/// dynamically dispatched call per word; from a `PrefetchedWords` the
/// sampling inlines, and only the words are drawn through the dynamic calls,
/// in one loop.
///
/// The draws, and the generator's state after them, are exactly those of
/// drawing from the generator directly when
///
/// - the generator's `next_u32` is the high half of the word its `next_u64`
///   would return (the xoshiro256 generators, such as the samplers'
///   `Xoshiro256PlusPlus`), and
/// - the draws consume at least as many words as were drawn ahead, so that
///   every word is used, in order, as a direct draw would have used it (the
///   caller knows a lower bound: e.g. each `random_range` of an integer
///   takes at least one word). Words drawn ahead and not consumed are lost
///   to the stream.
///
/// ```
/// use kameleon_core::PrefetchedWords;
/// use rand::{Rng, RngExt, SeedableRng};
/// use rand_xoshiro::Xoshiro256PlusPlus;
/// let mut direct = Xoshiro256PlusPlus::seed_from_u64(3);
/// let mut rng = direct.clone();
/// let dynamic: &mut dyn Rng = &mut rng;
/// let mut buffer = [0; 10];
/// let mut words = PrefetchedWords::new(dynamic, &mut buffer);
/// for i in 0..10 {
///     assert_eq!(words.random_range(i..100), direct.random_range(i..100));
/// }
/// assert_eq!(rng, direct);
/// ```
#[derive(Debug)]
pub struct PrefetchedWords<'a, R: Rng + ?Sized> {
    words: std::slice::Iter<'a, u64>,
    rng: &'a mut R,
}

impl<'a, R: Rng + ?Sized> PrefetchedWords<'a, R> {
    /// Draws `buffer.len()` words from `rng` (`next_u64`) into `buffer`, to
    /// be handed out first.
    pub fn new(rng: &'a mut R, buffer: &'a mut [u64]) -> Self {
        for word in buffer.iter_mut() {
            *word = rng.next_u64();
        }
        Self {
            words: buffer.iter(),
            rng,
        }
    }

    /// How many of the words drawn ahead have not been handed out yet.
    pub fn remaining(&self) -> usize {
        self.words.len()
    }

    /// The generator's next word, once the words drawn ahead are used up:
    /// out of line, so that a draw from the words stays small enough to be
    /// inlined whatever the generator's own `next_u64` costs.
    #[cold]
    #[inline(never)]
    fn next_from_generator(&mut self) -> u64 {
        self.rng.next_u64()
    }
}

impl<R: Rng + ?Sized> TryRng for PrefetchedWords<'_, R> {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok((self.try_next_u64()? >> 32) as u32)
    }

    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(match self.words.next() {
            Some(&word) => word,
            None => self.next_from_generator(),
        })
    }

    /// The words in turn, each in little-endian byte order (the last one
    /// cut short if `dst` ends within it).
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let word = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Integer draws from words drawn ahead equal direct draws, and leave
    /// the generator in the same state, also when draws take a second word
    /// (u32 ranges near 2³², where rand's multiply-and-reject method needs
    /// one about 70% of the time; the last draws then run past the block)
    /// and for u64 draws and byte fills after the block (the generator's
    /// `fill_bytes` gives its words in little-endian order).
    #[test]
    fn draws_and_final_state_match_direct_draws() {
        for (seed, high) in [(1, 7u32), (2, 1000), (3, 3_000_000_000), (4, u32::MAX)] {
            let mut direct = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut rng = direct.clone();
            let dynamic: &mut dyn Rng = &mut rng;
            let mut buffer = [0; 200];
            let mut words = PrefetchedWords::new(dynamic, &mut buffer);
            assert_eq!(words.remaining(), 200);
            for _ in 0..200 {
                assert_eq!(words.random_range(0..high), direct.random_range(0..high));
            }
            assert_eq!(words.random::<u64>(), direct.random::<u64>());
            let (mut a, mut b) = ([0u8; 13], [0u8; 13]);
            words.fill_bytes(&mut a);
            direct.fill_bytes(&mut b);
            assert_eq!(a, b);
            assert_eq!(rng, direct, "high = {high}");
        }
    }
}
