//! The mount-tree [`Sys`](super::Sys) methods: `mount(2)` (a new tmpfs, a bind, a change of
//! per-mount flags), `umount2(2)`, the mount table (`/proc/thread-self/mountinfo` on the
//! host, `Task::mountinfo` on uvfs) and the open of `execve(2)`, on the host as raw system
//! calls.
//!
//! The host side runs in the sandbox thread, which has a private mount namespace (every
//! mount made `MS_PRIVATE` before the `chroot`, see `enter_sandbox`): what a test mounts
//! there never reaches the host's namespace and goes away with the thread.

use super::Sys as _;
use super::{cpath, sc};
use uvfs::{Errno, Fd, Result};

pub use uvfs::{MountFlags, UmountFlags};

/// The per-mount flags a mount table entry reports (`ro`, `nosuid`, `nodev`, `noexec`).
pub const MNT_FLAGS: MountFlags = MountFlags::RDONLY
    .union(MountFlags::NOSUID)
    .union(MountFlags::NODEV)
    .union(MountFlags::NOEXEC);

/// One mount-table entry, as both sides report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mnt {
    pub id: u64,
    pub parent_id: u64,
    /// `st_dev` of the files in it.
    pub dev: u64,
    /// The path of the mount's root within its file system.
    pub root: Vec<u8>,
    /// Where it is mounted, relative to the task's root.
    pub mount_point: Vec<u8>,
    /// The per-mount flags among [`MNT_FLAGS`].
    pub flags: MountFlags,
    pub fs_type: String,
}

/// A mount-table entry without ids and devices: where, what part of its file system, which
/// flags, and the mount point of its parent (`None` for the first entry, whose parent is
/// above the task's root or itself).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MntShape {
    pub mount_point: String,
    pub root: String,
    pub flags: u64,
    pub parent: Option<String>,
}

/// The comparable shape of a mount table: each entry's [`MntShape`], in table order.
pub fn mount_shape(t: &[Mnt]) -> Vec<MntShape> {
    t.iter()
        .map(|m| MntShape {
            mount_point: super::show(&m.mount_point),
            root: super::show(&m.root),
            flags: m.flags.bits(),
            parent: t
                .iter()
                .find(|p| p.id == m.parent_id && p.id != m.id)
                .map(|p| super::show(&p.mount_point)),
        })
        .collect()
}

/// Checks what every mount table must satisfy: ids unique, a parent listed before its
/// children (only the first entry's parent may be unlisted or itself), each entry's `dev`
/// that of the files at its mount point (as `stat` sees them through `s`, unless a later
/// mount covers it).
pub fn check_mount_table(s: &dyn super::Sys, t: &[Mnt]) {
    assert!(!t.is_empty(), "{}: an empty mount table", s.kind());
    for (i, m) in t.iter().enumerate() {
        assert!(
            t[..i].iter().all(|o| o.id != m.id),
            "{}: mount id {} twice: {t:?}",
            s.kind(),
            m.id
        );
        if i > 0 {
            assert!(
                t[..i].iter().any(|p| p.id == m.parent_id),
                "{}: the parent of entry {i} is not listed before it: {t:?}",
                s.kind()
            );
        }
        let covered = t[i + 1..].iter().any(|o| o.mount_point == m.mount_point);
        if !covered && m.root == b"/" {
            let st = s
                .stat(&m.mount_point)
                .unwrap_or_else(|e| panic!("{}: stat {:?}: {e:?}", s.kind(), m));
            assert_eq!(st.st_dev, m.dev, "{}: st_dev of {m:?}", s.kind());
        }
    }
}

/// uvfs's mount table as [`Mnt`]s.
pub(crate) fn from_uvfs(t: Vec<uvfs::MountInfo>) -> Vec<Mnt> {
    t.into_iter()
        .map(|m| Mnt {
            id: m.mnt_id,
            parent_id: m.parent_id,
            dev: m.dev,
            root: m.root,
            mount_point: m.mount_point,
            flags: m.flags.intersection(MNT_FLAGS),
            fs_type: m.fs_type.to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// host side

fn host_mount(
    source: Option<&[u8]>,
    target: &[u8],
    fstype: Option<&std::ffi::CStr>,
    flags: u64,
) -> Result<()> {
    let src = source.map(cpath);
    let t = cpath(target);
    // SAFETY: NUL-terminated strings or NULL, NULL data; a mount in this sandbox thread's
    // private mount namespace.
    sc(unsafe {
        libc::syscall(
            libc::SYS_mount,
            src.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            t.as_ptr(),
            fstype.map_or(std::ptr::null(), |s| s.as_ptr()),
            flags as libc::c_ulong,
            std::ptr::null::<libc::c_void>(),
        )
    })
    .map(drop)
}

/// `mount("tmpfs", target, "tmpfs", flags, NULL)`.
pub(crate) fn host_mount_tmpfs(target: &[u8], flags: MountFlags) -> Result<()> {
    host_mount(Some(b"tmpfs"), target, Some(c"tmpfs"), flags.bits())
}

/// `mount(source, target, NULL, MS_BIND | flags, NULL)`.
pub(crate) fn host_mount_bind(source: &[u8], target: &[u8], flags: MountFlags) -> Result<()> {
    let f = MountFlags::BIND | flags;
    host_mount(Some(source), target, None, f.bits())
}

/// `mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)`.
pub(crate) fn host_mount_setflags(target: &[u8], flags: MountFlags) -> Result<()> {
    let f = MountFlags::REMOUNT | MountFlags::BIND | flags;
    host_mount(None, target, None, f.bits())
}

/// `umount2(target, flags)`.
pub(crate) fn host_umount2(target: &[u8], flags: UmountFlags) -> Result<()> {
    let t = cpath(target);
    // SAFETY: a NUL-terminated path; an unmount in this thread's private namespace.
    sc(unsafe { libc::syscall(libc::SYS_umount2, t.as_ptr(), flags.bits() as libc::c_int) })
        .map(drop)
}

/// Where [`host_mountinfo`] mounts a procfs for a moment (inside the sandbox's root, whose
/// tree has no `/proc`); its own entry is left out of the table.
const PROC_DIR: &[u8] = b"/.uvfs-mountinfo-proc";

/// The sandbox thread's mount table: `/proc/thread-self/mountinfo` read through a procfs
/// mounted for the read at [`PROC_DIR`] (then unmounted and removed), without that entry.
pub(crate) fn host_mountinfo() -> Result<Vec<Mnt>> {
    let dir = cpath(PROC_DIR);
    // SAFETY: a NUL-terminated path.
    sc(unsafe { libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, dir.as_ptr(), 0o555) })?;
    let text = host_mount(Some(b"proc"), PROC_DIR, Some(c"proc"), 0).and_then(|()| {
        let mut p = PROC_DIR.to_vec();
        p.extend_from_slice(b"/thread-self/mountinfo");
        let text = read_host_file(&p);
        host_umount2(PROC_DIR, UmountFlags::empty()).expect("umount proc");
        text
    });
    // SAFETY: a NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_unlinkat,
            libc::AT_FDCWD,
            dir.as_ptr(),
            libc::AT_REMOVEDIR,
        )
    };
    let text = text?;
    Ok(text
        .lines()
        .map(parse_mountinfo_line)
        .filter(|m| m.mount_point != PROC_DIR)
        .collect())
}

fn read_host_file(path: &[u8]) -> Result<String> {
    let p = cpath(path);
    // SAFETY: a NUL-terminated path.
    let fd = sc(unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, p.as_ptr(), 0) })?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `buf` is valid for its length.
        let n = sc(unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) });
        match n {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n as usize]),
            Err(e) => {
                // SAFETY: our own descriptor.
                unsafe { libc::syscall(libc::SYS_close, fd) };
                return Err(e);
            }
        }
    }
    // SAFETY: our own descriptor.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    Ok(String::from_utf8(out).expect("mountinfo is text"))
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match oct {
            Some(v) if b[i] == b'\\' => {
                out.push(v);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// One line of `mountinfo` (proc_pid_mountinfo(5)): `id parent major:minor root
/// mount-point options [optional...] - type source super-options`.
fn parse_mountinfo_line(l: &str) -> Mnt {
    let f: Vec<&str> = l.split(' ').collect();
    let (major, minor) = f[2].split_once(':').expect("major:minor");
    let mut flags = MountFlags::empty();
    for o in f[5].split(',') {
        flags |= match o {
            "ro" => MountFlags::RDONLY,
            "nosuid" => MountFlags::NOSUID,
            "nodev" => MountFlags::NODEV,
            "noexec" => MountFlags::NOEXEC,
            _ => MountFlags::empty(),
        };
    }
    let sep = f
        .iter()
        .position(|x| *x == "-")
        .expect("mountinfo separator");
    Mnt {
        id: f[0].parse().unwrap(),
        parent_id: f[1].parse().unwrap(),
        dev: libc::makedev(major.parse().unwrap(), minor.parse().unwrap()),
        root: unescape(f[3]),
        mount_point: unescape(f[4]),
        flags,
        fs_type: f[sep + 1].to_string(),
    }
}

/// The open of `execve(2)` on `path`, on the host: `execveat` of the file, which must be
/// empty, so that where the kernel lets it run, no binary format takes it (`ENOEXEC`, here
/// `Ok`) and the thread never leaves this program.
pub(crate) fn host_exec_check(path: &[u8]) -> Result<()> {
    let p = cpath(path);
    // SAFETY: a NUL-terminated path.
    let fd = sc(unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            p.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC,
        )
    })?;
    let st = super::Host.fstat(Fd(fd as i32));
    let r = match st {
        Ok(st) if st.st_size != 0 => {
            panic!("exec_check of a non-empty file {:?}", super::show(path))
        }
        Ok(_) => {
            let argv = [p.as_ptr(), std::ptr::null()];
            let envp = [std::ptr::null::<libc::c_char>()];
            // SAFETY: an O_PATH descriptor of an empty file (no binary format accepts it,
            // so a permitted exec fails with ENOEXEC before the point of no return), an
            // empty path with AT_EMPTY_PATH, NULL-terminated argv and envp.
            let r = sc(unsafe {
                libc::syscall(
                    libc::SYS_execveat,
                    fd,
                    c"".as_ptr(),
                    argv.as_ptr(),
                    envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                )
            });
            match r {
                Err(Errno::ENOEXEC) => Ok(()),
                Err(e) => Err(e),
                Ok(_) => unreachable!("execveat returned success"),
            }
        }
        Err(e) => Err(e),
    };
    // SAFETY: our own descriptor.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    r
}
