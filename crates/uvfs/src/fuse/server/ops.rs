//! The server's operations, one per FUSE request, in wire-neutral form: each takes the
//! request's arguments as plain values and returns what the reply carries (the
//! `fuse/abi` structs), or the errno. Both transports call these and only these: fuser's
//! [`Filesystem`](fuser::Filesystem) callbacks (`fuser_fs.rs`) and uvfs's own decoder of
//! request bytes (`dispatch.rs`), so the two cannot drift apart.
//!
//! Linux analogue: libfuse's `fuse_lowlevel_ops` as `passthrough_ll.c` implements them.

use std::sync::Arc;

use super::{
    abi, component, fh_make, fopen_flags, valid, xattr_answer, Caller, Permissions, UvfsFuse,
    Worker, Xattr, FMODE_EXEC, XATTR_AT,
};
use crate::cred::Cred;
use crate::dentry::Dentry;
use crate::errno::{Errno, Result};
use crate::namei::AtDir;
use crate::readdir::parse_dirents;
use crate::task::Task;
use crate::types::{self, AtFlags, OpenFlags, RenameFlags, Timespec};

use crate::fuse::abi::write_flags::{FUSE_WRITE_CACHE, FUSE_WRITE_KILL_SUIDGID};

/// What a SETATTR changes (`struct fuse_setattr_in` decoded; `None`/`UTIME_OMIT`: left).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SetAttr {
    /// New mode bits (`FATTR_MODE`).
    pub(super) mode: Option<u32>,
    /// New owner (`FATTR_UID`).
    pub(super) uid: Option<u32>,
    /// New group (`FATTR_GID`).
    pub(super) gid: Option<u32>,
    /// New size in bytes (`FATTR_SIZE`).
    pub(super) size: Option<u64>,
    /// New access time as `utimensat` takes it (`UTIME_NOW`, `UTIME_OMIT` or a time).
    pub(super) atime: Timespec,
    /// New modification time, as `atime`.
    pub(super) mtime: Timespec,
    /// The open file the change goes through (`FATTR_FH`: an `ftruncate`).
    pub(super) fh: Option<u64>,
}

/// One directory entry of a READDIR/READDIRPLUS reply.
#[derive(Debug)]
pub(super) struct DirEntryOut<'a> {
    /// Inode number as the kernel sees it.
    pub(super) ino: u64,
    /// The cookie of the entry after this one.
    pub(super) off: u64,
    /// `DT_*` type.
    pub(super) d_type: u32,
    /// The name.
    pub(super) name: &'a [u8],
}

impl UvfsFuse {
    /// A `fuse_entry_out` for `attr` with this server's validity periods.
    fn entry_out(&self, attr: abi::Attr) -> abi::EntryOut {
        let (es, en) = valid(self.entry_ttl());
        let (as_, an) = valid(self.opts.timeout);
        abi::EntryOut {
            nodeid: attr.ino,
            generation: 0,
            entry_valid: es,
            attr_valid: as_,
            entry_valid_nsec: en,
            attr_valid_nsec: an,
            attr,
        }
    }

    /// A `fuse_attr_out` for `attr` with this server's validity period.
    fn attr_out(&self, attr: abi::Attr) -> abi::AttrOut {
        let (s, n) = valid(self.opts.timeout);
        abi::AttrOut {
            attr_valid: s,
            attr_valid_nsec: n,
            dummy: 0,
            attr,
        }
    }

    /// The INIT capabilities uvfs wants (`FUSE_*` bits, `flags2` << 32), beyond fuser's
    /// defaults (`FUSE_ASYNC_READ`, `FUSE_BIG_WRITES`, `FUSE_MAX_PAGES`); each is used only
    /// where the kernel offers it.
    pub(super) fn init_wants(&self) -> u64 {
        use abi::init as F;
        let mut wants = 0;
        // readdirplus when the kernel finds it useful (first read, after lookups); not when
        // uvfs checks permissions: its entries would be looked up with the lister's
        // credentials, and a directory that may be read but not searched must still list.
        if self.opts.permissions == Permissions::Kernel {
            wants |= F::FUSE_DO_READDIRPLUS | F::FUSE_READDIRPLUS_AUTO;
        } else {
            // uvfs drops set-ID bits itself on write, truncate and chown, with the writer's
            // rights (`kill_suid`); otherwise the kernel would send a SETATTR of the mode as
            // the writer, which uvfs refuses (EPERM) to a writer who does not own the file,
            // failing the write. (With kernel checks the server's all-caps SETATTR does it.)
            wants |= F::FUSE_HANDLE_KILLPRIV;
        }
        // uvfs drops set-ID bits and file capabilities at write, truncation and chown
        // itself, in either mode (tmpfs's rules; with kernel checks, for a caller without
        // CAP_FSETID, `kill_suid_as_caller`). So the kernel's super block is SB_NOSEC: no
        // GETXATTR of `security.capability` before every write (without it, measured on
        // Linux 6.18: 100 4-KiB writes of `dd` were 100 GETXATTR and 100 WRITE).
        wants |= F::FUSE_HANDLE_KILLPRIV_V2;
        // lookups and readdirs in one directory in parallel: uvfs's are lock-free;
        // open(O_TRUNC) in one request, as `openat` does it; symlink targets never change:
        // the kernel may cache them.
        // The rings, when this connection is served by `serve_uring` (ring.rs).
        if self.opts.over_io_uring {
            wants |= F::FUSE_OVER_IO_URING;
        }
        wants | F::FUSE_PARALLEL_DIROPS | F::FUSE_ATOMIC_O_TRUNC | F::FUSE_CACHE_SYMLINKS
    }

    /// LOOKUP: `name` in `parent`, counting the lookup. A missing name is answered with a
    /// negative entry (nodeid 0) that the kernel caches for the timeout (libfuse's
    /// `negative_timeout`; `passthrough_ll` answers `ENOENT`, which is not cached), so that
    /// repeated lookups of a missing name (a `$PATH` search, a build's probes) stay in the
    /// kernel; creating the name through the mount replaces the kernel's negative dentry.
    ///
    /// # Errors
    /// `ESTALE` (unknown `parent`), `EINVAL` (bad name), the walk's (`ENOENT` when entries
    /// are not cached, `EACCES`, `ENOTDIR`).
    pub(super) fn op_lookup(&self, c: &Caller, parent: u64, name: &[u8]) -> Result<abi::EntryOut> {
        let p = self.node(parent)?;
        let name = component(name)?;
        match self.lookup_entry(c, &p, name) {
            Err(Errno::ENOENT) if !self.entry_ttl().is_zero() => {
                let (s, n) = valid(self.entry_ttl());
                Ok(abi::EntryOut {
                    entry_valid: s,
                    entry_valid_nsec: n,
                    attr_valid: s,
                    attr_valid_nsec: n,
                    ..Default::default()
                })
            }
            r => r,
        }
    }

    /// `name` in `parent` as an entry reply, counting the lookup.
    fn lookup_entry(&self, c: &Caller, parent: &Arc<Dentry>, name: &[u8]) -> Result<abi::EntryOut> {
        let attr = self.with(c, |t, _| {
            let d = Self::lookup_one(t, parent, name)?;
            let attr = self.attr_of(t, &d)?;
            self.remember(&d);
            Ok(attr)
        })?;
        Ok(self.entry_out(attr))
    }

    /// Runs a node-creating call `f(task, parent, name)` and answers with the new entry.
    fn create_entry(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        f: impl FnOnce(&Task, &Arc<Dentry>, &[u8]) -> Result<()>,
    ) -> Result<abi::EntryOut> {
        let p = self.node(parent)?;
        let name = component(name)?;
        self.with(c, |t, _| f(t, &p, name))?;
        self.lookup_entry(c, &p, name)
    }

    /// FORGET: the kernel let go of `nlookup` lookups of node `ino`.
    pub(super) fn op_forget(&self, ino: u64, nlookup: u64) {
        self.forget_node(ino, nlookup);
    }

    /// GETATTR of node `ino`, through open file `fh` when the kernel names one (`fstat`).
    ///
    /// # Errors
    /// `ESTALE` (unknown node), `EBADF` (forged handle), `fstatat`'s.
    pub(super) fn op_getattr(&self, c: &Caller, ino: u64, fh: Option<u64>) -> Result<abi::AttrOut> {
        let attr = match fh {
            Some(fh) => self.with_fh(c, fh, false, |t, fd, _| Ok(self.file_attr(&t.fstat(fd)?)))?,
            None => {
                let d = self.node(ino)?;
                self.with(c, |t, _| self.attr_of(t, &d))?
            }
        };
        Ok(self.attr_out(attr))
    }

    /// STATX of node `ino` (through handle `fh` when given): GETATTR's attributes and the
    /// birth time, as `statx(2)` gives them on tmpfs. Linux 6.6+ sends it for a `statx`
    /// that asks for more than the basic stats (`fuse_do_statx`: `STATX_BTIME`) and keeps
    /// what the reply's `mask` says; answered `ENOSYS`, the mount had no birth time.
    ///
    /// # Errors
    /// `ESTALE`, `EBADF` (a forged handle), `statx`'s.
    pub(super) fn op_statx(&self, c: &Caller, ino: u64, fh: Option<u64>) -> Result<abi::StatxOut> {
        use crate::stat::{STATX_BASIC_STATS, STATX_BTIME};
        let (a, x) = match fh {
            Some(fh) => self.with_fh(c, fh, false, |t, fd, _| {
                let a = self.file_attr(&t.fstat(fd)?);
                Ok((a, t.statx(fd, "", AtFlags::EMPTY_PATH, STATX_BTIME)?))
            })?,
            None => {
                let d = self.node(ino)?;
                self.with(c, |t, _| {
                    let a = self.attr_of(t, &d)?;
                    let x = t.statx(&*d, "", XATTR_AT, STATX_BTIME)?;
                    Ok((a, x))
                })?
            }
        };
        let time = |sec: u64, nsec: u32| abi::SxTime {
            tv_sec: sec as i64,
            tv_nsec: nsec,
            reserved: 0,
        };
        // `new_decode_dev` of the 32-bit form GETATTR carries.
        let (major, minor) = (
            (a.rdev & 0xfff00) >> 8,
            (a.rdev & 0xff) | ((a.rdev >> 12) & 0xfff00),
        );
        let (s, n) = valid(self.opts.timeout);
        Ok(abi::StatxOut {
            attr_valid: s,
            attr_valid_nsec: n,
            stat: abi::Statx {
                mask: STATX_BASIC_STATS | (x.stx_mask & STATX_BTIME),
                blksize: a.blksize,
                nlink: a.nlink,
                uid: a.uid,
                gid: a.gid,
                // The file type and permission bits: 16 bits, as `st_mode` uses them.
                mode: a.mode as u16,
                ino: a.ino,
                size: a.size,
                blocks: a.blocks,
                atime: time(a.atime, a.atimensec),
                btime: abi::SxTime {
                    tv_sec: x.stx_btime.tv_sec,
                    tv_nsec: x.stx_btime.tv_nsec,
                    reserved: 0,
                },
                ctime: time(a.ctime, a.ctimensec),
                mtime: time(a.mtime, a.mtimensec),
                rdev_major: major,
                rdev_minor: minor,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// SETATTR of node `ino`: `fchownat`, `fchmodat`, `truncate`/`ftruncate`, `utimensat`
    /// in `notify_change`'s order; the attributes after.
    ///
    /// # Errors
    /// `ESTALE`, `EFBIG` (size past `i64`), each call's.
    pub(super) fn op_setattr(&self, c: &Caller, ino: u64, a: SetAttr) -> Result<abi::AttrOut> {
        let d = self.node(ino)?;
        let empty = AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW;
        let size = a
            .size
            .map(|len| i64::try_from(len).map_err(|_| Errno::EFBIG))
            .transpose()?;
        let times = a.atime.tv_nsec != Timespec::UTIME_OMIT_NSEC
            || a.mtime.tv_nsec != Timespec::UTIME_OMIT_NSEC;
        // `notify_change`'s order: owner (which drops set-ID bits), mode, size, times.
        // A SETATTR with nothing to set is the kernel's for chown(-1, -1), and for the
        // privilege drop before a write or `fallocate` by a caller without CAP_FSETID
        // (`__remove_privs`, whose mode `FUSE_HANDLE_KILLPRIV(_V2)` leaves to the
        // server). Turned into chown(-1, -1) as the caller it would fail for a writer who
        // does not own the file (mount_lifecycle's uvfs_permission_mode_matches_tmpfs);
        // instead the bits go now, so that this reply's attributes, which the
        // kernel caches, show them gone: with the caller's own rule (the same for
        // chown(-1, -1) and a write), or, for root, whose writes send none, as chown.
        let nothing = a.mode.is_none() && a.uid.is_none() && a.gid.is_none() && size.is_none();
        // (A client without FUSE_HANDLE_KILLPRIV_V2 computes the drop itself: an empty
        // SETATTR from it is one it decided needs none.)
        if nothing && !times && super::setid_reg(d.inode()) && self.killpriv_v2() {
            if c.uid == 0 {
                self.with(c, |t, _| t.fchownat(&*d, "", u32::MAX, u32::MAX, empty))?;
            } else {
                self.kill_suid_empty_setattr(c, d.inode())?;
            }
        }
        let owner_and_mode = |t: &Task| -> Result<()> {
            if a.uid.is_some() || a.gid.is_some() {
                let (u, g) = (a.uid.unwrap_or(u32::MAX), a.gid.unwrap_or(u32::MAX));
                t.fchownat(&*d, "", u, g, empty)?;
            }
            if let Some(m) = a.mode {
                t.fchmodat(&*d, "", m & 0o7777, empty)?;
            }
            Ok(())
        };
        let times_and_attr = |t: &Task| -> Result<abi::Attr> {
            if times {
                t.utimensat(&*d, "", Some(&[a.atime, a.mtime]), empty)?;
            }
            self.attr_of(t, &d)
        };
        if size.is_some() {
            // `FATTR_KILL_SUIDGID` of a truncation (which fuser does not pass on): the
            // caller's own credentials decide, as for `open(O_TRUNC)`. (Without it the
            // client sends the mode itself.)
            self.kill_suid_as_caller_if(false, c, d.inode())?;
        }
        let attr = match (size, a.fh) {
            // ftruncate: on the handle's table (the kernel checked it is open for
            // writing).
            (Some(len), Some(fh)) => {
                self.with(c, |t, _| owner_and_mode(t))?;
                self.with_fh(c, fh, true, |t, fd, _| t.ftruncate(fd, len))?;
                self.with(c, |t, _| times_and_attr(t))?
            }
            // Everything else in one call (one credential setup).
            (size, _) => self.with(c, |t, _| {
                owner_and_mode(t)?;
                if let Some(len) = size {
                    t.truncate_at(AtDir::Dentry(&d), b"", len)?;
                }
                times_and_attr(t)
            })?,
        };
        Ok(self.attr_out(attr))
    }

    /// READLINK of node `ino`: the target.
    ///
    /// # Errors
    /// `ESTALE`, `readlinkat`'s (`EINVAL` for a non-symlink).
    pub(super) fn op_readlink(&self, c: &Caller, ino: u64) -> Result<Vec<u8>> {
        let d = self.node(ino)?;
        self.with(c, |t, buf| {
            buf.resize(crate::namei::PATH_MAX + 1, 0);
            let n = t.readlinkat(&*d, "", buf)?;
            Ok(buf[..n].to_vec())
        })
    }

    /// MKNOD: `mknodat(parent, name, mode, rdev)`, answered with the new entry.
    ///
    /// # Errors
    /// `ESTALE`, `EINVAL`, `mknodat`'s.
    pub(super) fn op_mknod(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
    ) -> Result<abi::EntryOut> {
        self.create_entry(c, parent, name, |t, p, name| {
            t.mknodat(p, name, mode, u64::from(rdev))
        })
    }

    /// MKDIR: `mkdirat(parent, name, mode)`, answered with the new entry.
    ///
    /// # Errors
    /// `ESTALE`, `EINVAL`, `mkdirat`'s.
    pub(super) fn op_mkdir(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
    ) -> Result<abi::EntryOut> {
        self.create_entry(c, parent, name, |t, p, name| t.mkdirat(p, name, mode))
    }

    /// SYMLINK: `symlinkat(target, parent, name)`, answered with the new entry.
    ///
    /// # Errors
    /// `ESTALE`, `EINVAL`, `symlinkat`'s.
    pub(super) fn op_symlink(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        target: &[u8],
    ) -> Result<abi::EntryOut> {
        self.create_entry(c, parent, name, |t, p, name| t.symlinkat(target, p, name))
    }

    /// UNLINK (`dir` false) or RMDIR (`dir` true) of `name` in `parent`.
    ///
    /// # Errors
    /// `ESTALE`, `EINVAL`, `unlinkat`'s.
    pub(super) fn op_unlink(&self, c: &Caller, parent: u64, name: &[u8], dir: bool) -> Result<()> {
        let p = self.node(parent)?;
        let name = component(name)?;
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        self.with(c, |t, _| t.unlinkat(&*p, name, flags))
    }

    /// RENAME/RENAME2: `renameat2` with `flags` (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    ///
    /// # Errors
    /// `ESTALE`, `EINVAL` (bad name or unknown flag), `renameat2`'s.
    pub(super) fn op_rename(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        let (p, np) = (self.node(parent)?, self.node(newparent)?);
        let (name, newname) = (component(name)?, component(newname)?);
        let flags = RenameFlags::from_bits(flags).ok_or(Errno::EINVAL)?;
        self.with(c, |t, _| t.renameat2(&*p, name, &*np, newname, flags))
    }

    /// LINK: a new name `newname` in `newparent` for node `ino`, answered with its entry.
    ///
    /// # Errors
    /// `ESTALE`, `EINVAL`, `linkat`'s.
    pub(super) fn op_link(
        &self,
        c: &Caller,
        ino: u64,
        newparent: u64,
        newname: &[u8],
    ) -> Result<abi::EntryOut> {
        let (d, np) = (self.node(ino)?, self.node(newparent)?);
        let newname = component(newname)?;
        self.with(c, |t, _| {
            t.linkat(&*d, "", &*np, newname, AtFlags::EMPTY_PATH)
        })?;
        self.lookup_entry(c, &np, newname)
    }

    /// OPEN (and OPENDIR, with `O_DIRECTORY` in `flags`) of node `ino`: a handle.
    ///
    /// # Errors
    /// `ESTALE`, `EMFILE`/`ENFILE` (handle limits), `dentry_open`'s.
    pub(super) fn op_open(&self, c: &Caller, ino: u64, flags: u32) -> Result<abi::OpenOut> {
        let d = self.node(ino)?;
        let (table, fd) = self.with_opener(c, |t, opener| {
            let flags = OpenFlags::from_bits_retain(flags);
            if flags.bits() & FMODE_EXEC != 0 {
                // execve's open: without `default_permissions` the kernel checked only
                // that some execute bit is set (`fuse_permission`); uvfs checks MAY_EXEC
                // alone for this caller, as `do_open_execat` does (a 0711 program runs).
                return opener.open(t, || t.dentry_open_exec(&d));
            }
            opener.open(t, || {
                let f = t.dentry_open(&d, flags)?;
                if flags.contains(OpenFlags::TRUNC) {
                    self.kill_suid_as_caller(c, d.inode())?;
                }
                Ok(f)
            })
        })?;
        Ok(abi::OpenOut {
            fh: fh_make(table, fd),
            open_flags: fopen_flags(OpenFlags::from_bits_retain(flags)),
            padding: 0,
        })
    }

    /// READ of `size` bytes at `offset` from handle `fh`: `out` gets the bytes read (from the
    /// worker's buffer, inside the call).
    ///
    /// # Errors
    /// `EBADF`, `EINVAL` (offset past `i64`), `pread`'s.
    pub(super) fn op_read(
        &self,
        c: &Caller,
        fh: u64,
        offset: u64,
        size: u32,
        out: impl FnOnce(&[u8]),
    ) -> Result<()> {
        self.with_fh(c, fh, false, |t, fd, buf| {
            let off = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
            buf.resize(size as usize, 0);
            let n = t.pread(fd, &mut buf[..size as usize], off)?;
            out(&buf[..n]);
            Ok(())
        })
    }

    /// WRITE of `data` at `offset` through handle `fh`, with the descriptor's flags as the
    /// kernel sends them now (`flags`) and `write_flags` ([`FUSE_WRITE_CACHE`]): bytes
    /// written.
    ///
    /// # Errors
    /// `EBADF`, `EFBIG`, `ENOSPC`, the file system's.
    pub(super) fn op_write(
        &self,
        c: &Caller,
        fh: u64,
        offset: u64,
        data: &[u8],
        write_flags: u32,
        flags: u32,
    ) -> Result<u32> {
        let cache = write_flags & FUSE_WRITE_CACHE != 0;
        let n = self.with_fh(c, fh, true, |t, fd, _| {
            let off = i64::try_from(offset).map_err(|_| Errno::EFBIG)?;
            // The descriptor's flags as they are now (`fuse_write_flags`: the kernel sends
            // `f_flags` with every WRITE), not as they were at `open`: `fcntl(F_SETFL)`
            // may have set or cleared O_APPEND since, and only the kernel saw it. A
            // writeback of mapped pages (`FUSE_WRITE_CACHE`) goes where its offset says.
            let append = OpenFlags::from_bits_retain(flags).contains(OpenFlags::APPEND) && !cache;
            // One descriptor lookup for the flag and the writes (`pwrite`'s own body).
            let f = t.fdget(fd)?;
            if f.flags().contains(OpenFlags::APPEND) != append {
                f.set_flags(f.flags() ^ OpenFlags::APPEND);
            }
            if write_flags & FUSE_WRITE_KILL_SUIDGID != 0 && !data.is_empty() {
                self.kill_suid_flagged_write(c, f.inode())?;
            }
            let (cred, fsize) = (t.cred(), t.getrlimit_fsize());
            let n = f.write_at_offset(data, off, cred, fsize)?;
            if n == data.len() || !cache {
                return Ok(n);
            }
            // A writeback of dirty pages (mmap stores): the kernel looks only at the error
            // of the reply, never at a short count (fs/fuse/file.c `fuse_writepage_end`),
            // so the pages past `n` would be dropped unreported. Write on: the rest is
            // stored, or the reply is its error (ENOSPC past `--size`), which the kernel
            // records for `msync`, `fsync` and `close` to return.
            let mut done = n;
            while done < data.len() {
                let at = off + done as i64;
                match f.write_at_offset(&data[done..], at, cred, fsize)? {
                    0 => return Err(Errno::EIO),
                    k => done += k,
                }
            }
            Ok(done)
        })?;
        // A WRITE carries at most `max_write` (far below 4 GiB) bytes.
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// FLUSH: always `ENOSYS`. Only `O_RDWR` handles get here (`fopen_flags`), after the
    /// kernel has written their file's dirty pages back and checked for errors itself
    /// (`fuse_flush`). tmpfs has nothing more to do at close (`shmem` has no `flush`):
    /// ENOSYS makes the kernel send no FLUSH again, on any handle (`fc->no_flush`), and
    /// close returns 0 for it.
    ///
    /// # Errors
    /// `ENOSYS`, always.
    pub(super) fn op_flush(&self) -> Result<()> {
        Err(Errno::ENOSYS)
    }

    /// RELEASE/RELEASEDIR of handle `fh`: `close` on its table.
    ///
    /// # Errors
    /// `EBADF` for a forged handle.
    pub(super) fn op_release(&self, fh: u64) -> Result<()> {
        let (table, fd) = super::fh_split(fh);
        self.worker(|w| {
            let t = Worker::table_task(&mut w.tasks, &self.handles, table)?;
            self.handles.close(t, w.own, fd)
        })
    }

    /// FSYNC/FSYNCDIR of handle `fh` (`fdatasync` with `datasync`).
    ///
    /// # Errors
    /// `EBADF`, the file system's.
    pub(super) fn op_fsync(&self, c: &Caller, fh: u64, datasync: bool) -> Result<()> {
        self.with_fh(c, fh, false, |t, fd, _| {
            if datasync {
                t.fdatasync(fd)
            } else {
                t.fsync(fd)
            }
        })
    }

    /// Reads directory `fh` from cookie `offset`, calling `add(entry)` until it says the
    /// reply is full.
    fn read_dir(
        &self,
        c: &Caller,
        fh: u64,
        offset: u64,
        mut add: impl FnMut(&Task, crate::DirEntry) -> Result<bool>,
    ) -> Result<()> {
        let offset = i64::try_from(offset).map_err(|_| Errno::EINVAL)?;
        self.with_fh(c, fh, false, |t, fd, buf| {
            t.lseek(fd, offset, types::SEEK_SET)?;
            let dev = t.fstat(fd)?.st_dev;
            buf.resize(16 * 1024, 0);
            loop {
                let n = t.getdents64(fd, buf)?;
                if n == 0 {
                    return Ok(());
                }
                for mut e in parse_dirents(&buf[..n]) {
                    e.d_ino = self.ino_of(dev, e.d_ino);
                    if add(t, e)? {
                        return Ok(());
                    }
                }
            }
        })
    }

    /// READDIR of handle `fh` from cookie `offset`: `add` takes each entry and says whether
    /// the reply is full (that entry not taken).
    ///
    /// # Errors
    /// `EBADF`, `EINVAL`, `getdents64`'s.
    pub(super) fn op_readdir(
        &self,
        c: &Caller,
        fh: u64,
        offset: u64,
        mut add: impl FnMut(DirEntryOut<'_>) -> bool,
    ) -> Result<()> {
        self.read_dir(c, fh, offset, |_, e| {
            Ok(add(DirEntryOut {
                ino: e.d_ino,
                off: e.d_off as u64,
                d_type: u32::from(e.d_type),
                name: &e.name,
            }))
        })
    }

    /// READDIRPLUS of directory node `ino`, handle `fh`, from cookie `offset`: `add` takes
    /// each entry with its `fuse_entry_out` and says whether the reply is full. Each entry
    /// taken (other than `.` and `..`) counts one lookup. An error after some entries were
    /// taken is not reported: those are sent (the kernel asks again from the last one's
    /// offset), as `readdir(3)` returns what it has.
    ///
    /// # Errors
    /// `ESTALE`, `EBADF`, `getdents64`'s, when no entry was taken.
    pub(super) fn op_readdirplus(
        &self,
        c: &Caller,
        ino: u64,
        fh: u64,
        offset: u64,
        mut add: impl FnMut(&abi::EntryOut, DirEntryOut<'_>) -> bool,
    ) -> Result<()> {
        let mut added = 0;
        let r = self.node(ino).and_then(|dir| {
            self.read_dir(c, fh, offset, |t, e| {
                let dot = e.name == b"." || e.name == b"..";
                // `.` and `..` carry no entry: the kernel neither links nor counts them
                // (`fuse_direntplus_link` skips them by name).
                let (entry, d) = if dot {
                    let st = t.fstatat(&*dir, &e.name, AtFlags::SYMLINK_NOFOLLOW)?;
                    let mut entry = self.entry_out(self.file_attr(&st));
                    entry.nodeid = 0;
                    (entry, None)
                } else {
                    match Self::lookup_one(t, &dir, &e.name) {
                        Ok(d) => (self.entry_out(self.attr_of(t, &d)?), Some(d)),
                        // Removed since getdents listed it: skip it.
                        Err(Errno::ENOENT) => return Ok(false),
                        Err(err) => return Err(err),
                    }
                };
                let full = add(
                    &entry,
                    DirEntryOut {
                        ino: entry.attr.ino,
                        off: e.d_off as u64,
                        d_type: u32::from(e.d_type),
                        name: &e.name,
                    },
                );
                if !full {
                    added += 1;
                    if let Some(d) = d {
                        self.remember(&d);
                    }
                }
                Ok(full)
            })
        });
        if added > 0 {
            Ok(())
        } else {
            r
        }
    }

    /// STATFS of node `ino`: the file system it is on (`fuse_statfs` asks for the node
    /// `statfs(2)` named): under a `--bind` or `--fuse` path, the host's or the server's,
    /// not the root tmpfs's (found by a fresh-user trial: `df` of such a path showed the
    /// root's).
    ///
    /// # Errors
    /// `ESTALE`; the file system's.
    pub(super) fn op_statfs(&self, c: &Caller, ino: u64) -> Result<abi::Kstatfs> {
        let d = self.node(ino)?;
        let s = self.with(c, |t, _| t.statfs_dentry(&d))?;
        Ok(abi::Kstatfs {
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: s.f_namelen as u32,
            frsize: s.f_frsize as u32,
            padding: 0,
            spare: [0; 6],
        })
    }

    /// SETXATTR `name` = `value` on node `ino` (`flags`: `XATTR_CREATE`/`XATTR_REPLACE`).
    ///
    /// # Errors
    /// `ESTALE`, `setxattrat`'s.
    pub(super) fn op_setxattr(
        &self,
        c: &Caller,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        let d = self.node(ino)?;
        self.with(c, |t, _| {
            t.setxattrat(&*d, "", XATTR_AT, name, value, flags)
        })
    }

    /// GETXATTR `name` of node `ino` into at most `size` bytes (0: the length only): `out`
    /// gets the answer, inside the call.
    ///
    /// # Errors
    /// `ESTALE`, `getxattrat`'s (`ENODATA`, `ERANGE`).
    pub(super) fn op_getxattr(
        &self,
        c: &Caller,
        ino: u64,
        name: &[u8],
        size: u32,
        out: impl FnOnce(Xattr<'_>),
    ) -> Result<()> {
        let d = self.node(ino)?;
        self.with(c, |t, buf| {
            // The kernel caps `size` at XATTR_SIZE_MAX (fs/xattr.c `do_getxattr`).
            buf.resize((size as usize).min(crate::xattr::XATTR_SIZE_MAX), 0);
            let n = t.getxattrat(&*d, "", XATTR_AT, name, buf)?;
            out(xattr_answer(size, &buf[..n.min(buf.len())], n));
            Ok(())
        })
    }

    /// LISTXATTR of node `ino` into at most `size` bytes (0: the length only), with the
    /// caller's own rights: the kernel leaves the list as the server sends it (fs/fuse/xattr.c
    /// `fuse_listxattr`), and `trusted.*` names are for CAP_SYS_ADMIN only
    /// (`simple_xattr_list`).
    ///
    /// # Errors
    /// `ESTALE`, `listxattrat`'s (`ERANGE`).
    pub(super) fn op_listxattr(
        &self,
        c: &Caller,
        ino: u64,
        size: u32,
        out: impl FnOnce(Xattr<'_>),
    ) -> Result<()> {
        let d = self.node(ino)?;
        self.worker(|w| {
            self.set_caller(&mut w.base, c);
            if self.opts.permissions == Permissions::Kernel {
                // Not the capabilities kernel-checked requests otherwise run with.
                let cr = w.base.cred();
                let own = Cred::new(cr.uid, cr.gid, &[]);
                w.base.override_creds(own);
            }
            let buf = &mut w.buf;
            buf.resize((size as usize).min(crate::xattr::XATTR_LIST_MAX), 0);
            let n = w.base.listxattrat(&*d, "", XATTR_AT, buf)?;
            out(xattr_answer(size, &buf[..n.min(buf.len())], n));
            Ok(())
        })
    }

    /// REMOVEXATTR `name` of node `ino`.
    ///
    /// # Errors
    /// `ESTALE`, `removexattrat`'s (`ENODATA`).
    pub(super) fn op_removexattr(&self, c: &Caller, ino: u64, name: &[u8]) -> Result<()> {
        let d = self.node(ino)?;
        self.with(c, |t, _| t.removexattrat(&*d, "", XATTR_AT, name))
    }

    /// ACCESS of node `ino` for `mask` (`R_OK|W_OK|X_OK`, `F_OK`). The kernel sends the
    /// caller's real ids for access(2) (`access_override_creds` ran before `fuse_access`):
    /// checked with them as the effective ones.
    ///
    /// # Errors
    /// `ESTALE`, `EACCES`, `EROFS`.
    pub(super) fn op_access(&self, c: &Caller, ino: u64, mask: u32) -> Result<()> {
        let d = self.node(ino)?;
        self.with(c, |t, _| {
            t.faccessat2(&*d, "", mask, AtFlags::EACCESS | AtFlags::EMPTY_PATH)
        })
    }

    /// CREATE: `name` in `parent` made and opened with `flags` and `mode`: the entry and the
    /// handle.
    ///
    /// # Errors
    /// `ESTALE` (unknown parent, or the name exists after all: the kernel looks it up again
    /// and opens it), `EEXIST` (`O_EXCL`), `EMFILE`/`ENFILE`, `openat`'s.
    pub(super) fn op_create(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        flags: u32,
    ) -> Result<(abi::EntryOut, abi::OpenOut)> {
        let p = self.node(parent)?;
        let name = component(name)?;
        let oflags = OpenFlags::from_bits_retain(flags);
        // The kernel sends CREATE only for a name it believes missing, and then skips its
        // own permission check of the open (`may_open` of a new file). If the name exists
        // after all (made behind the kernel's back, through the Rust API of an embedding
        // program), opening it here would bypass that check: create exclusively, and
        // answer ESTALE, which makes the VFS look the name up again and open the existing
        // file the checked way (`do_filp_open`'s LOOKUP_REVAL retry). A caller's own
        // O_EXCL gets its EEXIST.
        let excl = OpenFlags::CREAT | OpenFlags::EXCL;
        self.open_new(c, oflags, |t| {
            match t.filp_open(&*p, name, oflags | excl, mode) {
                Err(Errno::EEXIST) if !oflags.contains(OpenFlags::EXCL) => Err(Errno::ESTALE),
                r => r,
            }
        })
    }

    /// A file `open` made (opened with `oflags`) as CREATE's or TMPFILE's answer: its
    /// entry (a lookup counted) and a handle in the caller's table.
    fn open_new(
        &self,
        c: &Caller,
        oflags: OpenFlags,
        open: impl FnOnce(&Task) -> Result<crate::FileHandle>,
    ) -> Result<(abi::EntryOut, abi::OpenOut)> {
        let (table, (fd, attr)) = self.with_opener(c, |t, opener| {
            let mut dentry = None;
            let fd = opener.open(t, || {
                let f = open(t)?;
                dentry = Some(f.dentry().clone());
                Ok(f)
            })?;
            let d = dentry.ok_or(Errno::EIO)?;
            match self.attr_of(t, &d) {
                Ok(attr) => {
                    self.remember(&d);
                    Ok((fd, attr))
                }
                Err(e) => {
                    let _ = opener.close(t, fd);
                    Err(e)
                }
            }
        })?;
        let open = abi::OpenOut {
            fh: fh_make(table, fd),
            open_flags: fopen_flags(oflags),
            padding: 0,
        };
        Ok((self.entry_out(attr), open))
    }

    /// TMPFILE in directory `parent` (Linux 6.1's `fuse_tmpfile`, for `O_TMPFILE`): an
    /// unnamed regular file of mode `mode`, opened with `flags` (the kernel's `f_flags`:
    /// `O_EXCL` makes it unlinkable for good), as the caller (its ids own it): its entry,
    /// with a lookup the kernel will forget, and its handle. The kernel sends a name (`/`),
    /// which is not one: ignored.
    ///
    /// # Errors
    /// `ESTALE`, `ENOTDIR`, `EACCES`, `ENOSPC`, `EMFILE`/`ENFILE` (handle limits), `EROFS`,
    /// the open's.
    pub(super) fn op_tmpfile(
        &self,
        c: &Caller,
        parent: u64,
        mode: u32,
        flags: u32,
    ) -> Result<(abi::EntryOut, abi::OpenOut)> {
        let p = self.node(parent)?;
        // O_TMPFILE whatever the kernel passed on (it is what the request is); no O_CREAT,
        // which O_TMPFILE refuses.
        let oflags = (OpenFlags::from_bits_retain(flags) - OpenFlags::CREAT) | OpenFlags::TMPFILE;
        self.open_new(c, oflags, |t| t.filp_open(&*p, ".", oflags, mode))
    }

    /// FALLOCATE through handle `fh` (mode 0, `KEEP_SIZE`, `PUNCH_HOLE|KEEP_SIZE`).
    ///
    /// # Errors
    /// `EBADF`, `EFBIG`, `EOPNOTSUPP` (other modes), `ENOSPC`.
    pub(super) fn op_fallocate(
        &self,
        c: &Caller,
        fh: u64,
        offset: u64,
        length: u64,
        mode: u32,
    ) -> Result<()> {
        self.with_fh(c, fh, true, |t, fd, _| {
            let off = i64::try_from(offset).map_err(|_| Errno::EFBIG)?;
            let len = i64::try_from(length).map_err(|_| Errno::EFBIG)?;
            // `file_modified` of `fuse_file_fallocate`, whose SETATTR of the mode
            // `FUSE_HANDLE_KILLPRIV_V2` leaves out.
            self.kill_suid_as_caller_if(false, c, t.fdget_raw(fd)?.inode())?;
            t.fallocate(fd, mode as i32, off, len)
        })
    }

    /// LSEEK on handle `fh` (`SEEK_DATA`, `SEEK_HOLE`; the kernel does the others): the
    /// new offset.
    ///
    /// # Errors
    /// `EBADF`, `ENXIO` (no data or hole past `offset`), `EINVAL`.
    pub(super) fn op_lseek(&self, c: &Caller, fh: u64, offset: i64, whence: u32) -> Result<i64> {
        self.with_fh(c, fh, false, |t, fd, _| t.lseek(fd, offset, whence as i32))
    }
}
