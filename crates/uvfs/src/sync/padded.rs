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
#[derive(Default, Debug)]
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
