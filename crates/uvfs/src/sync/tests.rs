//! Loom models of the lock-free protocols in `sync/` (run with `--cfg uvfs_loom`).

mod loom_file_ref;
mod loom_once_box;
mod loom_page_evict;
mod loom_page_read;
mod loom_pcp_ref;
mod loom_seqcount;
