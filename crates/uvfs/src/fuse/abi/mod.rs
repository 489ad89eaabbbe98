//! The FUSE wire format (Linux include/uapi/linux/fuse.h, protocol 7.38), shared by the
//! FUSE client (`fuse/client`) and a future server transport of uvfs's own.
//!
//! Every message is a header ([`InHeader`] towards the server, [`OutHeader`] back) and a
//! payload of the structs below, native-endian, 8-byte aligned records. The structs are
//! `#[repr(C)]` with every padding field explicit, read from and written to byte buffers
//! with `zerocopy` (no unsafe casts: the bytes may come from a hostile server); each
//! one's size is asserted at compile time and, in the tests, every size and field offset
//! against the host's `<linux/fuse.h>` compiled by the C compiler.
//!
//! [`parse_message`] checks what a server sends before anything else looks at it.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The protocol's major version; other majors are refused.
pub(crate) const FUSE_KERNEL_VERSION: u32 = 7;
/// The minor version uvfs implements and offers in INIT.
pub(crate) const FUSE_KERNEL_MINOR_VERSION: u32 = 38;
/// The oldest minor uvfs accepts from a server (7.23: the attribute and entry layouts
/// used here, `FUSE_WRITEBACK_CACHE`-era INIT).
pub(crate) const FUSE_MIN_MINOR_VERSION: u32 = 23;
/// The root directory's node id.
pub(crate) const FUSE_ROOT_ID: u64 = 1;
/// The smallest read buffer a server must accept.
pub(crate) const FUSE_MIN_READ_BUFFER: usize = 8192;

/// Opcodes (`enum fuse_opcode`).
#[allow(missing_docs)]
pub(crate) mod opcode {
    pub(crate) const FUSE_LOOKUP: u32 = 1;
    pub(crate) const FUSE_FORGET: u32 = 2;
    pub(crate) const FUSE_GETATTR: u32 = 3;
    pub(crate) const FUSE_SETATTR: u32 = 4;
    pub(crate) const FUSE_READLINK: u32 = 5;
    pub(crate) const FUSE_SYMLINK: u32 = 6;
    pub(crate) const FUSE_MKNOD: u32 = 8;
    pub(crate) const FUSE_MKDIR: u32 = 9;
    pub(crate) const FUSE_UNLINK: u32 = 10;
    pub(crate) const FUSE_RMDIR: u32 = 11;
    pub(crate) const FUSE_RENAME: u32 = 12;
    pub(crate) const FUSE_LINK: u32 = 13;
    pub(crate) const FUSE_OPEN: u32 = 14;
    pub(crate) const FUSE_READ: u32 = 15;
    pub(crate) const FUSE_WRITE: u32 = 16;
    pub(crate) const FUSE_STATFS: u32 = 17;
    pub(crate) const FUSE_RELEASE: u32 = 18;
    pub(crate) const FUSE_FSYNC: u32 = 20;
    pub(crate) const FUSE_SETXATTR: u32 = 21;
    pub(crate) const FUSE_GETXATTR: u32 = 22;
    pub(crate) const FUSE_LISTXATTR: u32 = 23;
    pub(crate) const FUSE_REMOVEXATTR: u32 = 24;
    pub(crate) const FUSE_FLUSH: u32 = 25;
    pub(crate) const FUSE_INIT: u32 = 26;
    pub(crate) const FUSE_OPENDIR: u32 = 27;
    pub(crate) const FUSE_READDIR: u32 = 28;
    pub(crate) const FUSE_RELEASEDIR: u32 = 29;
    pub(crate) const FUSE_FSYNCDIR: u32 = 30;
    pub(crate) const FUSE_ACCESS: u32 = 34;
    pub(crate) const FUSE_CREATE: u32 = 35;
    pub(crate) const FUSE_INTERRUPT: u32 = 36;
    pub(crate) const FUSE_DESTROY: u32 = 38;
    pub(crate) const FUSE_BATCH_FORGET: u32 = 42;
    pub(crate) const FUSE_FALLOCATE: u32 = 43;
    pub(crate) const FUSE_READDIRPLUS: u32 = 44;
    pub(crate) const FUSE_RENAME2: u32 = 45;
    pub(crate) const FUSE_LSEEK: u32 = 46;
    pub(crate) const FUSE_TMPFILE: u32 = 51;
    /// Protocol 7.39 (Linux 6.6), sent by Linux whatever minor INIT settled on; not in
    /// the 7.38 `<linux/fuse.h>` the header test reads.
    pub(crate) const FUSE_STATX: u32 = 52;
}

/// `FOPEN_*` flags of `fuse_open_out.open_flags` the client acts on.
pub(crate) mod fopen {
    /// `FOPEN_DIRECT_IO`: bypass the page cache for this open file.
    pub(crate) const FOPEN_DIRECT_IO: u32 = 1 << 0;
    /// `FOPEN_KEEP_CACHE`: do not invalidate the data cache on open.
    pub(crate) const FOPEN_KEEP_CACHE: u32 = 1 << 1;
    /// `FOPEN_NONSEEKABLE`: the file is not seekable (`lseek`, `pread`, `pwrite`: ESPIPE).
    pub(crate) const FOPEN_NONSEEKABLE: u32 = 1 << 2;
    /// `FOPEN_STREAM`: a stream: not seekable, no file position.
    pub(crate) const FOPEN_STREAM: u32 = 1 << 4;
    /// `FOPEN_NOFLUSH`: the kernel sends no `FLUSH` at this open file's closes.
    pub(crate) const FOPEN_NOFLUSH: u32 = 1 << 5;
}

/// Notification codes (`enum fuse_notify_code`): the `error` field of a message with
/// `unique` 0.
pub(crate) mod notify {
    /// `FUSE_NOTIFY_POLL` (refused: uvfs does not offer poll).
    pub(crate) const POLL: i32 = 1;
    /// `FUSE_NOTIFY_INVAL_INODE`.
    pub(crate) const INVAL_INODE: i32 = 2;
    /// `FUSE_NOTIFY_INVAL_ENTRY`.
    pub(crate) const INVAL_ENTRY: i32 = 3;
    /// `FUSE_NOTIFY_STORE` (refused).
    pub(crate) const STORE: i32 = 4;
    /// `FUSE_NOTIFY_RETRIEVE` (refused).
    pub(crate) const RETRIEVE: i32 = 5;
    /// `FUSE_NOTIFY_DELETE`.
    pub(crate) const DELETE: i32 = 6;
}

/// INIT capability bits (`FUSE_*` of `fuse_init_in.flags`, `flags2` << 32).
#[allow(missing_docs)]
pub(crate) mod init {
    pub(crate) const FUSE_ASYNC_READ: u64 = 1 << 0;
    pub(crate) const FUSE_POSIX_LOCKS: u64 = 1 << 1;
    pub(crate) const FUSE_ATOMIC_O_TRUNC: u64 = 1 << 3;
    pub(crate) const FUSE_EXPORT_SUPPORT: u64 = 1 << 4;
    pub(crate) const FUSE_BIG_WRITES: u64 = 1 << 5;
    pub(crate) const FUSE_DONT_MASK: u64 = 1 << 6;
    pub(crate) const FUSE_SPLICE_WRITE: u64 = 1 << 7;
    pub(crate) const FUSE_SPLICE_MOVE: u64 = 1 << 8;
    pub(crate) const FUSE_SPLICE_READ: u64 = 1 << 9;
    pub(crate) const FUSE_FLOCK_LOCKS: u64 = 1 << 10;
    pub(crate) const FUSE_AUTO_INVAL_DATA: u64 = 1 << 12;
    pub(crate) const FUSE_DO_READDIRPLUS: u64 = 1 << 13;
    pub(crate) const FUSE_READDIRPLUS_AUTO: u64 = 1 << 14;
    pub(crate) const FUSE_WRITEBACK_CACHE: u64 = 1 << 16;
    pub(crate) const FUSE_NO_OPEN_SUPPORT: u64 = 1 << 17;
    pub(crate) const FUSE_PARALLEL_DIROPS: u64 = 1 << 18;
    pub(crate) const FUSE_HANDLE_KILLPRIV: u64 = 1 << 19;
    pub(crate) const FUSE_POSIX_ACL: u64 = 1 << 20;
    pub(crate) const FUSE_ABORT_ERROR: u64 = 1 << 21;
    pub(crate) const FUSE_MAX_PAGES: u64 = 1 << 22;
    pub(crate) const FUSE_CACHE_SYMLINKS: u64 = 1 << 23;
    pub(crate) const FUSE_NO_OPENDIR_SUPPORT: u64 = 1 << 24;
    pub(crate) const FUSE_HANDLE_KILLPRIV_V2: u64 = 1 << 28;
    pub(crate) const FUSE_SETXATTR_EXT: u64 = 1 << 29;
    pub(crate) const FUSE_INIT_EXT: u64 = 1 << 30;
    pub(crate) const FUSE_HAS_INODE_DAX: u64 = 1 << 33;
    /// The server takes requests over io_uring (protocol 7.42, Linux 6.14).
    pub(crate) const FUSE_OVER_IO_URING: u64 = 1 << 41;
}

/// `FATTR_*`: which fields of a [`SetattrIn`] count.
#[allow(missing_docs)]
pub(crate) mod fattr {
    pub(crate) const FATTR_MODE: u32 = 1 << 0;
    pub(crate) const FATTR_UID: u32 = 1 << 1;
    pub(crate) const FATTR_GID: u32 = 1 << 2;
    pub(crate) const FATTR_SIZE: u32 = 1 << 3;
    pub(crate) const FATTR_ATIME: u32 = 1 << 4;
    pub(crate) const FATTR_MTIME: u32 = 1 << 5;
    pub(crate) const FATTR_FH: u32 = 1 << 6;
    pub(crate) const FATTR_ATIME_NOW: u32 = 1 << 7;
    pub(crate) const FATTR_MTIME_NOW: u32 = 1 << 8;
    pub(crate) const FATTR_LOCKOWNER: u32 = 1 << 9;
    pub(crate) const FATTR_CTIME: u32 = 1 << 10;
    pub(crate) const FATTR_KILL_SUIDGID: u32 = 1 << 11;
}

/// `FUSE_WRITE_*`: a WRITE's `write_flags` (include/uapi/linux/fuse.h).
pub(crate) mod write_flags {
    /// A writeback of dirty pages (mmap stores or the write-back cache), not a `write(2)`.
    pub(crate) const FUSE_WRITE_CACHE: u32 = 1 << 0;
    /// Under `FUSE_HANDLE_KILLPRIV_V2`, the writer lacks `CAP_FSETID` (`fuse_send_write`),
    /// so the server drops the set-ID bits.
    pub(crate) const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;
}

/// What the tests compare with the C header: the C struct name and each field's offset.
pub(crate) trait Wire: FromBytes + IntoBytes + Immutable + KnownLayout + Copy {
    /// `struct NAME` in `<linux/fuse.h>`.
    const C_NAME: &'static str;
    /// `(field, offset)` of every field, in declaration order.
    fn offsets() -> Vec<(&'static str, usize)>;
}

/// A wire struct: `#[repr(C)]`, zerocopy's traits, its size asserted, its layout listed
/// for the header test.
macro_rules! wire {
    ($(#[$m:meta])* $name:ident = $c:literal, $size:literal { $($f:ident : $t:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
        #[allow(missing_docs)]
        pub(crate) struct $name {
            $(pub(crate) $f: $t,)*
        }
        crate::const_assert!(std::mem::size_of::<$name>() == $size);
        impl Wire for $name {
            const C_NAME: &'static str = $c;
            fn offsets() -> Vec<(&'static str, usize)> {
                vec![$((stringify!($f), std::mem::offset_of!($name, $f)),)*]
            }
        }
    };
}

wire! {
    /// `struct fuse_in_header`: Every request's header (server-bound).
    InHeader = "fuse_in_header", 40 {
        len: u32,
        opcode: u32,
        unique: u64,
        nodeid: u64,
        uid: u32,
        gid: u32,
        pid: u32,
        total_extlen: u16,
        padding: u16,
    }
}

wire! {
    /// `struct fuse_out_header`: Every reply's and notification's header (client-bound); `error` is 0 or a negated errno, or for a notification (`unique` 0) its code.
    OutHeader = "fuse_out_header", 16 {
        len: u32,
        error: i32,
        unique: u64,
    }
}

wire! {
    /// `struct fuse_attr`: A file's attributes as the server reports them.
    Attr = "fuse_attr", 88 {
        ino: u64,
        size: u64,
        blocks: u64,
        atime: u64,
        mtime: u64,
        ctime: u64,
        atimensec: u32,
        mtimensec: u32,
        ctimensec: u32,
        mode: u32,
        nlink: u32,
        uid: u32,
        gid: u32,
        rdev: u32,
        blksize: u32,
        flags: u32,
    }
}

wire! {
    /// `struct fuse_kstatfs`: `statfs` counts.
    Kstatfs = "fuse_kstatfs", 80 {
        blocks: u64,
        bfree: u64,
        bavail: u64,
        files: u64,
        ffree: u64,
        bsize: u32,
        namelen: u32,
        frsize: u32,
        padding: u32,
        spare: [u32; 6],
    }
}

wire! {
    /// `struct fuse_entry_out`: LOOKUP, MKNOD, MKDIR, SYMLINK, LINK, CREATE reply: the node, its generation, the cache timeouts and its attributes.
    EntryOut = "fuse_entry_out", 128 {
        nodeid: u64,
        generation: u64,
        entry_valid: u64,
        attr_valid: u64,
        entry_valid_nsec: u32,
        attr_valid_nsec: u32,
        attr: Attr,
    }
}

wire! {
    /// `struct fuse_forget_in`: FORGET: drop `nlookup` lookups of the header's node (never answered).
    ForgetIn = "fuse_forget_in", 8 {
        nlookup: u64,
    }
}

wire! {
    /// `struct fuse_forget_one`: One node of a BATCH_FORGET.
    ForgetOne = "fuse_forget_one", 16 {
        nodeid: u64,
        nlookup: u64,
    }
}

wire! {
    /// `struct fuse_batch_forget_in`: BATCH_FORGET: `count` [`ForgetOne`]s follow.
    BatchForgetIn = "fuse_batch_forget_in", 8 {
        count: u32,
        dummy: u32,
    }
}

wire! {
    /// `struct fuse_getattr_in`: GETATTR (with FUSE_GETATTR_FH, of the open file `fh`).
    GetattrIn = "fuse_getattr_in", 16 {
        getattr_flags: u32,
        dummy: u32,
        fh: u64,
    }
}

wire! {
    /// `struct fuse_attr_out`: GETATTR and SETATTR reply.
    AttrOut = "fuse_attr_out", 104 {
        attr_valid: u64,
        attr_valid_nsec: u32,
        dummy: u32,
        attr: Attr,
    }
}

wire! {
    /// `struct fuse_statx_in` (7.39): STATX; `sx_mask` the `STATX_*` fields wanted (Linux
    /// asks `STATX_BASIC_STATS | STATX_BTIME`), `sx_flags` the `AT_STATX_*` sync bits.
    /// Not in the 7.38 header: its layout is the kernel's, sizes asserted here.
    StatxIn = "fuse_statx_in", 24 {
        getattr_flags: u32,
        reserved: u32,
        fh: u64,
        sx_flags: u32,
        sx_mask: u32,
    }
}

wire! {
    /// `struct fuse_sx_time` (7.39): a `statx_timestamp`.
    SxTime = "fuse_sx_time", 16 {
        tv_sec: i64,
        tv_nsec: u32,
        reserved: i32,
    }
}

wire! {
    /// `struct fuse_statx` (7.39): `struct statx`'s layout (256 bytes).
    Statx = "fuse_statx", 256 {
        mask: u32,
        blksize: u32,
        attributes: u64,
        nlink: u32,
        uid: u32,
        gid: u32,
        mode: u16,
        spare0: u16,
        ino: u64,
        size: u64,
        blocks: u64,
        attributes_mask: u64,
        atime: SxTime,
        btime: SxTime,
        ctime: SxTime,
        mtime: SxTime,
        rdev_major: u32,
        rdev_minor: u32,
        dev_major: u32,
        dev_minor: u32,
        spare2: [u64; 14],
    }
}

wire! {
    /// `struct fuse_statx_out` (7.39): STATX's reply.
    StatxOut = "fuse_statx_out", 288 {
        attr_valid: u64,
        attr_valid_nsec: u32,
        flags: u32,
        spare: [u64; 2],
        stat: Statx,
    }
}

wire! {
    /// `struct fuse_mknod_in`: MKNOD; the name follows.
    MknodIn = "fuse_mknod_in", 16 {
        mode: u32,
        rdev: u32,
        umask: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_mkdir_in`: MKDIR; the name follows.
    MkdirIn = "fuse_mkdir_in", 8 {
        mode: u32,
        umask: u32,
    }
}

wire! {
    /// `struct fuse_rename_in`: RENAME; the old and new names follow.
    RenameIn = "fuse_rename_in", 8 {
        newdir: u64,
    }
}

wire! {
    /// `struct fuse_rename2_in`: RENAME2 (`flags`: RENAME_NOREPLACE, RENAME_EXCHANGE); the names follow.
    Rename2In = "fuse_rename2_in", 16 {
        newdir: u64,
        flags: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_link_in`: LINK; the new name follows.
    LinkIn = "fuse_link_in", 8 {
        oldnodeid: u64,
    }
}

wire! {
    /// `struct fuse_setattr_in`: SETATTR: the `FATTR_*` bits in `valid` say which fields count.
    SetattrIn = "fuse_setattr_in", 88 {
        valid: u32,
        padding: u32,
        fh: u64,
        size: u64,
        lock_owner: u64,
        atime: u64,
        mtime: u64,
        ctime: u64,
        atimensec: u32,
        mtimensec: u32,
        ctimensec: u32,
        mode: u32,
        unused4: u32,
        uid: u32,
        gid: u32,
        unused5: u32,
    }
}

wire! {
    /// `struct fuse_open_in`: OPEN, OPENDIR.
    OpenIn = "fuse_open_in", 8 {
        flags: u32,
        open_flags: u32,
    }
}

wire! {
    /// `struct fuse_create_in`: CREATE; the name follows.
    CreateIn = "fuse_create_in", 16 {
        flags: u32,
        mode: u32,
        umask: u32,
        open_flags: u32,
    }
}

wire! {
    /// `struct fuse_open_out`: OPEN, OPENDIR, CREATE (after the entry) reply: the server's handle.
    OpenOut = "fuse_open_out", 16 {
        fh: u64,
        open_flags: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_release_in`: RELEASE, RELEASEDIR.
    ReleaseIn = "fuse_release_in", 24 {
        fh: u64,
        flags: u32,
        release_flags: u32,
        lock_owner: u64,
    }
}

wire! {
    /// `struct fuse_flush_in`: FLUSH (each close of a descriptor).
    FlushIn = "fuse_flush_in", 24 {
        fh: u64,
        unused: u32,
        padding: u32,
        lock_owner: u64,
    }
}

wire! {
    /// `struct fuse_read_in`: READ, READDIR, READDIRPLUS.
    ReadIn = "fuse_read_in", 40 {
        fh: u64,
        offset: u64,
        size: u32,
        read_flags: u32,
        lock_owner: u64,
        flags: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_write_in`: WRITE; `size` bytes follow.
    WriteIn = "fuse_write_in", 40 {
        fh: u64,
        offset: u64,
        size: u32,
        write_flags: u32,
        lock_owner: u64,
        flags: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_write_out`: WRITE reply: bytes written.
    WriteOut = "fuse_write_out", 8 {
        size: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_statfs_out`: STATFS reply.
    StatfsOut = "fuse_statfs_out", 80 {
        st: Kstatfs,
    }
}

wire! {
    /// `struct fuse_fsync_in`: FSYNC, FSYNCDIR (`FUSE_FSYNC_FDATASYNC`).
    FsyncIn = "fuse_fsync_in", 16 {
        fh: u64,
        fsync_flags: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_setxattr_in`: SETXATTR (with FUSE_SETXATTR_EXT); name and value follow.
    SetxattrIn = "fuse_setxattr_in", 16 {
        size: u32,
        flags: u32,
        setxattr_flags: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_getxattr_in`: GETXATTR, LISTXATTR.
    GetxattrIn = "fuse_getxattr_in", 8 {
        size: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_getxattr_out`: GETXATTR, LISTXATTR reply when asked for the size.
    GetxattrOut = "fuse_getxattr_out", 8 {
        size: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_access_in`: ACCESS.
    AccessIn = "fuse_access_in", 8 {
        mask: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_init_in`: INIT (client-bound first request).
    InitIn = "fuse_init_in", 64 {
        major: u32,
        minor: u32,
        max_readahead: u32,
        flags: u32,
        flags2: u32,
        unused: [u32; 11],
    }
}

wire! {
    /// `struct fuse_init_out`: INIT reply: the server's minor, limits and capabilities.
    InitOut = "fuse_init_out", 64 {
        major: u32,
        minor: u32,
        max_readahead: u32,
        flags: u32,
        max_background: u16,
        congestion_threshold: u16,
        max_write: u32,
        time_gran: u32,
        max_pages: u16,
        map_alignment: u16,
        flags2: u32,
        unused: [u32; 7],
    }
}

wire! {
    /// `struct fuse_interrupt_in`: INTERRUPT: the unique of the request interrupted.
    InterruptIn = "fuse_interrupt_in", 8 {
        unique: u64,
    }
}

wire! {
    /// `struct fuse_fallocate_in`: FALLOCATE.
    FallocateIn = "fuse_fallocate_in", 32 {
        fh: u64,
        offset: u64,
        length: u64,
        mode: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_lseek_in`: LSEEK (SEEK_DATA, SEEK_HOLE).
    LseekIn = "fuse_lseek_in", 24 {
        fh: u64,
        offset: u64,
        whence: u32,
        padding: u32,
    }
}

wire! {
    /// `struct fuse_lseek_out`: LSEEK reply.
    LseekOut = "fuse_lseek_out", 8 {
        offset: u64,
    }
}

wire! {
    /// `struct fuse_dirent`: One READDIR entry's fixed part; `namelen` name bytes follow, padded to 8.
    Dirent = "fuse_dirent", 24 {
        ino: u64,
        off: u64,
        namelen: u32,
        r#type: u32,
    }
}

wire! {
    /// `struct fuse_notify_inval_inode_out`: FUSE_NOTIFY_INVAL_INODE: drop cached data of node `ino` in `[off, off + len)` (len < 0: to the end; off < 0: attributes only).
    NotifyInvalInodeOut = "fuse_notify_inval_inode_out", 24 {
        ino: u64,
        off: i64,
        len: i64,
    }
}

wire! {
    /// `struct fuse_notify_inval_entry_out`: FUSE_NOTIFY_INVAL_ENTRY: drop the cached entry `name` (follows, NUL-terminated) of directory `parent`.
    NotifyInvalEntryOut = "fuse_notify_inval_entry_out", 16 {
        parent: u64,
        namelen: u32,
        flags: u32,
    }
}

wire! {
    /// `struct fuse_notify_delete_out`: FUSE_NOTIFY_DELETE: entry `name` of `parent`, naming `child`, was deleted.
    NotifyDeleteOut = "fuse_notify_delete_out", 24 {
        parent: u64,
        child: u64,
        namelen: u32,
        padding: u32,
    }
}

/// `FUSE_NAME_OFFSET`: where a [`Dirent`]'s name starts.
pub(crate) const FUSE_NAME_OFFSET: usize = std::mem::size_of::<Dirent>();

/// `FUSE_DIRENT_ALIGN`: records are padded to 8 bytes.
pub(crate) const fn dirent_align(x: usize) -> usize {
    (x + 7) & !7
}

/// Why a message from the server was refused. The caller counts it per connection and
/// fails the request it answered (if any) with `EIO`; nothing else changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProtoError {
    /// Shorter than an [`OutHeader`].
    Short,
    /// The header's `len` is not the message's length (Linux `fuse_dev_do_write`:
    /// `oh.len != nbytes`, `EINVAL`).
    BadLen,
    /// A reply's `error` outside `(-512, 0]` (Linux since 2019: `oh.error <= -ERESTARTSYS
    /// || oh.error > 0`, `EINVAL`).
    BadError,
    /// An error reply that carries a payload.
    PayloadOnError,
    /// A notification (`unique` 0) with a code uvfs does not take.
    BadNotify,
    /// A payload of the wrong size for what it answers, or a record that overruns it.
    BadPayload,
}

/// A message from the server, checked by [`parse_message`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Message<'a> {
    /// The reply to request `unique` (an interrupt's reply has bit 0 set): its payload,
    /// or the errno the server answered with.
    Reply {
        unique: u64,
        result: Result<&'a [u8], crate::Errno>,
    },
    /// A notification ([`notify`] code) and its payload.
    Notify { code: i32, payload: &'a [u8] },
}

/// Checks one message from the server (`fuse_dev_do_write`'s checks, in its order):
/// length, then notification or reply; for a reply, the error's range and that an error
/// carries nothing. Matching `unique` to a request in flight is the caller's.
///
/// # Errors
/// [`ProtoError`]: the message is malformed; it must not be acted on.
pub(crate) fn parse_message(buf: &[u8]) -> Result<Message<'_>, ProtoError> {
    let (h, payload) = OutHeader::read_from_prefix(buf).map_err(|_| ProtoError::Short)?;
    if h.len as usize != buf.len() {
        return Err(ProtoError::BadLen);
    }
    let payload = &buf[buf.len() - payload.len()..];
    if h.unique == 0 {
        return match h.error {
            notify::INVAL_INODE | notify::INVAL_ENTRY | notify::DELETE => Ok(Message::Notify {
                code: h.error,
                payload,
            }),
            _ => Err(ProtoError::BadNotify),
        };
    }
    if h.error <= -512 || h.error > 0 {
        return Err(ProtoError::BadError);
    }
    if h.error < 0 {
        if !payload.is_empty() {
            return Err(ProtoError::PayloadOnError);
        }
        let e = crate::Errno::from_raw(-h.error).ok_or(ProtoError::BadError)?;
        return Ok(Message::Reply {
            unique: h.unique,
            result: Err(e),
        });
    }
    Ok(Message::Reply {
        unique: h.unique,
        result: Ok(payload),
    })
}

/// A reply payload that must be exactly one `T` (e.g. [`AttrOut`] for GETATTR).
///
/// # Errors
/// [`ProtoError::BadPayload`] for any other length.
pub(crate) fn exact<T: Wire>(payload: &[u8]) -> Result<T, ProtoError> {
    T::read_from_bytes(payload).map_err(|_| ProtoError::BadPayload)
}

/// One READDIR record: `(ino, next offset, d_type, name)`.
pub(crate) type DirentRec<'a> = (u64, u64, u32, &'a [u8]);

/// The records of a READDIR reply, as Linux's `fuse_parse_dirfile` reads them: records
/// while at least a [`Dirent`] is left; a record whose (padded) length runs past the end
/// ends the listing there, keeping those before it; a name of 0 or more than 255 bytes, or
/// with a `/`, is an error. A NUL in a name is an error too (stricter than Linux, which
/// lets it through: no path can name such an entry).
///
/// # Errors
/// [`ProtoError::BadPayload`] for a bad name length or a bad name.
pub(crate) fn dirents(mut buf: &[u8]) -> Result<Vec<DirentRec<'_>>, ProtoError> {
    let mut out = vec![];
    while buf.len() >= FUSE_NAME_OFFSET {
        let (d, rest) = Dirent::read_from_prefix(buf).map_err(|_| ProtoError::BadPayload)?;
        let n = d.namelen as usize;
        if n == 0 || n > 255 {
            return Err(ProtoError::BadPayload);
        }
        let rec = dirent_align(FUSE_NAME_OFFSET + n);
        if rec > buf.len() {
            break;
        }
        let name = &rest[..n];
        if name.iter().any(|&b| b == b'/' || b == 0) {
            return Err(ProtoError::BadPayload);
        }
        out.push((d.ino, d.off, d.r#type, name));
        buf = &buf[rec..];
    }
    Ok(out)
}

/// One READDIRPLUS record (`struct fuse_direntplus`): the entry (when its `nodeid` is not
/// 0, a lookup the server counted, which the client must link or forget) and the dirent.
pub(crate) type DirentPlusRec<'a> = (EntryOut, DirentRec<'a>);

/// `FUSE_NAME_OFFSET_DIRENTPLUS`: where a READDIRPLUS record's name starts.
pub(crate) const FUSE_NAME_OFFSET_DIRENTPLUS: usize =
    std::mem::size_of::<EntryOut>() + FUSE_NAME_OFFSET;

/// The records of a READDIRPLUS reply, as Linux's `parse_dirplusfile` reads them: records
/// while at least [`FUSE_NAME_OFFSET_DIRENTPLUS`] bytes are left; a record whose (padded)
/// length runs past the end ends the listing there; a name of 0 or more than 255 bytes, or
/// with a `/` or a NUL (as [`dirents`]), is an error. Returns the records before the
/// first bad one, and the error if there was one: the lookups the server counted for
/// those records must still be given back.
pub(crate) fn direntplus(mut buf: &[u8]) -> (Vec<DirentPlusRec<'_>>, Option<ProtoError>) {
    let mut out = vec![];
    while buf.len() >= FUSE_NAME_OFFSET_DIRENTPLUS {
        let Ok((e, rest)) = EntryOut::read_from_prefix(buf) else {
            return (out, Some(ProtoError::BadPayload));
        };
        let Ok((d, rest)) = Dirent::read_from_prefix(rest) else {
            return (out, Some(ProtoError::BadPayload));
        };
        let n = d.namelen as usize;
        if n == 0 || n > 255 {
            return (out, Some(ProtoError::BadPayload));
        }
        let rec = dirent_align(FUSE_NAME_OFFSET_DIRENTPLUS + n);
        if rec > buf.len() {
            break;
        }
        let name = &rest[..n];
        if name.iter().any(|&b| b == b'/' || b == 0) {
            return (out, Some(ProtoError::BadPayload));
        }
        out.push((e, (d.ino, d.off, d.r#type, name)));
        buf = &buf[rec..];
    }
    (out, None)
}

#[cfg(feature = "fuse")]
pub(crate) mod sqe;
#[cfg(all(test, not(uvfs_loom)))]
mod tests;

/// FUSE over io_uring (protocol 7.42, Linux 6.14, fs/fuse/dev_uring.c): the `cmd_op` of an
/// `IORING_OP_URING_CMD` on `/dev/fuse` (`enum fuse_uring_cmd`).
pub(crate) mod uring {
    /// `FUSE_IO_URING_CMD_REGISTER`: give the kernel one entry's buffers and fetch a
    /// request into them.
    pub(crate) const FUSE_IO_URING_CMD_REGISTER: u32 = 1;
    /// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: the reply is in the entry's buffers; fetch the
    /// next request into them.
    pub(crate) const FUSE_IO_URING_CMD_COMMIT_AND_FETCH: u32 = 2;
    /// `FUSE_URING_IN_OUT_HEADER_SZ`: room for `fuse_in_header` / `fuse_out_header`.
    pub(crate) const IN_OUT_HEADER_SZ: usize = 128;
    /// `FUSE_URING_OP_IN_OUT_SZ`: room for the request's first argument, its fixed
    /// per-opcode struct (`fuse_write_in`, ...; empty for ops whose first argument is a
    /// name, `fuse_set_zero_arg0`).
    pub(crate) const OP_IN_OUT_SZ: usize = 128;
}

wire! {
    /// `struct fuse_uring_ent_in_out`: the last part of an entry's header buffer, written
    /// by the kernel with a request and by the server with its reply.
    UringEntInOut = "fuse_uring_ent_in_out", 32 {
        flags: u64,
        commit_id: u64,
        payload_sz: u32,
        padding: u32,
        reserved: u64,
    }
}

wire! {
    /// `struct fuse_uring_cmd_req`: the command in the 80-byte area of a 128-byte SQE.
    UringCmdReq = "fuse_uring_cmd_req", 24 {
        flags: u64,
        commit_id: u64,
        qid: u16,
        padding: [u8; 6],
    }
}

/// `struct fuse_uring_req_header`: one entry's header buffer (`iov[0]` of its REGISTER):
/// `in_out` holds the `fuse_in_header` of a request and then the `fuse_out_header` of its
/// reply, `op_in` the request's first argument, `ring_ent_in_out` the sizes and commit id.
/// (Not in the host's `<linux/fuse.h>` of protocol 7.38: its layout is asserted here from
/// include/uapi/linux/fuse.h of Linux 6.14.)
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct UringReqHeader {
    pub(crate) in_out: [u8; uring::IN_OUT_HEADER_SZ],
    pub(crate) op_in: [u8; uring::OP_IN_OUT_SZ],
    pub(crate) ring_ent_in_out: UringEntInOut,
}
crate::const_assert!(std::mem::size_of::<UringReqHeader>() == 288);
crate::const_assert!(std::mem::offset_of!(UringReqHeader, ring_ent_in_out) == 256);
