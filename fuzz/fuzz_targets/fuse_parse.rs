//! One message from a FUSE server through every parser the client applies to it
//! (`uvfs::fuse::client::fuzz::parse`): must never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uvfs::fuse::client::fuzz::parse(data);
});
