//! `OwnedFd` (a descriptor owned by a Rust value) and `OpenFile` (an open file owned by a
//! Rust value, without a descriptor), with `std::io::{Read, Write, Seek}`.
//!
//! Linux analogue: none (the std `OwnedFd`/`File` pattern over `read`/`write`/`lseek`);
//! `OpenFile` is a `struct file *` held outside any `files_struct`, as a kernel caller of
//! `filp_open` holds one.

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

    /// The task whose descriptor it is.
    pub fn task(&self) -> &'t Task<V> {
        self.task
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
        Ok(self.task.seek(self.fd, pos)?)
    }
}

/// An open file owned by a Rust value, independent of any descriptor table: it holds its
/// own reference to the [`File`](crate::File) (as a descriptor would), so it can be
/// stored, moved to another thread and shared (`Send + Sync`, with `Read`/`Write`/`Seek`
/// also on `&OpenFile`, as `std::fs::File`). Closing every descriptor of the file does not
/// close it; dropping the last `OpenFile` (and descriptor) does (`fput`).
///
/// Writes and truncation act with the credentials and `RLIMIT_FSIZE` of the task the
/// handle was made from, as they were then (Linux uses the calling task's: an `OpenFile`
/// has no calling task). The position is the open file's, shared with every descriptor and
/// [`try_clone`](Self::try_clone) of it, as `dup` shares it.
///
/// # Refcounting
/// One reference (`f_ref`) per `OpenFile`; [`install`](Self::install) gives a task's table
/// another.
#[derive(Debug)]
pub struct OpenFile<V: Variant = Uvfs> {
    file: crate::FileHandle<V>,
    cred: crate::Cred,
    fsize: u64,
}

impl<V: Variant> Clone for OpenFile<V> {
    /// Another reference to the same open file (`get_file`).
    fn clone(&self) -> Self {
        OpenFile {
            file: self.file.clone(),
            cred: self.cred.clone(),
            fsize: self.fsize,
        }
    }
}

impl<V: Variant> Task<V> {
    /// Opens `path` (as [`Task::openat`] from the working directory) as an [`OpenFile`]:
    /// no descriptor is allocated.
    ///
    /// # Errors
    /// As [`Task::openat`] (`EMFILE` never: no descriptor).
    pub fn open_file(&self, path: impl AsPath, flags: OpenFlags, mode: u32) -> Result<OpenFile<V>> {
        let file = self.filp_open(Fd::AT_FDCWD, path, flags, mode)?;
        Ok(self.own(file))
    }

    /// An [`OpenFile`] of the file descriptor `fd` names (a new reference: `fget`); the
    /// descriptor stays open.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn fget_file(&self, fd: Fd) -> Result<OpenFile<V>> {
        Ok(self.own(self.files.fget(fd.0)?))
    }

    /// A host descriptor of the regular file `fd` names, with the open file's access
    /// mode ([`FileOps::host_fd`](crate::fs::FileOps::host_fd)): what `uvfs run` installs
    /// in a traced program so that the kernel can map the file itself.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open; `EOPNOTSUPP` when its file system has no host file
    /// behind it (tmpfs); the host's error when it cannot be reopened.
    pub fn host_fd(&self, fd: Fd) -> Result<std::os::fd::OwnedFd> {
        let f = self.files.fget(fd.0)?;
        self.host_fd_as(fd, f.flags())
    }

    /// [`host_fd`](Self::host_fd) with the access mode and `O_NONBLOCK` of `flags` instead
    /// of the open file's: for an `O_PATH` descriptor of a device node, whose host device
    /// `uvfs run` opens (uvfs drives no devices). The caller checks the permission.
    ///
    /// # Errors
    /// As [`host_fd`](Self::host_fd).
    pub fn host_fd_as(&self, fd: Fd, flags: OpenFlags) -> Result<std::os::fd::OwnedFd> {
        let f = self.files.fget(fd.0)?;
        let inode = f.inode();
        inode.i_op.host_fd(inode, flags)
    }

    fn own(&self, file: crate::FileHandle<V>) -> OpenFile<V> {
        OpenFile {
            file,
            cred: self.cred.clone(),
            fsize: self.getrlimit_fsize(),
        }
    }
}

impl<'t, V: Variant> OwnedFd<'t, V> {
    /// The descriptor's open file as an [`OpenFile`], closing the descriptor (the file
    /// stays open through the handle).
    ///
    /// # Errors
    /// `EBADF` if the descriptor was closed behind the handle's back.
    pub fn into_file(self) -> Result<OpenFile<V>> {
        let task = self.task;
        let f = task.fget_file(self.fd);
        drop(self);
        f
    }
}

impl<V: Variant> OpenFile<V> {
    /// `EBADF` for an `O_PATH` file, as `fdget` gives for every call but `fstat`.
    fn not_path(&self) -> Result<&crate::FileHandle<V>> {
        // Every call that may reach the file system goes through here (or `stat`): the
        // opener's credentials are this call's caller (`cred::caller`).
        crate::cred::set_caller(&self.cred);
        if self.file.mode().contains(crate::file::FMode::PATH) {
            return Err(crate::Errno::EBADF);
        }
        Ok(&self.file)
    }

    /// The open file.
    pub fn file(&self) -> &crate::FileHandle<V> {
        &self.file
    }

    /// Installs the file in `task`'s table at its lowest free descriptor (another
    /// reference; `fd_install`).
    ///
    /// # Errors
    /// `EMFILE` if the table is full.
    pub fn install(&self, task: &Task<V>, cloexec: bool) -> Result<Fd> {
        task.install_file(self.file.clone(), cloexec)
    }

    /// Another handle to the same open file (shared position; `std::fs::File::try_clone`).
    ///
    /// # Errors
    /// None (`io::Result` as std's).
    pub fn try_clone(&self) -> io::Result<OpenFile<V>> {
        Ok(self.clone())
    }

    /// `pread(2)` at `offset` (`std::os::unix::fs::FileExt::read_at`).
    ///
    /// # Errors
    /// `EINVAL` (offset past `i64::MAX`), `EBADF` (not open for reading), `EISDIR`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let off = i64::try_from(offset).map_err(|_| io::Error::from(crate::Errno::EINVAL))?;
        Ok(self.not_path()?.read_at_offset(buf, off)?)
    }

    /// `pwrite(2)` at `offset` (`FileExt::write_at`; with `O_APPEND` at the end, as Linux).
    ///
    /// # Errors
    /// `EINVAL`, `EBADF` (not open for writing), `EFBIG`, `ENOSPC`.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let off = i64::try_from(offset).map_err(|_| io::Error::from(crate::Errno::EINVAL))?;
        Ok(self
            .not_path()?
            .write_at_offset(buf, off, &self.cred, self.fsize)?)
    }

    /// `fstat` of the file.
    ///
    /// # Errors
    /// What refreshing the attributes gives on a file system that can change behind the
    /// VFS (hostfs: the host's errno).
    pub fn stat(&self) -> io::Result<Stat> {
        crate::cred::set_caller(&self.cred);
        self.file.inode().refresh()?;
        Ok(self.file.dentry().stat_marking(V::TEST_BEFORE_SET))
    }

    /// `ftruncate(2)` (`std::fs::File::set_len`).
    ///
    /// # Errors
    /// `EINVAL` (not a regular file open for writing; `size` past `i64::MAX`), `EFBIG`
    /// (past `RLIMIT_FSIZE`), `EPERM` (an immutable file), `ENOSPC`.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        let len = i64::try_from(size).map_err(|_| io::Error::from(crate::Errno::EINVAL))?;
        Ok(self.not_path()?.truncate_to(len, &self.cred, self.fsize)?)
    }

    /// `fsync(2)` (`std::fs::File::sync_all`).
    ///
    /// # Errors
    /// `EBADF` for an `O_PATH` file; the file system's (hostfs: the host's `fsync`).
    pub fn sync_all(&self) -> io::Result<()> {
        let f = self.not_path()?;
        Ok(f.inode().i_op.fsync(f.inode(), f.fh(), false)?)
    }
}

impl<V: Variant> io::Read for &OpenFile<V> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.not_path()?.read_pos(buf)?)
    }
}

impl<V: Variant> io::Read for OpenFile<V> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl<V: Variant> io::Write for &OpenFile<V> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(self.not_path()?.write_pos(buf, &self.cred, self.fsize)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<V: Variant> io::Write for OpenFile<V> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `SeekFrom` as `lseek`'s offset and whence; `EINVAL` for a `Start` past `i64::MAX`.
pub(crate) fn whence(pos: io::SeekFrom) -> Result<(i64, i32)> {
    Ok(match pos {
        io::SeekFrom::Start(o) => (
            i64::try_from(o).map_err(|_| crate::Errno::EINVAL)?,
            SEEK_SET,
        ),
        io::SeekFrom::Current(o) => (o, SEEK_CUR),
        io::SeekFrom::End(o) => (o, SEEK_END),
    })
}

impl<V: Variant> io::Seek for &OpenFile<V> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let (off, w) = whence(pos)?;
        Ok(self.not_path()?.llseek(off, w)? as u64)
    }
}

impl<V: Variant> io::Seek for OpenFile<V> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        (&*self).seek(pos)
    }
}
