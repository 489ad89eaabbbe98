//! Crate-level loom models (run with `--cfg uvfs_loom`); the `sync/` primitives have their own
//! in `sync/tests/`.

mod loom_dir;
mod loom_fdtable;
mod loom_limits;
