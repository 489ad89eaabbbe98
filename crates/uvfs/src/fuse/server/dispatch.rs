//! uvfs's own decoder of FUSE requests: one request's bytes (as read from `/dev/fuse` or an
//! io_uring entry's buffers) in, the reply's bytes out, through the same operations
//! (`ops.rs`) that fuser's callbacks run. The wire structs are `fuse/abi`'s, shared with the
//! FUSE client; nothing here trusts a length it has not checked.
//!
//! Linux analogue: libfuse's `fuse_session_process_buf` (lib/fuse_lowlevel.c), which
//! decodes a request and calls `fuse_lowlevel_ops`; what the kernel sends is fs/fuse/'s
//! `fuse_args` of each operation.

use zerocopy::{FromBytes, IntoBytes};

use super::ops::{DirEntryOut, SetAttr};
use super::{abi, Caller, UvfsFuse, Xattr};
use crate::errno::{Errno, Result};
use crate::types::{OpenFlags, Timespec};
use abi::opcode as op;

/// `FUSE_COMPAT_SETXATTR_IN_SIZE`: a SETXATTR's argument without `FUSE_SETXATTR_EXT`
/// (`size`, `flags`), which uvfs does not ask for.
const SETXATTR_IN_COMPAT: usize = 8;

/// `FUSE_GETATTR_FH` in `fuse_getattr_in.getattr_flags`: `fh` is valid.
const FUSE_GETATTR_FH: u32 = 1 << 0;

/// `FUSE_FSYNC_FDATASYNC` in `fuse_fsync_in.fsync_flags`.
const FUSE_FSYNC_FDATASYNC: u32 = 1 << 0;

/// The largest WRITE uvfs accepts (`fuse_init_out.max_write`): 1 MiB, 256 pages of
/// 4 KiB, the kernel's default `max_pages_limit` (`fuse_max_pages_limit`).
pub const MAX_WRITE: u32 = 1 << 20;

/// `fuse_init_out.max_pages` for a page size of `page` bytes: `MAX_WRITE` in pages,
/// rounded up, at least 1 (`process_init_reply` clamps it to 1 ..= `max_pages_limit`).
pub(crate) fn max_pages_for(page: usize) -> u16 {
    (MAX_WRITE as usize)
        .div_ceil(page.max(1))
        .clamp(1, usize::from(u16::MAX)) as u16
}

/// `fuse_init_out.max_pages` on this machine (its page size, not an assumed 4 KiB).
pub(crate) fn max_pages() -> u16 {
    max_pages_for(rustix::param::page_size())
}

/// The payload buffer an io_uring entry needs: the kernel refuses a smaller one
/// (`fuse_uring_create`: `max(FUSE_MIN_READ_BUFFER, max_write, max_pages * PAGE_SIZE)`).
pub(crate) fn max_payload() -> usize {
    (MAX_WRITE as usize).max(usize::from(max_pages()) * rustix::param::page_size())
}

/// Splits a `T` off the front of `b`.
///
/// # Errors
/// `EINVAL` if `b` is shorter than a `T`.
fn arg<T: abi::Wire>(b: &[u8]) -> Result<(T, &[u8])> {
    T::read_from_prefix(b).map_err(|_| Errno::EINVAL)
}

/// Splits a NUL-terminated name off the front of `b` (without its NUL).
///
/// # Errors
/// `EINVAL` if there is no NUL.
fn cstr(b: &[u8]) -> Result<(&[u8], &[u8])> {
    let n = b.iter().position(|&c| c == 0).ok_or(Errno::EINVAL)?;
    Ok((&b[..n], &b[n + 1..]))
}

/// A SETATTR time: `UTIME_NOW` with the `*_NOW` bit, the time with the `FATTR_*` bit, else
/// `UTIME_OMIT`.
fn set_time(valid: u32, set: u32, now: u32, sec: u64, nsec: u32) -> Timespec {
    if valid & now != 0 {
        Timespec::UTIME_NOW
    } else if valid & set != 0 {
        Timespec {
            tv_sec: sec as i64,
            tv_nsec: i64::from(nsec),
        }
    } else {
        Timespec::UTIME_OMIT
    }
}

/// A reply being built in the transport's buffer: the header's room first, its length and
/// error set at the end.
struct Out<'a> {
    buf: &'a mut Vec<u8>,
}

impl Out<'_> {
    fn push(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// The payload's length so far.
    fn len(&self) -> usize {
        self.buf.len() - std::mem::size_of::<abi::OutHeader>()
    }
}

/// Appends one READDIR record (`struct fuse_dirent` and its name, padded to 8 bytes) if it
/// fits in `size` bytes of payload; says whether the reply is full.
fn add_dirent(
    out: &mut Out<'_>,
    size: usize,
    plus: Option<&abi::EntryOut>,
    e: &DirEntryOut<'_>,
) -> bool {
    let head = plus.map_or(0, |_| std::mem::size_of::<abi::EntryOut>());
    let rec = head + std::mem::size_of::<abi::Dirent>() + e.name.len();
    let padded = (rec + 7) & !7;
    if out.len() + padded > size {
        return true;
    }
    if let Some(p) = plus {
        out.push(p.as_bytes());
    }
    let d = abi::Dirent {
        ino: e.ino,
        off: e.off,
        namelen: e.name.len() as u32,
        r#type: e.d_type,
    };
    out.push(d.as_bytes());
    out.push(e.name);
    out.push(&[0; 8][..padded - rec]);
    false
}

impl UvfsFuse {
    /// Serves one FUSE request: `req` is exactly the bytes of one request as the kernel
    /// queued it (`struct fuse_in_header` and its arguments); the reply is written to `out`
    /// (cleared first: `struct fuse_out_header` and the payload, or a header alone with a
    /// negative errno). Returns whether there is a reply to send: `FORGET`,
    /// `BATCH_FORGET` and `INTERRUPT` have none, and neither has a request too short to
    /// carry a header.
    ///
    /// Every opcode the kernel may send gets its operation, or `ENOSYS` as libfuse answers
    /// one its server does not implement (`GETLK`/`SETLK`: the kernel then keeps POSIX locks
    /// itself; `IOCTL`, `POLL`, `BMAP`, `COPY_FILE_RANGE`, ...).
    /// `INTERRUPT` gets no reply: the request it names is interrupted on the worker serving
    /// it, or when its worker publishes it (see the module doc of `server`, "Interrupts");
    /// every other request except `INIT` and `DESTROY` is published in the calling thread's
    /// interrupt slot while it runs. `INIT` negotiates: protocol 7.x with the smaller minor
    /// of the two (at least 7.23, else `EPROTO`), the capabilities of
    /// [`init_wants`](Self::init_wants) the kernel offers, `max_write` [`MAX_WRITE`].
    ///
    /// # Errors
    /// None returned: a malformed request (its `len` not the bytes given, an argument cut
    /// short, a name without its NUL) is answered `EINVAL`, an operation's error with its
    /// errno.
    ///
    /// # References
    /// libfuse lib/fuse_lowlevel.c `fuse_session_process_buf_internal`, `do_init`,
    /// `do_interrupt`; Linux fs/fuse/dev.c `queue_interrupt`, `fuse_read_interrupt`; Linux
    /// include/uapi/linux/fuse.h; fs/fuse/dev.c `fuse_dev_do_write` (reply checks).
    pub fn dispatch(&self, req: &[u8], out: &mut Vec<u8>) -> bool {
        let Ok((h, _)) = abi::InHeader::read_from_prefix(req) else {
            return false;
        };
        out.clear();
        out.extend_from_slice(abi::OutHeader::default().as_bytes());
        let mut o = Out { buf: out };
        let body = &req[std::mem::size_of::<abi::InHeader>().min(req.len())..];
        let r = if h.len as usize != req.len() {
            Err(Errno::EINVAL)
        } else {
            match h.opcode {
                op::FUSE_FORGET => {
                    if let Ok((f, _)) = arg::<abi::ForgetIn>(body) {
                        self.op_forget(h.nodeid, f.nlookup);
                    }
                    return false;
                }
                op::FUSE_BATCH_FORGET => {
                    if let Ok((b, mut rest)) = arg::<abi::BatchForgetIn>(body) {
                        for _ in 0..b.count {
                            let Ok((f, r)) = arg::<abi::ForgetOne>(rest) else {
                                break;
                            };
                            self.op_forget(f.nodeid, f.nlookup);
                            rest = r;
                        }
                    }
                    return false;
                }
                op::FUSE_INTERRUPT => {
                    if let Ok((i, _)) = arg::<abi::InterruptIn>(body) {
                        self.op_interrupt(i.unique);
                    }
                    return false;
                }
                // INIT and DESTROY cannot block, and INIT comes on a thread that may serve
                // nothing else (see `interruptible`).
                op::FUSE_INIT | op::FUSE_DESTROY => self.decode(&h, body, &mut o),
                _ => self.interruptible(h.unique, || self.decode(&h, body, &mut o)),
            }
        };
        let error = match r {
            Ok(()) => 0,
            Err(e) => {
                out.truncate(std::mem::size_of::<abi::OutHeader>());
                -e.raw()
            }
        };
        let oh = abi::OutHeader {
            len: out.len() as u32,
            error,
            unique: h.unique,
        };
        out[..std::mem::size_of::<abi::OutHeader>()].copy_from_slice(oh.as_bytes());
        true
    }

    /// Decodes the arguments of request `h` from `b`, runs its operation and appends the
    /// reply payload to `o`.
    fn decode(&self, h: &abi::InHeader, b: &[u8], o: &mut Out<'_>) -> Result<()> {
        let c = Caller {
            uid: h.uid,
            gid: h.gid,
            pid: h.pid,
        };
        let c = &c;
        // Whatever task serves it (a handle's table task runs as its opener), the request
        // is this caller's for a file system that sends credentials on (a FUSE server
        // behind `--fuse`).
        let _caller = crate::cred::RequestCaller::enter(h.uid, h.gid);
        let ino = h.nodeid;
        match h.opcode {
            op::FUSE_INIT => {
                let (i, _) = arg::<abi::InitIn>(b)?;
                o.push(self.init_reply(&i)?.as_bytes());
            }
            op::FUSE_DESTROY => {}
            op::FUSE_LOOKUP => {
                let (name, _) = cstr(b)?;
                o.push(self.op_lookup(c, ino, name)?.as_bytes());
            }
            op::FUSE_GETATTR => {
                let (g, _) = arg::<abi::GetattrIn>(b)?;
                let fh = (g.getattr_flags & FUSE_GETATTR_FH != 0).then_some(g.fh);
                o.push(self.op_getattr(c, ino, fh)?.as_bytes());
            }
            op::FUSE_STATX => {
                let (x, _) = arg::<abi::StatxIn>(b)?;
                let fh = (x.getattr_flags & FUSE_GETATTR_FH != 0).then_some(x.fh);
                o.push(self.op_statx(c, ino, fh)?.as_bytes());
            }
            op::FUSE_SETATTR => {
                use abi::fattr as F;
                let (s, _) = arg::<abi::SetattrIn>(b)?;
                let v = s.valid;
                let a = SetAttr {
                    mode: (v & F::FATTR_MODE != 0).then_some(s.mode),
                    uid: (v & F::FATTR_UID != 0).then_some(s.uid),
                    gid: (v & F::FATTR_GID != 0).then_some(s.gid),
                    size: (v & F::FATTR_SIZE != 0).then_some(s.size),
                    atime: set_time(v, F::FATTR_ATIME, F::FATTR_ATIME_NOW, s.atime, s.atimensec),
                    mtime: set_time(v, F::FATTR_MTIME, F::FATTR_MTIME_NOW, s.mtime, s.mtimensec),
                    fh: (v & F::FATTR_FH != 0).then_some(s.fh),
                };
                o.push(self.op_setattr(c, ino, a)?.as_bytes());
            }
            op::FUSE_READLINK => o.push(&self.op_readlink(c, ino)?),
            op::FUSE_SYMLINK => {
                let (name, rest) = cstr(b)?;
                let (target, _) = cstr(rest)?;
                o.push(self.op_symlink(c, ino, name, target)?.as_bytes());
            }
            op::FUSE_MKNOD => {
                let (m, rest) = arg::<abi::MknodIn>(b)?;
                let (name, _) = cstr(rest)?;
                o.push(self.op_mknod(c, ino, name, m.mode, m.rdev)?.as_bytes());
            }
            op::FUSE_MKDIR => {
                let (m, rest) = arg::<abi::MkdirIn>(b)?;
                let (name, _) = cstr(rest)?;
                o.push(self.op_mkdir(c, ino, name, m.mode)?.as_bytes());
            }
            op::FUSE_UNLINK | op::FUSE_RMDIR => {
                let (name, _) = cstr(b)?;
                self.op_unlink(c, ino, name, h.opcode == op::FUSE_RMDIR)?;
            }
            op::FUSE_RENAME => {
                let (r, rest) = arg::<abi::RenameIn>(b)?;
                let (name, rest) = cstr(rest)?;
                let (newname, _) = cstr(rest)?;
                self.op_rename(c, ino, name, r.newdir, newname, 0)?;
            }
            op::FUSE_RENAME2 => {
                let (r, rest) = arg::<abi::Rename2In>(b)?;
                let (name, rest) = cstr(rest)?;
                let (newname, _) = cstr(rest)?;
                self.op_rename(c, ino, name, r.newdir, newname, r.flags)?;
            }
            op::FUSE_LINK => {
                let (l, rest) = arg::<abi::LinkIn>(b)?;
                let (newname, _) = cstr(rest)?;
                o.push(self.op_link(c, l.oldnodeid, ino, newname)?.as_bytes());
            }
            op::FUSE_OPEN | op::FUSE_OPENDIR => {
                let (i, _) = arg::<abi::OpenIn>(b)?;
                let dir = if h.opcode == op::FUSE_OPENDIR {
                    OpenFlags::DIRECTORY.bits()
                } else {
                    0
                };
                o.push(self.op_open(c, ino, i.flags | dir)?.as_bytes());
            }
            op::FUSE_READ => {
                let (r, _) = arg::<abi::ReadIn>(b)?;
                let size = r.size.min(MAX_WRITE);
                self.op_read(c, r.fh, r.offset, size, |d| o.push(d))?;
            }
            op::FUSE_WRITE => {
                let (w, data) = arg::<abi::WriteIn>(b)?;
                let data = data.get(..w.size as usize).ok_or(Errno::EINVAL)?;
                let n = self.op_write(c, w.fh, w.offset, data, w.write_flags, w.flags)?;
                o.push(
                    abi::WriteOut {
                        size: n,
                        padding: 0,
                    }
                    .as_bytes(),
                );
            }
            op::FUSE_STATFS => {
                let st = self.op_statfs(c, ino)?;
                o.push(abi::StatfsOut { st }.as_bytes());
            }
            op::FUSE_RELEASE | op::FUSE_RELEASEDIR => {
                let (r, _) = arg::<abi::ReleaseIn>(b)?;
                self.op_release(r.fh)?;
            }
            op::FUSE_FSYNC | op::FUSE_FSYNCDIR => {
                let (f, _) = arg::<abi::FsyncIn>(b)?;
                self.op_fsync(c, f.fh, f.fsync_flags & FUSE_FSYNC_FDATASYNC != 0)?;
            }
            op::FUSE_FLUSH => {
                arg::<abi::FlushIn>(b)?;
                self.op_flush()?;
            }
            op::FUSE_SETXATTR => {
                let (size, flags) = match b.get(..SETXATTR_IN_COMPAT) {
                    Some(a) => {
                        let (s, _) = arg::<abi::GetxattrIn>(a)?;
                        (s.size, s.padding)
                    }
                    None => return Err(Errno::EINVAL),
                };
                let (name, value) = cstr(&b[SETXATTR_IN_COMPAT..])?;
                let value = value.get(..size as usize).ok_or(Errno::EINVAL)?;
                self.op_setxattr(c, ino, name, value, flags)?;
            }
            op::FUSE_GETXATTR | op::FUSE_LISTXATTR => {
                let (g, rest) = arg::<abi::GetxattrIn>(b)?;
                let mut put = |x: Xattr<'_>| match x {
                    Xattr::Size(n) => o.push(
                        abi::GetxattrOut {
                            size: n,
                            padding: 0,
                        }
                        .as_bytes(),
                    ),
                    Xattr::Data(d) => o.push(d),
                };
                if h.opcode == op::FUSE_GETXATTR {
                    let (name, _) = cstr(rest)?;
                    self.op_getxattr(c, ino, name, g.size, &mut put)?;
                } else {
                    self.op_listxattr(c, ino, g.size, &mut put)?;
                }
            }
            op::FUSE_REMOVEXATTR => {
                let (name, _) = cstr(b)?;
                self.op_removexattr(c, ino, name)?;
            }
            op::FUSE_ACCESS => {
                let (a, _) = arg::<abi::AccessIn>(b)?;
                self.op_access(c, ino, a.mask)?;
            }
            op::FUSE_CREATE => {
                let (i, rest) = arg::<abi::CreateIn>(b)?;
                let (name, _) = cstr(rest)?;
                let (e, open) = self.op_create(c, ino, name, i.mode, i.flags)?;
                o.push(e.as_bytes());
                o.push(open.as_bytes());
            }
            op::FUSE_TMPFILE => {
                let (i, rest) = arg::<abi::CreateIn>(b)?;
                // The name (`/`) is checked for its NUL only: a tmpfile has none.
                cstr(rest)?;
                let (e, open) = self.op_tmpfile(c, ino, i.mode, i.flags)?;
                o.push(e.as_bytes());
                o.push(open.as_bytes());
            }
            op::FUSE_READDIR | op::FUSE_READDIRPLUS => {
                let (r, _) = arg::<abi::ReadIn>(b)?;
                let size = r.size.min(MAX_WRITE) as usize;
                if h.opcode == op::FUSE_READDIR {
                    self.op_readdir(c, r.fh, r.offset, |e| add_dirent(o, size, None, &e))?;
                } else {
                    self.op_readdirplus(c, ino, r.fh, r.offset, |ent, e| {
                        add_dirent(o, size, Some(ent), &e)
                    })?;
                }
            }
            op::FUSE_FALLOCATE => {
                let (f, _) = arg::<abi::FallocateIn>(b)?;
                self.op_fallocate(c, f.fh, f.offset, f.length, f.mode)?;
            }
            op::FUSE_LSEEK => {
                let (l, _) = arg::<abi::LseekIn>(b)?;
                let offset = self.op_lseek(c, l.fh, l.offset as i64, l.whence)?;
                o.push(
                    abi::LseekOut {
                        offset: offset as u64,
                    }
                    .as_bytes(),
                );
            }
            // Everything uvfs does not implement (INTERRUPT is `dispatch`'s).
            _ => return Err(Errno::ENOSYS),
        }
        Ok(())
    }

    /// The reply to INIT `i` (libfuse `do_init`).
    ///
    /// # Errors
    /// `EPROTO` for a major below 7 or a minor below 7.23.
    fn init_reply(&self, i: &abi::InitIn) -> Result<abi::InitOut> {
        use abi::init as F;
        let mut reply = abi::InitOut {
            major: abi::FUSE_KERNEL_VERSION,
            minor: abi::FUSE_KERNEL_MINOR_VERSION,
            ..Default::default()
        };
        // A newer major: answer with ours alone; the kernel sends INIT again with it.
        if i.major > abi::FUSE_KERNEL_VERSION {
            return Ok(reply);
        }
        if i.major < abi::FUSE_KERNEL_VERSION || i.minor < abi::FUSE_MIN_MINOR_VERSION {
            return Err(Errno::EPROTO);
        }
        let mut offered = u64::from(i.flags);
        if offered & F::FUSE_INIT_EXT != 0 {
            offered |= u64::from(i.flags2) << 32;
        }
        let wants = F::FUSE_ASYNC_READ | F::FUSE_BIG_WRITES | F::FUSE_MAX_PAGES | self.init_wants();
        let mut flags = wants & offered;
        if flags >> 32 != 0 {
            flags |= F::FUSE_INIT_EXT;
        }
        self.init_settled(flags);
        reply.minor = i.minor.min(abi::FUSE_KERNEL_MINOR_VERSION);
        reply.max_readahead = i.max_readahead;
        reply.flags = flags as u32;
        reply.flags2 = (flags >> 32) as u32;
        reply.max_background = 16;
        reply.congestion_threshold = 12;
        reply.max_write = MAX_WRITE;
        reply.time_gran = 1;
        reply.max_pages = max_pages();
        Ok(reply)
    }
}

#[cfg(test)]
mod tests;
