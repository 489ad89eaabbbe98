//! The ablation variants (`uvfs::variant`) behave exactly like uvfs: each swaps one
//! mechanism (count layout, reference get, test-before-set, open-file list), never a result.
//! The same script runs on every variant and its results are compared with uvfs's.

use std::thread;
use uvfs::file::File;
use uvfs::sync::rcu::RcuRefcounted as _;
use uvfs::variant::*;
use uvfs::*;

/// Opens, dups, forks, shares across threads, stats, reads, writes and closes; returns every
/// observable result (including reference counts and errnos) in order.
fn script<V: Variant>() -> Vec<String> {
    let mnt = tmpfs::mount(TmpfsOptions::default());
    let t: Task<V> = Task::init_variant(&mnt);
    let mut out = Vec::new();
    let mut log = |s: String| out.push(s);
    let fd = t
        .open("/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    log(format!("write {:?}", t.write(fd, b"hello world")));
    let d = t.dup(fd).unwrap();
    log(format!(
        "dup {d:?} count {}",
        t.files().fget(fd.0).unwrap().count()
    ));
    let child = t.fork();
    log(format!(
        "fork count {}",
        t.files().fget(fd.0).unwrap().count()
    ));
    let mut b = [0u8; 5];
    log(format!(
        "child pread {:?} {:?}",
        child.pread(d, &mut b, 6),
        b
    ));
    drop(child);
    let threads: Vec<Task<V>> = (0..2).map(|_| t.clone_thread()).collect();
    let sizes: Vec<i64> = thread::scope(|s| {
        let hs: Vec<_> = threads
            .into_iter()
            .map(|th| {
                s.spawn(move || {
                    let mut last = 0;
                    for _ in 0..1000 {
                        last = th.fstat(fd).unwrap().st_size;
                    }
                    last
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    log(format!("thread fstat sizes {sizes:?}"));
    let f: FileHandle<V> = t.files().fget(fd.0).unwrap();
    log(format!("handle count {}", f.count()));
    log(format!("close {:?} {:?}", t.close(fd), t.close(d)));
    log(format!("after close count {}", f.count()));
    log(format!("close again {:?}", t.close(fd)));
    log(format!("fstat closed {:?}", t.fstat(fd).map(|s| s.st_size)));
    log(format!("mode {:?}", File::mode(&f)));
    drop(f);
    log(format!(
        "open missing {:?}",
        t.open("/nope", OpenFlags::RDONLY, 0)
    ));
    out
}

fn check<V: Variant>() {
    let before = V::Files::nr_files();
    let (got, want) = (script::<V>(), script::<Uvfs>());
    assert_eq!(want.len(), 12, "{want:?}");
    assert_eq!(got, want, "variant {}", V::NAME);
    // Every file the script opened was unlisted at its last close (other tests of this
    // binary use other variants, so the count is this variant's own).
    assert_eq!(V::Files::nr_files(), before, "variant {}", V::NAME);
}

#[test]
fn shared_line_variant_matches_uvfs() {
    check::<SharedLineVariant>();
}

#[test]
fn cas_ref_variant_matches_uvfs() {
    check::<CasRefVariant>();
}

#[test]
fn blind_set_variant_matches_uvfs() {
    check::<BlindSetVariant>();
}

#[test]
fn global_file_list_variant_matches_uvfs() {
    check::<GlobalFileListVariant>();
    // The list saw files while they were open.
    let mnt = tmpfs::mount(TmpfsOptions::default());
    let t: Task<GlobalFileListVariant> = Task::init_variant(&mnt);
    let n = GlobalFileList::nr_files().unwrap();
    let fd = t
        .open("/g", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    assert_eq!(GlobalFileList::nr_files(), Some(n + 1));
    t.close(fd).unwrap();
    assert_eq!(GlobalFileList::nr_files(), Some(n));
}

#[test]
fn aligned_file_list_variant_matches_uvfs() {
    check::<AlignedFileListVariant>();
}

#[test]
fn uvfs_tracks_nothing() {
    assert_eq!(NoFileList::nr_files(), None);
    let h = {
        let mnt = tmpfs::mount(TmpfsOptions::default());
        let t = Task::init(&mnt);
        let fd = t
            .open("/x", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
            .unwrap();
        t.files().fget(fd.0).unwrap()
    };
    assert_eq!(h.file_ref().read(), 1);
}
