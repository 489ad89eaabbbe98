//! The extended-attribute [`Sys`](super::Sys) methods: uvfs's and the host's raw system
//! calls (`getxattr`, `lgetxattr`, `fgetxattr`, and the `set`, `list`, `remove` families).

use super::{cpath, sc};
use uvfs::{Fd, Result, Task};

/// Which file an xattr call is about, and so which of the three system calls it is.
#[derive(Clone, Copy, Debug)]
pub enum XTarget<'a> {
    /// `getxattr` & co.: a path, a final symlink followed.
    Path(&'a [u8]),
    /// `lgetxattr` & co.: a path, a final symlink itself.
    LPath(&'a [u8]),
    /// `fgetxattr` & co.: a descriptor.
    Fd(Fd),
}

pub(super) fn uvfs_get(t: &Task, x: XTarget<'_>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
    match x {
        XTarget::Path(p) => t.getxattr(p, name, buf),
        XTarget::LPath(p) => t.lgetxattr(p, name, buf),
        XTarget::Fd(fd) => t.fgetxattr(fd, name, buf),
    }
}

pub(super) fn uvfs_set(t: &Task, x: XTarget<'_>, name: &[u8], v: &[u8], flags: u32) -> Result<()> {
    match x {
        XTarget::Path(p) => t.setxattr(p, name, v, flags),
        XTarget::LPath(p) => t.lsetxattr(p, name, v, flags),
        XTarget::Fd(fd) => t.fsetxattr(fd, name, v, flags),
    }
}

pub(super) fn uvfs_list(t: &Task, x: XTarget<'_>, buf: &mut [u8]) -> Result<usize> {
    match x {
        XTarget::Path(p) => t.listxattr(p, buf),
        XTarget::LPath(p) => t.llistxattr(p, buf),
        XTarget::Fd(fd) => t.flistxattr(fd, buf),
    }
}

pub(super) fn uvfs_remove(t: &Task, x: XTarget<'_>, name: &[u8]) -> Result<()> {
    match x {
        XTarget::Path(p) => t.removexattr(p, name),
        XTarget::LPath(p) => t.lremovexattr(p, name),
        XTarget::Fd(fd) => t.fremovexattr(fd, name),
    }
}

/// A buffer pointer for the kernel: null when empty (a size-0 query).
fn out(buf: &mut [u8]) -> *mut libc::c_void {
    if buf.is_empty() {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    }
}

pub(super) fn host_get(x: XTarget<'_>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
    let n = cpath(name);
    let (b, len) = (out(buf), buf.len());
    // SAFETY: valid NUL-terminated strings; `b` valid for `len` bytes or null with 0.
    let r = unsafe {
        match x {
            XTarget::Path(p) => {
                libc::syscall(libc::SYS_getxattr, cpath(p).as_ptr(), n.as_ptr(), b, len)
            }
            XTarget::LPath(p) => {
                libc::syscall(libc::SYS_lgetxattr, cpath(p).as_ptr(), n.as_ptr(), b, len)
            }
            XTarget::Fd(fd) => libc::syscall(libc::SYS_fgetxattr, fd.0, n.as_ptr(), b, len),
        }
    };
    sc(r).map(|v| v as usize)
}

pub(super) fn host_set(x: XTarget<'_>, name: &[u8], v: &[u8], flags: u32) -> Result<()> {
    let n = cpath(name);
    let (vp, len) = (v.as_ptr(), v.len());
    // SAFETY: valid NUL-terminated strings; `vp` valid for `len` bytes.
    let r = unsafe {
        match x {
            XTarget::Path(p) => libc::syscall(
                libc::SYS_setxattr,
                cpath(p).as_ptr(),
                n.as_ptr(),
                vp,
                len,
                flags,
            ),
            XTarget::LPath(p) => libc::syscall(
                libc::SYS_lsetxattr,
                cpath(p).as_ptr(),
                n.as_ptr(),
                vp,
                len,
                flags,
            ),
            XTarget::Fd(fd) => libc::syscall(libc::SYS_fsetxattr, fd.0, n.as_ptr(), vp, len, flags),
        }
    };
    sc(r).map(drop)
}

pub(super) fn host_list(x: XTarget<'_>, buf: &mut [u8]) -> Result<usize> {
    let (b, len) = (out(buf), buf.len());
    // SAFETY: valid NUL-terminated path; `b` valid for `len` bytes or null with 0.
    let r = unsafe {
        match x {
            XTarget::Path(p) => libc::syscall(libc::SYS_listxattr, cpath(p).as_ptr(), b, len),
            XTarget::LPath(p) => libc::syscall(libc::SYS_llistxattr, cpath(p).as_ptr(), b, len),
            XTarget::Fd(fd) => libc::syscall(libc::SYS_flistxattr, fd.0, b, len),
        }
    };
    sc(r).map(|v| v as usize)
}

pub(super) fn host_remove(x: XTarget<'_>, name: &[u8]) -> Result<()> {
    let n = cpath(name);
    // SAFETY: valid NUL-terminated strings.
    let r = unsafe {
        match x {
            XTarget::Path(p) => libc::syscall(libc::SYS_removexattr, cpath(p).as_ptr(), n.as_ptr()),
            XTarget::LPath(p) => {
                libc::syscall(libc::SYS_lremovexattr, cpath(p).as_ptr(), n.as_ptr())
            }
            XTarget::Fd(fd) => libc::syscall(libc::SYS_fremovexattr, fd.0, n.as_ptr()),
        }
    };
    sc(r).map(drop)
}
