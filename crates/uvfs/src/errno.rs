//! `Errno`, the error type of every uvfs operation, with Linux's numeric values.
//!
//! Linux analogue: the negative `-E*` return values of `include/uapi/asm-generic/errno-base.h`
//! and `errno.h`. Conversions with `std::io::Error` and rustix's `Errno` sit at the edges
//! (rustix:src/io/errno.rs).

use std::fmt;
use std::num::NonZeroI32;

/// A Linux error number (`errno`), always non-zero and positive.
///
/// Shapes: a 4-byte newtype over `NonZeroI32`, so `Result<()>` is 4 bytes and
/// `Result<u32>` is 8. Values are Linux x86_64/generic values (`ENOENT` = 2 ...).
///
/// # References
/// errno(3), Linux `include/uapi/asm-generic/errno-base.h`.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Errno(NonZeroI32);

/// The result of a uvfs operation: a value or a Linux `Errno`.
pub type Result<T> = std::result::Result<T, Errno>;

macro_rules! errnos {
    ($($name:ident = $val:expr, $msg:expr;)*) => {
        impl Errno {
            $(
                #[doc = $msg]
                pub const $name: Errno = Errno(match NonZeroI32::new($val) {
                    Some(v) => v,
                    None => panic!("errno 0"),
                });
            )*

            /// The symbolic name (`"ENOENT"`) of a known errno, `None` otherwise.
            pub fn name(self) -> Option<&'static str> {
                match self.0.get() {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            fn message(self) -> &'static str {
                match self.0.get() {
                    $($val => $msg,)*
                    _ => "unknown error",
                }
            }
        }
    };
}

errnos! {
    EPERM = 1, "Operation not permitted";
    ENOENT = 2, "No such file or directory";
    ESRCH = 3, "No such process";
    EINTR = 4, "Interrupted system call";
    EIO = 5, "Input/output error";
    ENXIO = 6, "No such device or address";
    E2BIG = 7, "Argument list too long";
    ENOEXEC = 8, "Exec format error";
    EBADF = 9, "Bad file descriptor";
    ECHILD = 10, "No child processes";
    EAGAIN = 11, "Resource temporarily unavailable";
    ENOMEM = 12, "Cannot allocate memory";
    EACCES = 13, "Permission denied";
    EFAULT = 14, "Bad address";
    ENOTBLK = 15, "Block device required";
    EBUSY = 16, "Device or resource busy";
    EEXIST = 17, "File exists";
    EXDEV = 18, "Invalid cross-device link";
    ENODEV = 19, "No such device";
    ENOTDIR = 20, "Not a directory";
    EISDIR = 21, "Is a directory";
    EINVAL = 22, "Invalid argument";
    ENFILE = 23, "Too many open files in system";
    EMFILE = 24, "Too many open files";
    ENOTTY = 25, "Inappropriate ioctl for device";
    ETXTBSY = 26, "Text file busy";
    EFBIG = 27, "File too large";
    ENOSPC = 28, "No space left on device";
    ESPIPE = 29, "Illegal seek";
    EROFS = 30, "Read-only file system";
    EMLINK = 31, "Too many links";
    EPIPE = 32, "Broken pipe";
    EDOM = 33, "Numerical argument out of domain";
    ERANGE = 34, "Numerical result out of range";
    EDEADLK = 35, "Resource deadlock avoided";
    ENAMETOOLONG = 36, "File name too long";
    ENOLCK = 37, "No locks available";
    ENOSYS = 38, "Function not implemented";
    ENOTEMPTY = 39, "Directory not empty";
    ELOOP = 40, "Too many levels of symbolic links";
    ENODATA = 61, "No data available";
    EPROTO = 71, "Protocol error";
    EOVERFLOW = 75, "Value too large for defined data type";
    ENOTSOCK = 88, "Socket operation on non-socket";
    EOPNOTSUPP = 95, "Operation not supported";
    ECONNABORTED = 103, "Software caused connection abort";
    ECONNRESET = 104, "Connection reset by peer";
    ENOTCONN = 107, "Transport endpoint is not connected";
    ETIMEDOUT = 110, "Connection timed out";
    ESTALE = 116, "Stale file handle";
    EDQUOT = 122, "Disk quota exceeded";
    ECANCELED = 125, "Operation canceled";
}

impl Errno {
    /// `EWOULDBLOCK` is `EAGAIN` on Linux.
    pub const EWOULDBLOCK: Errno = Errno::EAGAIN;
    /// `ENOTSUP` is `EOPNOTSUPP` on Linux.
    pub const ENOTSUP: Errno = Errno::EOPNOTSUPP;

    /// The raw positive errno value (`ENOENT.raw() == 2`).
    #[inline]
    pub const fn raw(self) -> i32 {
        self.0.get()
    }

    /// Builds an `Errno` from a raw value; `None` for 0 or negative values.
    pub const fn from_raw(raw: i32) -> Option<Errno> {
        if raw <= 0 {
            return None;
        }
        match NonZeroI32::new(raw) {
            Some(v) => Some(Errno(v)),
            None => None,
        }
    }

    /// The errno carried by an `io::Error`, `EIO` when it carries none.
    pub fn from_io_error(e: &std::io::Error) -> Errno {
        e.raw_os_error()
            .and_then(Errno::from_raw)
            .unwrap_or(Errno::EIO)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.message(), self)
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    /// `raw_os_error()` of the result is the errno.
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.raw())
    }
}

impl From<rustix::io::Errno> for Errno {
    fn from(e: rustix::io::Errno) -> Self {
        Errno::from_raw(e.raw_os_error()).unwrap_or(Errno::EIO)
    }
}

impl From<Errno> for rustix::io::Errno {
    fn from(e: Errno) -> Self {
        rustix::io::Errno::from_raw_os_error(e.raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_linux() {
        // Linux asm-generic values, checked against the host's libc via rustix.
        assert_eq!(Errno::ENOENT.raw(), rustix::io::Errno::NOENT.raw_os_error());
        assert_eq!(Errno::EMFILE.raw(), rustix::io::Errno::MFILE.raw_os_error());
        assert_eq!(Errno::ELOOP.raw(), rustix::io::Errno::LOOP.raw_os_error());
        assert_eq!(
            Errno::ENOTEMPTY.raw(),
            rustix::io::Errno::NOTEMPTY.raw_os_error()
        );
        assert_eq!(
            Errno::EOPNOTSUPP.raw(),
            rustix::io::Errno::OPNOTSUPP.raw_os_error()
        );
        assert_eq!(
            Errno::ENAMETOOLONG.raw(),
            rustix::io::Errno::NAMETOOLONG.raw_os_error()
        );
    }

    #[test]
    fn io_error_round_trip() {
        let io: std::io::Error = Errno::EISDIR.into();
        assert_eq!(io.raw_os_error(), Some(21));
        assert_eq!(io.kind(), std::io::ErrorKind::IsADirectory);
        assert_eq!(Errno::from_io_error(&io), Errno::EISDIR);
        assert_eq!(Errno::from(rustix::io::Errno::NOTDIR), Errno::ENOTDIR);
        assert_eq!(format!("{:?}", Errno::EBADF), "EBADF");
        assert_eq!(Errno::from_raw(0), None);
    }
}
