//! `OwnedFd`: a descriptor owned by a Rust value, with `std::io::{Read, Write, Seek}`.
//!
//! Linux analogue: none (the std `OwnedFd`/`File` pattern over `read`/`write`/`lseek`).

use crate::task::Task;
use crate::types::*;
use crate::variant::{Uvfs, Variant};
use crate::Result;
use std::io;

/// A descriptor of `task` that is closed when dropped; `Read`/`Write`/`Seek` go through the
/// task's `read`/`write`/`lseek`, so the position is shared with every `dup` of it.
#[derive(Debug)]
pub struct OwnedFd<'t, V: Variant = Uvfs> {
    task: &'t Task<V>,
    fd: Fd,
}

impl<'t, V: Variant> OwnedFd<'t, V> {
    /// Takes ownership of `fd` (it will be closed on drop).
    pub fn new(task: &'t Task<V>, fd: Fd) -> OwnedFd<'t, V> {
        OwnedFd { task, fd }
    }

    /// The descriptor number.
    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// Gives up ownership without closing.
    pub fn into_raw(self) -> Fd {
        let fd = self.fd;
        std::mem::forget(self);
        fd
    }

    /// `fstat` of the descriptor.
    ///
    /// # Errors
    /// As [`Task::fstat`].
    pub fn stat(&self) -> Result<Stat> {
        self.task.fstat(self.fd)
    }
}

impl<V: Variant> Task<V> {
    /// Opens `path` (as [`Task::open`]) and returns an owning handle.
    ///
    /// # Errors
    /// As [`Task::openat`].
    pub fn open_owned(
        &self,
        path: impl AsPath,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<OwnedFd<'_, V>> {
        Ok(OwnedFd::new(self, self.open(path, flags, mode)?))
    }
}

impl<V: Variant> Drop for OwnedFd<'_, V> {
    fn drop(&mut self) {
        let _ = self.task.close(self.fd);
    }
}

impl<V: Variant> io::Read for OwnedFd<'_, V> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.task.read(self.fd, buf)?)
    }
}

impl<V: Variant> io::Write for OwnedFd<'_, V> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(self.task.write(self.fd, buf)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<V: Variant> io::Seek for OwnedFd<'_, V> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let (off, whence) = match pos {
            io::SeekFrom::Start(o) => (
                i64::try_from(o).map_err(|_| io::Error::from(crate::Errno::EINVAL))?,
                SEEK_SET,
            ),
            io::SeekFrom::Current(o) => (o, SEEK_CUR),
            io::SeekFrom::End(o) => (o, SEEK_END),
        };
        Ok(self.task.lseek(self.fd, off, whence)? as u64)
    }
}
