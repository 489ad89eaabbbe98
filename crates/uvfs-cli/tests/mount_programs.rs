//! Real programs on `uvfs mount`: `cp -a`, `tar`, `make` + `gcc`, `git`. Each
//! result is checked by a Rust comparison of the trees ([`compare_trees`]: file
//! types, bytes, modes, owners, times, symlink targets, link counts and which
//! names share an inode), not by the programs' own word.
//!
//! A program that is not installed is skipped with a message (a failure under
//! `UVFS_REQUIRE_FUSE=1`: CI installs git, make, gcc and tar).

mod common;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use common::{MountGuard, Rng};

/// Runs `cmd`, panicking with its output unless it exits 0.
fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// True if every program is in `$PATH`; else skips (see [`common::skip`]).
fn have(test: &str, programs: &[&str]) -> bool {
    for p in programs {
        if common::find_in_path(p).is_none() {
            common::skip(test, &format!("{p} is not installed"));
            return false;
        }
    }
    true
}

/// What [`compare_trees`] compares beyond types, bytes, modes and owners.
#[derive(Debug, Clone, Copy)]
struct Compare {
    /// Modification times: None = not compared, Some(false) = seconds only
    /// (what a GNU-format tar keeps), Some(true) = to the nanosecond.
    mtime_ns: Option<bool>,
    /// Owners (uid, gid).
    owners: bool,
}

/// One entry of a tree, for the comparison.
#[derive(Debug)]
struct Entry {
    meta: fs::Metadata,
    /// Symlink target.
    target: Option<PathBuf>,
}

/// Every entry under `root` (not `root` itself), by relative path, without
/// following symlinks.
fn walk(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("readdir {}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let meta = fs::symlink_metadata(&path)
                .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()));
            let target = meta.file_type().is_symlink().then(|| {
                fs::read_link(&path).unwrap_or_else(|e| panic!("readlink {}: {e}", path.display()))
            });
            let is_dir = meta.is_dir();
            out.insert(
                path.strip_prefix(root).unwrap().to_owned(),
                Entry { meta, target },
            );
            if is_dir {
                go(root, &path, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

/// Names grouped by inode: for each name of a non-directory with more than one
/// link, the sorted list of names in the tree sharing its inode.
fn link_groups(tree: &BTreeMap<PathBuf, Entry>) -> BTreeMap<PathBuf, Vec<PathBuf>> {
    let mut by_ino: BTreeMap<(u64, u64), Vec<PathBuf>> = BTreeMap::new();
    for (p, e) in tree {
        if !e.meta.is_dir() && e.meta.nlink() > 1 {
            by_ino
                .entry((e.meta.dev(), e.meta.ino()))
                .or_default()
                .push(p.clone());
        }
    }
    let mut out = BTreeMap::new();
    for names in by_ino.into_values() {
        for n in &names {
            out.insert(n.clone(), names.clone());
        }
    }
    out
}

/// Differences between the trees under `want` and `got`, one line each
/// (empty if none). Reads every regular file of both.
fn compare_trees(want: &Path, got: &Path, how: Compare) -> Vec<String> {
    let (a, b) = (walk(want), walk(got));
    let mut diffs = Vec::new();
    for p in a.keys().filter(|p| !b.contains_key(*p)) {
        diffs.push(format!("{}: missing", p.display()));
    }
    for p in b.keys().filter(|p| !a.contains_key(*p)) {
        diffs.push(format!("{}: not in the source", p.display()));
    }
    let (la, lb) = (link_groups(&a), link_groups(&b));
    for (p, ea) in &a {
        let Some(eb) = b.get(p) else { continue };
        let (ma, mb) = (&ea.meta, &eb.meta);
        let d = |what: &str, x: &dyn std::fmt::Debug, y: &dyn std::fmt::Debug| {
            format!("{}: {what} {y:?}, want {x:?}", p.display())
        };
        if ma.file_type() != mb.file_type() {
            diffs.push(d("type", &ma.file_type(), &mb.file_type()));
            continue;
        }
        if ma.mode() != mb.mode() {
            diffs.push(format!(
                "{}: mode {:o}, want {:o}",
                p.display(),
                mb.mode(),
                ma.mode()
            ));
        }
        if how.owners && (ma.uid(), ma.gid()) != (mb.uid(), mb.gid()) {
            diffs.push(d("owner", &(ma.uid(), ma.gid()), &(mb.uid(), mb.gid())));
        }
        if let Some(ns) = how.mtime_ns {
            let ta = (ma.mtime(), if ns { ma.mtime_nsec() } else { 0 });
            let tb = (mb.mtime(), if ns { mb.mtime_nsec() } else { 0 });
            if ta != tb {
                diffs.push(d("mtime", &ta, &tb));
            }
        }
        if !ma.is_dir() && ma.nlink() != mb.nlink() {
            diffs.push(d("nlink", &ma.nlink(), &mb.nlink()));
        }
        if la.get(p) != lb.get(p) {
            diffs.push(d("hard links", &la.get(p), &lb.get(p)));
        }
        if ea.target != eb.target {
            diffs.push(d("symlink target", &ea.target, &eb.target));
        }
        if ma.is_file() {
            if ma.len() != mb.len() {
                diffs.push(d("size", &ma.len(), &mb.len()));
            } else {
                let (ca, cb) = (
                    common::read_all(&want.join(p)),
                    common::read_all(&got.join(p)),
                );
                if ca != cb {
                    let at = ca.iter().zip(&cb).position(|(x, y)| x != y);
                    diffs.push(d("content differs at byte", &"none", &at));
                }
            }
        }
    }
    diffs
}

/// Panics with the differences, if any.
fn assert_same_tree(want: &Path, got: &Path, how: Compare) {
    let diffs = compare_trees(want, got, how);
    assert!(
        diffs.is_empty(),
        "{} differs from {} in {} ways:\n{}",
        got.display(),
        want.display(),
        diffs.len(),
        diffs
            .iter()
            .take(50)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn write_file(path: &Path, data: &[u8], mode: u32) {
    let mut f = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    f.write_all(data).unwrap();
    drop(f);
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A tree with what `cp -a` and `tar` must keep: files of sizes around page
/// edges and a 1 MiB one, a sparse file, modes with setuid/setgid/sticky,
/// other owners, relative, absolute, dangling and looping symlinks, a file with
/// three names in three directories, a FIFO, long, spaced and non-ASCII names,
/// old times.
fn make_tree(root: &Path, seed: u64) {
    let mut rng = Rng::new(seed);
    for d in [
        "a/b/c",
        "empty",
        "sp ace dir",
        "ünïcødé",
        "sticky",
        "private",
    ] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for (i, size) in [
        0usize,
        1,
        511,
        4095,
        4096,
        4097,
        65535,
        65536,
        131_073,
        (1 << 20) + 3,
    ]
    .into_iter()
    .enumerate()
    {
        let mut data = vec![0u8; size];
        rng.fill(&mut data);
        let dir = ["", "a", "a/b", "a/b/c", "sp ace dir"][i % 5];
        write_file(&root.join(dir).join(format!("f{size}")), &data, 0o644);
    }
    // Sparse: 8 MiB with 3 bytes of data in the middle.
    let sparse = File::create(root.join("sparse")).unwrap();
    sparse.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sparse, b"mid", 4 << 20).unwrap();
    drop(sparse);
    for (name, mode) in [
        ("m755", 0o755),
        ("m600", 0o600),
        ("m400", 0o400),
        ("m4755", 0o4755),
        ("m2755", 0o2755),
        ("m000", 0o000),
    ] {
        write_file(&root.join("a").join(name), name.as_bytes(), mode);
    }
    fs::set_permissions(root.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    write_file(&root.join("private/secret"), b"s", 0o600);
    fs::set_permissions(root.join("private"), fs::Permissions::from_mode(0o700)).unwrap();
    write_file(&root.join("ünïcødé/ファイル"), "データ".as_bytes(), 0o644);
    write_file(&root.join("sp ace dir/a file"), b"spaces", 0o644);
    let long = "L".repeat(255);
    write_file(&root.join("a/b").join(&long), b"long name", 0o644);
    // Hard links: three names in three directories.
    write_file(&root.join("linked"), b"one inode, three names", 0o640);
    fs::hard_link(root.join("linked"), root.join("a/linked2")).unwrap();
    fs::hard_link(root.join("linked"), root.join("a/b/c/linked3")).unwrap();
    // Symlinks.
    symlink("../f0", root.join("a/rel")).unwrap();
    symlink("/etc/hostname", root.join("abs")).unwrap();
    symlink("nowhere/at/all", root.join("dangling")).unwrap();
    symlink("a/b", root.join("dirlink")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    symlink(&long, root.join("a/b/to-long")).unwrap();
    // A FIFO.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("a/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o620),
        0,
    )
    .unwrap();
    // Other owners (as root).
    std::os::unix::fs::chown(root.join("a/b/c/f4095"), Some(1234), Some(5678)).unwrap();
    std::os::unix::fs::lchown(root.join("abs"), Some(4321), Some(8765)).unwrap();
    std::os::unix::fs::chown(root.join("sticky"), Some(1000), Some(1000)).unwrap();
    // Old times, to the nanosecond, on a file and a directory (last: writes
    // above changed the directories' times).
    let old = SystemTime::UNIX_EPOCH + Duration::new(1_000_000_000, 123_456_789);
    File::options()
        .write(true)
        .open(root.join("f0"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    File::open(root.join("empty"))
        .unwrap()
        .set_modified(old)
        .unwrap();
}

#[test]
fn cp_a_tree_and_back() {
    if !have("cp_a_tree_and_back", &["cp"]) {
        return;
    }
    let Some(mnt) = MountGuard::mount("cp_a_tree_and_back", &[]) else {
        return;
    };
    let host = tempfile::tempdir().unwrap();
    let src = host.path().join("src");
    fs::create_dir(&src).unwrap();
    make_tree(&src, 1);
    let all = Compare {
        mtime_ns: Some(true),
        owners: true,
    };
    // Host to mount, and back from the mount to the host.
    run(Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(mnt.path().join("copy")));
    assert_same_tree(&src, &mnt.path().join("copy"), all);
    run(Command::new("cp")
        .arg("-a")
        .arg(mnt.path().join("copy"))
        .arg(host.path().join("back")));
    assert_same_tree(&src, &host.path().join("back"), all);
    // Within the mount.
    run(Command::new("cp")
        .arg("-a")
        .arg(mnt.path().join("copy"))
        .arg(mnt.path().join("copy2")));
    assert_same_tree(&src, &mnt.path().join("copy2"), all);
    // A real tree.
    let linux = Path::new("/usr/include/linux");
    if linux.is_dir() {
        run(Command::new("cp")
            .arg("-a")
            .arg(linux)
            .arg(mnt.path().join("linux")));
        assert_same_tree(linux, &mnt.path().join("linux"), all);
    } else {
        println!("cp_a_tree_and_back: no /usr/include/linux, only the generated tree");
    }
    // cp -a removes nothing; rm -r must empty the mount.
    run(Command::new("rm").arg("-rf").arg(mnt.path().join("copy")));
    run(Command::new("rm").arg("-rf").arg(mnt.path().join("copy2")));
    run(Command::new("rm").arg("-rf").arg(mnt.path().join("linux")));
    let left: Vec<_> = fs::read_dir(mnt.path()).unwrap().collect();
    assert!(left.is_empty(), "left after rm -rf: {left:?}");
    mnt.unmount();
}

#[test]
fn tar_create_and_extract() {
    if !have("tar_create_and_extract", &["tar"]) {
        return;
    }
    let Some(mnt) = MountGuard::mount("tar_create_and_extract", &[]) else {
        return;
    };
    let m = mnt.path();
    let src = m.join("src");
    fs::create_dir(&src).unwrap();
    make_tree(&src, 2);
    // GNU format: times in whole seconds. POSIX (pax) format: nanoseconds.
    for (format, ns) in [("gnu", false), ("posix", true)] {
        let archive = m.join(format!("t-{format}.tar"));
        let x = m.join(format!("x-{format}"));
        fs::create_dir(&x).unwrap();
        run(Command::new("tar")
            .arg(format!("--format={format}"))
            .arg("-C")
            .arg(&src)
            .arg("-cf")
            .arg(&archive)
            .arg("."));
        run(Command::new("tar")
            .arg("-C")
            .arg(&x)
            .arg("-xpf")
            .arg(&archive)
            .arg("--same-owner"));
        let how = Compare {
            mtime_ns: Some(ns),
            owners: true,
        };
        assert_same_tree(&src, &x, how);
        // The archive made on the mount, extracted on the host, gives the same
        // tree: the archive itself is right, not only the round trip.
        let host = tempfile::tempdir().unwrap();
        run(Command::new("tar")
            .arg("-C")
            .arg(host.path())
            .arg("-xpf")
            .arg(&archive)
            .arg("--same-owner"));
        assert_same_tree(&src, host.path(), how);
        // tar's own check of the extracted tree against the archive.
        run(Command::new("tar")
            .arg("-C")
            .arg(&x)
            .arg("--compare")
            .arg("-f")
            .arg(&archive));
    }
    mnt.unmount();
}

const MAKEFILE: &str = "\
CC = gcc
CFLAGS = -O1 -Wall -Werror

prog: main.o util.o
\t$(CC) -o $@ main.o util.o

%.o: %.c util.h
\t$(CC) $(CFLAGS) -c -o $@ $<

clean:
\trm -f prog *.o
";

const UTIL_H: &str = "\
int triangle(int n);
const char *greeting(void);
";

const MAIN_C: &str = "\
#include <stdio.h>
#include \"util.h\"

int main(int argc, char **argv) {
    (void)argv;
    printf(\"%s %d %d\\n\", greeting(), triangle(100), argc);
    return 0;
}
";

fn util_c(greeting: &str) -> String {
    format!(
        "#include \"util.h\"\n\
         int triangle(int n) {{ return n <= 0 ? 0 : n + triangle(n - 1); }}\n\
         const char *greeting(void) {{ return \"{greeting}\"; }}\n"
    )
}

#[test]
fn make_and_gcc_build_and_run() {
    if !have("make_and_gcc_build_and_run", &["make", "gcc"]) {
        return;
    }
    let Some(mnt) = MountGuard::mount("make_and_gcc_build_and_run", &[]) else {
        return;
    };
    let dir = mnt.path().join("proj");
    fs::create_dir(&dir).unwrap();
    write_file(&dir.join("Makefile"), MAKEFILE.as_bytes(), 0o644);
    write_file(&dir.join("util.h"), UTIL_H.as_bytes(), 0o644);
    write_file(&dir.join("main.c"), MAIN_C.as_bytes(), 0o644);
    write_file(&dir.join("util.c"), util_c("hello").as_bytes(), 0o644);
    let make = || {
        let mut c = Command::new("make");
        c.arg("-C").arg(&dir).env("TMPDIR", &dir);
        c
    };
    run(&mut make());
    let out = run(Command::new(dir.join("prog")).args(["x", "y"]));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello 5050 3\n");
    // Up to date now: `make -q` exits 0.
    assert!(
        make().arg("-q").status().unwrap().success(),
        "make -q: not up to date after make"
    );
    // A newer util.c: only util.o and prog are rebuilt. (Sources and outputs are
    // moved 20 s and 10 s into the past rather than util.c into the future:
    // make warns of times in the future.)
    let now = SystemTime::now();
    let past = now - Duration::from_secs(10);
    for (name, t) in [
        ("Makefile", now - Duration::from_secs(20)),
        ("util.h", now - Duration::from_secs(20)),
        ("main.c", now - Duration::from_secs(20)),
        ("util.c", now - Duration::from_secs(20)),
        ("main.o", past),
        ("util.o", past),
        ("prog", past),
    ] {
        File::options()
            .write(true)
            .open(dir.join(name))
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    assert!(
        make().arg("-q").status().unwrap().success(),
        "make -q: outputs newer than sources"
    );
    let main_o = fs::metadata(dir.join("main.o"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(main_o, past);
    write_file(&dir.join("util.c"), util_c("again").as_bytes(), 0o644);
    assert_eq!(
        make().arg("-q").status().unwrap().code(),
        Some(1),
        "make -q: util.c is newer"
    );
    let out = run(&mut make());
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("util.o util.c") && !log.contains("main.o main.c"),
        "{log}"
    );
    assert_eq!(
        fs::metadata(dir.join("main.o"))
            .unwrap()
            .modified()
            .unwrap(),
        main_o
    );
    let out = run(&mut Command::new(dir.join("prog")));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "again 5050 1\n");
    let mode = fs::metadata(dir.join("prog")).unwrap().mode();
    assert_eq!(mode & 0o111, 0o111, "prog mode {mode:o}: not executable");
    run(make().arg("clean"));
    let mut left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["Makefile", "main.c", "util.c", "util.h"]);
    mnt.unmount();
}

/// `git` with no user or system configuration, and an identity.
fn git(home: &Path, dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "-c",
            "user.name=uvfs test",
            "-c",
            "user.email=test@uvfs.invalid",
        ])
        .args(["-c", "init.defaultBranch=main", "-c", "gc.auto=0"])
        .arg("-C")
        .arg(dir);
    c
}

fn stdout(out: Output) -> String {
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn git_init_commit_log_fsck_clone() {
    if !have("git_init_commit_log_fsck_clone", &["git"]) {
        return;
    }
    let Some(mnt) = MountGuard::mount("git_init_commit_log_fsck_clone", &[]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let repo = mnt.path().join("repo");
    fs::create_dir(&repo).unwrap();
    run(git(h, &repo).args(["init", "-q"]));
    // First commit: text, a 300 KiB binary, an executable, a symlink, nested dirs.
    let mut rng = Rng::new(3);
    let mut blob = vec![0u8; 300 * 1024];
    rng.fill(&mut blob);
    fs::create_dir_all(repo.join("src/deep/er")).unwrap();
    write_file(&repo.join("README"), b"uvfs mount test\n", 0o644);
    write_file(&repo.join("src/lib.txt"), b"line 1\nline 2\n", 0o644);
    write_file(&repo.join("src/deep/er/blob.bin"), &blob, 0o644);
    write_file(&repo.join("run.sh"), b"#!/bin/sh\necho run\n", 0o755);
    symlink("src/lib.txt", repo.join("lib-link")).unwrap();
    run(git(h, &repo).args(["add", "-A"]));
    run(git(h, &repo).args(["commit", "-q", "-m", "first"]));
    // Second: modify, rename, delete, add.
    write_file(
        &repo.join("src/lib.txt"),
        b"line 1\nline 2 changed\nline 3\n",
        0o644,
    );
    run(git(h, &repo).args(["mv", "README", "README.md"]));
    run(git(h, &repo).args(["rm", "-q", "run.sh"]));
    write_file(&repo.join("new.txt"), b"new\n", 0o600);
    run(git(h, &repo).args(["add", "-A"]));
    run(git(h, &repo).args(["commit", "-q", "-m", "second"]));
    let log = stdout(run(git(h, &repo).args(["log", "--format=%s"])));
    assert_eq!(log, "second\nfirst\n");
    let status = stdout(run(git(h, &repo).args(["status", "--porcelain"])));
    assert_eq!(status, "", "a clean work tree");
    let names = stdout(run(git(h, &repo).args([
        "show",
        "--name-status",
        "--format=",
        "HEAD",
    ])));
    assert_eq!(
        names,
        "R100\tREADME\tREADME.md\nA\tnew.txt\nD\trun.sh\nM\tsrc/lib.txt\n"
    );
    run(git(h, &repo).args(["fsck", "--full", "--strict", "--no-progress"]));
    // Repack (pack files, renames, deletes of loose objects) and check again.
    run(git(h, &repo).args(["gc", "-q", "--prune=now"]));
    run(git(h, &repo).args(["fsck", "--full", "--strict", "--no-progress"]));
    let blob_back = run(git(h, &repo).args(["show", "HEAD:src/deep/er/blob.bin"])).stdout;
    assert!(blob_back == blob, "blob read back from the pack differs");
    // Clone on the mount; the work trees agree (without .git).
    let clone = mnt.path().join("clone");
    run(git(h, mnt.path()).args(["clone", "-q", "repo", "clone"]));
    run(git(h, &clone).args(["fsck", "--full", "--strict", "--no-progress"]));
    let heads: Vec<String> = [&repo, &clone]
        .iter()
        .map(|d| stdout(run(git(h, d).args(["rev-parse", "HEAD"]))))
        .collect();
    assert_eq!(heads[0], heads[1]);
    for d in [&repo, &clone] {
        fs::rename(d.join(".git"), d.with_extension("git")).unwrap();
    }
    // A checkout sets modes from the index (umask) and fresh times.
    let how = Compare {
        mtime_ns: None,
        owners: true,
    };
    let diffs = compare_trees(&repo, &clone, how);
    // new.txt was 0600 in the repo; git only keeps the executable bit.
    assert_eq!(
        diffs,
        ["new.txt: mode 100644, want 100600"],
        "work trees of repo and clone"
    );
    mnt.unmount();
}

/// The comparison finds what it should (no FUSE needed).
#[test]
fn compare_trees_finds_differences() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    fs::create_dir(&a).unwrap();
    make_tree(&a, 9);
    run(Command::new("cp").arg("-a").arg(&a).arg(&b));
    let all = Compare {
        mtime_ns: Some(true),
        owners: true,
    };
    assert_eq!(compare_trees(&a, &b, all), Vec::<String>::new());
    // One of each kind of difference.
    let f = File::options()
        .write(true)
        .open(b.join("a/b/f65536"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"X", 7).unwrap();
    fs::set_permissions(b.join("a/m600"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::remove_file(b.join("a/b/c/linked3")).unwrap();
    write_file(&b.join("a/b/c/linked3"), b"one inode, three names", 0o640);
    fs::remove_file(b.join("a/rel")).unwrap();
    symlink("../f1", b.join("a/rel")).unwrap();
    std::os::unix::fs::lchown(b.join("abs"), Some(1), Some(1)).unwrap();
    fs::remove_dir(b.join("empty")).unwrap();
    let diffs = compare_trees(&a, &b, all).join("\n");
    for want in [
        "a/b/f65536: content differs at byte Some(7)",
        "a/m600: mode 100640, want 100600",
        "a/b/c/linked3: nlink 1, want 3",
        "linked: nlink 2, want 3",
        "a/rel: symlink target Some(\"../f1\")",
        "abs: owner (1, 1), want (4321, 8765)",
        "empty: missing",
    ] {
        assert!(diffs.contains(want), "want {want:?} in:\n{diffs}");
    }
}
