//! Embedding the FUSE server: a uvfs tmpfs, prepared in-process, served to every program
//! on the machine at a mount point (what `uvfs mount` does, minus its options).
//!
//! Needs the `fuse` feature, /dev/fuse and either root or `fusermount3` (Debian: `fuse3`).
//! Run: `cargo run -p uvfs --features fuse --example fuse_server -- /tmp/mnt`, then in
//! another shell `cat /tmp/mnt/hello.txt`; Ctrl-C (or `fusermount3 -u /tmp/mnt`) ends it.

use std::io;
use uvfs::fuse::{FuseOptions, UvfsFuse};
use uvfs::Task;

fn main() -> io::Result<()> {
    let Some(mountpoint) = std::env::args_os().nth(1) else {
        eprintln!("usage: fuse_server MOUNTPOINT");
        std::process::exit(2);
    };
    // The tree to serve, owned by the user who runs the server (as `uvfs mount` does).
    let mnt = uvfs::tmpfs::mount(uvfs::TmpfsOptions {
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        ..Default::default()
    });
    let task = Task::init(&mnt);
    let root = task.root_dir()?;
    root.write("hello.txt", "served by uvfs from memory\n")?;
    root.create_dir_all("a/b/c")?;
    // The server: one worker thread per core, the kernel's default permission checks.
    let fs = UvfsFuse::new(&mnt, FuseOptions::default());
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("uvfs-example".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    let session = fuser::Session::new(fs, std::path::Path::new(&mountpoint), &config)?;
    eprintln!("serving on {}", mountpoint.to_string_lossy());
    session.run()?;
    Ok(())
}
