//! Ablation seams: each mechanism one of the five seed patches changed is a type parameter
//! of the file layer, so the "before" of a lesson runs on the product's own code paths, in
//! the same process as uvfs, with exactly that one mechanism swapped.
//!
//! Linux analogue: none (the kernel changed each mechanism once, in place). The patches:
//! 1. "fs: Move f_count to a different cacheline with f_mode" ([`FileLines`]: [`SplitLines`]
//!    vs [`SharedLine`]);
//! 2. "fs: Optimized fget to improve performance", today `file_ref_t` ([`RefCount`]:
//!    [`FileRef`] vs [`CasRef`]);
//! 3. "fs/buffer: avoid setting buffer bits that are already set"
//!    ([`Variant::TEST_BEFORE_SET`], on the inode's `I_CTIME_QUERIED` mark that every
//!    `stat` sets);
//! 4. "cacheline align files_lock", then no global file list at all ([`OpenFiles`]:
//!    [`NoFileList`] vs [`AlignedFileList`] vs [`GlobalFileList`]);
//! 5. FUSE `request_end()`: pending until the FUSE client exists.
//!
//! [`Uvfs`] is the product (every "after"); it is the default type parameter of [`Task`],
//! [`FdTable`], [`File`] and [`FileHandle`], so code that does not name a variant gets it.
//! The other variants exist for `uvfs bench --ablation` and the `benches/`; each differs from
//! [`Uvfs`] in one associated item only (the const asserts at the end check the layouts).
//!
//! Why lesson 3 is the ctime "queried" mark: it is the state bit uvfs sets on the path users
//! hit hardest on shared objects, `stat`/`fstat` of one file from many threads (build tools,
//! `make`, language runtimes probing the same headers), and it is sticky: set once, then
//! every later `stat` finds it set until the next change. A blind `fetch_or` there turns a
//! read-only `stat` into a write of the inode's timestamp line on every call.
//!
//! [`Task`]: crate::Task
//! [`FdTable`]: crate::FdTable
//! [`File`]: crate::File
//! [`FileHandle`]: crate::FileHandle

use crate::errno::{Errno, Result};
use crate::sync::file_ref::FileRef;
use crate::sync::padded::CacheLine;
use crate::sync::plain::{AtomicUsize, Mutex, Ordering};
use crate::sync::plock;
use crate::sync::refcount::{CasRef, RefCount};
use std::fmt;

/// A choice of the lessons' mechanisms (see the module doc); [`Uvfs`] is the product.
pub trait Variant: Send + Sync + 'static {
    /// Short name for reports, e.g. `"uvfs"` or `"cas-loop-get"`.
    const NAME: &'static str;
    /// One line saying what differs from uvfs.
    const DESCRIPTION: &'static str;
    /// Lesson 2: the open file's reference count.
    type Ref: RefCount;
    /// Lesson 1: where that count sits relative to the read-mostly fields.
    /// Generic over the read-mostly part `H` (the file's [`FileHot`](crate::file::FileHot)),
    /// so that this module, below `file.rs`, does not name it.
    type Lines<H: Send + Sync + 'static>: FileLines<Self::Ref, H>;
    /// Lesson 3: `stat` tests the sticky `I_CTIME_QUERIED` mark before setting it (`true`)
    /// or sets it with an unconditional `fetch_or` (`false`).
    const TEST_BEFORE_SET: bool;
    /// Lesson 4: what tracks the open files.
    type Files: OpenFiles;
    /// Beyond the lessons: `fdget` on a shared table borrows the file through the task's
    /// borrow slots (`true`, no shared line written) or takes a counted reference with
    /// `fget` (`false`, as Linux; what lessons 1 and 2 measure).
    const FGET_BORROW: bool;
}

/// uvfs: `FileRef` on its own line, test before set, no list of open files, borrowed `fdget`.
#[derive(Debug)]
pub struct Uvfs;
impl Variant for Uvfs {
    const NAME: &'static str = "uvfs";
    const DESCRIPTION: &'static str = "the product: every lesson applied";
    type Ref = FileRef;
    type Lines<H: Send + Sync + 'static> = SplitLines<FileRef, H>;
    const TEST_BEFORE_SET: bool = true;
    type Files = NoFileList;
    const FGET_BORROW: bool = true;
}

/// uvfs with Linux's counted `fget` on a shared table (every other mechanism uvfs's): the
/// "after" of lessons 1 and 2, whose mechanisms only a counted `fget` exercises, and the
/// "before" of the borrowed `fdget`.
#[derive(Debug)]
pub struct CountedFgetVariant;
impl Variant for CountedFgetVariant {
    const NAME: &'static str = "counted-fget";
    const DESCRIPTION: &'static str =
        "fdget on a shared table takes a counted reference (fget), as Linux; no borrow slots";
    type Ref = FileRef;
    type Lines<H: Send + Sync + 'static> = SplitLines<FileRef, H>;
    const TEST_BEFORE_SET: bool = true;
    type Files = NoFileList;
    const FGET_BORROW: bool = false;
}

/// Lesson 1 before: the reference count on the same cache line as `f_mode`, `f_flags` and
/// the dentry pointer, which every syscall on the file reads.
#[derive(Debug)]
pub struct SharedLineVariant;
impl Variant for SharedLineVariant {
    const NAME: &'static str = "count-on-mode-line";
    const DESCRIPTION: &'static str =
        "lesson 1 before: f_ref on the line of f_mode, f_flags and the dentry";
    type Ref = FileRef;
    type Lines<H: Send + Sync + 'static> = SharedLine<FileRef, H>;
    const TEST_BEFORE_SET: bool = true;
    type Files = NoFileList;
    const FGET_BORROW: bool = false;
}

/// Lesson 2 before: references taken with a compare-and-swap "add unless zero" loop.
#[derive(Debug)]
pub struct CasRefVariant;
impl Variant for CasRefVariant {
    const NAME: &'static str = "cas-loop-get";
    const DESCRIPTION: &'static str =
        "lesson 2 before: fget takes references with a compare-and-swap inc-not-zero loop";
    type Ref = CasRef;
    type Lines<H: Send + Sync + 'static> = SplitLines<CasRef, H>;
    const TEST_BEFORE_SET: bool = true;
    type Files = NoFileList;
    const FGET_BORROW: bool = false;
}

/// Lesson 3 before: `stat` sets the sticky queried mark without testing it first.
#[derive(Debug)]
pub struct BlindSetVariant;
impl Variant for BlindSetVariant {
    const NAME: &'static str = "blind-set-bit";
    const DESCRIPTION: &'static str =
        "lesson 3 before: stat sets I_CTIME_QUERIED with an unconditional fetch_or";
    type Ref = FileRef;
    type Lines<H: Send + Sync + 'static> = SplitLines<FileRef, H>;
    const TEST_BEFORE_SET: bool = false;
    type Files = NoFileList;
    const FGET_BORROW: bool = true;
}

/// Lesson 4, 2003: every open file on one global list under `files_lock`, which shares its
/// cache line with `max_files`, read by every open. The list entry (`f_list`) sits on the
/// `File`'s `f_pos` line, so the `File` keeps uvfs's 192 bytes.
#[derive(Debug)]
pub struct GlobalFileListVariant;
impl Variant for GlobalFileListVariant {
    const NAME: &'static str = "files-lock-unaligned";
    const DESCRIPTION: &'static str =
        "lesson 4, 2003: every open file on a global list under files_lock, on max_files' line";
    type Ref = FileRef;
    type Lines<H: Send + Sync + 'static> = SplitLines<FileRef, H>;
    const TEST_BEFORE_SET: bool = true;
    type Files = GlobalFileList;
    const FGET_BORROW: bool = true;
}

/// Lesson 4, the patch: the same list, `files_lock` on its own cache line.
#[derive(Debug)]
pub struct AlignedFileListVariant;
impl Variant for AlignedFileListVariant {
    const NAME: &'static str = "files-lock-aligned";
    const DESCRIPTION: &'static str =
        "lesson 4, the patch: the same global list, files_lock on its own cache line";
    type Ref = FileRef;
    type Lines<H: Send + Sync + 'static> = SplitLines<FileRef, H>;
    const TEST_BEFORE_SET: bool = true;
    type Files = AlignedFileList;
    const FGET_BORROW: bool = true;
}

/// Lesson 1: the first part of a `File`, holding the read-mostly fields `H` (a
/// [`FileHot`](crate::file::FileHot), at most one line) and the reference count, in some
/// layout.
///
/// # Safety
/// `f_ref` and `f_ref_raw` give the same field; `drop_hot` drops the `H` and never the
/// count.
pub unsafe trait FileLines<R: RefCount, H>: Send + Sync + 'static {
    /// The lines holding `hot` and `count`.
    fn new(hot: H, count: R) -> Self;
    /// The read-mostly fields.
    fn hot(&self) -> &H;
    /// The reference count.
    fn f_ref(&self) -> &R;
    /// The count of the lines at `this`, without a reference to the rest.
    ///
    /// # Safety
    /// `this` points to an allocated `Self` (its `H` possibly dropped).
    unsafe fn f_ref_raw(this: *const Self) -> *const R;
    /// Drops the `H` in place.
    ///
    /// # Safety
    /// Called once, by the owner of the file being released.
    unsafe fn drop_hot(this: *mut Self);
}

/// uvfs (since Linux 6.15's layout): the read-mostly fields on one 64-byte line, the count
/// on the next. 128 bytes.
#[repr(C)]
pub struct SplitLines<R, H> {
    hot: CacheLine<H>,
    f_ref: CacheLine<R>,
}

// SAFETY: `f_ref`/`f_ref_raw` both give the `f_ref` field; `drop_hot` drops only `hot`.
unsafe impl<R: RefCount, H: Send + Sync + 'static> FileLines<R, H> for SplitLines<R, H> {
    #[inline]
    fn new(hot: H, count: R) -> Self {
        SplitLines {
            hot: CacheLine(hot),
            f_ref: CacheLine(count),
        }
    }
    #[inline]
    fn hot(&self) -> &H {
        &self.hot
    }
    #[inline]
    fn f_ref(&self) -> &R {
        &self.f_ref
    }
    #[inline]
    unsafe fn f_ref_raw(this: *const Self) -> *const R {
        // SAFETY: `this` points to an allocated `Self` (caller's contract); `addr_of!`
        // projects to the field without creating a reference.
        unsafe { std::ptr::addr_of!((*this).f_ref.0) }
    }
    unsafe fn drop_hot(this: *mut Self) {
        // SAFETY: called once by the owner (caller's contract); `hot` only.
        unsafe { std::ptr::drop_in_place(std::ptr::addr_of_mut!((*this).hot)) }
    }
}

/// Lesson 1 before: the count right after the read-mostly fields, on the same 64-byte
/// line; the second line is padding, so `File` keeps its size and its `f_pos` line.
/// 128 bytes.
#[repr(C, align(64))]
pub struct SharedLine<R, H> {
    hot: H,
    f_ref: R,
    _pad: CacheLine<[u8; 1]>,
}

// SAFETY: as for `SplitLines`.
unsafe impl<R: RefCount, H: Send + Sync + 'static> FileLines<R, H> for SharedLine<R, H> {
    #[inline]
    fn new(hot: H, count: R) -> Self {
        SharedLine {
            hot,
            f_ref: count,
            _pad: CacheLine([0]),
        }
    }
    #[inline]
    fn hot(&self) -> &H {
        &self.hot
    }
    #[inline]
    fn f_ref(&self) -> &R {
        &self.f_ref
    }
    #[inline]
    unsafe fn f_ref_raw(this: *const Self) -> *const R {
        // SAFETY: as in `SplitLines::f_ref_raw`.
        unsafe { std::ptr::addr_of!((*this).f_ref) }
    }
    unsafe fn drop_hot(this: *mut Self) {
        // SAFETY: as in `SplitLines::drop_hot`.
        unsafe { std::ptr::drop_in_place(std::ptr::addr_of_mut!((*this).hot)) }
    }
}

impl<R, H> fmt::Debug for SplitLines<R, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SplitLines")
    }
}
impl<R, H> fmt::Debug for SharedLine<R, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedLine")
    }
}

/// Lesson 4: what an open and the last close of a file do to track open files.
pub trait OpenFiles: Send + Sync + 'static {
    /// What a `File` keeps to be found in the tracker (Linux 2.6: `f_list`).
    type Node: Send + Sync + fmt::Debug;
    /// Registers a new open file (Linux 2.6 `file_move`/`file_sb_list_add` at open).
    ///
    /// # Errors
    /// `ENFILE` when `max_files` files are open.
    fn add() -> Result<Self::Node>;
    /// Unregisters it at its last close (`file_sb_list_del` in `__fput`).
    fn del(node: &Self::Node);
    /// Files on the list now (Linux `get_nr_files`); `None` when nothing is tracked.
    fn nr_files() -> Option<usize>;
}

/// uvfs and Linux since 3.13: nothing lists open files; open and close write no global line.
#[derive(Debug)]
pub struct NoFileList;
impl OpenFiles for NoFileList {
    type Node = ();
    #[inline(always)]
    fn add() -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn del(_: &()) {}
    fn nr_files() -> Option<usize> {
        None
    }
}

/// The list: slot indices of open files (a slab, so add and del are O(1) like `list_add`
/// and `list_del`), and the free slots.
#[derive(Debug, Default)]
struct FileList {
    live: Vec<bool>,
    free: Vec<usize>,
    open: usize,
}

impl FileList {
    fn add(&mut self, max_files: usize) -> Result<usize> {
        if self.open >= max_files {
            return Err(Errno::ENFILE);
        }
        if self.live.capacity() == 0 {
            // Linux's `list_add` never allocates: size the slab once, so that growth does
            // not happen under `files_lock` during a measurement.
            self.live.reserve(1 << 16);
            self.free.reserve(1 << 16);
        }
        self.open += 1;
        Ok(match self.free.pop() {
            Some(i) => {
                self.live[i] = true;
                i
            }
            None => {
                self.live.push(true);
                self.live.len() - 1
            }
        })
    }

    fn del(&mut self, i: usize) {
        if let Some(live) = self.live.get_mut(i) {
            if std::mem::take(live) {
                self.open -= 1;
                self.free.push(i);
            }
        }
    }
}

/// `files_stat.max_files` (`/proc/sys/fs/file-max`): 8M, about what Linux picks for a few
/// GiB of memory.
const MAX_FILES: usize = 8 << 20;

/// 2003 layout: `max_files` (read by every open) and `files_lock` with its list on one line.
#[repr(C, align(64))]
struct UnalignedGlobals {
    max_files: AtomicUsize,
    files_lock: Mutex<FileList>,
}

static UNALIGNED: UnalignedGlobals = UnalignedGlobals {
    max_files: AtomicUsize::new(MAX_FILES),
    files_lock: Mutex::new(FileList {
        live: Vec::new(),
        free: Vec::new(),
        open: 0,
    }),
};

/// Lesson 4 before (2003): one global list of open files under `files_lock`, which shares
/// its cache line with `max_files`.
#[derive(Debug)]
pub struct GlobalFileList;
impl OpenFiles for GlobalFileList {
    type Node = usize;
    fn add() -> Result<usize> {
        // Relaxed: a sysctl value, read like Linux's plain load of `files_stat.max_files`.
        let max = UNALIGNED.max_files.load(Ordering::Relaxed);
        plock(&UNALIGNED.files_lock).add(max)
    }
    fn del(node: &usize) {
        plock(&UNALIGNED.files_lock).del(*node);
    }
    fn nr_files() -> Option<usize> {
        Some(plock(&UNALIGNED.files_lock).open)
    }
}

/// `max_files` on its own line.
static ALIGNED_MAX_FILES: CacheLine<AtomicUsize> = CacheLine(AtomicUsize::new(MAX_FILES));
/// `files_lock` + list, `__cacheline_aligned_in_smp`.
static ALIGNED_FILES_LOCK: CacheLine<Mutex<FileList>> = CacheLine(Mutex::new(FileList {
    live: Vec::new(),
    free: Vec::new(),
    open: 0,
}));

/// Lesson 4, the 2003 patch: the same list with `files_lock` on its own cache line.
#[derive(Debug)]
pub struct AlignedFileList;
impl OpenFiles for AlignedFileList {
    type Node = usize;
    fn add() -> Result<usize> {
        // Relaxed: as in `GlobalFileList::add`.
        let max = ALIGNED_MAX_FILES.load(Ordering::Relaxed);
        plock(&ALIGNED_FILES_LOCK).add(max)
    }
    fn del(node: &usize) {
        plock(&ALIGNED_FILES_LOCK).del(*node);
    }
    fn nr_files() -> Option<usize> {
        Some(plock(&ALIGNED_FILES_LOCK).open)
    }
}

#[cfg(not(uvfs_loom))]
mod layout {
    use super::*;
    use crate::sync::padded::CACHE_LINE;
    use std::mem::{offset_of, size_of};
    // The lines with the largest read-mostly part that leaves the count room on line 0
    // (`FileHot` is smaller; file.rs
    // asserts the same with `FileHot` itself).
    type Hot = [u8; 56];
    crate::const_assert!(size_of::<SplitLines<FileRef, Hot>>() == 2 * CACHE_LINE);
    crate::const_assert!(offset_of!(SplitLines<FileRef, Hot>, f_ref) == CACHE_LINE);
    crate::const_assert!(size_of::<SharedLine<FileRef, Hot>>() == 2 * CACHE_LINE);
    crate::const_assert!(offset_of!(SharedLine<FileRef, Hot>, f_ref) < CACHE_LINE);
    crate::const_assert!(size_of::<SplitLines<CasRef, Hot>>() == 2 * CACHE_LINE);
    // 2003: the lock within the first line, next to `max_files`.
    crate::const_assert!(offset_of!(UnalignedGlobals, files_lock) < CACHE_LINE);
    crate::const_assert!(size_of::<CacheLine<Mutex<FileList>>>().is_multiple_of(CACHE_LINE));
}

#[cfg(all(test, not(uvfs_loom)))]
mod tests {
    use super::*;

    #[test]
    fn file_list_reuses_slots_and_limits() {
        let mut l = FileList::default();
        let a = l.add(2).unwrap();
        let b = l.add(2).unwrap();
        assert_ne!(a, b);
        assert_eq!(l.add(2), Err(Errno::ENFILE));
        l.del(a);
        l.del(a); // a second del of the same slot changes nothing
        assert_eq!(l.open, 1);
        assert_eq!(l.add(2), Ok(a));
    }
}
