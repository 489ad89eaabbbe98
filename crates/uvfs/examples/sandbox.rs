//! A sandbox: a task confined to one directory (chroot) with non-root credentials, and a
//! `Dir` handle that cannot leave its directory whatever path it is given.
//!
//! Run: `cargo run -p uvfs --example sandbox`

use std::io;
use uvfs::{AtFlags, Cred, Errno, Fd, OpenFlags, Task};

fn main() -> io::Result<()> {
    let mnt = uvfs::tmpfs::mount(Default::default());
    let admin = Task::init(&mnt); // root
    let root = admin.root_dir()?;
    root.create_dir_all("srv/app/data")?;
    root.write("secret", "root only")?;
    root.set_permissions("secret", uvfs::dir::Permissions::from_mode(0o600))?;
    root.write("srv/app/config", "mode = sandboxed\n")?;
    admin.fchownat(Fd::AT_FDCWD, "/srv/app/data", 1000, 1000, AtFlags::empty())?;

    // The sandboxed program's task: its own process (fork), its root the app directory,
    // then unprivileged (as a container runtime does: chroot, then setuid).
    let mut app = admin.fork();
    app.chroot("/srv/app")?;
    app.chdir("/")?;
    app.set_cred(Cred::new(1000, 1000, &[]));

    // Inside: what the app may do works.
    let fd = app.open("/data/out", OpenFlags::CREAT | OpenFlags::WRONLY, 0o644)?;
    app.write(fd, b"result")?;
    app.close(fd)?;
    assert_eq!(
        app.root_dir()?.read_to_string("config")?,
        "mode = sandboxed\n"
    );
    // `..` stops at its root, as after chroot(2): /../secret is /secret of the sandbox.
    assert_eq!(
        app.open("/../secret", OpenFlags::RDONLY, 0),
        Err(Errno::ENOENT)
    );
    // Not root: the sandbox's own root-owned files stay read-only to it.
    assert_eq!(
        app.open("/config", OpenFlags::WRONLY, 0),
        Err(Errno::EACCES)
    );
    // And it cannot undo the chroot (no CAP_SYS_CHROOT).
    assert_eq!(app.chroot("/data"), Err(Errno::EPERM));

    // A Dir handle is confined too, even for root, and says so (EXDEV, as
    // openat2(RESOLVE_BENEATH)) instead of quietly resolving elsewhere.
    let data = admin.open_dir("/srv/app/data")?;
    assert_eq!(data.read_to_string("out")?, "result");
    let e = data.read("../../../secret").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(Errno::EXDEV.raw()));
    data.symlink("/secret", "escape")?;
    let e = data.read("escape").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(Errno::EXDEV.raw()));
    println!("sandbox: confined ({e})");
    Ok(())
}
