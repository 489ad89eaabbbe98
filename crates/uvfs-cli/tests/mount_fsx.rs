//! fsx-style data integrity on `uvfs mount`: a seeded random sequence of writes
//! (also past EOF, leaving holes), reads, truncates, fallocates, close/reopen
//! cycles, fsyncs, page-cache drops and size checks on a file, every read checked
//! byte for byte against an in-memory model of the file (after Linux's
//! `fsx.c` in xfstests; no mmap).
//!
//! `UVFS_FSX_OPS` (default 100000, split over [`WORKERS`] files served
//! concurrently) and `UVFS_FSX_SEED` (decimal or `0x` hex; printed) change the
//! run; the same seed gives the same operations.
//!
//! fallocate: modes 0, `KEEP_SIZE` and `PUNCH_HOLE | KEEP_SIZE`. A mode the mount
//! answers with `EOPNOTSUPP` must leave the file as it was (checked whole); the
//! model is then not updated. A success must have done what the mode says: the
//! affected range is read back at once.
//!
//! Server resources, measured before the run and after it (files closed, still
//! there): its descriptor count may grow by at most [`FD_SLACK`], its resident
//! memory by at most [`RSS_SLACK`] beyond the bytes the files hold at the end
//! (allocator caches, per-thread arenas, the kernel's FUSE buffers are not
//! memory of the server; a leak of even 1% of the ~1.7 GiB written would exceed
//! it).

mod common;

use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{MountGuard, Rng};
use rustix::fs::{fadvise, fallocate, Advice, FallocateFlags};
use rustix::io::Errno;

/// Largest file size the sequence makes.
const MAX_LEN: u64 = 256 * 1024;
/// Longest single write, read or fallocate.
const MAX_OP_LEN: u64 = 64 * 1024;
/// Operations kept for the failure report.
const LOG_TAIL: usize = 40;
/// Files (and threads) run concurrently, each with its own seed.
const WORKERS: u64 = 2;
/// Allowed growth of the server's descriptor count over a run.
const FD_SLACK: usize = 4;
/// Allowed growth of the server's RSS beyond the files' final size.
const RSS_SLACK: u64 = 64 << 20;

/// The fallocate modes exercised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FallocMode {
    /// Mode 0: allocate, extend the size if past EOF.
    Alloc,
    /// `FALLOC_FL_KEEP_SIZE`: allocate, size unchanged.
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: zero the range.
    PunchHole,
}

impl FallocMode {
    const ALL: [FallocMode; 3] = [
        FallocMode::Alloc,
        FallocMode::KeepSize,
        FallocMode::PunchHole,
    ];

    fn flags(self) -> FallocateFlags {
        match self {
            FallocMode::Alloc => FallocateFlags::empty(),
            FallocMode::KeepSize => FallocateFlags::KEEP_SIZE,
            FallocMode::PunchHole => FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        }
    }
}

/// One operation of the sequence.
#[derive(Debug, Clone, Copy)]
enum Op {
    Write {
        off: u64,
        len: u64,
    },
    Read {
        off: u64,
        len: u64,
    },
    Truncate {
        size: u64,
    },
    Fallocate {
        mode: FallocMode,
        off: u64,
        len: u64,
    },
    /// close, then open again (with `O_TRUNC` if `trunc`).
    Reopen {
        trunc: bool,
    },
    Fsync,
    Fdatasync,
    /// fdatasync, then `POSIX_FADV_DONTNEED` so later reads go to the server.
    DropCache,
    /// `stat` by path and `fstat`: sizes and file type.
    Stat,
    /// Read the whole file through a second, fresh descriptor.
    VerifyAll,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Write { off, len } => write!(f, "write  {off:#x}..{:#x} ({len})", off + len),
            Op::Read { off, len } => write!(f, "read   {off:#x}..{:#x} ({len})", off + len),
            Op::Truncate { size } => write!(f, "trunc  to {size:#x}"),
            Op::Fallocate { mode, off, len } => {
                write!(f, "falloc {mode:?} {off:#x}..{:#x} ({len})", off + len)
            }
            Op::Reopen { trunc } => write!(f, "reopen{}", if trunc { " O_TRUNC" } else { "" }),
            Op::Fsync => write!(f, "fsync"),
            Op::Fdatasync => write!(f, "fdatasync"),
            Op::DropCache => write!(f, "dropcache"),
            Op::Stat => write!(f, "stat"),
            Op::VerifyAll => write!(f, "verify all"),
        }
    }
}

/// One file, its model and its generator.
struct Fsx {
    path: PathBuf,
    file: File,
    /// What the file must hold.
    model: Vec<u8>,
    rng: Rng,
    seed: u64,
    /// Number of operations done.
    opno: u64,
    /// The last [`LOG_TAIL`] operations, with the size before each.
    log: VecDeque<String>,
    /// Per mode: Some(false) once the mount answered EOPNOTSUPP.
    falloc_supported: [Option<bool>; 3],
    /// Operations by kind, for the summary.
    counts: [u64; 10],
}

fn open_rw(path: &Path, trunc: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(trunc)
        .open(path)
}

/// The first difference between `got` and `want` (which start at file offset
/// `base`), as a report; `None` if equal.
fn compare(base: u64, got: &[u8], want: &[u8]) -> Option<String> {
    if got == want {
        return None;
    }
    if got.len() != want.len() {
        let common = got.len().min(want.len());
        let first = (0..common).find(|&i| got[i] != want[i]);
        return Some(format!(
            "length {} at {base:#x}, want {}{}",
            got.len(),
            want.len(),
            first.map_or(String::new(), |i| format!(
                "; first differing byte at {:#x}",
                base + i as u64
            ))
        ));
    }
    let first = (0..got.len()).find(|&i| got[i] != want[i]).unwrap();
    let last = (0..got.len()).rev().find(|&i| got[i] != want[i]).unwrap();
    let show = |b: &[u8]| {
        b[first..(first + 16).min(b.len())]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(format!(
        "bytes differ at {:#x}..={:#x} ({} of {} bytes)\n  got  {}\n  want {}",
        base + first as u64,
        base + last as u64,
        (first..=last).filter(|&i| got[i] != want[i]).count(),
        got.len(),
        show(got),
        show(want)
    ))
}

impl Fsx {
    fn new(path: PathBuf, seed: u64) -> Fsx {
        let file =
            open_rw(&path, true).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        Fsx {
            path,
            file,
            model: Vec::new(),
            rng: Rng::new(seed),
            seed,
            opno: 0,
            log: VecDeque::new(),
            falloc_supported: [None; 3],
            counts: [0; 10],
        }
    }

    fn size(&self) -> u64 {
        self.model.len() as u64
    }

    /// A length for a write, read or fallocate: small ones often (page and
    /// block edges), up to [`MAX_OP_LEN`].
    fn op_len(&mut self) -> u64 {
        match self.rng.below(4) {
            0 => self.rng.range(1, 16),
            1 => self.rng.range(1, 4096),
            _ => self.rng.range(1, MAX_OP_LEN),
        }
    }

    /// An offset: within the file most of the time, anywhere below [`MAX_LEN`]
    /// otherwise (past EOF: holes).
    fn op_off(&mut self) -> u64 {
        if self.size() > 0 && self.rng.below(5) != 0 {
            self.rng.below(self.size())
        } else {
            self.rng.below(MAX_LEN)
        }
    }

    /// The next operation of the sequence.
    fn next_op(&mut self) -> Op {
        let pick = self.rng.below(100);
        match pick {
            0..=29 => {
                let off = self.op_off();
                let len = self.op_len().min(MAX_LEN - off).max(1);
                let off = off.min(MAX_LEN - len);
                Op::Write { off, len }
            }
            30..=59 => {
                let off = self.op_off();
                let len = self.op_len();
                Op::Read { off, len }
            }
            60..=66 => Op::Truncate {
                size: self.rng.below(MAX_LEN + 1),
            },
            67..=77 => {
                let mode = FallocMode::ALL[self.rng.below(3) as usize];
                let off = self.op_off();
                let len = self.op_len().min(MAX_LEN - off).max(1);
                let off = off.min(MAX_LEN - len);
                Op::Fallocate { mode, off, len }
            }
            78..=83 => Op::Reopen {
                trunc: self.rng.below(8) == 0,
            },
            84..=85 => Op::Fsync,
            86..=87 => Op::Fdatasync,
            88..=91 => Op::DropCache,
            92..=97 => Op::Stat,
            _ => Op::VerifyAll,
        }
    }

    fn kind(op: &Op) -> usize {
        match op {
            Op::Write { .. } => 0,
            Op::Read { .. } => 1,
            Op::Truncate { .. } => 2,
            Op::Fallocate { .. } => 3,
            Op::Reopen { .. } => 4,
            Op::Fsync => 5,
            Op::Fdatasync => 6,
            Op::DropCache => 7,
            Op::Stat => 8,
            Op::VerifyAll => 9,
        }
    }

    /// Runs `n` operations; on the first failure, a report with the log tail.
    fn run(&mut self, n: u64) -> Result<(), String> {
        for _ in 0..n {
            let op = self.next_op();
            self.opno += 1;
            if self.log.len() == LOG_TAIL {
                self.log.pop_front();
            }
            self.log
                .push_back(format!("#{:<7} size {:#8x}  {op}", self.opno, self.size()));
            self.counts[Self::kind(&op)] += 1;
            let res = self.apply(op).and_then(|()| self.check_size());
            if let Err(e) = res {
                return Err(self.report(&e));
            }
        }
        // Through a fresh descriptor, after the cache is dropped.
        self.apply(Op::DropCache)
            .and_then(|()| self.apply(Op::VerifyAll))
            .map_err(|e| self.report(&format!("final check: {e}")))
    }

    fn report(&self, what: &str) -> String {
        format!(
            "fsx {}: operation #{} failed (seed {:#x}; rerun with UVFS_FSX_SEED): {what}\n\
             last {} operations:\n{}",
            self.path.display(),
            self.opno,
            self.seed,
            self.log.len(),
            self.log.iter().cloned().collect::<Vec<_>>().join("\n")
        )
    }

    /// `pread` until `len` bytes or EOF.
    fn pread(&self, file: &File, off: u64, len: u64) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; len as usize];
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("pread {off:#x}+{len}: {e}")),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    /// Checks the file's bytes in `off..off+len` (clipped to the model's size).
    fn check_range(&self, off: u64, len: u64) -> Result<(), String> {
        let got = self.pread(&self.file, off, len)?;
        let start = (off as usize).min(self.model.len());
        let end = ((off + len) as usize).min(self.model.len());
        match compare(off, &got, &self.model[start..end]) {
            None => Ok(()),
            Some(d) => Err(format!("read {off:#x}+{len}: {d}")),
        }
    }

    /// `fstat` size equals the model's.
    fn check_size(&self) -> Result<(), String> {
        let st = self.file.metadata().map_err(|e| format!("fstat: {e}"))?;
        if st.len() != self.size() {
            return Err(format!(
                "fstat size {:#x}, want {:#x}",
                st.len(),
                self.size()
            ));
        }
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Write { off, len } => {
                let mut data = vec![0u8; len as usize];
                self.rng.fill(&mut data);
                self.file
                    .write_all_at(&data, off)
                    .map_err(|e| format!("pwrite {off:#x}+{len}: {e}"))?;
                let end = (off + len) as usize;
                if self.model.len() < end {
                    self.model.resize(end, 0);
                }
                self.model[off as usize..end].copy_from_slice(&data);
            }
            Op::Read { off, len } => self.check_range(off, len)?,
            Op::Truncate { size } => {
                let old = self.size();
                self.file
                    .set_len(size)
                    .map_err(|e| format!("ftruncate {size:#x}: {e}"))?;
                self.model.resize(size as usize, 0);
                // Grown: the new tail reads as zeros (also what a shrink left).
                if size > old {
                    self.check_range(old, size - old)?;
                }
            }
            Op::Fallocate { mode, off, len } => self.fallocate(mode, off, len)?,
            Op::Reopen { trunc } => {
                // Drop the old descriptor first: a close the server sees.
                let placeholder =
                    File::open("/dev/null").map_err(|e| format!("open /dev/null: {e}"))?;
                drop(std::mem::replace(&mut self.file, placeholder));
                self.file = open_rw(&self.path, trunc)
                    .map_err(|e| format!("reopen {}: {e}", self.path.display()))?;
                if trunc {
                    self.model.clear();
                }
            }
            Op::Fsync => self.file.sync_all().map_err(|e| format!("fsync: {e}"))?,
            Op::Fdatasync => self
                .file
                .sync_data()
                .map_err(|e| format!("fdatasync: {e}"))?,
            Op::DropCache => {
                self.file
                    .sync_data()
                    .map_err(|e| format!("fdatasync: {e}"))?;
                fadvise(&self.file, 0, None::<NonZeroU64>, Advice::DontNeed)
                    .map_err(|e| format!("fadvise DONTNEED: {e}"))?;
            }
            Op::Stat => {
                let st = std::fs::metadata(&self.path)
                    .map_err(|e| format!("stat {}: {e}", self.path.display()))?;
                if !st.is_file() || st.len() != self.size() {
                    return Err(format!(
                        "stat: {:?} size {:#x}, want a regular file of {:#x}",
                        st.file_type(),
                        st.len(),
                        self.size()
                    ));
                }
            }
            Op::VerifyAll => {
                let f = File::open(&self.path)
                    .map_err(|e| format!("open {}: {e}", self.path.display()))?;
                let got = self.pread(&f, 0, MAX_LEN + 1)?;
                if let Some(d) = compare(0, &got, &self.model) {
                    return Err(format!("whole file through a new descriptor: {d}"));
                }
            }
        }
        Ok(())
    }

    fn fallocate(&mut self, mode: FallocMode, off: u64, len: u64) -> Result<(), String> {
        let idx = mode as usize;
        match fallocate(&self.file, mode.flags(), off, len) {
            Ok(()) => {
                self.falloc_supported[idx] = Some(true);
                match mode {
                    FallocMode::Alloc => {
                        let end = (off + len) as usize;
                        if self.model.len() < end {
                            self.model.resize(end, 0);
                        }
                    }
                    FallocMode::KeepSize => {}
                    FallocMode::PunchHole => {
                        let end = ((off + len) as usize).min(self.model.len());
                        if (off as usize) < end {
                            self.model[off as usize..end].fill(0);
                        }
                    }
                }
                // The range (and the size, checked after every operation) now
                // is what the mode promises: no silent success.
                self.check_range(off, len)
                    .map_err(|e| format!("after fallocate {mode:?} succeeded: {e}"))
            }
            Err(Errno::OPNOTSUPP) => {
                if self.falloc_supported[idx] == Some(true) {
                    return Err(format!(
                        "fallocate {mode:?}: EOPNOTSUPP, but an earlier call succeeded"
                    ));
                }
                self.falloc_supported[idx] = Some(false);
                // Refused: nothing may have changed. The size is checked after
                // every operation; the bytes here.
                self.check_range(0, MAX_LEN + 1)
                    .map_err(|e| format!("fallocate {mode:?} answered EOPNOTSUPP, so the file must be unchanged, but: {e}"))
            }
            Err(e) => Err(format!("fallocate {mode:?} {off:#x}+{len}: {e}")),
        }
    }

    fn summary(&self) -> String {
        const NAMES: [&str; 10] = [
            "write",
            "read",
            "truncate",
            "fallocate",
            "reopen",
            "fsync",
            "fdatasync",
            "dropcache",
            "stat",
            "verify",
        ];
        let counts: Vec<String> = NAMES
            .iter()
            .zip(self.counts)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        let falloc: Vec<String> = FallocMode::ALL
            .iter()
            .map(|m| {
                let s = match self.falloc_supported[*m as usize] {
                    Some(true) => "supported",
                    Some(false) => "EOPNOTSUPP (file checked unchanged)",
                    None => "not tried",
                };
                format!("{m:?} {s}")
            })
            .collect();
        format!(
            "{}: {} ops ({}); fallocate: {}; final size {}",
            self.path.display(),
            self.opno,
            counts.join(", "),
            falloc.join(", "),
            self.size()
        )
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("{name}={v}: {e}"))
        }
        Err(_) => default,
    }
}

#[test]
fn fsx_on_mount() {
    let ops = env_u64("UVFS_FSX_OPS", 100_000);
    let seed = env_u64("UVFS_FSX_SEED", 0x5eed_f5c5);
    let Some(mnt) = MountGuard::mount("fsx_on_mount", &["--threads", "2"]) else {
        return;
    };
    println!("fsx: seed {seed:#x} (UVFS_FSX_SEED), {ops} ops over {WORKERS} files");
    let before = mnt
        .server_pid()
        .map(|pid| (pid, common::fd_count(pid), common::rss_bytes(pid)));
    let start = Instant::now();
    let results: Vec<Result<(String, u64), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let path = mnt.path().join(format!("fsx-{w}"));
                let n = ops / WORKERS + u64::from(w < ops % WORKERS);
                s.spawn(move || {
                    let mut fsx = Fsx::new(path, seed.wrapping_add(w));
                    fsx.run(n)?;
                    Ok((fsx.summary(), fsx.size()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    let mut data = 0;
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok((summary, size)) => {
                println!("fsx: {summary}");
                data += size;
            }
            Err(report) => failures.push(report),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("fsx: {ops} ops in {elapsed:.2?}");
    if let Some((pid, fds0, rss0)) = before {
        // FUSE_RELEASE of the closed files is asynchronous: give the server a
        // moment to see the last closes.
        let settle = Instant::now();
        while common::fd_count(pid) > fds0 + FD_SLACK && settle.elapsed().as_secs() < 2 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (fds1, rss1) = (common::fd_count(pid), common::rss_bytes(pid));
        println!(
            "fsx: server {pid}: fds {fds0} -> {fds1}, VmRSS {} -> {} KiB (files hold {data} bytes)",
            rss0 >> 10,
            rss1 >> 10
        );
        assert!(
            fds1 <= fds0 + FD_SLACK,
            "server descriptors grew from {fds0} to {fds1} over the run (allowed +{FD_SLACK})"
        );
        assert!(
            rss1 <= rss0 + data + RSS_SLACK,
            "server RSS grew from {rss0} to {rss1} bytes; allowed: {data} bytes of file data + {RSS_SLACK}"
        );
    } else {
        println!("fsx: no server pid (UVFS_MOUNT_TEST_PID): descriptor and RSS checks skipped");
    }
    mnt.unmount();
}

/// The checker itself: a byte changed behind the model's back, a lost write
/// and a wrong size are each reported (on a plain temporary directory, no FUSE).
#[test]
fn fsx_detects_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let mut fsx = Fsx::new(dir.path().join("f"), 7);
    fsx.run(2000).unwrap();
    // Make sure there is data, then flip one byte through another descriptor.
    fsx.apply(Op::Write {
        off: 100,
        len: 1000,
    })
    .unwrap();
    let f = OpenOptions::new().write(true).open(&fsx.path).unwrap();
    let mut b = [0u8];
    fsx.file.read_at(&mut b, 500).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], 500).unwrap();
    let err = fsx.apply(Op::VerifyAll).unwrap_err();
    assert!(err.contains("bytes differ at 0x1f4..=0x1f4 (1 of"), "{err}");
    let err = fsx.apply(Op::Read { off: 400, len: 200 }).unwrap_err();
    assert!(err.contains("0x1f4"), "{err}");
    // Restore, then a write the model does not know of.
    f.write_all_at(&b, 500).unwrap();
    fsx.apply(Op::VerifyAll).unwrap();
    let n = fsx.model.len();
    let flipped: Vec<u8> = fsx.model[n - 3..].iter().map(|b| !b).collect();
    f.write_all_at(&flipped, n as u64 - 3).unwrap();
    let err = fsx.apply(Op::VerifyAll).unwrap_err();
    assert!(
        err.contains(&format!("bytes differ at {:#x}", n - 3)),
        "{err}"
    );
    // A size change behind its back.
    f.set_len(fsx.size() + 1).unwrap();
    let err = fsx.check_size().unwrap_err();
    assert!(err.contains("fstat size"), "{err}");
    // The report names the seed and the operations.
    let report = fsx.report("x");
    assert!(
        report.contains("seed 0x7") && report.contains("#2000"),
        "{report}"
    );
}
