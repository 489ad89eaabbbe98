//! The fuser transport: [`fuser::Filesystem`] callbacks that decode nothing themselves
//! (fuser did) and run the shared operations of `ops.rs`, converting their `fuse/abi`
//! results into fuser's reply calls.
//!
//! Linux analogue: none (a libfuse-style session loop, fuser 0.18's).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};

use super::ops::SetAttr;
use super::{abi, Caller, UvfsFuse, Xattr};
use crate::errno::{Errno, Result};
use crate::types::{self, OpenFlags, Timespec};

/// The errno as fuser carries it.
fn fe(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

impl Caller {
    /// The caller of a request fuser decoded, recorded as this thread's request caller
    /// (`cred::set_request_caller`: fuser's session threads serve requests only, each
    /// callback makes its `Caller` first).
    fn of(req: &Request) -> Caller {
        crate::cred::set_request_caller(req.uid(), req.gid());
        Caller {
            uid: req.uid(),
            gid: req.gid(),
            pid: req.pid(),
        }
    }
}

/// A timestamp as `SystemTime` (times before 1970 included).
fn system_time(t: Timespec) -> SystemTime {
    let nsec = Duration::from_nanos(t.tv_nsec.clamp(0, 999_999_999) as u64);
    if t.tv_sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.tv_sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(t.tv_sec.unsigned_abs()) + nsec
    }
}

/// A `SystemTime` as a timestamp (saturating at `i64::MIN` seconds).
fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(d.subsec_nanos()),
        },
        Err(e) => {
            let d = e.duration();
            // `wrapping_neg`: 2^63 s before 1970 is i64::MIN itself.
            let s = (d.as_secs() as i64).wrapping_neg();
            match d.subsec_nanos() {
                0 => Timespec {
                    tv_sec: s,
                    tv_nsec: 0,
                },
                n => Timespec {
                    tv_sec: s.saturating_sub(1),
                    tv_nsec: 1_000_000_000 - i64::from(n),
                },
            }
        }
    }
}

/// The time the kernel sent in a `SETATTR`, from the `SystemTime` fuser 0.18 made of it.
/// fuser's `system_time_from_time` turns `(secs < 0, nsec)` into `EPOCH - (|secs| s + nsec
/// ns)` instead of `EPOCH - |secs| s + nsec ns` (its source says "TODO: 1_000_000_000 -
/// nsec"), so a time before 1970 with nanoseconds would be stored up to a second early
/// (`touch -d '1969-12-31 23:59:59.25'` became `.. 58.75`). The mapping is one-to-one, so
/// this undoes it; fuser is pinned to 0.18.0 (Cargo.toml) so that a fixed fuser cannot
/// silently turn this into the error.
fn setattr_time(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(_) => timespec(t),
        Err(e) => Timespec {
            tv_sec: (e.duration().as_secs() as i64).wrapping_neg(),
            tv_nsec: i64::from(e.duration().subsec_nanos()),
        },
    }
}

/// `setattr`'s time as `utimensat`'s.
fn utime(t: Option<TimeOrNow>) -> Timespec {
    match t {
        None => Timespec::UTIME_OMIT,
        Some(TimeOrNow::Now) => Timespec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(t)) => setattr_time(t),
    }
}

/// The file type of a mode.
fn file_type(mode: u32) -> FileType {
    match mode & types::S_IFMT {
        types::S_IFDIR => FileType::Directory,
        types::S_IFLNK => FileType::Symlink,
        types::S_IFIFO => FileType::NamedPipe,
        types::S_IFCHR => FileType::CharDevice,
        types::S_IFBLK => FileType::BlockDevice,
        types::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// A reply that is complete once `ok` (an empty one, or a directory listing filled in).
trait Done {
    fn ok(self);
    fn error(self, e: fuser::Errno);
}

macro_rules! impl_done {
    ($($t:ty),*) => {$(
        impl Done for $t {
            fn ok(self) {
                <$t>::ok(self)
            }
            fn error(self, e: fuser::Errno) {
                <$t>::error(self, e)
            }
        }
    )*};
}
impl_done!(ReplyEmpty, ReplyDirectory, ReplyDirectoryPlus);

/// Answers `reply` with `r`'s outcome.
fn empty(reply: impl Done, r: Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(fe(e)),
    }
}

/// A wire attribute as fuser's (`crtime`, which Linux's `fuse_attr` lacks, as `ctime`).
fn fuser_attr(a: &abi::Attr) -> FileAttr {
    let t = |sec: u64, nsec: u32| {
        system_time(Timespec {
            tv_sec: sec as i64,
            tv_nsec: i64::from(nsec),
        })
    };
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: t(a.atime, a.atimensec),
        mtime: t(a.mtime, a.mtimensec),
        ctime: t(a.ctime, a.ctimensec),
        crtime: t(a.ctime, a.ctimensec),
        kind: file_type(a.mode),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: a.flags,
    }
}

/// Answers `reply` with `e`, an entry (negative when its node id is 0).
fn entry(reply: ReplyEntry, e: Result<abi::EntryOut>) {
    match e {
        Ok(e) => reply.entry_with_ttls(
            &Duration::new(e.attr_valid, e.attr_valid_nsec),
            &Duration::new(e.entry_valid, e.entry_valid_nsec),
            &fuser_attr(&e.attr),
            Generation(e.generation),
        ),
        Err(err) => reply.error(fe(err)),
    }
}

/// Answers `reply` with `a`.
fn attr(reply: ReplyAttr, a: Result<abi::AttrOut>) {
    match a {
        Ok(a) => reply.attr(
            &Duration::new(a.attr_valid, a.attr_valid_nsec),
            &fuser_attr(&a.attr),
        ),
        Err(e) => reply.error(fe(e)),
    }
}

/// Answers an xattr request: `out` is what the operation produced, inside its call.
fn xattr(reply: ReplyXattr, op: impl FnOnce(&mut dyn FnMut(Xattr<'_>)) -> Result<()>) {
    let mut reply = Some(reply);
    let r = op(&mut |x| {
        if let Some(reply) = reply.take() {
            match x {
                Xattr::Size(n) => reply.size(n),
                Xattr::Data(d) => reply.data(d),
            }
        }
    });
    if let (Err(e), Some(reply)) = (r, reply) {
        reply.error(fe(e));
    }
}

impl Filesystem for UvfsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let wants = self.init_wants();
        // Each is optional: a kernel without one keeps its default behaviour.
        let mut settled = 0;
        for bit in 0..64 {
            if wants & (1 << bit) != 0
                && config
                    .add_capabilities(fuser::InitFlags::from_bits_retain(1 << bit))
                    .is_ok()
            {
                settled |= 1 << bit;
            }
        }
        self.init_settled(settled);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        entry(
            reply,
            self.op_lookup(&Caller::of(req), parent.0, name.as_bytes()),
        );
    }

    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        // Every callback records its caller, so that none runs with the previous one's
        // (`Caller::of`).
        crate::cred::set_request_caller(req.uid(), req.gid());
        self.op_forget(ino.0, nlookup);
    }

    fn getattr(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        attr(
            reply,
            self.op_getattr(&Caller::of(req), ino.0, fh.map(|f| f.0)),
        );
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: utime(atime),
            mtime: utime(mtime),
            fh: fh.map(|f| f.0),
        };
        attr(reply, self.op_setattr(&Caller::of(req), ino.0, a));
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.op_readlink(&Caller::of(req), ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let c = Caller::of(req);
        entry(
            reply,
            self.op_mknod(&c, parent.0, name.as_bytes(), mode, rdev),
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        entry(
            reply,
            self.op_mkdir(&Caller::of(req), parent.0, name.as_bytes(), mode),
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            reply,
            self.op_unlink(&Caller::of(req), parent.0, name.as_bytes(), false),
        );
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            reply,
            self.op_unlink(&Caller::of(req), parent.0, name.as_bytes(), true),
        );
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        let c = Caller::of(req);
        entry(
            reply,
            self.op_symlink(&c, parent.0, link_name.as_bytes(), target),
        );
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = self.op_rename(
            &Caller::of(req),
            parent.0,
            name.as_bytes(),
            newparent.0,
            newname.as_bytes(),
            flags.bits(),
        );
        empty(reply, r);
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let c = Caller::of(req);
        entry(
            reply,
            self.op_link(&c, ino.0, newparent.0, newname.as_bytes()),
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        match self.op_open(&Caller::of(req), ino.0, flags.0 as u32) {
            Ok(o) => reply.opened(
                fuser::FileHandle(o.fh),
                FopenFlags::from_bits_retain(o.open_flags),
            ),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        size: u32,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        // The data is sent from the worker's buffer, inside the call.
        let mut reply = Some(reply);
        let r = self.op_read(&Caller::of(req), fh.0, offset, size, |data| {
            if let Some(reply) = reply.take() {
                reply.data(data);
            }
        });
        if let (Err(e), Some(reply)) = (r, reply) {
            reply.error(fe(e));
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: fuser::WriteFlags,
        flags: fuser::OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let r = self.op_write(
            &Caller::of(req),
            fh.0,
            offset,
            data,
            write_flags.bits(),
            flags.0 as u32,
        );
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        _fh: fuser::FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        crate::cred::set_request_caller(req.uid(), req.gid());
        empty(reply, self.op_flush());
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        _flags: fuser::OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        crate::cred::set_request_caller(req.uid(), req.gid());
        empty(reply, self.op_release(fh.0));
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.op_fsync(&Caller::of(req), fh.0, datasync));
    }

    fn opendir(&self, req: &Request, ino: INodeNo, flags: fuser::OpenFlags, reply: ReplyOpen) {
        self.open(
            req,
            ino,
            fuser::OpenFlags(flags.0 | OpenFlags::DIRECTORY.bits() as i32),
            reply,
        );
    }

    fn readdir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.op_readdir(&Caller::of(req), fh.0, offset, |e| {
            reply.add(
                INodeNo(e.ino),
                e.off,
                file_type(e.d_type << 12),
                OsStr::from_bytes(e.name),
            )
        });
        empty(reply, r);
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let r = self.op_readdirplus(&Caller::of(req), ino.0, fh.0, offset, |ent, e| {
            // fuser sends `attr.ino` as the node id; the kernel skips `.` and `..` by name.
            reply.add(
                INodeNo(ent.nodeid),
                e.off,
                OsStr::from_bytes(e.name),
                &Duration::new(ent.entry_valid, ent.entry_valid_nsec),
                &fuser_attr(&ent.attr),
                Generation(ent.generation),
            )
        });
        empty(reply, r);
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        flags: fuser::OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.release(req, ino, fh, flags, None, false, reply);
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.op_statfs(&Caller::of(req), ino.0) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        // `position` is macOS's resource-fork offset; Linux always sends 0.
        let r = if position != 0 {
            Err(Errno::EINVAL)
        } else {
            let c = Caller::of(req);
            self.op_setxattr(&c, ino.0, name.as_bytes(), value, flags as u32)
        };
        empty(reply, r);
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let c = Caller::of(req);
        xattr(reply, |out| {
            self.op_getxattr(&c, ino.0, name.as_bytes(), size, out)
        });
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let c = Caller::of(req);
        xattr(reply, |out| self.op_listxattr(&c, ino.0, size, out));
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(
            reply,
            self.op_removexattr(&Caller::of(req), ino.0, name.as_bytes()),
        );
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        empty(
            reply,
            self.op_access(&Caller::of(req), ino.0, mask.bits() as u32),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let c = Caller::of(req);
        match self.op_create(&c, parent.0, name.as_bytes(), mode, flags as u32) {
            Ok((e, o)) => reply.created(
                &Duration::new(e.entry_valid, e.entry_valid_nsec),
                &fuser_attr(&e.attr),
                Generation(e.generation),
                fuser::FileHandle(o.fh),
                FopenFlags::from_bits_retain(o.open_flags),
            ),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let c = Caller::of(req);
        empty(
            reply,
            self.op_fallocate(&c, fh.0, offset, length, mode as u32),
        );
    }

    fn lseek(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: fuser::FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        match self.op_lseek(&Caller::of(req), fh.0, offset, whence as u32) {
            Ok(off) => reply.offset(off),
            Err(e) => reply.error(fe(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Stat;

    #[test]
    fn times_round_trip_before_and_after_1970() {
        for (sec, nsec) in [
            (0, 0),
            (1, 5),
            (1_700_000_000, 999_999_999),
            (-1, 0),
            (-1, 1),
            (-2, 500_000_000),
            (i64::MIN, 0),
        ] {
            let t = Timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            };
            assert_eq!(timespec(system_time(t)), t, "{sec}.{nsec}");
        }
        // -0.5 s is (-1 s, 500000000 ns), as the kernel normalises it.
        let half = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(
            timespec(half),
            Timespec {
                tv_sec: -1,
                tv_nsec: 500_000_000
            }
        );
    }

    #[test]
    fn setattr_times_map_to_utimensat() {
        assert_eq!(utime(None).tv_nsec, Timespec::UTIME_OMIT_NSEC);
        assert_eq!(
            utime(Some(TimeOrNow::Now)).tv_nsec,
            Timespec::UTIME_NOW_NSEC
        );
        let t = UNIX_EPOCH + Duration::new(7, 8);
        assert_eq!(
            utime(Some(TimeOrNow::SpecificTime(t))),
            Timespec {
                tv_sec: 7,
                tv_nsec: 8
            }
        );
        // fuser 0.18's decoding of (secs, nsec) before 1970: EPOCH - (|secs| s + nsec ns).
        let fuser_decode =
            |secs: i64, nsec: u32| UNIX_EPOCH - Duration::new(secs.unsigned_abs(), nsec);
        for (secs, nsec) in [
            (-1, 250_000_000),
            (-1, 0),
            (-86_400, 999_999_999),
            (i64::MIN, 0),
        ] {
            let want = Timespec {
                tv_sec: secs,
                tv_nsec: i64::from(nsec),
            };
            let got = utime(Some(TimeOrNow::SpecificTime(fuser_decode(secs, nsec))));
            assert_eq!(got, want, "{secs}.{nsec}");
        }
    }

    #[test]
    fn attributes_carry_type_permissions_and_times() {
        let st = Stat {
            st_ino: 5,
            st_mode: types::S_IFLNK | 0o777,
            st_nlink: 1,
            st_size: 3,
            st_blocks: 0,
            st_blksize: 4096,
            st_mtime: Timespec {
                tv_sec: -3,
                tv_nsec: 1,
            },
            ..Default::default()
        };
        let a = fuser_attr(&super::super::wire_attr(&st));
        assert_eq!(
            (a.ino, a.kind, a.perm, a.size, a.nlink),
            (INodeNo(5), FileType::Symlink, 0o777, 3, 1)
        );
        assert_eq!(timespec(a.mtime), st.st_mtime);

        for (ty, kind) in [
            (types::S_IFDIR, FileType::Directory),
            (types::S_IFREG, FileType::RegularFile),
            (types::S_IFIFO, FileType::NamedPipe),
            (types::S_IFSOCK, FileType::Socket),
            (types::S_IFCHR, FileType::CharDevice),
            (types::S_IFBLK, FileType::BlockDevice),
        ] {
            assert_eq!(file_type(ty | 0o644), kind);
        }
    }
}
