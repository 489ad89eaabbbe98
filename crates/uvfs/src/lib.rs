//! uvfs: a userspace file layer that scales with cores.
//!
//! The Linux file layer (open files, descriptor tables, path walk, tmpfs) as a library: a
//! [`Task`] offers syscall-shaped methods (`openat`, `read`, `dup2`, `renameat`, ...) that
//! return what Linux returns, errno included, over an in-memory tmpfs ([`mount()`]).
//! Operations on objects no other thread touches write no shared cache line: descriptor
//! lookup takes no lock ([`FdTable::fget`]) and, from a `Task`, no reference either (a
//! private table's owner borrows the file outright, a shared table's users through borrow
//! slots of their own, [`sync::borrow`]); a private table's owner writes it without its
//! lock; reference counts are one atomic add ([`sync::file_ref::FileRef`]); path walks take
//! no references, and there is no global lock or list on open/close.
//!
//! # Example
//! ```
//! use uvfs::{tmpfs, AtFlags, Errno, Fd, OpenFlags, Task};
//!
//! fn main() -> Result<(), Errno> {
//!     let mnt = tmpfs::mount(Default::default());
//!     let task = Task::init(&mnt); // pid 1, root, cwd "/", umask 022
//!     let fd = task.open("/hello", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)?;
//!     task.write(fd, b"hi")?;
//!     assert_eq!(task.fstatat(Fd::AT_FDCWD, "/hello", AtFlags::empty())?.st_size, 2);
//!     assert_eq!(task.open("/missing", OpenFlags::RDONLY, 0), Err(Errno::ENOENT));
//!     let child = task.fork(); // copies the fd table: same open file, shared offset
//!     assert_eq!(child.lseek(fd, 0, uvfs::types::SEEK_CUR)?, 2);
//!     Ok(())
//! }
//! ```
//!
//! The same through the [`std::fs`]-shaped facade ([`Dir`]; errors are `std::io::Error`s
//! carrying the errno):
//! ```
//! let mnt = uvfs::tmpfs::mount(Default::default());
//! let task = uvfs::Task::init(&mnt);
//! let root = task.root_dir()?;
//! root.create_dir_all("src/bin")?;
//! root.write("src/bin/main.rs", "fn main() {}")?;
//! assert_eq!(root.read_to_string("src/bin/main.rs")?, "fn main() {}");
//! let names: Vec<_> = root.read_dir("src")?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
//! assert_eq!(names, ["bin"]);
//! assert_eq!(root.read("../etc/passwd").unwrap_err().raw_os_error(), Some(18)); // EXDEV: confined
//! root.remove_dir_all("src")?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Crate map (uvfs type -> Linux name)
//! | uvfs | Linux |
//! |---|---|
//! | [`Errno`], [`Result`] | `-E*` returns |
//! | [`sync::file_ref::FileRef`] | `file_ref_t` (include/linux/file_ref.h) |
//! | [`sync::borrow::BorrowSlots`] | none (Linux's `fget` counts): hazard pointers with arc-swap's debt payment |
//! | `sync::audit` (feature `audit`) | none: COMMUTER's conflict check (SOSP 2013) as a recording build of `sync`'s atomics and locks, for `uvfs bench --audit` (docs/audit.md) |
//! | [`File`], [`FileHandle`] | `struct file`, `struct file *` (fs/file_table.c) |
//! | [`FdTable`] | `struct files_struct` + `struct fdtable` (fs/file.c) |
//! | [`Task`] | `task_struct` (`files`, `fs`, `cred`) |
//! | [`Inode`] (defined in fs.rs beside the seam, as in include/linux/fs.h; methods in inode.rs), [`Dentry`], [`SuperBlock`], [`Mount`] | same names (fs/inode.c, fs/dcache.c, fs/super.c, fs/namespace.c) |
//! | [`fs::FileSystem`], [`fs::InodeOps`], [`fs::FileOps`] (fs.rs, the seam) | `super_operations`, `inode_operations`, `file_operations` (include/linux/fs.h) |
//! | [`tmpfs`] (fs/tmpfs/: inodes, accounting, page store) | mm/shmem.c |
//! | `namei::Nameidata` | `struct nameidata` (fs/namei.c) |
//! | [`AtDir`] | a `*at` call's `dirfd`, or a kernel caller's `struct path` |
//! | [`locks::FileLockContext`], [`Flock`], [`LockCmd`], [`Interrupter`] | `struct file_lock_context`, `struct flock`, `F_*LK*`, a signal to a blocked task (fs/locks.c) |
//! | [`hostfs::mount`] | a host directory as a file system, confined to it (gVisor's gofer idea) |
//! | `fuse::UvfsFuse` (feature `fuse`) | a FUSE server (libfuse's `fuse_lowlevel_ops`) |
//! | [`variant`]: `Variant`, `Uvfs`, the lessons' "before" types | the seed patches' before/after (ablation only) |
//! | [`hosttree`]: [`Dir::import_host`], [`Dir::export_host`] | none: `cp -a` between a host directory and a `Dir` (modes, owners, times, symlinks, hard links, holes) |
//! | [`Dir`], [`dir::OpenOptions`], [`Metadata`], [`dir::ReadDir`], [`dir::WalkDir`] (dir.rs) | none: a `std::fs`/cap-std-shaped facade over a task's calls, confined beneath one directory (`openat2` `RESOLVE_BENEATH`) |
//!
//! # Which file holds which syscall family (methods on [`Task`])
//! | file | calls |
//! |---|---|
//! | open.rs | `openat`, `openat2`, `open`, `creat`, `O_TMPFILE`, `dentry_open`, `close`, `fcntl` |
//! | fdtable.rs, task.rs | `dup`, `dup2`, `dup3`, `close_range`, `fork`, `exec`, rlimits, `umask` |
//! | read_write.rs | `read`, `write`, `pread`, `pwrite`, `lseek`, `ftruncate`, `fallocate` |
//! | readdir.rs | `getdents64` |
//! | namei/ | the walk (with mount crossing); `mkdirat`, `mknodat`, `symlinkat`, `readlinkat`, `unlinkat`, `rmdir`, `renameat2`, `linkat`, `chdir`, `fchdir`, `chroot`, `getcwd` |
//! | stat.rs | `fstat`, `fstatat`, `statx`, `futimens`, `utimensat` |
//! | attr.rs | `fchmod(at)`, `fchown(at)`, `truncate`, `faccessat2` |
//! | statfs.rs | `statfs`, `fstatfs`, `fsync`, `fdatasync` |
//! | xattr.rs | `getxattr`, `setxattr`, `listxattr`, `removexattr` and their `l`/`f`/`at` forms |
//! | namespace.rs | `mount` (a new file system, `mount_bind`, `mount_setflags`), `umount2`, `mountinfo` |
//! | locks.rs | `fcntl` record locks (`F_GETLK`, `F_SETLK`, `F_SETLKW`, `F_OFD_*`: [`Task::fcntl_lock`]), `flock` |
//!
//! # Global lock order
//! A namespace's lock (mount and umount only) -> a mount point's parent directory lock, and
//! -> a mount's count lock (a leaf, also taken alone by the last put of a detached mount).
//! `SuperBlock::s_rename_lock` -> directory locks (ancestor first, else by address; in one
//! directory a name's bucket lock alone, or every bucket lock in index order, dcache.rs) ->
//! a regular file's data lock -> an inode's attribute lock. `FdTable::file_lock`,
//! `FsStruct::lock` and a `File`'s `f_pos_lock` (taken before the data lock) are otherwise
//! leaves, as is a tmpfs inode's extended-attribute lock (taken alone, or under the data
//! lock by a write's capability check, `Inode::kill_priv`). File locks
//! (locks.rs): an interrupter's slot lock -> an inode's lock-context lock -> the global
//! deadlock-detection table (taken only by lock requests that must sleep); none under
//! `file_lock`. No lock is global but that table;
//! none is taken on `fget`. hostfs's locks (per-inode location, data descriptor, the
//! mount's identity map and descriptor cache) are leaves below the attribute lock
//! (fs/hostfs/mod.rs). The FUSE server's node-table shard
//! locks are leaves held only around its own table (never across a call into uvfs); its
//! handle registry lock is taken before a table's `file_lock`, only at a worker's first use
//! of a table (not per request). (The lesson-4 ablation variants in
//! [`variant`] add a global `files_lock`, a leaf taken at open and at last close; the default
//! [`variant::Uvfs`] has none.)

#![warn(missing_docs, missing_debug_implementations, unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod attr;
pub mod cred;
mod dcache;
pub mod dentry;
pub mod dir;
pub mod errno;
pub mod fdtable;
pub mod file;
pub mod fs;
pub mod fuse;
pub mod hosttree;
pub mod inode;
pub mod io;
pub mod locks;
pub mod mount;
pub mod namei;
pub mod namespace;
pub mod open;
pub mod read_write;
pub mod readdir;
pub mod stat;
pub mod statfs;
pub mod super_block;
pub mod sync;
pub mod task;
mod time;
pub mod types;
pub mod variant;
pub mod xattr;

#[cfg(all(test, uvfs_loom))]
mod tests;

pub use cred::{Caps, Cred};
pub use dentry::Dentry;
pub use dir::{Dir, Metadata, OpenOptions, Permissions};
pub use errno::{Errno, Result};
pub use fdtable::FdTable;
pub use file::{File, FileHandle};
pub use fs::tmpfs::mount;
pub use fs::tmpfs::TmpfsOptions;
pub use fuse::client::Interrupter;
pub use inode::Inode;
pub use io::{OpenFile, OwnedFd};
pub use locks::{Flock, LockCmd};
pub use mount::{Mount, MountFlags, Path, UmountFlags};
pub use namei::AtDir;
pub use namespace::MountInfo;
pub use open::{Fcntl, OpenHow, ResolveFlags};
pub use readdir::{parse_dirents, DirEntry};
pub use stat::Statx;
pub use statfs::StatFs;
pub use super_block::SuperBlock;
pub use task::Task;
pub use types::{AsPath, AtFlags, Fd, OpenFlags, RenameFlags, Stat, Timespec};

pub use fs::hostfs;
pub use fs::tmpfs;
