//! `getdents64`: directory listing in stable cookie order.
//!
//! Linux analogue: fs/readdir.c (`getdents64`, `filldir64`), fs/libfs.c
//! (`offset_readdir`, `offset_dir_llseek`; tmpfs since 6.6).
//!
//! Position 0 yields `.`, 1 yields `..`; positions `>= 2` are entry cookies: the listing
//! resumes at the first entry whose cookie is at or after the position. Cookies come from
//! the directory's per-bucket sequences (dcache.rs), so the order is neither the names' nor
//! strictly the creations'; they are unique and, until a bucket's sequence wraps after 2^27
//! cookies (as Linux's offset map wraps), never reused, so an entry linked for the whole
//! listing appears exactly once, however many entries are created or removed meanwhile (an
//! entry renamed within the directory keeps its cookie; one renamed in from another
//! directory gets a new one).
//!
//! A listing ends at the entries that existed when it started: its first `getdents64`
//! after the open, or after a seek to 0 (`rewinddir`), records the directory's listing end
//! (`DirLocked::listing_end`: every cookie given out later is at or past it) in
//! `File::f_dir_end`, and entries with that cookie or a later one (created meanwhile) are
//! not listed. Without that bound a program that creates an entry per entry read would list
//! forever (xfstests generic/736; Linux 6.11's `offset_dir_open`/`offset_dir_llseek`
//! recorded the next offset the same way, and 6.18's newest-first walk never reaches
//! entries created behind it). The end is taken at the first call rather than at `open`,
//! so that opening a directory (as a `dirfd`, say) takes no directory lock; entries created
//! between the open and the first call are listed, as 6.18 lists them.

use crate::dcache::{EOD_COOKIE, FIRST_COOKIE};
use crate::inode::Inode;
use crate::sync::plain::Ordering;
use crate::sync::{epoch, plock};
use crate::task::Task;
use crate::types::*;
use crate::variant::Variant;
use crate::{Errno, Result};
use std::sync::Arc;

/// One parsed `linux_dirent64` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode number.
    pub d_ino: u64,
    /// Position to resume after this entry.
    pub d_off: i64,
    /// `DT_DIR`, `DT_REG`, `DT_LNK`, `DT_FIFO`, `DT_CHR`, `DT_BLK`, `DT_SOCK`.
    pub d_type: u8,
    /// Name (no NUL).
    pub name: Vec<u8>,
}

/// `S_DT`: the `d_type` is the file type bits shifted down (`DT_DIR`, `DT_REG`, `DT_LNK`,
/// `DT_FIFO`, `DT_CHR`, `DT_BLK`, `DT_SOCK`).
fn d_type(i: &Inode) -> u8 {
    ((i.mode() & S_IFMT) >> 12) as u8
}

/// Appends one `linux_dirent64` record to `buf` at `*used`; false if it does not fit.
fn emit(buf: &mut [u8], used: &mut usize, ino: u64, off: i64, ty: u8, name: &[u8]) -> bool {
    let reclen = (19 + name.len() + 1).next_multiple_of(8);
    if *used + reclen > buf.len() {
        return false;
    }
    let r = &mut buf[*used..*used + reclen];
    r[0..8].copy_from_slice(&ino.to_ne_bytes());
    r[8..16].copy_from_slice(&off.to_ne_bytes());
    r[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
    r[18] = ty;
    r[19..19 + name.len()].copy_from_slice(name);
    r[19 + name.len()..].fill(0);
    *used += reclen;
    true
}

/// Parses the records `getdents64` wrote into `buf[..len]`.
pub fn parse_dirents(buf: &[u8]) -> Vec<DirEntry> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 19 <= buf.len() {
        let reclen = u16::from_ne_bytes([buf[i + 16], buf[i + 17]]) as usize;
        if reclen < 20 || i + reclen > buf.len() {
            break;
        }
        let r = &buf[i..i + reclen];
        let name = &r[19..];
        let nul = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        out.push(DirEntry {
            d_ino: u64::from_ne_bytes(r[0..8].try_into().unwrap_or_default()),
            d_off: i64::from_ne_bytes(r[8..16].try_into().unwrap_or_default()),
            d_type: r[18],
            name: name[..nul].to_vec(),
        });
        i += reclen;
    }
    out
}

/// The end-of-directory position of a directory its file system lists (`iterate_dir`):
/// the largest `d_off`, as 64-bit hashed cookies (ext4) may use the rest.
const FS_EOD: u64 = i64::MAX as u64;

/// Sets the d_off of the last record in `buf[..used]` to `pos` (Linux `getdents64`:
/// `lastdirent->d_off = buf.ctx.pos`).
fn set_last_d_off(buf: &mut [u8], used: usize, pos: u64) {
    let mut last = None;
    let mut i = 0;
    while i < used {
        last = Some(i);
        i += u16::from_ne_bytes([buf[i + 16], buf[i + 17]]) as usize;
    }
    if let Some(i) = last {
        buf[i + 8..i + 16].copy_from_slice(&(pos as i64).to_ne_bytes());
    }
}

impl<V: Variant> Task<V> {
    /// `getdents64(2)`: fills `buf` with `linux_dirent64` records from the directory position
    /// and advances it; returns bytes written, 0 at the end. Parse with [`parse_dirents`].
    ///
    /// # Errors
    /// `EBADF` (not open), `ENOTDIR` (not a directory, whatever the open mode), `EINVAL`
    /// (`buf` too small for the next record), `ENOENT` (the directory was removed).
    ///
    /// # References
    /// getdents64(2); Linux `iterate_dir`, `offset_readdir`.
    pub fn getdents64(&self, fd: Fd, buf: &mut [u8]) -> Result<usize> {
        let f = self.fdget(fd)?;
        // Linux's `iterate_dir` does not look at the open mode: a write-only regular file
        // gives ENOTDIR, as any non-directory (directories open read-only).
        let inode = f.inode();
        let dir = f.dentry().dir().ok_or(Errno::ENOTDIR)?;
        let mut pos = plock(&f.f_pos);
        let mut used = 0;
        let g = epoch::pin();
        let mut dl = dir.lock_all();
        if dl.dead() {
            return Err(Errno::ENOENT);
        }
        // Linux's `iterate_dir` stamps atime once the directory is live, whether or not a
        // record fit (the EINVAL of a too small buffer comes after).
        // The file system's own listing, dots and positions included (FUSE: the server's).
        let raw = inode.needs_revalidate() && inode.i_op.raw_dir_listing();
        let base = if raw { 0 } else { FIRST_COOKIE };
        let r = 'done: {
            if *pos == 0 && !raw {
                if !emit(buf, &mut used, inode.ino(), 1, DT_DIR, b".") {
                    break 'done Err(Errno::EINVAL);
                }
                *pos = 1;
            }
            if *pos == 1 && !raw {
                let parent = f
                    .dentry()
                    .parent(&g)
                    .map(|p| p.d_inode.ino())
                    .unwrap_or(inode.ino());
                if !emit(buf, &mut used, parent, FIRST_COOKIE as i64, DT_DIR, b"..") {
                    break 'done if used == 0 {
                        Err(Errno::EINVAL)
                    } else {
                        Ok(used)
                    };
                }
                *pos = FIRST_COOKIE;
            }
            if inode.needs_revalidate() {
                // The file system lists (`->iterate_shared`); its positions start at 0 after
                // `.` and `..`, which are the VFS's 0 and 1, or at 0 for a raw listing.
                if *pos == FS_EOD {
                    break 'done Ok(used);
                }
                let mut full = false;
                let mut emitted = *pos;
                let parent = f.dentry();
                let mut link = |name: &[u8], child: Arc<Inode>| {
                    crate::namei::link_listed(parent, &mut dl, name, child);
                };
                let r = inode.i_op.iterate_dir(
                    inode,
                    f.fh(),
                    *pos - base,
                    &mut |name, ino, dtype, next| {
                        let next = next.saturating_add(base).min(FS_EOD);
                        if !emit(buf, &mut used, ino, next as i64, dtype, name) {
                            full = true;
                            return false;
                        }
                        emitted = next;
                        true
                    },
                    &mut link,
                );
                *pos = emitted;
                match r {
                    Err(e) if used == 0 => break 'done Err(e),
                    // The end: the file system's own end position if it has one (a host
                    // directory's `DIR_OFFSET_EOD`), which keeps later calls at the end
                    // and `read(2)` at EISDIR as on the host; else the largest `d_off`.
                    // As Linux's `getdents64`, the last record's d_off is the final
                    // position.
                    Ok(end) if !full => {
                        *pos = end.map_or(FS_EOD, |p| p.saturating_add(base).min(FS_EOD));
                        set_last_d_off(buf, used, *pos);
                    }
                    _ if used == 0 => break 'done Err(Errno::EINVAL),
                    _ => {}
                }
                break 'done Ok(used);
            }
            // The listing's end, recorded at its first call (module doc). Relaxed:
            // `f_dir_end` is protected by `f_pos_lock`, held (`pos`).
            let mut end = f.f_dir_end.load(Ordering::Relaxed);
            if end == 0 {
                end = dl.listing_end();
                // Relaxed: as above.
                f.f_dir_end.store(end, Ordering::Relaxed);
            }
            // Once a listing reaches the end, the position stays there (Linux's
            // `DIR_OFFSET_EOD` in `offset_iterate_dir`, past any cookie): entries created
            // afterwards are not listed until the directory is rewound.
            let range = dl.listing((*pos).min(end), end);
            let mut full = false;
            for (cookie, d) in range {
                let name = &d.link(&g).name;
                let next = cookie + 1;
                if !emit(
                    buf,
                    &mut used,
                    d.d_inode.ino(),
                    next as i64,
                    d_type(&d.d_inode),
                    name,
                ) {
                    if used == 0 {
                        break 'done Err(Errno::EINVAL);
                    }
                    full = true;
                    break;
                }
                *pos = next;
            }
            if !full {
                *pos = EOD_COOKIE;
                // As Linux's `getdents64`: the last record's d_off is the final position.
                set_last_d_off(buf, used, EOD_COOKIE);
            }
            Ok(used)
        };
        drop(dl);
        drop(pos);
        f.file_accessed();
        r
    }
}
