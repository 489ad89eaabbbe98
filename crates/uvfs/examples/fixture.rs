//! A test-harness fixture: the tree is built once with the `std::fs`-shaped facade, each
//! test gets its own copy-on-write snapshot of it (`tmpfs::snapshot`: per inode, not per
//! byte), and the code under test runs on it through the same calls it would make on a
//! real file system.
//!
//! Run: `cargo run -p uvfs --example fixture`

use std::io;
use uvfs::{Dir, Task};

/// The tree every test starts from (a tiny project).
fn fixture(root: &Dir<'_>) -> io::Result<()> {
    root.create_dir_all("proj/src/bin")?;
    root.write("proj/Cargo.toml", "[package]\nname = \"demo\"\n")?;
    root.write("proj/src/lib.rs", "pub fn f() {}\n// TODO: more\n")?;
    root.write("proj/src/bin/main.rs", "fn main() {\n    demo::f();\n}\n")?;
    root.symlink("src/lib.rs", "proj/lib.rs")?;
    Ok(())
}

/// The code under test: counts the lines of every `.rs` file below `dir` (symlinks are
/// not followed, so `lib.rs` counts once) and writes a report.
fn count_lines(dir: &Dir<'_>) -> io::Result<usize> {
    let mut total = 0;
    let mut report = String::new();
    for e in dir.walk_dir("proj").sort_by_file_name() {
        let e = e?;
        if e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "rs") {
            let n = dir.read_to_string(e.path())?.lines().count();
            report += &format!("{} {n}\n", e.path().display());
            total += n;
        }
    }
    dir.write("proj/report.txt", report)?;
    Ok(total)
}

fn main() -> io::Result<()> {
    // Built once; every test below starts from a snapshot of it.
    let prepared = uvfs::tmpfs::mount(Default::default());
    fixture(&Task::init(&prepared).root_dir()?)?;
    // Test 1: the normal case.
    {
        let mnt = uvfs::tmpfs::snapshot(&prepared)?;
        let task = Task::init(&mnt);
        let root = task.root_dir()?;
        assert_eq!(count_lines(&root)?, 5);
        assert_eq!(
            root.read_to_string("proj/report.txt")?,
            "proj/src/bin/main.rs 3\nproj/src/lib.rs 2\n"
        );
    } // the whole copy goes with the mount; `prepared` never saw the report
      // Test 2: an unreadable file is reported with its errno, as on a real file system
      // (a non-root task sees the mode bits).
    {
        let mnt = uvfs::tmpfs::snapshot(&prepared)?;
        let admin = Task::init(&mnt);
        admin
            .root_dir()?
            .set_permissions("proj/src/lib.rs", uvfs::dir::Permissions::from_mode(0o000))?;
        admin.fchownat(
            uvfs::Fd::AT_FDCWD,
            "/proj",
            1000,
            1000,
            uvfs::AtFlags::empty(),
        )?;
        let mut user = admin.fork();
        user.set_cred(uvfs::Cred::new(1000, 1000, &[]));
        let err = count_lines(&user.root_dir()?).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        println!("test 2: count_lines failed as expected: {err}");
    }
    assert!(!Task::init(&prepared)
        .root_dir()?
        .try_exists("proj/report.txt")?);
    println!("fixture: both tests passed");
    Ok(())
}
