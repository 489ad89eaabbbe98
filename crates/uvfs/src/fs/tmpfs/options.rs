//! `TmpfsOptions`: the options of a tmpfs mount, and Linux's defaults for them.
//!
//! Linux analogue: mm/shmem.c (`shmem_default_max_blocks`, `shmem_default_max_inodes`,
//! `shmem_parse_one`), tmpfs(5).

/// Options of a tmpfs mount.
#[derive(Clone, Debug, Default)]
pub struct TmpfsOptions {
    /// Permission bits of the root directory; `None` = `0o1777` (tmpfs's default).
    pub mode: Option<u32>,
    /// Owner of the root directory.
    pub uid: u32,
    /// Group of the root directory.
    pub gid: u32,
    /// `size=`: bytes of file data the mount may hold, rounded up to whole 4 KiB pages;
    /// `None` = tmpfs's default, half of RAM ([`default_size`](Self::default_size));
    /// `Some(0)` = unlimited (tmpfs's `size=0`: nothing but the machine's memory stops the
    /// mount from growing; for embedders that bound what they store themselves). Writes,
    /// `fallocate` and creations past it fail with `ENOSPC`; freed pages (truncate, the last
    /// close of an unlinked file) count again.
    pub size: Option<u64>,
    /// `nr_inodes=`: inodes the mount may hold, the root included; `None` = tmpfs's
    /// default, as many as half of RAM has pages
    /// ([`default_nr_inodes`](Self::default_nr_inodes)); `Some(0)` = unlimited (tmpfs's
    /// `nr_inodes=0`). Creations past it fail with `ENOSPC`.
    pub nr_inodes: Option<u64>,
}

impl TmpfsOptions {
    /// A mount without `size` and `nr_inodes` limits (tmpfs's `size=0,nr_inodes=0`), the
    /// other options at their defaults. It keeps no space or inode counts, so create,
    /// write and unlink write no shared counter; nothing stops it from filling memory.
    pub fn unlimited() -> TmpfsOptions {
        TmpfsOptions {
            size: Some(0),
            nr_inodes: Some(0),
            ..TmpfsOptions::default()
        }
    }

    /// tmpfs's default `size=` in bytes: half of RAM, in whole 4 KiB pages (at least one).
    ///
    /// # References
    /// Linux mm/shmem.c `shmem_default_max_blocks` (`totalram_pages() / 2`); sysinfo(2)
    /// (`totalram * mem_unit`, as `si_meminfo` fills it).
    pub fn default_size() -> u64 {
        (ram_pages().0 / 2).max(1) * PAGE_BYTES
    }

    /// tmpfs's default `nr_inodes=`: as many inodes as half of RAM has pages, and no more
    /// than RAM outside highmem has (64-bit machines have none); at least one (the root).
    ///
    /// # References
    /// Linux mm/shmem.c `shmem_default_max_inodes` (`min3(nr_pages - totalhigh_pages(),
    /// nr_pages / 2, ULONG_MAX / BOGO_INODE_SIZE)`); sysinfo(2) (`totalhigh`).
    pub fn default_nr_inodes() -> u64 {
        let (total, high) = ram_pages();
        (total - high.min(total)).min(total / 2).max(1)
    }
}

/// Bytes in a page of the `size=` accounting (uvfs pages are always 4 KiB).
pub(super) const PAGE_BYTES: u64 = 4096;

/// `(totalram_pages, totalhigh_pages)` in 4 KiB pages, from sysinfo(2) (also the FUSE
/// server's default handle limit).
pub(crate) fn ram_pages() -> (u64, u64) {
    let si = rustix::system::sysinfo();
    let unit = u64::from(si.mem_unit.max(1));
    let pages = |n: u64| n.saturating_mul(unit) / PAGE_BYTES;
    (pages(si.totalram as u64), pages(si.totalhigh as u64))
}
