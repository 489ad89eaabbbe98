//! `SeqCount`: a sequence counter for data read far more often than written, and its
//! spinning write lock (a `seqlock_t` whose lock is the counter itself).
//!
//! Linux analogue: `include/linux/seqlock.h` (`seqcount_t`, `read_seqcount_begin`,
//! `read_seqcount_retry`, `write_seqcount_begin/end`; `seqlock_t`, `write_seqlock`,
//! `write_sequnlock`). Readers write nothing. Writers are serialised either by a lock of
//! their own ([`write_begin`](SeqCount::write_begin)/[`write_end`](SeqCount::write_end)) or
//! by the counter ([`write_lock`](SeqCount::write_lock)): a writer moves an even count to
//! odd with one compare-and-swap and back to even with a plain store, so a write section
//! costs one locked instruction and its words stay on one cache line, and a writer that
//! finds the count odd spins (never parks: a section is a few stores). The protected data
//! must itself be atomics (read and written Relaxed), so that a torn read is a retry,
//! never undefined behaviour. A counter uses one style of writer serialisation for its
//! whole life.
//!
//! The code is written once (`seqcount_impl!`) for `std`'s atomics (what uvfs runs) and,
//! under `--cfg uvfs_loom`, for loom's (`model::SeqCount`, checked by
//! sync/tests/loom_seqcount.rs). uvfs's own counters stay `std`'s in loom builds: inodes
//! are freed by the epoch collector, outside the model execution that made them.

/// Defines `SeqCount` and `SeqWriteGuard` over the atomics `$atomic` (a module path) and
/// the spin hint `$hint::spin_loop` and `$thread::yield_now`.
macro_rules! seqcount_impl {
    ($($atomic:ident)::+; $($hint:ident)::+; $($thread:ident)::+) => {
        use $($atomic)::+::{fence, AtomicU32, Ordering};

        /// A sequence counter; odd while a write is in progress.
        #[derive(Debug, Default)]
        pub struct SeqCount {
            seq: AtomicU32,
        }

        /// A write section entered by [`SeqCount::write_lock`]; ends it (count even again)
        /// when dropped.
        #[derive(Debug)]
        #[must_use = "the write section ends when the guard drops"]
        pub struct SeqWriteGuard<'a> {
            s: &'a SeqCount,
        }

        /// One wait of a spin loop: a backoff of pauses (doubling, up to 128), and after
        /// 64 waits a yield, so that a holder preempted mid-section (2 vCPUs) gets to run
        /// rather than watch the spinners burn their time slices.
        #[inline]
        fn spin(spins: &mut u32) {
            *spins += 1;
            if *spins < 64 {
                // Exponential backoff (2, 4 ... 128 pauses between looks): every look
                // of a waiter pulls the line the holder is storing to into the shared
                // state, and the holder's next store then waits for it to come back, so
                // eager waiters stretch the section they wait for (futimes at 2 threads
                // spent 83% here). One pause a look under loom (a pause is a scheduling
                // point there).
                let n = if cfg!(uvfs_loom) { 1 } else { 1u32 << (*spins).min(7) };
                for _ in 0..n {
                    $($hint)::+::spin_loop();
                }
            } else {
                $($thread)::+::yield_now();
            }
        }

        impl SeqCount {
            /// A counter with no write in progress.
            pub fn new() -> SeqCount {
                SeqCount {
                    seq: AtomicU32::new(0),
                }
            }

            /// Starts a read section; returns the sequence to pass to
            /// [`read_retry`](Self::read_retry). Spins while a write is in progress.
            #[inline]
            pub fn read_begin(&self) -> u32 {
                let mut spins = 0u32;
                loop {
                    // Acquire: pairs with the Release store in `write_end`/the guard's drop:
                    // data loads after this see at least the writes of the section that
                    // produced `s`.
                    let s = self.seq.load(Ordering::Acquire);
                    if s & 1 == 0 {
                        return s;
                    }
                    spin(&mut spins);
                }
            }

            /// Starts a read section unless a write is in progress (`raw_seqcount_try_begin`):
            /// the sequence for [`read_retry`](Self::read_retry), or `None` while the count is
            /// odd, for a reader that falls back to the writers' lock instead of spinning.
            #[inline]
            pub fn try_read_begin(&self) -> Option<u32> {
                // Acquire: as in `read_begin` (pairs with the Release store that ended the
                // last write section).
                let s = self.seq.load(Ordering::Acquire);
                (s & 1 == 0).then_some(s)
            }

            /// Whether the read section that began with `start` raced with a write and
            /// must retry.
            #[inline]
            pub fn read_retry(&self, start: u32) -> bool {
                // Acquire fence: orders the section's Relaxed data loads before the
                // re-load of the counter (the `smp_rmb()` of `read_seqcount_retry`); pairs
                // with the Release fence in `write_begin`/`write_lock`.
                fence(Ordering::Acquire);
                // Relaxed: ordered by the fence above.
                self.seq.load(Ordering::Relaxed) != start
            }

            /// Starts a write section. Context: the caller holds the writers' lock.
            #[inline]
            pub fn write_begin(&self) {
                // Relaxed: writers are serialised by the caller's lock.
                let s = self.seq.load(Ordering::Relaxed);
                // Relaxed store, then a Release fence: the odd value is ordered before the
                // data stores that follow (the `smp_wmb()` of `write_seqcount_begin`);
                // pairs with the Acquire fence in `read_retry`.
                self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
                fence(Ordering::Release);
            }

            /// Ends a write section. Context: the caller holds the writers' lock.
            #[inline]
            pub fn write_end(&self) {
                // Relaxed: serialised by the caller's lock.
                let s = self.seq.load(Ordering::Relaxed);
                // Release: the data stores happen before the even value; pairs with the
                // Acquire load in `read_begin`.
                self.seq.store(s.wrapping_add(1), Ordering::Release);
            }

            /// Enters a write section serialised by the counter itself (`write_seqlock`
            /// with the spinlock folded into the count): waits, spinning, until no write
            /// is in progress, then makes the count odd. Inside the section the data may
            /// be read with plain Relaxed loads (no other writer) and stored Relaxed.
            /// One locked instruction (the compare-and-swap); the end is a plain store.
            #[inline]
            pub fn write_lock(&self) -> SeqWriteGuard<'_> {
                let mut spins = 0u32;
                loop {
                    // Relaxed: test before the compare-and-swap, so waiting writers only read
                    // the line (lesson 3); the CAS below orders.
                    let s = self.seq.load(Ordering::Relaxed);
                    if s & 1 == 0 {
                        let won = self.seq.compare_exchange_weak(
                            s,
                            s.wrapping_add(1),
                            // Acquire on success: pairs with the Release store that ended
                            // the previous section, so this section reads what it stored.
                            Ordering::Acquire,
                            // Relaxed on failure: nothing was read; the loop loads again.
                            Ordering::Relaxed,
                        );
                        if won.is_ok() {
                            // Release fence: the odd value is ordered before the section's
                            // data stores (as in `write_begin`); pairs with the Acquire
                            // fence in `read_retry`.
                            fence(Ordering::Release);
                            return SeqWriteGuard { s: self };
                        }
                    }
                    spin(&mut spins);
                }
            }
        }

        impl Drop for SeqWriteGuard<'_> {
            #[inline]
            fn drop(&mut self) {
                // Relaxed: only the section's owner writes the count while it is odd.
                let s = self.s.seq.load(Ordering::Relaxed);
                // Release: the section's data stores happen before the even value; pairs
                // with the Acquire load in `read_begin` and the Acquire CAS of the next
                // `write_lock`.
                self.s.seq.store(s.wrapping_add(1), Ordering::Release);
            }
        }
    };
}

seqcount_impl!(crate::sync::atomic; std::hint; std::thread);

/// The same code over loom's atomics, for the models (sync/tests/loom_seqcount.rs).
#[cfg(uvfs_loom)]
pub(crate) mod model {
    seqcount_impl!(loom::sync::atomic; loom::hint; loom::thread);
}
