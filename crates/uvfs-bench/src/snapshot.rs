//! `uvfs bench --snapshot`: what a tmpfs snapshot costs against a full copy of the same
//! tree, in time and in memory.
//!
//! The tree is `--tree` (default /usr/include) imported once into a uvfs tmpfs
//! (`Dir::import_host`, timed as context). Then, interleaved, `--reps` times each (default
//! 5): a snapshot of that mount (`uvfs::tmpfs::snapshot`), and a full copy of it into a
//! fresh tmpfs through the `std::fs`-shaped facade, as a harness without snapshots would
//! make one (directories, files' bytes with their permission bits, symlinks; fewer
//! attributes than a snapshot keeps, so the copy's figures are a lower bound). Every
//! snapshot and copy is kept until the end, so the resident-memory growth over the run
//! (`/proc/self/statm`), divided by the reps, is what each holds.

use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uvfs::{Dir, Mount, Task};

/// Resident memory of this process, in bytes (`/proc/self/statm`'s second field).
fn rss() -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm")
        .map_err(|e| Error::new("reading /proc/self/statm", e))?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::msg("/proc/self/statm: no resident field"))?;
    Ok(pages * 4096)
}

/// A full copy of `src`'s tree into `dst` through the facade (`cp -r` with modes).
fn full_copy(src: &Dir<'_>, dst: &Dir<'_>) -> std::io::Result<()> {
    for e in src.walk_dir(".") {
        let e = e?;
        if e.depth() == 0 {
            continue;
        }
        let p = e.path();
        let ft = e.file_type();
        if ft.is_dir() {
            dst.create_dir(p)?;
            dst.set_permissions(p, src.symlink_metadata(p)?.permissions())?;
        } else if ft.is_symlink() {
            dst.symlink(src.read_link(p)?, p)?;
        } else if ft.is_file() {
            // `Dir::copy` copies the bytes and the permission bits, as `std::fs::copy`.
            src.copy(p, dst, p)?;
        }
    }
    Ok(())
}

/// Median and (min, max) of `v` in milliseconds.
fn stats(v: &mut [Duration]) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(v[v.len() / 2]), ms(v[0]), ms(v[v.len() - 1]))
}

/// Runs the comparison on the host tree `tree`, `reps` times each, and prints the table.
///
/// # Errors
/// The import's or a copy's error (the tree unreadable, memory exhausted).
pub fn run(tree: &Path, reps: u32) -> Result<()> {
    let reps = reps.max(1) as usize;
    let io = |what: &'static str| move |e: std::io::Error| Error::new(what, e);
    // One task over a scratch root, the source mounted at /src and each copy at /copyN
    // (a copy through the facade is between two `Dir`s of one task).
    let scratch = uvfs::tmpfs::mount(Default::default());
    let t = Task::init(&scratch);
    let src = uvfs::tmpfs::mount(Default::default());
    let mnt = |m: &Arc<Mount>, at: &str| -> Result<()> {
        t.mkdirat(uvfs::Fd::AT_FDCWD, at, 0o755)
            .and_then(|()| t.mount(m, at, uvfs::MountFlags::empty()))
            .map_err(|e| Error::new(format!("mounting {at}"), e))
    };
    mnt(&src, "/src")?;
    let sdir = t
        .root_dir()
        .map_err(io("uvfs root"))?
        .open_dir("src")
        .map_err(io("/src"))?;
    let r0 = rss()?;
    let start = Instant::now();
    let st = sdir
        .import_host(tree, ".")
        .map_err(|e| io("importing the tree")(e.into()))?;
    let import = start.elapsed();
    let imported = rss()?.saturating_sub(r0);
    println!(
        "snapshot: {} imported: {} directories, {} files, {} symlinks, {:.1} MiB of data \
         in {:.0} ms (resident +{:.1} MiB)",
        tree.display(),
        st.dirs,
        st.files,
        st.symlinks,
        st.bytes as f64 / (1 << 20) as f64,
        import.as_secs_f64() * 1e3,
        imported as f64 / (1 << 20) as f64,
    );
    // First snapshot: turns every page into a shared one (its own row).
    let r1 = rss()?;
    let start = Instant::now();
    let first = uvfs::tmpfs::snapshot(&src).map_err(|e| Error::new("snapshot", e))?;
    let first_t = start.elapsed();
    let first_mem = rss()?.saturating_sub(r1);
    let mut snaps: Vec<Arc<Mount>> = vec![first];
    let mut copies: Vec<Arc<Mount>> = vec![];
    let (mut ts, mut tc) = (vec![], vec![]);
    let (mut ms, mut mc) = (0u64, 0u64);
    for i in 0..reps {
        let before = rss()?;
        let start = Instant::now();
        snaps.push(uvfs::tmpfs::snapshot(&src).map_err(|e| Error::new("snapshot", e))?);
        ts.push(start.elapsed());
        ms += rss()?.saturating_sub(before);

        let before = rss()?;
        let start = Instant::now();
        let m = uvfs::tmpfs::mount(Default::default());
        let at = format!("/copy{i}");
        mnt(&m, &at)?;
        let dst = t
            .root_dir()
            .map_err(io("uvfs root"))?
            .open_dir(&at[1..])
            .map_err(io("copy"))?;
        full_copy(&sdir, &dst).map_err(io("full copy"))?;
        tc.push(start.elapsed());
        mc += rss()?.saturating_sub(before);
        copies.push(m);
    }
    let (s_med, s_min, s_max) = stats(&mut ts);
    let (c_med, c_min, c_max) = stats(&mut tc);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!();
    println!(
        "| {:<28} | {:>12} | {:>17} | {:>16} |",
        "", "time ms", "(min-max)", "resident MiB each"
    );
    println!("|{:-<30}|{:->14}|{:->19}|{:->18}|", "", "", "", "");
    println!(
        "| {:<28} | {:>12.1} | {:>17} | {:>16.1} |",
        "first snapshot",
        first_t.as_secs_f64() * 1e3,
        "",
        mib(first_mem)
    );
    println!(
        "| {:<28} | {:>12.1} | {:>17} | {:>16.1} |",
        format!("snapshot (x{reps})"),
        s_med,
        format!("{s_min:.1}-{s_max:.1}"),
        mib(ms / reps as u64)
    );
    println!(
        "| {:<28} | {:>12.1} | {:>17} | {:>16.1} |",
        format!("full copy, facade (x{reps})"),
        c_med,
        format!("{c_min:.1}-{c_max:.1}"),
        mib(mc / reps as u64)
    );
    println!(
        "\nsnapshot / full copy: time {:.3}x, memory {:.3}x (medians; memory is resident \
         growth per snapshot or copy, all kept alive)",
        s_med / c_med,
        (ms as f64) / (mc.max(1) as f64)
    );
    Ok(())
}
