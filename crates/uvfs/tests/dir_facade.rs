//! The `std::fs`-shaped facade (`uvfs::Dir`), asserted against `std::fs` itself: each
//! scenario runs on a `Dir` over every file system behind the seam (tmpfs, hostfs) and on
//! `std::fs` in a host temporary directory, and the two must give the same results and the
//! same errnos. Confinement (which `std::fs` does not have) is asserted against Linux's
//! `openat2(RESOLVE_BENEATH)` answer, `EXDEV` (openat2(2)).

mod common;
use common::*;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use uvfs::dir::{Dir, OpenOptions, Permissions};

/// What a call gave: a value, or an error as its errno (or its kind when it has none).
#[derive(Debug, PartialEq, Eq, Clone)]
enum Out<T> {
    Ok(T),
    Errno(i32),
    Kind(io::ErrorKind),
}

fn out<T>(r: io::Result<T>) -> Out<T> {
    match r {
        Ok(v) => Out::Ok(v),
        Err(e) => match e.raw_os_error() {
            Some(n) => Out::Errno(n),
            None => Out::Kind(e.kind()),
        },
    }
}

/// A scenario's transcript: each call's source text and its result.
macro_rules! tr {
    ($($e:expr),* $(,)?) => {
        vec![$(format!("{} = {:?}", stringify!($e), $e)),*]
    };
}

/// The calls a scenario makes, on either side.
trait Fsx {
    fn write(&self, p: &str, data: &[u8]) -> io::Result<()>;
    fn read(&self, p: &str) -> io::Result<Vec<u8>>;
    fn create_dir(&self, p: &str) -> io::Result<()>;
    fn create_dir_all(&self, p: &str) -> io::Result<()>;
    fn remove_file(&self, p: &str) -> io::Result<()>;
    fn remove_dir(&self, p: &str) -> io::Result<()>;
    fn remove_dir_all(&self, p: &str) -> io::Result<()>;
    fn rename(&self, a: &str, b: &str) -> io::Result<()>;
    fn hard_link(&self, a: &str, b: &str) -> io::Result<()>;
    fn symlink(&self, target: &str, p: &str) -> io::Result<()>;
    fn read_link(&self, p: &str) -> io::Result<PathBuf>;
    fn copy(&self, a: &str, b: &str) -> io::Result<u64>;
    /// (is_dir, is_file, is_symlink, len, permission bits, nlink)
    fn meta(&self, p: &str, follow: bool) -> io::Result<(bool, bool, bool, u64, u32, u64)>;
    fn set_mode(&self, p: &str, mode: u32) -> io::Result<()>;
    /// Sorted (name, is_dir, is_file, is_symlink) of a listing.
    fn list(&self, p: &str) -> io::Result<Vec<(String, bool, bool, bool)>>;
    /// Opens with options (read, write, append, truncate, create, create_new), writes
    /// `data`, reads the whole file back from offset 0 if readable.
    fn open_rw(&self, p: &str, o: [bool; 6], data: &[u8]) -> io::Result<Vec<u8>>;
    /// Sorted relative paths and depths of a walk.
    fn walk(&self, p: &str) -> io::Result<Vec<(String, usize, bool)>>;
}

fn meta_of(m: uvfs::Metadata) -> (bool, bool, bool, u64, u32, u64) {
    let len = if m.is_dir() { 0 } else { m.len() };
    (
        m.is_dir(),
        m.is_file(),
        m.is_symlink(),
        len,
        m.permissions().mode(),
        m.nlink(),
    )
}

impl Fsx for Dir<'_> {
    fn write(&self, p: &str, data: &[u8]) -> io::Result<()> {
        Dir::write(self, p, data)
    }
    fn read(&self, p: &str) -> io::Result<Vec<u8>> {
        Dir::read(self, p)
    }
    fn create_dir(&self, p: &str) -> io::Result<()> {
        Dir::create_dir(self, p)
    }
    fn create_dir_all(&self, p: &str) -> io::Result<()> {
        Dir::create_dir_all(self, p)
    }
    fn remove_file(&self, p: &str) -> io::Result<()> {
        Dir::remove_file(self, p)
    }
    fn remove_dir(&self, p: &str) -> io::Result<()> {
        Dir::remove_dir(self, p)
    }
    fn remove_dir_all(&self, p: &str) -> io::Result<()> {
        Dir::remove_dir_all(self, p)
    }
    fn rename(&self, a: &str, b: &str) -> io::Result<()> {
        Dir::rename(self, a, self, b)
    }
    fn hard_link(&self, a: &str, b: &str) -> io::Result<()> {
        Dir::hard_link(self, a, self, b)
    }
    fn symlink(&self, target: &str, p: &str) -> io::Result<()> {
        Dir::symlink(self, target, p)
    }
    fn read_link(&self, p: &str) -> io::Result<PathBuf> {
        Dir::read_link(self, p)
    }
    fn copy(&self, a: &str, b: &str) -> io::Result<u64> {
        Dir::copy(self, a, self, b)
    }
    fn meta(&self, p: &str, follow: bool) -> io::Result<(bool, bool, bool, u64, u32, u64)> {
        let m = if follow {
            self.metadata(p)?
        } else {
            self.symlink_metadata(p)?
        };
        Ok(meta_of(m))
    }
    fn set_mode(&self, p: &str, mode: u32) -> io::Result<()> {
        self.set_permissions(p, Permissions::from_mode(mode))
    }
    fn list(&self, p: &str) -> io::Result<Vec<(String, bool, bool, bool)>> {
        let mut v = Vec::new();
        for e in self.read_dir(p)? {
            let e = e?;
            let t = e.file_type()?;
            assert_eq!(e.path(), Path::new(p).join(e.file_name()));
            assert_eq!(e.metadata()?.ino(), e.ino());
            v.push((
                e.file_name().into_string().unwrap(),
                t.is_dir(),
                t.is_file(),
                t.is_symlink(),
            ));
        }
        v.sort();
        Ok(v)
    }
    fn open_rw(&self, p: &str, o: [bool; 6], data: &[u8]) -> io::Result<Vec<u8>> {
        let mut f = self.open_with(
            p,
            OpenOptions::new()
                .read(o[0])
                .write(o[1])
                .append(o[2])
                .truncate(o[3])
                .create(o[4])
                .create_new(o[5]),
        )?;
        rw(&mut f, o, data)
    }
    fn walk(&self, p: &str) -> io::Result<Vec<(String, usize, bool)>> {
        let mut v = Vec::new();
        for e in self.walk_dir(p).sort_by_file_name() {
            let e = e?;
            v.push((
                e.path().to_str().unwrap().to_string(),
                e.depth(),
                e.file_type().is_dir(),
            ));
        }
        Ok(v)
    }
}

fn rw(f: &mut (impl Read + Write + Seek), o: [bool; 6], data: &[u8]) -> io::Result<Vec<u8>> {
    if !data.is_empty() {
        f.write_all(data)?;
    }
    let mut back = Vec::new();
    if o[0] {
        f.seek(SeekFrom::Start(0))?;
        f.read_to_end(&mut back)?;
    }
    Ok(back)
}

/// `std::fs` on a host directory: the reference.
struct StdFs(PathBuf);

impl StdFs {
    fn p(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Fsx for StdFs {
    fn write(&self, p: &str, data: &[u8]) -> io::Result<()> {
        std::fs::write(self.p(p), data)
    }
    fn read(&self, p: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.p(p))
    }
    fn create_dir(&self, p: &str) -> io::Result<()> {
        std::fs::create_dir(self.p(p))
    }
    fn create_dir_all(&self, p: &str) -> io::Result<()> {
        std::fs::create_dir_all(self.p(p))
    }
    fn remove_file(&self, p: &str) -> io::Result<()> {
        std::fs::remove_file(self.p(p))
    }
    fn remove_dir(&self, p: &str) -> io::Result<()> {
        std::fs::remove_dir(self.p(p))
    }
    fn remove_dir_all(&self, p: &str) -> io::Result<()> {
        std::fs::remove_dir_all(self.p(p))
    }
    fn rename(&self, a: &str, b: &str) -> io::Result<()> {
        std::fs::rename(self.p(a), self.p(b))
    }
    fn hard_link(&self, a: &str, b: &str) -> io::Result<()> {
        std::fs::hard_link(self.p(a), self.p(b))
    }
    fn symlink(&self, target: &str, p: &str) -> io::Result<()> {
        std::os::unix::fs::symlink(target, self.p(p))
    }
    fn read_link(&self, p: &str) -> io::Result<PathBuf> {
        std::fs::read_link(self.p(p))
    }
    fn copy(&self, a: &str, b: &str) -> io::Result<u64> {
        std::fs::copy(self.p(a), self.p(b))
    }
    fn meta(&self, p: &str, follow: bool) -> io::Result<(bool, bool, bool, u64, u32, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = if follow {
            std::fs::metadata(self.p(p))?
        } else {
            std::fs::symlink_metadata(self.p(p))?
        };
        let len = if m.is_dir() { 0 } else { m.len() };
        Ok((
            m.is_dir(),
            m.is_file(),
            m.is_symlink(),
            len,
            m.mode() & 0o7777,
            m.nlink(),
        ))
    }
    fn set_mode(&self, p: &str, mode: u32) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.p(p), std::fs::Permissions::from_mode(mode))
    }
    fn list(&self, p: &str) -> io::Result<Vec<(String, bool, bool, bool)>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(self.p(p))? {
            let e = e?;
            let t = e.file_type()?;
            v.push((
                e.file_name().into_string().unwrap(),
                t.is_dir(),
                t.is_file(),
                t.is_symlink(),
            ));
        }
        v.sort();
        Ok(v)
    }
    fn open_rw(&self, p: &str, o: [bool; 6], data: &[u8]) -> io::Result<Vec<u8>> {
        let mut f = std::fs::OpenOptions::new()
            .read(o[0])
            .write(o[1])
            .append(o[2])
            .truncate(o[3])
            .create(o[4])
            .create_new(o[5])
            .open(self.p(p))?;
        rw(&mut f, o, data)
    }
    fn walk(&self, p: &str) -> io::Result<Vec<(String, usize, bool)>> {
        // A plain recursive reference walk (pre-order, entries sorted by name).
        fn go(
            root: &Path,
            rel: &str,
            depth: usize,
            v: &mut Vec<(String, usize, bool)>,
        ) -> io::Result<()> {
            let m = std::fs::symlink_metadata(root.join(rel))?;
            v.push((rel.to_string(), depth, m.is_dir()));
            if m.is_dir() {
                let mut names: Vec<String> = std::fs::read_dir(root.join(rel))?
                    .map(|e| e.map(|e| e.file_name().into_string().unwrap()))
                    .collect::<io::Result<_>>()?;
                names.sort();
                for n in names {
                    go(root, &format!("{rel}/{n}"), depth + 1, v)?;
                }
            }
            Ok(())
        }
        let mut v = Vec::new();
        go(&self.0, p, 0, &mut v)?;
        Ok(v)
    }
}

/// Runs `f` on a `Dir` over each file system and on `std::fs`, and asserts the same
/// transcript. The umask is 0o022 on both sides (set for the host process here; a uvfs
/// task starts with it).
fn same_as_std<T: PartialEq + std::fmt::Debug>(f: impl Fn(&dyn Fsx) -> T) {
    // SAFETY-free: umask is process-wide; every test here wants 0o022.
    unsafe_umask();
    let host = tempfile::tempdir().unwrap();
    let want = f(&StdFs(host.path().to_path_buf()));
    for u in each_fs() {
        let name = if u.host.is_some() { "hostfs" } else { "tmpfs" };
        let d = u.task.root_dir().unwrap();
        let got = f(&d);
        assert_eq!(got, want, "on {name}");
    }
}

fn unsafe_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
}

#[test]
fn read_write_and_metadata() {
    same_as_std(|s| {
        tr![
            out(s.write("f", b"hello")),
            out(s.read("f")),
            out(s.meta("f", true)),
            out(s.write("f", b"hi")),
            out(s.read("f")),
            out(s.read("missing")),
            out(s.write("missing/f", b"x")),
            out(s.create_dir("d")),
            out(s.read("d")),
            out(s.write("d", b"x")),
            out(s.meta("d", true).map(|m| (m.0, m.1, m.4))),
            out(s.write("f/x", b"x")),
            out(s.meta("f/", true)),
        ]
    });
}

#[test]
fn open_options() {
    const R: [bool; 6] = [true, false, false, false, false, false];
    same_as_std(|s| {
        s.write("f", b"abc").unwrap();
        tr![
            out(s.open_rw("f", R, b"")),
            // read + write, no truncation: overwrite at 0
            out(s.open_rw("f", [true, true, false, false, false, false], b"X")),
            // append
            out(s.open_rw("f", [true, false, true, false, false, false], b"YZ")),
            // truncate
            out(s.open_rw("f", [true, true, false, true, false, false], b"q")),
            // create_new on an existing name
            out(s.open_rw("f", [false, true, false, false, false, true], b"")),
            // create_new on a new name
            out(s.open_rw("g", [true, true, false, false, false, true], b"new")),
            // no access mode
            out(s.open_rw("f", [false; 6], b"")),
            // truncate without write
            out(s.open_rw("f", [true, false, false, true, false, false], b"")),
            // create without write
            out(s.open_rw("h", [true, false, false, false, true, false], b"")),
            // truncate with append
            out(s.open_rw("f", [false, true, true, true, false, false], b"")),
            // create on a missing name, write only
            out(s.open_rw("h", [false, true, false, false, true, false], b"w")),
            out(s.read("h")),
            out(s.open_rw("missing", R, b"")),
        ]
    });
}

#[test]
fn create_and_remove_dirs() {
    same_as_std(|s| {
        tr![
            out(s.create_dir_all("a/b/c")),
            out(s.create_dir_all("a/b/c")),
            out(s.create_dir_all("a//b/./c/d/")),
            out(s.meta("a/b/c/d", true).map(|m| m.0)),
            out(s.write("a/f", b"x")),
            out(s.create_dir_all("a/f/g")),
            out(s.create_dir_all("a/f")),
            out(s.create_dir("a")),
            out(s.create_dir("x/y")),
            out(s.remove_dir("a")),
            out(s.remove_dir("a/f")),
            out(s.remove_file("a/b")),
            out(s.remove_file("a/f")),
            out(s.remove_file("a/f")),
            out(s.remove_dir("a/b/c/d")),
            out(s.symlink("b", "a/lb")),
            out(s.create_dir_all("a/lb/c/e")),
            out(s.meta("a/b/c/e", true).map(|m| m.0)),
            out(s.list("a")),
        ]
    });
}

#[test]
fn remove_dir_all_removes_trees_and_not_through_symlinks() {
    same_as_std(|s| {
        s.create_dir_all("keep/inner").unwrap();
        s.write("keep/inner/k", b"kept").unwrap();
        s.create_dir_all("t/a/b/c").unwrap();
        // More entries than one 4 KiB getdents64 buffer holds, with subdirectories among
        // them, at two levels: the removal must not skip any.
        for i in 0..150 {
            let long = format!("{i:03}-{}", "n".repeat(40));
            s.write(&format!("t/{long}"), b"x").unwrap();
            if i % 37 == 0 {
                s.create_dir(&format!("t/a/{long}")).unwrap();
                s.write(&format!("t/a/{long}/f"), b"y").unwrap();
            }
        }
        s.symlink("../keep", "t/a/b/c/to-keep").unwrap();
        s.symlink("../../keep/inner", "t/a/b/inner-link").unwrap();
        s.hard_link("keep/inner/k", "t/a/b/hard").unwrap();
        tr![
            out(s.remove_dir_all("t/")),
            out(s.meta("t", false)),
            out(s.read("keep/inner/k")),
            out(s.meta("keep/inner/k", true).map(|m| m.5)),
            // A symlink is removed itself, its target left.
            out(s.symlink("keep", "lk")),
            out(s.remove_dir_all("lk")),
            out(s.list("keep")),
            out(s.remove_dir_all("missing")),
            // A file: removed (std).
            out(s.write("file", b"1")),
            out(s.remove_dir_all("file")),
            out(s.meta("file", false)),
        ]
    });
}

#[test]
fn rename_link_symlink_copy() {
    same_as_std(|s| {
        s.write("f", b"data").unwrap();
        s.create_dir_all("d/e").unwrap();
        s.write("d/e/g", b"g").unwrap();
        s.set_mode("f", 0o640).unwrap();
        tr![
            out(s.rename("f", "d/f2")),
            out(s.read("d/f2")),
            out(s.rename("d/f2", "d/e")),
            out(s.rename("d", "d/e/sub")),
            out(s.create_dir("empty")),
            out(s.rename("d/e", "empty")),
            out(s.list("empty")),
            out(s.rename("missing", "x")),
            out(s.hard_link("d/f2", "hl")),
            out(s.meta("hl", true).map(|m| (m.3, m.5))),
            out(s.hard_link("d/f2", "hl")),
            out(s.hard_link("empty", "hd")),
            out(s.symlink("d/f2", "sl")),
            out(s.read_link("sl")),
            out(s.read_link("hl")),
            out(s.meta("sl", false).map(|m| (m.2, m.3))),
            out(s.meta("sl", true)),
            out(s.read("sl")),
            out(s.symlink("x", "sl")),
            out(s.copy("d/f2", "c")),
            out(s.meta("c", true).map(|m| (m.1, m.3, m.4))),
            out(s.copy("sl", "c2")),
            out(s.read("c2")),
            out(s.copy("empty", "c3")),
            out(s.copy("missing", "c4")),
            out(s.set_mode("c", 0o600)),
            out(s.meta("c", true).map(|m| m.4)),
            out(s.set_mode("sl", 0o604)),
            out(s.meta("d/f2", true).map(|m| m.4)),
        ]
    });
}

#[test]
fn read_dir_and_walk() {
    same_as_std(|s| {
        s.create_dir_all("w/a/b").unwrap();
        s.write("w/a/b/f", b"1").unwrap();
        s.write("w/g", b"2").unwrap();
        s.symlink("a", "w/la").unwrap();
        s.create_dir("w/empty").unwrap();
        tr![
            out(s.list("w")),
            out(s.list("w/a/b")),
            out(s.list("w/g")),
            out(s.list("w/missing")),
            out(s.walk("w")),
            out(s.walk("w/g")),
            out(s.walk("w/missing")),
        ]
    });
}

/// A copy onto itself is refused before anything is truncated (std's `copy` would empty
/// the file first: a data loss this facade does not repeat).
#[test]
fn copy_onto_itself_keeps_the_data() {
    for u in each_fs() {
        let d = u.task.root_dir().unwrap();
        d.write("f", b"precious").unwrap();
        d.hard_link("f", &d, "h").unwrap();
        for to in ["f", "h", "./f"] {
            let e = d.copy("f", &d, to).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(d.read("f").unwrap(), b"precious");
        }
    }
}

/// Nothing outside the `Dir` is reached: an absolute path, a `..` above it and a symlink
/// leading out are `EXDEV` (openat2(2), `RESOLVE_BENEATH`), and change nothing.
#[test]
fn confined_beneath_the_dir() {
    const EXDEV: i32 = 18;
    for u in each_fs() {
        let t = &u.task;
        let root = t.root_dir().unwrap();
        root.create_dir_all("outside/box").unwrap();
        root.write("outside/secret", b"s").unwrap();
        root.symlink("/outside/secret", "outside/box/abs").unwrap();
        root.symlink("../secret", "outside/box/up").unwrap();
        root.symlink("../../outside", "outside/box/upup").unwrap();
        let b = t.open_dir("/outside/box").unwrap();
        let x = |r: io::Result<()>| out(r);
        assert_eq!(out(b.read("/outside/secret")), Out::Errno(EXDEV));
        assert_eq!(out(b.read("../secret")), Out::Errno(EXDEV));
        assert_eq!(out(b.read("abs")), Out::Errno(EXDEV));
        assert_eq!(out(b.read("up")), Out::Errno(EXDEV));
        assert_eq!(
            out(b.metadata("upup/secret").map(|_| ())),
            Out::Errno(EXDEV)
        );
        assert_eq!(x(b.write("../new", b"x")), Out::Errno(EXDEV));
        assert_eq!(x(b.write("up", b"x")), Out::Errno(EXDEV));
        assert_eq!(x(b.remove_file("../secret")), Out::Errno(EXDEV));
        assert_eq!(x(b.remove_file("upup/secret")), Out::Errno(EXDEV));
        assert_eq!(x(b.create_dir("../d")), Out::Errno(EXDEV));
        assert_eq!(x(b.create_dir_all("/abs/d")), Out::Errno(EXDEV));
        assert_eq!(x(b.create_dir_all("upup/d")), Out::Errno(EXDEV));
        assert_eq!(x(b.remove_dir_all("upup/box")), Out::Errno(EXDEV));
        assert_eq!(x(b.remove_dir_all("..")), Out::Errno(EXDEV));
        assert_eq!(
            x(b.set_permissions("up", Permissions::from_mode(0o777))),
            Out::Errno(EXDEV)
        );
        assert_eq!(x(b.rename("../secret", &b, "mine")), Out::Errno(EXDEV));
        assert_eq!(x(b.hard_link("../secret", &b, "mine")), Out::Errno(EXDEV));
        assert_eq!(out(b.copy("up", &b, "mine")), Out::Errno(EXDEV));
        assert_eq!(out(b.read_dir("..").map(|_| ())), Out::Errno(EXDEV));
        // A symlink named with a trailing slash would be followed by the *at call: checked
        // beneath first. remove_dir_all("link/") of a link out removes nothing (review).
        root.create_dir_all("outside/victim").unwrap();
        root.write("outside/victim/v", b"v").unwrap();
        root.symlink("/outside/victim", "outside/box/tv").unwrap();
        root.symlink("../victim", "outside/box/rv").unwrap();
        assert_eq!(x(b.remove_dir_all("tv/")), Out::Errno(EXDEV));
        assert_eq!(x(b.remove_dir_all("rv/")), Out::Errno(EXDEV));
        assert_eq!(out(b.read_link("abs/")), Out::Errno(EXDEV));
        assert_eq!(root.read("outside/victim/v").unwrap(), b"v");
        // A final `..` above the Dir is EXDEV for every call, as in a middle position.
        assert_eq!(out(b.read_link("..")), Out::Errno(EXDEV));
        assert_eq!(x(b.remove_dir("..")), Out::Errno(EXDEV));
        assert_eq!(x(b.create_dir("..")), Out::Errno(EXDEV));
        let walked: Vec<_> = b.walk_dir("upup").collect();
        assert_eq!(walked.len(), 1, "a symlink is listed, not followed");
        // The symlinks themselves are inside: they can be read and removed.
        assert_eq!(b.read_link("up").unwrap(), Path::new("../secret"));
        assert!(b.symlink_metadata("abs").unwrap().is_symlink());
        // Nothing changed outside.
        assert_eq!(root.read("outside/secret").unwrap(), b"s");
        assert_eq!(
            root.metadata("outside/secret")
                .unwrap()
                .permissions()
                .mode(),
            0o644
        );
        assert!(!root.try_exists("outside/new").unwrap());
        assert!(!root.try_exists("outside/d").unwrap());
        // `.` and `..` as the tree to remove are refused before anything goes.
        b.write("inside", b"i").unwrap();
        assert_eq!(x(b.remove_dir_all(".")), Out::Errno(22));
        assert_eq!(b.read("inside").unwrap(), b"i");
        // `..` that stays beneath is fine; a `Dir` opened on a subdirectory is confined to
        // that subdirectory.
        b.create_dir("sub").unwrap();
        assert_eq!(b.read("sub/../inside").unwrap(), b"i");
        assert_eq!(x(b.remove_dir_all("sub/..")), Out::Errno(39));
        let sub = b.open_dir("sub").unwrap();
        assert_eq!(out(sub.read("../inside")), Out::Errno(EXDEV));
    }
}

/// Errors are `std::io::Error`s carrying the errno (`raw_os_error`), as std's are.
#[test]
fn errors_carry_the_errno() {
    for u in each_fs() {
        let d = u.task.root_dir().unwrap();
        let e = d.read("nope").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(uvfs::Errno::from_io_error(&e), uvfs::Errno::ENOENT);
        assert_eq!(out(d.metadata("").map(|_| ())), Out::Errno(2));
        assert_eq!(out(d.create_dir("")), Out::Errno(2));
        assert!(d.try_exists(".").unwrap());
        assert!(d.dir_metadata().unwrap().is_dir());
    }
}

/// `OpenFile` owns its reference: it is `Send + Sync`, outlives the descriptor it came
/// from, shares the open file's position with every descriptor of it (as `dup`), and does
/// std `File`'s Read/Write/Seek/FileExt.
#[test]
fn open_file_owns_its_reference() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<uvfs::OpenFile>();
    for u in each_fs() {
        let t = &u.task;
        let flags = uvfs::OpenFlags::CREAT | uvfs::OpenFlags::RDWR;
        let f = t.open_file("/of", flags, 0o600).unwrap();
        (&f).write_all(b"hello world").unwrap();
        assert_eq!(f.stat().unwrap().st_size, 11);
        // Another thread reads it through a clone (same position: at the end).
        let g = f.try_clone().unwrap();
        let h = std::thread::spawn(move || {
            let mut g = g;
            let mut s = String::new();
            g.read_to_string(&mut s).unwrap();
            g.seek(SeekFrom::Start(6)).unwrap();
            g.read_to_string(&mut s).unwrap();
            s
        });
        assert_eq!(h.join().unwrap(), "world");
        // FileExt-style positioned calls leave the position alone.
        let mut b = [0u8; 5];
        assert_eq!(f.read_at(&mut b, 0).unwrap(), 5);
        assert_eq!(&b, b"hello");
        assert_eq!(f.write_at(b"W", 6).unwrap(), 1);
        assert_eq!((&f).stream_position().unwrap(), 11);
        // A descriptor of the same open file shares the position.
        let fd = f.install(t, false).unwrap();
        assert_eq!(t.lseek(fd, 0, uvfs::types::SEEK_CUR).unwrap(), 11);
        t.lseek(fd, 2, uvfs::types::SEEK_SET).unwrap();
        assert_eq!((&f).stream_position().unwrap(), 2);
        t.close(fd).unwrap();
        // From a Dir, confined as every Dir call.
        let d = t.root_dir().unwrap();
        let mut df = d.open_file("of", OpenOptions::new().read(true)).unwrap();
        let mut s = String::new();
        df.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello World");
        assert_eq!(
            out(d
                .open_file("/of", OpenOptions::new().read(true))
                .map(|_| ())),
            Out::Errno(18)
        );
        // From a descriptor: the descriptor closes, the file stays open.
        let owned = t.open_owned("/of", uvfs::OpenFlags::RDONLY, 0).unwrap();
        let n = owned.fd();
        let r = owned.into_file().unwrap();
        assert_eq!(t.fstat(n), Err(uvfs::Errno::EBADF));
        // Unlinked while open: still readable, as Linux.
        t.unlinkat(uvfs::Fd::AT_FDCWD, "/of", uvfs::AtFlags::empty())
            .unwrap();
        let mut s = String::new();
        (&r).read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello World");
        // Errors are the calls' errnos.
        assert_eq!(out((&r).write(b"x")), Out::Errno(9)); // EBADF: read-only
        assert_eq!(out(r.set_len(0)), Out::Errno(22)); // EINVAL: not open for writing
        f.set_len(5).unwrap();
        assert_eq!(f.stat().unwrap().st_size, 5);
        assert_eq!(out(f.read_at(&mut b, u64::MAX)), Out::Errno(22));
        f.sync_all().unwrap();
        let p = t.open_file("/", uvfs::OpenFlags::PATH, 0).unwrap();
        assert_eq!(out(p.sync_all()), Out::Errno(9));
        // Every call but stat is EBADF on an O_PATH file, as for its descriptor (review).
        assert_eq!(out((&p).seek(SeekFrom::Start(1))), Out::Errno(9));
        assert_eq!(out(p.set_len(0)), Out::Errno(9));
        assert!(p.stat().unwrap().is_dir());
        assert_eq!(t.fget_file(uvfs::Fd(999)).err(), Some(uvfs::Errno::EBADF));
    }
}

/// `Task::seek` is `lseek` with `std::io::SeekFrom`, errnos included (lseek(2)).
#[test]
fn seek_takes_seekfrom() {
    for u in each_fs() {
        let t = &u.task;
        let fd = t
            .open("/s", uvfs::OpenFlags::CREAT | uvfs::OpenFlags::RDWR, 0o644)
            .unwrap();
        t.write(fd, b"0123456789").unwrap();
        assert_eq!(t.seek(fd, SeekFrom::Start(3)), Ok(3));
        assert_eq!(t.seek(fd, SeekFrom::Current(2)), Ok(5));
        assert_eq!(t.seek(fd, SeekFrom::End(-1)), Ok(9));
        assert_eq!(t.seek(fd, SeekFrom::Current(-20)), Err(uvfs::Errno::EINVAL));
        assert_eq!(
            t.seek(fd, SeekFrom::Start(u64::MAX)),
            Err(uvfs::Errno::EINVAL)
        );
        assert_eq!(
            t.seek(uvfs::Fd(77), SeekFrom::Start(0)),
            Err(uvfs::Errno::EBADF)
        );
        // The position is unchanged by the failures.
        assert_eq!(t.lseek(fd, 0, uvfs::types::SEEK_CUR), Ok(9));
    }
}

/// `Metadata::created` is the inode's birth time (`statx` `stx_btime`) where the file
/// system keeps one (tmpfs does, as Linux's tmpfs since 5.x), through every way a
/// `Metadata` is made; it does not move when the file changes.
#[test]
fn created_is_the_birth_time() {
    let t = uvfs::Task::init(&uvfs::tmpfs::mount(Default::default()));
    let d = t.root_dir().unwrap();
    d.write("f", "x").unwrap();
    let x = t
        .statx(
            uvfs::Fd::AT_FDCWD,
            "/f",
            uvfs::AtFlags::empty(),
            uvfs::stat::STATX_BTIME,
        )
        .unwrap();
    let born = std::time::UNIX_EPOCH
        + std::time::Duration::new(x.stx_btime.tv_sec as u64, x.stx_btime.tv_nsec);
    assert_eq!(d.metadata("f").unwrap().created().unwrap(), born);
    let listed = d.entries().unwrap().next().unwrap().unwrap();
    assert_eq!(listed.metadata().unwrap().created().unwrap(), born);
    std::thread::sleep(std::time::Duration::from_millis(20));
    d.write("f", "changed").unwrap();
    let m = d.metadata("f").unwrap();
    assert_eq!(m.created().unwrap(), born, "a write does not move it");
    assert!(m.modified().unwrap() > born);
    assert!(d.dir_metadata().unwrap().created().is_ok());
}
