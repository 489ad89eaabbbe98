//! `SeqCount`: a sequence counter for data read far more often than written.
//!
//! Linux analogue: `include/linux/seqlock.h` (`seqcount_t`, `read_seqcount_begin`,
//! `read_seqcount_retry`, `write_seqcount_begin/end`). Readers write nothing; writers must be
//! serialised by a lock of their own. The protected data must itself be atomics (read and
//! written Relaxed), so that a torn read is a retry, never undefined behaviour.

use std::sync::atomic::{fence, AtomicU32, Ordering};

/// A sequence counter; odd while a write is in progress.
#[derive(Debug, Default)]
pub struct SeqCount {
    seq: AtomicU32,
}

impl SeqCount {
    /// A counter with no write in progress.
    pub fn new() -> SeqCount {
        SeqCount {
            seq: AtomicU32::new(0),
        }
    }

    /// Starts a read section; returns the sequence to pass to [`read_retry`](Self::read_retry).
    /// Spins while a write is in progress.
    #[inline]
    pub fn read_begin(&self) -> u32 {
        let mut spins = 0u32;
        loop {
            // Acquire: pairs with the Release fence in `write_end`: data loads after this
            // see at least the writes of the write section that produced `s`.
            let s = self.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                return s;
            }
            // Spin briefly, then yield: a writer preempted mid-section (2 vCPUs) must get to
            // run rather than watch readers burn their time slices.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Whether the read section that began with `start` raced with a write and must retry.
    #[inline]
    pub fn read_retry(&self, start: u32) -> bool {
        // Acquire fence: orders the section's Relaxed data loads before the re-load of the
        // counter (the `smp_rmb()` of `read_seqcount_retry`); pairs with the Release fence in
        // `write_begin`.
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        self.seq.load(Ordering::Relaxed) != start
    }

    /// Starts a write section. Context: the caller holds the writers' lock.
    #[inline]
    pub fn write_begin(&self) {
        // Relaxed: writers are serialised by the caller's lock.
        let s = self.seq.load(Ordering::Relaxed);
        // Relaxed store, then a Release fence: the odd value is ordered before the data
        // stores that follow (the `smp_wmb()` of `write_seqcount_begin`); pairs with the
        // Acquire fence in `read_retry`.
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// Ends a write section. Context: the caller holds the writers' lock.
    #[inline]
    pub fn write_end(&self) {
        // Relaxed: serialised by the caller's lock.
        let s = self.seq.load(Ordering::Relaxed);
        // Release: the data stores happen before the even value; pairs with the Acquire load
        // in `read_begin`.
        self.seq.store(s.wrapping_add(1), Ordering::Release);
    }
}
