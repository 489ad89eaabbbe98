//! Cache-line alignment for hot fields, and compile-time layout assertions.
//!
//! Linux analogue: `____cacheline_aligned_in_smp` (include/linux/cache.h).
//!
//! uvfs aligns to 64 bytes, the coherence unit of every x86_64 and most arm64 parts, and the
//! `L1_CACHE_BYTES` Linux uses to lay out `struct file` (6.12: three 64-byte lines, 184 bytes).
//! crossbeam's `CachePadded` uses 128 bytes on x86_64 to also defeat the adjacent-line
//! prefetcher; that would double `File` past the 192-byte budget of issue 2, so the two hot
//! lines of `File` are 64-byte aligned and the prefetcher pair effect is accepted, as in Linux.

use std::ops::{Deref, DerefMut};

/// Bytes in one cache line (`L1_CACHE_BYTES`).
pub const CACHE_LINE: usize = 64;

/// `T` aligned (and so padded) to a 64-byte cache line, so that no other hot field shares it.
///
/// Shapes: `size_of::<CacheLine<T>>()` is `size_of::<T>()` rounded up to a multiple of 64.
#[derive(Default, Debug, Clone, Copy)]
#[repr(C, align(64))]
pub struct CacheLine<T>(pub T);

impl<T> Deref for CacheLine<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for CacheLine<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// Asserts at compile time that a condition on a type's layout holds
/// (rustix:src/check_types.rs).
#[macro_export]
#[doc(hidden)]
macro_rules! const_assert {
    ($cond:expr $(,)?) => {
        const _: () = assert!($cond);
    };
}

const_assert!(std::mem::align_of::<CacheLine<u8>>() == CACHE_LINE);
const_assert!(std::mem::size_of::<CacheLine<u64>>() == CACHE_LINE);

/// Words per cache line.
const LINE_WORDS: usize = CACHE_LINE / 8;

/// A growable array of `u64` words in an allocation of whole cache lines of its own: no
/// other object's bytes share a line with it, whichever thread allocated them next to it.
///
/// For small per-owner arrays written on hot paths (a descriptor table's bitmaps: one word
/// for the first 64 descriptors): a `Vec<u64>` of one word is an 8-byte block, and the
/// allocator puts the next table's block, made by the same thread (`fork` from one
/// parent), on the same line, so two tasks that share nothing write one line. Measured on
/// `open-close` (each thread its own forked task): 2 threads / 1 thread 0.9-1.44x with
/// `Vec<u64>` bitmaps, 1.83-2.2x with them on own lines (two sets of interleaved runs). Linux embeds the first words in
/// the cache-line-aligned `files_struct` (`open_fds_init`, `close_on_exec_init`,
/// `full_fds_bits_init`).
///
/// Shapes: `len` words (indexed `0 .. len`), stored in `ceil(len / 8)` 64-byte lines.
#[derive(Clone, Default)]
pub struct LineWords {
    lines: Vec<CacheLine<[u64; LINE_WORDS]>>,
    len: usize,
}

impl LineWords {
    /// `len` zero words.
    pub fn zeroed(len: usize) -> LineWords {
        let mut w = LineWords::default();
        w.resize(len);
        w
    }

    /// The number of words.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no word.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Grows (with zero words) or shrinks to `len` words (`Vec::resize(len, 0)`).
    pub fn resize(&mut self, len: usize) {
        // Words past a shrink are cleared, so that a later grow reads zeros (as `Vec`).
        for i in len..self.len {
            self[i] = 0;
        }
        self.lines
            .resize_with(len.div_ceil(LINE_WORDS), || CacheLine([0; LINE_WORDS]));
        self.len = len;
    }

    /// The words, in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.lines.iter().flat_map(|l| l.0).take(self.len)
    }
}

impl std::ops::Index<usize> for LineWords {
    type Output = u64;
    /// Word `i`; panics when `i >= len` (as a slice).
    #[inline]
    fn index(&self, i: usize) -> &u64 {
        assert!(i < self.len, "word {i} of {}", self.len);
        &self.lines[i / LINE_WORDS].0[i % LINE_WORDS]
    }
}

impl std::ops::IndexMut<usize> for LineWords {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut u64 {
        assert!(i < self.len, "word {i} of {}", self.len);
        &mut self.lines[i / LINE_WORDS].0[i % LINE_WORDS]
    }
}

impl std::fmt::Debug for LineWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_words_are_a_zeroed_resizable_array_on_own_lines() {
        let mut w = LineWords::zeroed(1);
        assert_eq!(w.len(), 1);
        assert_eq!(w.lines.as_ptr() as usize % CACHE_LINE, 0);
        w[0] = 5;
        w.resize(17);
        assert_eq!(w.lines.len(), 3);
        assert_eq!(w.iter().collect::<Vec<_>>()[..2], [5, 0]);
        w[16] = 7;
        w.resize(2);
        w.resize(17);
        assert_eq!(w[16], 0, "a shrink clears what it drops");
        assert_eq!(w.iter().count(), 17);
        assert!(std::panic::catch_unwind(|| LineWords::zeroed(3)[3]).is_err());
    }
}
