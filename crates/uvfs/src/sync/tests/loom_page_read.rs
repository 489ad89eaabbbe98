//! Loom model of tmpfs's lockless read (fs/tmpfs/regular.rs `read_lockless`, issue 16)
//! against a write and a truncate of the same file.
//!
//! The model has the protocol's parts with loom's atomics: the file's sequence count
//! (`SeqCount`, the same code as uvfs's through `seqcount::model`), the size word, a page
//! slot (the `PageIndex` leaf slot, Acquire/Release as there) and a page of 4 bytes read and
//! written byte-wise atomically (Relaxed `AtomicU8`s: what `PageBuf`'s copy is, byte for
//! byte). Writers hold the data lock (a loom `Mutex`) and change bytes, slot and size inside
//! a write section; the reader tries twice without the lock, then takes it, as uvfs does.
//! A page removed by a truncate is kept until the model ends: uvfs frees it after an epoch
//! grace period (crossbeam-epoch, which loom cannot model, as for `RcuCell`), so the model
//! checks that the reader never *uses* such bytes unless the count says they were stable.
//!
//! Property: the reader returns one of the file's states (Linux's result for a read at
//! offset 0 of 4 bytes): 4 bytes of the first contents or of the write, or 2 bytes of
//! either after the truncate to 2 (its tail zeroed), or 0 bytes after a truncate to 0,
//! never bytes of two states and never a size from one state with bytes of another.

use crate::sync::seqcount::model::SeqCount;
use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

const LEN: usize = 4;

struct Page([AtomicU8; LEN]);

impl Page {
    fn new(v: u8) -> *mut Page {
        Box::into_raw(Box::new(Page(std::array::from_fn(|_| AtomicU8::new(v)))))
    }
}

struct File {
    seq: SeqCount,
    size: AtomicU64,
    slot: AtomicPtr<Page>,
    /// The data lock; holds the pages removed from the file (freed when the model ends,
    /// standing for the grace period).
    lock: Mutex<Vec<*mut Page>>,
}

// SAFETY: the raw pages are shared as `PageBuf`s are (their bytes are atomics).
unsafe impl Send for File {}
// SAFETY: as above.
unsafe impl Sync for File {}

impl File {
    fn new() -> File {
        File {
            seq: SeqCount::new(),
            size: AtomicU64::new(LEN as u64),
            slot: AtomicPtr::new(Page::new(1)),
            lock: Mutex::new(Vec::new()),
        }
    }

    /// One try of the read at offset 0: `(count, bytes)` from whatever it loaded.
    fn copy(&self) -> (usize, [u8; LEN]) {
        // Relaxed: inside the read section (ordered by `read_retry`'s fence).
        let n = (self.size.load(Ordering::Relaxed) as usize).min(LEN);
        let mut out = [0u8; LEN];
        // Acquire: pairs with the Release store of the slot (PageIndex::get/set).
        let p = self.slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: pages are freed only when the model ends.
            let page = unsafe { &*p };
            for (i, b) in out.iter_mut().enumerate().take(n) {
                // Relaxed: a byte-wise atomic copy (PageBuf::load).
                *b = page.0[i].load(Ordering::Relaxed);
            }
        }
        (n, out)
    }

    /// `read_at`: two lockless tries, then under the lock.
    fn read(&self) -> (usize, [u8; LEN]) {
        for _ in 0..2 {
            let Some(s) = self.seq.try_read_begin() else {
                break;
            };
            let r = self.copy();
            if !self.seq.read_retry(s) {
                return r;
            }
        }
        let _g = self.lock.lock().unwrap();
        self.copy()
    }

    /// `write_at` of `LEN` bytes of `v` at 0 (the page exists, or is allocated).
    fn write(&self, v: u8) {
        let _g = self.lock.lock().unwrap();
        self.seq.write_begin();
        // Relaxed: writers hold the lock.
        let mut p = self.slot.load(Ordering::Relaxed);
        if p.is_null() {
            p = Page::new(0);
            // Release: publishes the new page (PageIndex::set).
            self.slot.store(p, Ordering::Release);
        }
        // SAFETY: a page in the slot is live.
        let page = unsafe { &*p };
        for b in &page.0 {
            // Relaxed: a byte-wise atomic store (PageBuf::store), inside the section.
            b.store(v, Ordering::Relaxed);
        }
        // Relaxed: inside the section.
        self.size.store(LEN as u64, Ordering::Relaxed);
        self.seq.write_end();
    }

    /// `truncate` to `len`: to 0 the page is removed (retired), else its tail zeroed.
    fn truncate(&self, len: usize) {
        let mut g = self.lock.lock().unwrap();
        self.seq.write_begin();
        // Relaxed: writers hold the lock.
        let p = self.slot.load(Ordering::Relaxed);
        if len == 0 {
            if !p.is_null() {
                // Release: as every slot store.
                self.slot.store(std::ptr::null_mut(), Ordering::Release);
                g.push(p);
            }
        } else if !p.is_null() {
            // SAFETY: a page in the slot is live.
            for b in &unsafe { &*p }.0[len..] {
                // Relaxed: a byte-wise atomic store (PageBuf::zero), inside the section.
                b.store(0, Ordering::Relaxed);
            }
        }
        // Relaxed: inside the section.
        self.size.store(len as u64, Ordering::Relaxed);
        self.seq.write_end();
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // Relaxed: exclusive access.
        let p = self.slot.load(Ordering::Relaxed);
        let retired = std::mem::take(&mut *self.lock.lock().unwrap());
        for q in retired.into_iter().chain((!p.is_null()).then_some(p)) {
            // SAFETY: every page came from `Page::new` and is dropped once.
            drop(unsafe { Box::from_raw(q) });
        }
    }
}

/// Whether `(n, bytes)` is a state of the file: `n` bytes all `v` with `v` one of
/// `values`, zeros never inside the count.
fn is_state(r: (usize, [u8; LEN]), counts: &[usize], values: &[u8]) -> bool {
    let (n, b) = r;
    counts.contains(&n) && (n == 0 || (values.contains(&b[0]) && b[..n].iter().all(|&x| x == b[0])))
}

/// A reader against a write and a truncate to 2 (the tail zeroed in place).
#[test]
fn read_vs_write_vs_truncate_tail() {
    loom::model(|| {
        let f = Arc::new(File::new());
        let w = {
            let f = f.clone();
            thread::spawn(move || f.write(2))
        };
        let t = {
            let f = f.clone();
            thread::spawn(move || f.truncate(2))
        };
        let r = f.read();
        assert!(
            is_state(r, &[LEN, 2], &[1, 2]),
            "not a state of the file: {r:?}"
        );
        w.join().unwrap();
        t.join().unwrap();
    });
}

/// A reader against a truncate to 0 (the page removed) and a write that allocates a new
/// page: never the removed page's bytes with the new size, never a page's bytes past 0.
#[test]
fn read_vs_truncate_to_zero_vs_write() {
    loom::model(|| {
        let f = Arc::new(File::new());
        let t = {
            let f = f.clone();
            thread::spawn(move || f.truncate(0))
        };
        let w = {
            let f = f.clone();
            thread::spawn(move || f.write(3))
        };
        let r = f.read();
        assert!(
            is_state(r, &[LEN, 0], &[1, 3]),
            "not a state of the file: {r:?}"
        );
        t.join().unwrap();
        w.join().unwrap();
    });
}
