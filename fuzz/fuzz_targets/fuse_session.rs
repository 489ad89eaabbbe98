//! The FUSE client mounted over a hostile in-process server whose replies are the input
//! (`uvfs::fuse::client::fuzz::session`: a mode byte, then chunks of a `u16` prefix and
//! bytes): must never panic, hang (run with `-timeout=10`) or leak.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uvfs::fuse::client::fuzz::session(data);
});
