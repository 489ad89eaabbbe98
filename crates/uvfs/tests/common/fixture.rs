//! The one starting tree of the `posix_*` tests: [`posix_tree`], built through [`Sys`]
//! (so the same calls make it on uvfs tmpfs, uvfs hostfs and the host kernel), a superset
//! of what the cases need.

use super::{Sys, CWD, NOAT};

/// Builds the shared POSIX test tree in an empty root (the harness's umask 022 applies, so
/// plain directories are 0755 and files 0644; uid and gid 0):
///
/// | entry | type, mode | contents | why |
/// |---|---|---|---|
/// | `/d/` | dir 0755 | `f`, `sub` | a directory that is not empty (`ENOTEMPTY`, walks through it, `..`) |
/// | `/d/f` | file 0644 | `"data"` (4 bytes) | a file one level down (`/d/f/` and `/d/f/x`: `ENOTDIR`; `labs`'s target) |
/// | `/d/sub/` | dir 0755 | empty | a nested directory (rename into a descendant: `EINVAL`; `..` walks; bind and mount targets) |
/// | `/e/` | dir 0755 | empty | an empty directory (`rmdir` succeeds; a rename target over a directory) |
/// | `/f` | file 0644 | `"hello"` (5 bytes) | the top-level regular file most cases open, stat, link and rename |
/// | `/l` | symlink | `f` | a relative symlink to a file (follow vs `NOFOLLOW`, `lstat`) |
/// | `/ld` | symlink | `d` | a symlink to a directory (walks through it, trailing slashes) |
/// | `/labs` | symlink | `/d/f` | an absolute symlink (resolved against the task's root; `RESOLVE_*`) |
/// | `/dangling` | symlink | `nowhere` | a symlink whose target is missing (`O_CREAT` through it, `ENOENT`) |
/// | `/loop` | symlink | `loop` | a symlink to itself (`ELOOP`) |
/// | `/sticky/` | dir 01777 | empty | a world-writable sticky directory (sticky-bit rules, `user.` xattrs on it) |
/// | `/private` | file 0600 | empty | a file only its owner may read or write (`EACCES` for other credentials) |
///
/// The root itself is 01777 (the harness's tmpfs root) and holds 10 entries, 3 of them
/// directories (`d`, `e`, `sticky`): `/` has link count 5 and `/d` (with `sub`) 3. Cases that depend on a directory's exact contents (listings, link counts,
/// directory sizes, `ENOTEMPTY`) are written against this table; change it and those
/// expectations together (they are checked against Linux on every run as root).
pub fn posix_tree(s: &dyn Sys) {
    s.mkdir(b"/d");
    s.mkfile(b"/d/f", b"data");
    s.mkdir(b"/d/sub");
    s.mkdir(b"/e");
    s.mkfile(b"/f", b"hello");
    s.symlink(b"f", b"/l");
    s.symlink(b"d", b"/ld");
    s.symlink(b"/d/f", b"/labs");
    s.symlink(b"nowhere", b"/dangling");
    s.symlink(b"loop", b"/loop");
    s.mkdirat(CWD, b"/sticky", 0o777)
        .unwrap_or_else(|e| panic!("{}: mkdir /sticky: {e:?}", s.kind()));
    s.fchmodat(CWD, b"/sticky", 0o1777, NOAT)
        .unwrap_or_else(|e| panic!("{}: chmod /sticky: {e:?}", s.kind()));
    s.mkfile(b"/private", b"");
    s.fchmodat(CWD, b"/private", 0o600, NOAT)
        .unwrap_or_else(|e| panic!("{}: chmod /private: {e:?}", s.kind()));
}
