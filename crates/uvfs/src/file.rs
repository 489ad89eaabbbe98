//! `File`: an open file description, shared by every descriptor `dup`'d or inherited from
//! the same `open`.
//!
//! Linux analogue: `struct file` (include/linux/fs.h) and fs/file_table.c. Seed patch:
//! "fs: Move f_count to a different cacheline" (UnixBench syscall +42% on 24 cores).
//!
//! # Layout (three 64-byte lines, 192 bytes)
//! ```text
//! line 0  FileHot: f_mode, f_flags, f_dentry, f_cred_id,  read by every syscall, written never
//!         f_private
//!                                                       (f_flags: only by F_SETFL)
//! line 1  f_ref (FileRef)                               written by every fget/fput/dup/close
//! line 2  f_pos_lock + f_pos, f_dir_end                 written by read/write/lseek
//! ```
//! Readers of line 0 on other cores keep their copy while `dup`/`close` bounce line 1.
//! The heap block holding a `File` is 256 bytes: `RcuRef` rounds an over-aligned type up to
//! a power of two, so that size-class allocators serve the 64-aligned request on their
//! ordinary path (mimalloc gave the 192-byte request a 256-byte block anyway, through its
//! slower over-allocating path).
//! Lines 0 and 1 are `V::Lines` and the count is `V::Ref` (see [`crate::variant`]): the
//! default [`Uvfs`] variant is the layout above; ablation variants swap one of them.
//!
//! # Invariants
//! - `f_mode`, `f_dentry`, `f_cred_id` and `f_private` are immutable after `open`.
//! - `f_pos` and `f_dir_end` are protected by `f_pos_lock`; `pread`/`pwrite` never touch
//!   them.

use crate::dentry::Dentry;
use crate::errno::Result;
use crate::inode::Inode;
use crate::mount::{MntRef, Mount, Path};
use crate::sync::epoch::Guard;
use crate::sync::plain::{AtomicU32, AtomicU64, Mutex, Ordering};
use crate::sync::rcu::{RcuRef, RcuRefcounted};
use crate::sync::refcount::RefCount;
use crate::types::OpenFlags;
use crate::variant::{FileLines, OpenFiles, Uvfs, Variant};
use bitflags::bitflags;
use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

bitflags! {
    /// `f_mode`: what the open file may do (`FMODE_*`, include/linux/fs.h).
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    pub struct FMode: u32 {
        /// Open for reading.
        const READ = 0x1;
        /// Open for writing.
        const WRITE = 0x2;
        /// Seekable.
        const LSEEK = 0x4;
        /// `pread` allowed.
        const PREAD = 0x8;
        /// `pwrite` allowed.
        const PWRITE = 0x10;
        /// `FMODE_EXEC`: opened by `execve` ([`Task::open_exec`]); holds a denial of
        /// writing on its inode (`ETXTBSY` for openers for writing and `truncate`) until
        /// its last close, as Linux's exec file does while the program runs.
        ///
        /// [`Task::open_exec`]: crate::Task::open_exec
        const EXEC = 0x20;
        /// `FMODE_PATH`: opened with `O_PATH`. The file only names its dentry: `fstat`,
        /// `fstatfs`, use as a `dirfd` (with `AT_EMPTY_PATH` too), `fchdir`, `close`, `dup*`
        /// and `fcntl` (`F_DUPFD*`, `F_GETFD`, `F_SETFD`, `F_GETFL`) work; every other call
        /// on the descriptor is `EBADF` (Linux: `empty_fops`, `fdget` vs `fdget_raw`).
        const PATH = 0x4000;
        /// `FMODE_WRITER`: the file holds a write count on its mount (an open for writing
        /// of a regular file), carried by its mount reference and given back with it at
        /// the last close.
        const WRITER = 0x10000;
        /// `FMODE_CREATED`: the open that made the file (`O_CREAT` of a new name, or
        /// `O_TMPFILE`): the file system's `->open` may take what its create prepared (a
        /// FUSE server's handle from CREATE or TMPFILE).
        const CREATED = 0x100000;
        /// `FMODE_STREAM`: a stream without a file position (`stream_open`: a FUSE
        /// server's `FOPEN_STREAM`): `read` and `write` pass offset 0 to the file system
        /// and neither read nor move the position, so they take no position lock
        /// (`file_ppos` is `NULL`); `lseek`, `pread` and `pwrite` are `ESPIPE`.
        const STREAM = 0x200000;
    }
}

/// The read-mostly first cache line of a `File`: `f_mode`, `f_flags`, the dentry, the
/// mount, the opener's credential identity, the file system's handle (48 bytes).
#[derive(Debug)]
pub struct FileHot {
    /// Immutable after open.
    pub(crate) f_mode: FMode,
    /// Open flags; `O_APPEND`/`O_NONBLOCK` change under F_SETFL (atomic; written rarely).
    pub(crate) f_flags: AtomicU32,
    /// The dentry opened (Linux: `f_path.dentry`; `f_inode` is its inode). Immutable after
    /// open. No second count on the inode, which the dentry holds.
    pub(crate) f_dentry: Arc<Dentry>,
    /// The mount it was opened through (Linux `f_path.mnt`), held by a per-thread-sharded
    /// count ([`MntRef`]): the open and the last close each write the calling thread's
    /// shard line, never a namespace-wide one. Immutable after open; put after the dentry
    /// is dropped at the last close (`__fput`: `dput`, then `mntput`), by `drop_payload`
    /// under the release's pin (hence `ManuallyDrop`: dropping `FileHot` leaves it).
    pub(crate) f_mnt: ManuallyDrop<MntRef>,
    /// The opener's credential identity (`Task::cred_id`; Linux: `f_cred`). Immutable after
    /// open; read only by `linkat` with `AT_EMPTY_PATH`.
    pub(crate) f_cred_id: u64,
    /// The file system's handle for this open file (`FileOps::open`'s result; Linux
    /// `private_data`, a FUSE server's `fh`), passed to every `FileOps` call on the file.
    /// Immutable after open (line 0: read by every read and write, which read the line
    /// anyway).
    pub(crate) f_private: u64,
}

/// An open file description.
///
/// # Refcounting
/// Counted by `f_ref` (`V::Ref`, for uvfs [`FileRef`](crate::sync::file_ref::FileRef));
/// handles are [`FileHandle`]s. Each fd table that names
/// the file holds one reference, however many of its descriptors name it (fdtable.rs).
/// The last put drops the dentry reference at once (Linux `__fput`) and frees the memory
/// after an epoch grace period, because `fget` may still be reading `f_ref` of a file that
/// a concurrent `close` released.
///
/// `V` chooses the lessons' mechanisms ([`crate::variant`]); only ablation benchmarks name
/// another than [`Uvfs`].
#[repr(C, align(64))]
pub struct File<V: Variant = Uvfs> {
    /// `FileHot` and `f_ref`, laid out by the variant (two lines for every variant).
    pub(crate) lines: V::Lines<FileHot>,
    /// `f_pos_lock` + `f_pos` (bytes for regular files, a cookie for directories); starts
    /// line 2.
    pub(crate) f_pos: Mutex<u64>,
    /// A directory's listing end: the directory's next cookie when the listing started
    /// (its first `getdents64` since the open or since a seek to 0), 0 until then; entries
    /// with this cookie or a later one are not listed (readdir.rs). Protected by
    /// `f_pos_lock` (an atomic only so that `File` is `Sync` without unsafe code; Linux:
    /// the `private_data` of a `simple_offset` directory, under `f_pos_lock` too).
    pub(crate) f_dir_end: AtomicU64,
    /// The open-file tracker's entry (uvfs: none, zero bytes; the lesson-4 lists: an index,
    /// on line 2 after `f_pos`, like Linux 2.6's `f_list`, written only at open and last
    /// close).
    pub(crate) f_list: <V::Files as OpenFiles>::Node,
}

/// A counted reference to a [`File`] (Linux: a `struct file *` holding an `f_ref`).
pub type FileHandle<V = Uvfs> = RcuRef<File<V>>;

// SAFETY: `file_ref` and `file_ref_raw` always give the count inside `lines` (FileLines'
// contract); `drop_payload` drops every other field and never the count; `File`s are created
// only by `File::open_handle`, which boxes them in an `RcuRef`.
unsafe impl<V: Variant> RcuRefcounted for File<V> {
    type Ref = V::Ref;

    #[inline]
    fn file_ref(&self) -> &V::Ref {
        self.lines.f_ref()
    }

    #[inline]
    unsafe fn file_ref_raw(this: *const Self) -> *const V::Ref {
        // SAFETY: `this` points to an allocated `File` (caller's contract); `addr_of!`
        // projects to the field without creating a reference, and `f_ref_raw` likewise.
        unsafe { V::Lines::<FileHot>::f_ref_raw(std::ptr::addr_of!((*this).lines)) }
    }

    unsafe fn drop_payload(this: *mut Self, guard: &Guard) {
        // Every field but `f_ref` is listed below; this destructuring stops compiling when a
        // field is added, so it cannot be forgotten here. (`File` must not implement `Drop`:
        // its fields are dropped only here.)
        #[allow(dead_code)]
        fn all_fields<V: Variant>(f: File<V>) {
            let File {
                lines: _,
                f_pos: _,
                f_dir_end: _,
                f_list: _,
            } = f;
        }
        // SAFETY: the caller owns the object and calls this once; each field but the count
        // (plain atomics, no drop glue) is dropped exactly once, through raw projections
        // that never cover it (`drop_hot` leaves it, FileLines' contract).
        unsafe {
            V::Files::del(&*std::ptr::addr_of!((*this).f_list));
            // The last close of the inode's file (`__fput` -> `->release`, `dput` ->
            // `iput`): the file system's release for a file it opened, and on a mount with
            // limits an unlinked file's space comes back now.
            let hot = V::Lines::<FileHot>::hot(&*std::ptr::addr_of!((*this).lines));
            let inode = &hot.f_dentry.d_inode;
            if !hot.f_mode.contains(FMode::PATH) && inode.wants_open() {
                inode.i_op.release(inode, hot.f_private);
            }
            // `__fput` -> `locks_remove_file`: the file's OFD and `flock` locks.
            if let Some(ctx) = inode.flctx() {
                ctx.remove_file(this as usize);
            }
            // `__fput`: the write count of a writer, the denial of an exec open.
            put_file_access(inode, hot.f_mode);
            inode.file_closed();
            // Taken out before `FileHot` is dropped (which leaves a `ManuallyDrop`), put
            // after: the dentry goes first, as in `__fput`.
            let mnt = ManuallyDrop::into_inner(std::ptr::read(&hot.f_mnt));
            V::Lines::<FileHot>::drop_hot(std::ptr::addr_of_mut!((*this).lines));
            mnt.put(guard);
            std::ptr::drop_in_place(std::ptr::addr_of_mut!((*this).f_pos));
            std::ptr::drop_in_place(std::ptr::addr_of_mut!((*this).f_dir_end));
            std::ptr::drop_in_place(std::ptr::addr_of_mut!((*this).f_list));
        }
    }
}

/// Linux `put_file_access` (the inode's part): gives back the write count of a file
/// opened with [`FMode::WRITER`], or the write denial of one with [`FMode::EXEC`].
fn put_file_access(inode: &crate::Inode, mode: FMode) {
    if mode.contains(FMode::WRITER) {
        inode.put_write_access();
    } else if mode.contains(FMode::EXEC) {
        inode.allow_write_access();
    }
}

#[cfg(not(uvfs_loom))]
mod layout {
    use super::*;
    use crate::sync::file_ref::FileRef;
    use crate::sync::padded::CACHE_LINE;
    use crate::variant::{
        AlignedFileListVariant, BlindSetVariant, CasRefVariant, GlobalFileListVariant,
        SharedLineVariant,
    };
    use crate::variant::{SharedLine, SplitLines};
    use std::mem::{offset_of, size_of};
    crate::const_assert!(size_of::<FileHot>() <= CACHE_LINE);
    crate::const_assert!(size_of::<File>() == 192);
    crate::const_assert!(offset_of!(File, lines) == 0);
    // The count is on line 1 (`SplitLines` asserts its own offset).
    crate::const_assert!(size_of::<SplitLines<FileRef, FileHot>>() == 2 * CACHE_LINE);
    // Lesson 1 before: `FileHot` and the count share line 0 (two lines in all only if the
    // count fits beside it; the second is padding).
    crate::const_assert!(size_of::<SharedLine<FileRef, FileHot>>() == 2 * CACHE_LINE);
    crate::const_assert!(offset_of!(File, f_pos) == 2 * CACHE_LINE);
    // Every ablation variant has the same size and the same `f_pos` line, so that each
    // differs from uvfs in its one mechanism only (not in allocation size or lines touched).
    macro_rules! same_shape {
        ($($v:ty),*) => {$(
            crate::const_assert!(size_of::<File<$v>>() == 192);
            crate::const_assert!(offset_of!(File<$v>, f_pos) == 2 * CACHE_LINE);
        )*};
    }
    same_shape!(
        SharedLineVariant,
        CasRefVariant,
        BlindSetVariant,
        GlobalFileListVariant,
        AlignedFileListVariant
    );
}

impl<V: Variant> fmt::Debug for File<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("mode", &self.hot().f_mode)
            .field("flags", &self.flags())
            .field("inode", &self.hot().f_dentry.d_inode)
            .field("count", &self.file_ref().read())
            .finish()
    }
}

impl<V: Variant> File<V> {
    /// Opens `dentry` with `mode` and `flags` (already validated): a new file with one
    /// reference.
    ///
    /// Unless `mode` is [`FMode::PATH`], the file system opens it first (`->open`, paired
    /// with the `->release` of the last reference's drop).
    ///
    /// # Errors
    /// The file system's `->open`; `ENFILE` from the variant's open-file list (never for
    /// [`Uvfs`]).
    /// With [`FMode::WRITER`] in `mode`, `path`'s mount reference carries a write count
    /// ([`Mount::get_write_access`]) and the inode one (`Inode::get_write_access`), which
    /// the file now owns (and on error gives back); with [`FMode::EXEC`], the inode's
    /// denial of writing likewise.
    pub(crate) fn open_handle(
        path: Path,
        mut mode: FMode,
        flags: OpenFlags,
        cred_id: u64,
    ) -> Result<FileHandle<V>> {
        let Path { mnt, dentry } = path;
        let inode = &dentry.d_inode;
        let call = !mode.contains(FMode::PATH) && inode.wants_open();
        // A failed open gives back what the caller took for the file: the inode's write
        // count or exec denial (the mount's goes with `mnt`).
        let access = mode;
        let undo = |e| {
            put_file_access(inode, access);
            e
        };
        let f_private = if call {
            let created = mode.contains(FMode::CREATED);
            let fh = inode.i_op.open(inode, flags, created).map_err(undo)?;
            if inode.i_op.nonseekable(inode, fh) {
                mode -= FMode::LSEEK | FMode::PREAD | FMode::PWRITE;
            }
            if inode.i_op.stream(inode, fh) {
                mode -= FMode::LSEEK | FMode::PREAD | FMode::PWRITE;
                mode |= FMode::STREAM;
            }
            fh
        } else {
            0
        };
        let f_list = match V::Files::add() {
            Ok(l) => l,
            Err(e) => {
                if call {
                    inode.i_op.release(inode, f_private);
                }
                return Err(undo(e));
            }
        };
        dentry.d_inode.file_opened();
        Ok(RcuRef::new_with(|| File {
            lines: V::Lines::<FileHot>::new(
                FileHot {
                    f_mode: mode,
                    // `do_dentry_open` drops O_TRUNC after `->open` (which may see it).
                    f_flags: AtomicU32::new((flags - OpenFlags::TRUNC).bits()),
                    f_dentry: dentry,
                    f_mnt: ManuallyDrop::new(mnt),
                    f_cred_id: cred_id,
                    f_private,
                },
                V::Ref::new(1),
            ),
            f_pos: Mutex::new(0),
            f_dir_end: AtomicU64::new(0),
            f_list,
        }))
    }

    /// The read-mostly fields.
    #[inline]
    pub(crate) fn hot(&self) -> &FileHot {
        self.lines.hot()
    }

    /// `file_accessed`: stamps the inode's atime (under relatime) unless the file was
    /// opened with `O_NOATIME`.
    pub(crate) fn file_accessed(&self) {
        if !self.flags().contains(OpenFlags::NOATIME) {
            self.inode().touch_atime();
        }
    }

    /// `f_mode`.
    #[inline]
    pub fn mode(&self) -> FMode {
        self.hot().f_mode
    }

    /// `f_flags` (the flags given to `open`, as changed by `F_SETFL`).
    #[inline]
    pub fn flags(&self) -> OpenFlags {
        // Relaxed: an independent word; F_SETFL has no ordering duties (Linux: plain store
        // under f_lock, plain loads).
        OpenFlags::from_bits_retain(self.hot().f_flags.load(Ordering::Relaxed))
    }

    /// Replaces `f_flags` (F_SETFL).
    pub(crate) fn set_flags(&self, flags: OpenFlags) {
        // Relaxed: see `flags`.
        self.hot().f_flags.store(flags.bits(), Ordering::Relaxed);
    }

    /// Whether a `close(2)` of a descriptor of this file calls the file system's
    /// `->flush` (its inode's file system has per-open state; never for `O_PATH`).
    #[inline]
    pub(crate) fn wants_flush(&self) -> bool {
        !self.mode().contains(FMode::PATH) && self.inode().wants_open()
    }

    /// `filp_close`'s `->flush`, for a descriptor of this file being closed.
    ///
    /// # Errors
    /// The file system's ([`FileOps::flush`](crate::fs::FileOps::flush)).
    #[inline]
    pub(crate) fn flush(&self) -> Result<()> {
        if !self.wants_flush() {
            return Ok(());
        }
        self.flush_slow()
    }

    /// The file system's `->flush` (out of line: tmpfs's files never get here).
    #[cold]
    #[inline(never)]
    fn flush_slow(&self) -> Result<()> {
        let inode = self.inode();
        inode.i_op.flush(inode, self.fh())
    }

    /// The file system's handle for this open file (`FileOps::open`'s result).
    #[inline]
    pub(crate) fn fh(&self) -> u64 {
        self.hot().f_private
    }

    /// The inode.
    #[inline]
    pub fn inode(&self) -> &Arc<Inode> {
        &self.hot().f_dentry.d_inode
    }

    /// The dentry the file was opened at (its name may have changed since, by rename).
    pub fn dentry(&self) -> &Arc<Dentry> {
        &self.hot().f_dentry
    }

    /// The mount the file was opened through.
    #[inline]
    pub fn mount(&self) -> &Mount {
        &self.hot().f_mnt
    }

    /// Number of references: one per fd table naming the file, plus handles; a snapshot
    /// (Linux's `file_count` counts descriptors instead).
    pub fn count(&self) -> u64 {
        self.file_ref().read()
    }
}
