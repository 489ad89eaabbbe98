use uvfs::*;

#[test]
fn smoke() {
    let mnt = tmpfs::mount(TmpfsOptions::default());
    let t = Task::init(&mnt);
    t.mkdirat(Fd::AT_FDCWD, "/d", 0o755).unwrap();
    let fd = t
        .open("/d/f", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)
        .unwrap();
    assert_eq!(fd, Fd(0));
    assert_eq!(t.write(fd, b"hello").unwrap(), 5);
    assert_eq!(t.lseek(fd, 0, types::SEEK_SET).unwrap(), 0);
    let mut b = [0u8; 10];
    assert_eq!(t.read(fd, &mut b).unwrap(), 5);
    assert_eq!(&b[..5], b"hello");
    let d = t.dup(fd).unwrap();
    assert_eq!(d, Fd(1));
    t.close(d).unwrap();
    let st = t.fstatat(Fd::AT_FDCWD, "/d/f", AtFlags::empty()).unwrap();
    assert_eq!(st.st_size, 5);
    assert_eq!(st.st_mode, 0o100644);
    t.symlinkat("f", Fd::AT_FDCWD, "/d/l").unwrap();
    assert_eq!(
        t.fstatat(Fd::AT_FDCWD, "/d/l", AtFlags::empty())
            .unwrap()
            .st_ino,
        st.st_ino
    );
    let list = || {
        let dfd = t.open("/d", OpenFlags::DIRECTORY, 0).unwrap();
        let mut buf = [0u8; 4096];
        let n = t.getdents64(dfd, &mut buf).unwrap();
        t.close(dfd).unwrap();
        parse_dirents(&buf[..n])
            .into_iter()
            .map(|e| String::from_utf8(e.name).unwrap())
            .collect::<Vec<_>>()
    };
    // More entries, so that f is not the last in the listing and a rename that moved it
    // to the end (a new cookie) would show.
    for i in 0..6 {
        t.mknodat(
            Fd::AT_FDCWD,
            format!("/d/h{i}").as_str(),
            types::S_IFREG | 0o644,
            0,
        )
        .unwrap();
    }
    let before = list();
    assert_ne!(before.last().map(String::as_str), Some("f"), "{before:?}");
    t.renameat(Fd::AT_FDCWD, "/d/f", Fd::AT_FDCWD, "/d/g")
        .unwrap();
    assert_eq!(
        t.fstatat(Fd::AT_FDCWD, "/d/l", AtFlags::empty()),
        Err(Errno::ENOENT)
    );
    let dfd = t.open("/d", OpenFlags::DIRECTORY, 0).unwrap();
    let mut buf = [0u8; 4096];
    let n = t.getdents64(dfd, &mut buf).unwrap();
    let names: Vec<_> = parse_dirents(&buf[..n])
        .into_iter()
        .map(|e| String::from_utf8(e.name).unwrap())
        .collect();
    // A rename within a directory keeps the entry's place in the listing (the order is the
    // cookies', dcache.rs: g stands where f stood).
    let renamed: Vec<_> = before
        .iter()
        .map(|n| if n == "f" { "g".to_owned() } else { n.clone() })
        .collect();
    assert_eq!(names, renamed);
    assert_eq!(names.len(), 10);
    t.unlinkat(Fd::AT_FDCWD, "/d/g", AtFlags::empty()).unwrap();
    t.unlinkat(Fd::AT_FDCWD, "/d/l", AtFlags::empty()).unwrap();
    for i in 0..6 {
        t.unlinkat(Fd::AT_FDCWD, format!("/d/h{i}").as_str(), AtFlags::empty())
            .unwrap();
    }
    assert_eq!(
        t.unlinkat(Fd::AT_FDCWD, "/d", AtFlags::empty()),
        Err(Errno::EISDIR)
    );
    t.unlinkat(Fd::AT_FDCWD, "/d", AtFlags::REMOVEDIR).unwrap();
    // open file survives unlink
    assert_eq!(t.fstat(fd).unwrap().st_nlink, 0);
    let c = t.fork();
    assert_eq!(c.fstat(fd).unwrap().st_size, 5);
    assert_eq!(t.files().fget(0).unwrap().count(), 3);
}
