//! Loom model of tmpfs's synchronous free at eviction (fs/tmpfs/regular.rs `drop_pages`,
//! issue 16's re-land) against lockless readers.
//!
//! `drop_pages` detaches the page index (a Release store of a null root) and then, if the
//! inode's open count read under `attr_lock` is 0, frees the pages at once instead of after
//! a grace period. A lockless reader is inside `read_at` only through an open file, counted
//! from `file_opened` to `file_closed`, both under `attr_lock`. The model: the count behind
//! a loom `Mutex` (`attr_lock`), the root as a loom `AtomicPtr` (Acquire load, as
//! `PageIndex::get`), the page's bytes in a loom `UnsafeCell`, and the free as a write to
//! them (`with_mut`): a free that can overlap a reader's copy is a data race loom reports.
//! Two readers: one whose file was open before the eviction and closes concurrently, one
//! that opens concurrently (a lock-free walk that reached the name before its unlink).
//!
//! Property: the free never races with a copy, and no reader copies freed bytes; when the
//! count is not 0 the page is left to the grace period (here: never freed in the model).

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicPtr, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// The bytes a freed page holds in the model.
const FREED: u8 = 0xdd;

struct Page(UnsafeCell<u8>);

struct Inode {
    /// `i_opens` behind `attr_lock`.
    opens: Mutex<u32>,
    /// The index root (one page).
    root: AtomicPtr<Page>,
    /// The page, kept allocated for the whole model (a "free" writes `FREED`).
    page: Box<Page>,
}

// SAFETY: the page's cell is accessed through loom's checked `with`/`with_mut`; the raw
// root pointer points into `page`, which lives as long as the inode.
unsafe impl Send for Inode {}
// SAFETY: as above.
unsafe impl Sync for Inode {}

impl Inode {
    fn new(opens: u32) -> Arc<Inode> {
        let page = Box::new(Page(UnsafeCell::new(7)));
        let p = &*page as *const Page as *mut Page;
        Arc::new(Inode {
            opens: Mutex::new(opens),
            root: AtomicPtr::new(p),
            page,
        })
    }

    /// One lockless copy (`read_lockless`'s walk and `PageBuf::load`).
    fn read(&self) {
        // Acquire: pairs with the Release of the slot/root stores (PageIndex::get).
        let p = self.root.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: the page lives for the whole model (`page`); the read of the cell is
            // the access loom checks against the free.
            let b = unsafe { &*p }.0.with(|b| unsafe { *b });
            assert_ne!(b, FREED, "a reader copied a freed page");
        }
    }

    /// `file_opened`, a read, `file_closed`.
    fn open_read_close(&self) {
        *self.opens.lock().unwrap() += 1;
        self.read();
        *self.opens.lock().unwrap() -= 1;
    }

    /// `drop_pages`: detach, then free at once only with no open file.
    fn evict(&self) {
        // Release: as `PageIndex::detach`.
        let p = self.root.swap(std::ptr::null_mut(), Ordering::Release);
        let none_open = *self.opens.lock().unwrap() == 0;
        if none_open && !p.is_null() {
            // The free: a write to the bytes, which loom checks against every copy.
            // SAFETY: the cell is live; loom reports the write if it can race a copy.
            self.page.0.with_mut(|b| unsafe { *b = FREED });
        }
    }
}

/// An open file reading and closing while the inode is evicted, and a concurrent open.
#[test]
fn evict_free_vs_open_reader_and_racing_open() {
    loom::model(|| {
        // One file open before the eviction (count 1), read and closed by `a`.
        let inode = Inode::new(1);
        let a = {
            let i = inode.clone();
            thread::spawn(move || {
                i.read();
                *i.opens.lock().unwrap() -= 1;
            })
        };
        let b = {
            let i = inode.clone();
            thread::spawn(move || i.open_read_close())
        };
        inode.evict();
        a.join().unwrap();
        b.join().unwrap();
    });
}
