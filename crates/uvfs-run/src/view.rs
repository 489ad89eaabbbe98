//! The program's view: a uvfs tmpfs at `/` with host directories bound into it.

use std::path::{Path, PathBuf};

use uvfs::{AtFlags, Fd, MountFlags, Task};

/// One `--bind HOST:PATH[:ro|rw]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The host directory.
    pub host: PathBuf,
    /// Where it appears (absolute).
    pub path: String,
    /// Read-only (`:ro`, the default binds' mode) or read-write (`:rw`, the default of
    /// `--bind`).
    pub read_only: bool,
}

impl Bind {
    /// Parses `HOST:PATH[:ro|rw]`.
    ///
    /// # Errors
    /// A one-line message for a relative PATH, a PATH with `..`, PATH `/` (the view's
    /// root is its own tmpfs, which a mount on `/` would only cover: the program's root
    /// stays the tmpfs's root directory, as a Linux process's under a mount on `/`), or an
    /// unknown mode.
    pub fn parse(s: &str) -> Result<Bind, String> {
        // PATH is the last field before the mode: HOST may hold colons (`/data/a:b:/d`),
        // PATH may not. (It was split at every colon: a HOST with one could not be bound.)
        let (rest, read_only) = match s.rsplit_once(':') {
            Some((r, "ro")) => (r, true),
            Some((r, "rw")) => (r, false),
            _ => (s, false),
        };
        let Some((host, path)) = rest.rsplit_once(':') else {
            return Err(format!("--bind {s}: expected HOST:PATH[:ro|rw]"));
        };
        // `HOST:/p:xx`: a mode, not a PATH.
        if !path.starts_with('/')
            && host
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.starts_with('/'))
        {
            return Err(format!(
                "--bind {s}: unknown mode '{path}' (ro or rw; PATH may not contain ':')"
            ));
        }
        check_mount_point(path).map_err(|e| format!("--bind {s}: {e}"))?;
        // `/data/` and `/data` are one PATH.
        let path = path.trim_end_matches('/');
        if host.is_empty() {
            return Err(format!("--bind {s}: HOST is empty"));
        }
        Ok(Bind {
            host: PathBuf::from(host),
            path: path.to_owned(),
            read_only,
        })
    }
}

/// An absolute path without `.` or `..` components.
pub(crate) fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("PATH {path} is not absolute"));
    }
    if path.split('/').any(|c| c == ".." || c == ".") {
        return Err(format!("PATH {path} has a . or .. component"));
    }
    Ok(())
}

/// Where a `--bind` or `--tmpfs` may go: an absolute path without `.` or `..` components
/// ([`check_path`]), other than `/`. The view's root is its own tmpfs, which a mount on
/// `/` would only cover: the program's root stays the tmpfs's root directory (as a Linux
/// process's root stays under a mount on `/` until it `chroot`s into it), so the mount
/// would be silently ignored; it is refused instead.
///
/// # Errors
/// A one-line message naming the fault.
pub(crate) fn check_mount_point(path: &str) -> Result<(), String> {
    check_path(path)?;
    if path.split('/').all(str::is_empty) {
        return Err(format!(
            "PATH {path} is the view's root, a uvfs tmpfs that no mount replaces; mount \
             below / (--import HOST_DIR:/ copies a host tree into it)"
        ));
    }
    Ok(())
}

/// The usage error of a mount point given twice: two `--bind`s, or two `--tmpfs`, at one
/// PATH (`None` when every PATH is given once). The CLI checks it while parsing (exit
/// status 2, as its other usage errors); [`run`](crate::run) checks it again for library
/// callers.
pub fn duplicate_mount_point(binds: &[Bind], tmpfs: &[String]) -> Option<String> {
    for (i, b) in binds.iter().enumerate() {
        if binds[..i].iter().any(|o| o.path == b.path) {
            return Some(format!(
                "--bind {}:{}: PATH given twice",
                b.host.display(),
                b.path
            ));
        }
    }
    let norm = |t: &str| t.trim_end_matches('/').to_owned();
    for (i, t) in tmpfs.iter().enumerate() {
        if tmpfs[..i].iter().any(|o| norm(o) == norm(t)) {
            return Some(format!("--tmpfs {t}: PATH given twice"));
        }
    }
    None
}

/// Parses `--tmpfs PATH`: an absolute path without `.` or `..` components, other than
/// `/` (see [`Bind::parse`]); returned as given.
///
/// # Errors
/// A one-line message for a relative PATH, a PATH with `.` or `..`, or `/`.
pub fn parse_tmpfs(s: &str) -> Result<String, String> {
    check_mount_point(s).map_err(|e| format!("--tmpfs {s}: {e}"))?;
    Ok(s.to_owned())
}

/// The default read-only binds, each where the host has a directory.
const DEFAULT_BINDS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/dev", "/proc",
    "/sys", "/run",
];

/// The namespace the program runs in, and the task whose table and working directory the
/// first process starts with.
#[derive(Debug)]
pub(crate) struct View {
    /// The first process's task (root's working directory: the host's current directory
    /// when the view has it, else `/`).
    pub task: Task,
}

/// Builds the view: tmpfs root (owned by the caller, with a `/tmp` of mode 1777), the
/// default binds, `--tmpfs` and `--bind` mounts, `--import` copies.
pub(crate) fn build(opts: &crate::RunOptions) -> Result<View, String> {
    let root = uvfs::tmpfs::mount(Default::default());
    let task = Task::init(&root);
    let (uid, gid, _) = crate::sys::ids();
    let e = |what: &str, err: uvfs::Errno| format!("uvfs run: {what}: {err}");
    task.fchownat(Fd::AT_FDCWD, "/", uid, gid, AtFlags::empty())
        .map_err(|err| e("chown /", err))?;
    task.mkdirat(Fd::AT_FDCWD, "/tmp", 0o777)
        .map_err(|err| e("mkdir /tmp", err))?;
    task.fchmodat(Fd::AT_FDCWD, "/tmp", 0o1777, AtFlags::empty())
        .map_err(|err| e("chmod /tmp", err))?;
    let mut binds: Vec<Bind> = Vec::new();
    if !opts.no_default_binds {
        for p in DEFAULT_BINDS {
            if Path::new(p).is_dir() && !opts.binds.iter().any(|b| b.path == *p) {
                binds.push(Bind {
                    host: PathBuf::from(p),
                    path: (*p).to_owned(),
                    read_only: true,
                });
            }
        }
    }
    for b in &opts.binds {
        check_mount_point(&b.path)
            .map_err(|m| format!("--bind {}:{}: {m}", b.host.display(), b.path))?;
        binds.push(b.clone());
    }
    for t in &opts.tmpfs {
        parse_tmpfs(t)?;
    }
    if let Some(msg) = duplicate_mount_point(&opts.binds, &opts.tmpfs) {
        return Err(msg);
    }
    // Every mount, parents before what they hold (a --tmpfs under a bind goes on top of
    // the bind, a bind under a --tmpfs inside it), whatever the order of the options;
    // a stable sort keeps the given order among equals.
    enum M<'a> {
        Bind(&'a Bind),
        Tmpfs(&'a str),
    }
    let mut mounts: Vec<(usize, M<'_>)> = binds
        .iter()
        .map(|b| (depth(&b.path), M::Bind(b)))
        .chain(opts.tmpfs.iter().map(|t| (depth(t), M::Tmpfs(t.as_str()))))
        .collect();
    mounts.sort_by_key(|(d, _)| *d);
    for (_, m) in mounts {
        match m {
            M::Tmpfs(t) => {
                mkdir_p(&task, t).map_err(|m| format!("--tmpfs {t}: {m}"))?;
                task.mount(
                    &uvfs::tmpfs::mount(Default::default()),
                    t,
                    MountFlags::empty(),
                )
                .map_err(|err| format!("--tmpfs {t}: cannot mount: {err}"))?;
            }
            M::Bind(b) => {
                let spec = format!("--bind {}:{}", b.host.display(), b.path);
                let fs = uvfs::hostfs::mount(
                    &b.host,
                    uvfs::hostfs::HostfsOptions {
                        read_only: b.read_only,
                        ..Default::default()
                    },
                )
                .map_err(|err| format!("{spec}: HOST {}: {err}", b.host.display()))?;
                mkdir_p(&task, &b.path).map_err(|m| format!("{spec}: {m}"))?;
                let flags = if b.read_only {
                    MountFlags::RDONLY
                } else {
                    MountFlags::empty()
                };
                task.mount(&fs, b.path.as_str(), flags)
                    .map_err(|err| format!("{spec}: cannot mount: {err}"))?;
            }
        }
    }
    if !opts.imports.is_empty() {
        let dir = task
            .root_dir()
            .map_err(|err| format!("uvfs run: /: {err}"))?;
        for (host, path) in &opts.imports {
            check_path(path).map_err(|m| format!("--import {}:{path}: {m}", host.display()))?;
            dir.import_host(host, beneath_root(path))
                .map_err(|err| err.beneath(Path::new("/")))
                .map_err(|err| format!("--import {}:{path}: {err}", host.display()))?;
        }
    }
    // The working directory: the host's, when the view has that directory.
    if let Ok(cwd) = std::env::current_dir() {
        let _ = task.chdir(cwd.as_os_str());
    }
    Ok(View { task })
}

/// An absolute view path as a path beneath the root directory: `/` itself is `.` (an
/// empty path names nothing: `ENOENT`, as in Linux's walk).
fn beneath_root(path: &str) -> &str {
    match path.trim_start_matches('/') {
        "" => ".",
        p => p,
    }
}

/// The number of components of an absolute path (`/` is 0).
fn depth(path: &str) -> usize {
    path.split('/').filter(|c| !c.is_empty()).count()
}

/// Makes `path` and its missing parents as directories (0755); a parent on a read-only
/// bind says so.
fn mkdir_p(task: &Task, path: &str) -> Result<(), String> {
    let mut at = String::new();
    for comp in path.split('/').filter(|c| !c.is_empty()) {
        at.push('/');
        at.push_str(comp);
        match task.mkdirat(Fd::AT_FDCWD, at.as_str(), 0o755) {
            Ok(()) | Err(uvfs::Errno::EEXIST) => {}
            Err(uvfs::Errno::EROFS) => {
                return Err(format!(
                    "cannot make {at}: it would be inside a read-only bind (bind a host \
                     directory that has it, or use another PATH)"
                ))
            }
            Err(e) => return Err(format!("cannot make {at}: {e}")),
        }
    }
    match task.fstatat(Fd::AT_FDCWD, path, AtFlags::empty()) {
        Ok(st) if st.st_mode & 0o170000 == 0o040000 => Ok(()),
        Ok(_) => Err(format!("{path} is not a directory")),
        Err(e) => Err(format!("{path}: {e}")),
    }
}

/// `--export PATH:HOST_DIR`: copies each tree out after the program exited.
pub(crate) fn export(view: &View, exports: &[(String, PathBuf)]) -> Result<(), String> {
    if exports.is_empty() {
        return Ok(());
    }
    let dir = view
        .task
        .root_dir()
        .map_err(|err| format!("uvfs run: /: {err}"))?;
    for (path, host) in exports {
        dir.export_host(beneath_root(path), host)
            .map_err(|err| err.beneath(Path::new("/")))
            .map_err(|err| format!("--export {path}:{}: {err}", host.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Bind;

    fn bind(s: &str) -> Result<(String, String, bool), String> {
        Bind::parse(s).map(|b| (b.host.display().to_string(), b.path, b.read_only))
    }

    /// `HOST:PATH[:ro|rw]`, with colons allowed in HOST (not in PATH, which ends the
    /// spec before the mode).
    #[test]
    fn binds_parse_with_colons_in_host() {
        let b = |h: &str, p: &str, ro| Ok((h.to_owned(), p.to_owned(), ro));
        assert_eq!(bind("/data:/d"), b("/data", "/d", false));
        assert_eq!(bind("/data:/d:ro"), b("/data", "/d", true));
        assert_eq!(bind("/data:/d/:rw"), b("/data", "/d", false));
        assert_eq!(bind("/a:b:/d"), b("/a:b", "/d", false));
        assert_eq!(bind("/a:b:/d:ro"), b("/a:b", "/d", true));
        assert_eq!(bind("/x:ro:/d"), b("/x:ro", "/d", false));
        for (bad, why) in [
            ("/data", "expected HOST:PATH"),
            ("/data:ro", "expected HOST:PATH"),
            (":/d", "HOST is empty"),
            ("/data:rel", "not absolute"),
            ("/data:/d:xx", "unknown mode 'xx'"),
            ("/data:/d:", "unknown mode ''"),
            ("/data:/a:b", "PATH may not contain ':'"),
            ("/data:/", "PATH"),
            ("/data:/a/../b", "PATH"),
        ] {
            let e = bind(bad).unwrap_err();
            assert!(
                e.contains(why) && e.starts_with(&format!("--bind {bad}: ")),
                "{bad}: {e}"
            );
        }
    }
}
