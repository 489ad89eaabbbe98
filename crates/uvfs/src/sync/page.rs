//! `PageBuf`: one page of file data that lockless readers copy while a writer may be
//! storing to it, without a data race in Rust's memory model.
//!
//! Linux analogue: a page-cache folio read by `filemap_read`'s fast short-read path
//! (mm/filemap.c, 2025: copy under a sequence count, re-check, no folio reference) while
//! `generic_perform_write` copies into it; C tolerates the racy `memcpy`, Rust does not.
//!
//! # How the copy is sound
//! Every access to a page's bytes that may overlap another thread's write is a
//! *byte-wise atomic* copy (the `atomic_load_per_byte_memcpy`/`atomic_store_per_byte_memcpy`
//! of C++ proposal P1478): each byte is read or written as if by a Relaxed `AtomicU8`
//! access, in no particular order. Two such copies racing are atomic accesses of one size
//! (a byte), which is no data race; a reader may see some bytes of one write and some of
//! another, which is why every lockless reader validates its copy with a sequence count
//! (`SeqCount`) and retries or falls back to the lock. On x86-64 the copy is inline
//! assembly (SSE2 `movdqu`, 64 bytes per step, then 8-byte and 1-byte moves): an `asm!`
//! block may do whatever some Rust code could do, and a sequence of Relaxed byte loads and
//! stores could produce exactly what it does (the hardware reads each byte once and never
//! tears a byte); with AVX (checked at run time) the long steps move 32 bytes at a time.
//! Elsewhere (and under Miri) the copy is that loop of `AtomicU8` accesses.
//! The assembly is not a plain `memcpy` because the compiler may assume a plain copy's
//! source does not change under it (and may, e.g., read it twice); it is not a loop of
//! `AtomicU64` loads because a reader's unaligned range would then overlap a writer's
//! differently sized accesses (mixed-size races are undefined) and because those loads do
//! not vectorise (measured on this project's AMD EPYC VM, 4 KiB, L1-resident: the SSE2 loop
//! 302-373 ns per 2 copies, `copy_from_slice` 468-661, `rep movsb` 418-450, on a loaded host).
//!
//! # Invariants
//! - The bytes are only ever accessed through [`PageBuf::load`], [`PageBuf::store`],
//!   [`PageBuf::zero`] (byte-wise atomic) or through `&mut PageBuf` (exclusive), so no
//!   plain access ever races with another access.
//!
//! Lock order: none (a leaf; the callers' locks serialise writers, not this type).

use std::cell::UnsafeCell;

/// Bytes in a page (`PAGE_SIZE`, 4 KiB, as `crate::inode::PAGE_SIZE`).
pub const PAGE_BYTES: usize = 4096;

/// One page of file data: [`PAGE_BYTES`] bytes, 64-byte aligned (whole cache lines).
///
/// # Invariants
/// See the module doc: shared accesses are byte-wise atomic copies.
#[repr(C, align(64))]
pub struct PageBuf {
    bytes: UnsafeCell<[u8; PAGE_BYTES]>,
}

// SAFETY: every access through `&PageBuf` is a byte-wise atomic copy (module invariant), so
// sharing a page between threads is data-race free, as for `[AtomicU8; PAGE_BYTES]`.
unsafe impl Sync for PageBuf {}

const _: () = assert!(std::mem::size_of::<PageBuf>() == PAGE_BYTES);
const _: () = assert!(std::mem::align_of::<PageBuf>() == 64);

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuf").finish_non_exhaustive()
    }
}

/// A page of zeros, the source of [`PageBuf::zero`].
static ZEROS: [u8; PAGE_BYTES] = [0; PAGE_BYTES];

impl PageBuf {
    /// A fresh page of zeros on the heap (zeroed memory from the allocator: no 4 KiB copy
    /// through the stack).
    pub fn zeroed() -> Box<PageBuf> {
        let b = Box::<PageBuf>::new_zeroed();
        // SAFETY: all-zero bytes are a valid `[u8; N]` inside an `UnsafeCell` (no niche,
        // no padding).
        unsafe { b.assume_init() }
    }

    /// A fresh page holding a copy of `self`'s bytes (copy-on-write of a shared page).
    pub fn copy(&self) -> Box<PageBuf> {
        let mut b = PageBuf::zeroed();
        self.load(0, b.bytes.get_mut());
        b
    }

    /// Copies `dst.len()` bytes at byte offset `off` of the page into `dst`, byte-wise
    /// atomically (module doc): sound while another thread [`store`](Self::store)s; the
    /// bytes may then mix that store's old and new values, which the caller's sequence
    /// count detects.
    ///
    /// Panics if `off + dst.len() > PAGE_BYTES` (a caller's bug, never input: callers split
    /// reads at page boundaries).
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn load(&self, off: usize, dst: &mut [u8]) {
        assert!(off <= PAGE_BYTES && dst.len() <= PAGE_BYTES - off);
        #[cfg(feature = "audit")]
        self.touch_lines(off, dst.len(), false);
        // SAFETY: `off..off + len` is inside the page (checked above) and `dst` is a
        // distinct, exclusively borrowed buffer of `len` bytes; the source is read only
        // byte-wise atomically (module invariant).
        unsafe {
            atomic_copy(
                dst.as_mut_ptr(),
                self.bytes.get().cast::<u8>().add(off),
                dst.len(),
            )
        };
    }

    /// Copies `src` to byte offset `off` of the page, byte-wise atomically (module doc).
    /// Writers of one page must be serialised by the caller (its data lock); readers may
    /// [`load`](Self::load) meanwhile.
    ///
    /// Panics if `off + src.len() > PAGE_BYTES` (a caller's bug, as `load`).
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn store(&self, off: usize, src: &[u8]) {
        assert!(off <= PAGE_BYTES && src.len() <= PAGE_BYTES - off);
        #[cfg(feature = "audit")]
        self.touch_lines(off, src.len(), true);
        // SAFETY: as in `load`, with the roles swapped; `src` cannot overlap the page (a
        // shared borrow of other memory: the page's bytes are never lent out as a slice).
        unsafe {
            atomic_copy(
                self.bytes.get().cast::<u8>().add(off),
                src.as_ptr(),
                src.len(),
            )
        };
    }

    /// Zeroes `len` bytes at `off`, as [`store`](Self::store) of zeros.
    #[inline]
    pub fn zero(&self, off: usize, len: usize) {
        self.store(off, &ZEROS[..len.min(PAGE_BYTES)]);
    }

    /// The page's address (tests compare pages by it).
    #[cfg(test)]
    pub fn addr(&self) -> usize {
        self.bytes.get() as usize
    }

    /// Records the cache lines of `off..off + len` for the conflict audit.
    #[cfg(feature = "audit")]
    #[track_caller]
    fn touch_lines(&self, off: usize, len: usize, write: bool) {
        if len == 0 {
            return;
        }
        let base = self.bytes.get() as usize;
        let (first, last) = ((base + off) / 64, (base + off + len - 1) / 64);
        for line in first..=last {
            super::audit::touch((line * 64) as *const u8, write, false);
        }
    }
}

/// Copies `n` bytes from `src` to `dst`, each byte as a Relaxed atomic load from `src` and
/// a Relaxed atomic store to `dst` (module doc): SSE2 on x86-64.
///
/// # Safety
/// - `src` is valid for reads and `dst` for writes of `n` bytes; the ranges do not overlap.
/// - Every access that may race with this copy, on either range, is itself byte-wise atomic.
#[inline]
#[cfg(all(target_arch = "x86_64", not(miri)))]
unsafe fn atomic_copy(dst: *mut u8, src: *const u8, n: usize) {
    if n >= 256 && std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the caller's contract; the CPU has AVX-512F (checked just above).
        unsafe { atomic_copy_avx512(dst, src, n) }
    } else if n >= 256 && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the caller's contract; the CPU has AVX (checked just above).
        unsafe { atomic_copy_avx(dst, src, n) }
    } else {
        // SAFETY: the caller's contract.
        unsafe { atomic_copy_sse2(dst, src, n) }
    }
}

/// The loop of the wide copies: 256 bytes per step of the moves `$asm` (an `asm!` template
/// over `{s}` (source), `{t}` (target) and four registers `{a}`..`{d}` of class `$reg`),
/// then the SSE2 copy for the rest. Expands inside an `unsafe fn` whose contract is
/// [`atomic_copy`]'s and whose `target_feature` provides `$reg`.
#[cfg(all(target_arch = "x86_64", not(miri)))]
macro_rules! wide_copy_loop {
    ($dst:ident, $src:ident, $n:ident, $reg:ident, $($asm:literal),+ $(,)?) => {{
        use std::arch::asm;
        while $n >= 256 {
            // SAFETY: 256 readable bytes at `src`, 256 writable at `dst` (n >= 256, the
            // caller's ranges); unaligned moves; touches nothing else and no flags.
            unsafe {
                asm!(
                    $($asm),+,
                    s = in(reg) $src,
                    t = in(reg) $dst,
                    a = out($reg) _,
                    b = out($reg) _,
                    c = out($reg) _,
                    d = out($reg) _,
                    options(nostack, preserves_flags),
                );
                $src = $src.add(256);
                $dst = $dst.add(256);
            }
            $n -= 256;
        }
        // SAFETY: the rest of the caller's ranges.
        unsafe { atomic_copy_sse2($dst, $src, $n) }
    }};
}

/// [`atomic_copy`] 256 bytes per step in 64-byte AVX-512 moves (a 4 KiB page is 64 loads
/// and 64 stores), then SSE2. Measured 2026-12-07 on the Intel Xeon VM (a C copy of 4 KiB
/// pages in random order from 110 MiB, the `tree` workload's pattern, three runs): 9.2-10.2
/// GB/s against 6.6-7.9 for the same loop in 32-byte moves (`rep movsb` 8.6-10.0, glibc's
/// `memcpy` 8.5-9.4); from L1 all four are within 10% (36-40 GB/s).
///
/// # Safety
/// As [`atomic_copy`]; the CPU has AVX-512F.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx512f")]
unsafe fn atomic_copy_avx512(mut dst: *mut u8, mut src: *const u8, mut n: usize) {
    wide_copy_loop!(
        dst,
        src,
        n,
        zmm_reg,
        "vmovdqu64 {a}, [{s}]",
        "vmovdqu64 {b}, [{s} + 64]",
        "vmovdqu64 {c}, [{s} + 128]",
        "vmovdqu64 {d}, [{s} + 192]",
        "vmovdqu64 [{t}], {a}",
        "vmovdqu64 [{t} + 64], {b}",
        "vmovdqu64 [{t} + 128], {c}",
        "vmovdqu64 [{t} + 192], {d}",
    )
}

/// [`atomic_copy`] 256 bytes per step in 32-byte AVX moves (half the instructions of
/// SSE2's: a 4 KiB page is 128 loads and 128 stores, as glibc's `memcpy`), then SSE2.
///
/// # Safety
/// As [`atomic_copy`]; the CPU has AVX.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx")]
unsafe fn atomic_copy_avx(mut dst: *mut u8, mut src: *const u8, mut n: usize) {
    wide_copy_loop!(
        dst,
        src,
        n,
        ymm_reg,
        "vmovdqu {a}, [{s}]",
        "vmovdqu {b}, [{s} + 32]",
        "vmovdqu {c}, [{s} + 64]",
        "vmovdqu {d}, [{s} + 96]",
        "vmovdqu [{t}], {a}",
        "vmovdqu [{t} + 32], {b}",
        "vmovdqu [{t} + 64], {c}",
        "vmovdqu [{t} + 96], {d}",
        "vmovdqu {a}, [{s} + 128]",
        "vmovdqu {b}, [{s} + 160]",
        "vmovdqu {c}, [{s} + 192]",
        "vmovdqu {d}, [{s} + 224]",
        "vmovdqu [{t} + 128], {a}",
        "vmovdqu [{t} + 160], {b}",
        "vmovdqu [{t} + 192], {c}",
        "vmovdqu [{t} + 224], {d}",
    )
}

/// [`atomic_copy`] in SSE2 (every x86-64 CPU has it): 64 bytes per step, then 8 and 1.
///
/// # Safety
/// As [`atomic_copy`].
#[inline]
#[cfg(all(target_arch = "x86_64", not(miri)))]
unsafe fn atomic_copy_sse2(mut dst: *mut u8, mut src: *const u8, mut n: usize) {
    use std::arch::asm;
    while n >= 64 {
        // SAFETY: 64 readable bytes at `src`, 64 writable at `dst` (n >= 64, the caller's
        // ranges); unaligned moves (`movdqu`); the block touches nothing else and no flags.
        unsafe {
            asm!(
                "movdqu {a}, [{s}]",
                "movdqu {b}, [{s} + 16]",
                "movdqu {c}, [{s} + 32]",
                "movdqu {d}, [{s} + 48]",
                "movdqu [{t}], {a}",
                "movdqu [{t} + 16], {b}",
                "movdqu [{t} + 32], {c}",
                "movdqu [{t} + 48], {d}",
                s = in(reg) src,
                t = in(reg) dst,
                a = out(xmm_reg) _,
                b = out(xmm_reg) _,
                c = out(xmm_reg) _,
                d = out(xmm_reg) _,
                options(nostack, preserves_flags),
            );
            src = src.add(64);
            dst = dst.add(64);
        }
        n -= 64;
    }
    while n >= 8 {
        // SAFETY: 8 bytes at each end, as above.
        unsafe {
            asm!(
                "mov {x}, qword ptr [{s}]",
                "mov qword ptr [{t}], {x}",
                s = in(reg) src,
                t = in(reg) dst,
                x = out(reg) _,
                options(nostack, preserves_flags),
            );
            src = src.add(8);
            dst = dst.add(8);
        }
        n -= 8;
    }
    while n > 0 {
        // SAFETY: 1 byte at each end, as above.
        unsafe {
            asm!(
                "mov {x}, byte ptr [{s}]",
                "mov byte ptr [{t}], {x}",
                s = in(reg) src,
                t = in(reg) dst,
                x = out(reg_byte) _,
                options(nostack, preserves_flags),
            );
            src = src.add(1);
            dst = dst.add(1);
        }
        n -= 1;
    }
}

/// Copies `n` bytes from `src` to `dst` as Relaxed `AtomicU8` loads and stores (targets
/// without the assembly above, and Miri).
///
/// # Safety
/// As the x86-64 version.
#[inline]
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
unsafe fn atomic_copy(dst: *mut u8, src: *const u8, n: usize) {
    use std::sync::atomic::AtomicU8;
    for i in 0..n {
        // SAFETY: in bounds (caller); `AtomicU8` has `u8`'s size and alignment, and every
        // racing access is atomic too (caller), as `from_ptr` requires.
        let (s, d) = unsafe {
            (
                AtomicU8::from_ptr(src.add(i).cast_mut()),
                AtomicU8::from_ptr(dst.add(i)),
            )
        };
        // Relaxed: a byte-wise atomic copy promises no order; the caller's sequence count
        // orders the copy as a whole (its Acquire fence / Release store).
        d.store(
            s.load(std::sync::atomic::Ordering::Relaxed),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every offset and length class round-trips (64-byte steps, 8-byte and byte tails).
    #[test]
    fn store_then_load_every_shape() {
        let p = PageBuf::zeroed();
        let pattern: Vec<u8> = (0..PAGE_BYTES).map(|i| (i % 251) as u8 + 1).collect();
        for &(off, len) in &[
            (0, 4096),
            (0, 1),
            (1, 63),
            (3, 64),
            (7, 65),
            (4000, 96),
            (4095, 1),
            (100, 0),
        ] {
            p.zero(0, PAGE_BYTES);
            p.store(off, &pattern[..len]);
            let mut all = vec![0xAAu8; PAGE_BYTES];
            p.load(0, &mut all);
            for (i, &b) in all.iter().enumerate() {
                let want = if (off..off + len).contains(&i) {
                    pattern[i - off]
                } else {
                    0
                };
                assert_eq!(b, want, "byte {i} after store({off}, {len})");
            }
            let mut part = vec![0u8; len];
            p.load(off, &mut part);
            assert_eq!(part, &pattern[..len]);
        }
    }

    /// A fresh page reads as zeros; `copy` is a distinct page with the same bytes.
    #[test]
    fn zeroed_and_copy() {
        let p = PageBuf::zeroed();
        let mut b = [1u8; PAGE_BYTES];
        p.load(0, &mut b);
        assert!(b.iter().all(|&x| x == 0));
        p.store(10, b"abc");
        let c = p.copy();
        assert_ne!(c.addr(), p.addr());
        let mut got = [0u8; 3];
        c.load(10, &mut got);
        assert_eq!(&got, b"abc");
    }

    /// A copy past the page's end is a bug the assertion stops (never an overflowing copy).
    /// Each wide copy the CPU has (the dispatch in `atomic_copy` runs only the widest)
    /// copies every length from 256 to 600 bytes, and 4096, at odd offsets exactly.
    #[test]
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    fn every_wide_copy_copies_exactly() {
        let src: Vec<u8> = (0..5000).map(|i| (i % 253) as u8 + 1).collect();
        type Copy = unsafe fn(*mut u8, *const u8, usize);
        let mut copies: Vec<(&str, Copy)> = vec![("sse2", atomic_copy_sse2)];
        if std::arch::is_x86_feature_detected!("avx") {
            copies.push(("avx", atomic_copy_avx));
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            copies.push(("avx512", atomic_copy_avx512));
        }
        for (what, copy) in copies {
            for n in (256..=600).chain([4096]) {
                let mut dst = vec![0u8; n + 8];
                // SAFETY: `src` has 3 + n readable bytes, `dst` 1 + n + 7 writable; the
                // CPU has the copy's feature (checked above); nothing races.
                unsafe { copy(dst.as_mut_ptr().add(1), src.as_ptr().add(3), n) };
                assert_eq!(&dst[1..=n], &src[3..3 + n], "{what} n={n}");
                assert_eq!(dst[0], 0, "{what} n={n}: wrote before");
                assert!(
                    dst[n + 1..].iter().all(|&b| b == 0),
                    "{what} n={n}: wrote past"
                );
            }
        }
    }

    #[test]
    #[should_panic]
    fn load_past_the_end_panics() {
        let p = PageBuf::zeroed();
        p.load(4090, &mut [0u8; 7]);
    }
}
