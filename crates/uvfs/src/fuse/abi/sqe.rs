//! The one field of a FUSE-over-io_uring command SQE that the `io-uring` crate cannot set:
//! `sqe->len`, which `FUSE_IO_URING_CMD_REGISTER` needs to be the number of iovecs (2).
//!
//! Linux analogue: fs/fuse/dev_uring.c `fuse_uring_get_iovec_from_sqe` reads `sqe->addr`
//! and `sqe->len` (`FUSE_URING_IOV_SEGS`) and refuses any other count with `EINVAL`;
//! `io_uring::opcode::UringCmd80` (0.7.16, the newest release) sets `addr` and the 80-byte
//! command but has no `len`. libfuse 3.18 (lib/fuse_uring.c `fuse_uring_prepare_fetch_sqes`)
//! sets `sqe->len = 2` through liburing's plain struct.
//!
//! Invariants: `io_uring::squeue::Entry128` is `#[repr(C)]` over `(Entry, [u8; 64])`, and
//! `Entry` is `#[repr(C)]` over the kernel's `struct io_uring_sqe` (64 bytes of integers and
//! unions of integers, no padding), so the entry is 128 plain bytes in the kernel's layout
//! (include/uapi/linux/io_uring.h): `len` is the `u32` at byte 24. The unit test checks
//! that layout against fields the crate sets itself (`fd` at 4, `addr` at 16, `user_data`
//! at 32, the command at 48).

use io_uring::squeue::Entry128;

/// Byte offset of `__u32 len` in `struct io_uring_sqe`.
const SQE_LEN_OFFSET: usize = 24;

crate::const_assert!(std::mem::size_of::<Entry128>() == 128);

/// `e` with `sqe->len` set to `len`.
///
/// # References
/// Linux include/uapi/linux/io_uring.h `struct io_uring_sqe`; fs/fuse/dev_uring.c
/// `fuse_uring_get_iovec_from_sqe`.
pub(crate) fn sqe128_with_len(e: Entry128, len: u32) -> Entry128 {
    // SAFETY: `Entry128` is 128 bytes (asserted above; `transmute` checks it again) of
    // `#[repr(C)]` integer fields and unions of integers without padding (module doc), so
    // every byte is initialised and its bytes are a valid `[u8; 128]`.
    let mut b: [u8; 128] = unsafe { std::mem::transmute::<Entry128, [u8; 128]>(e) };
    b[SQE_LEN_OFFSET..SQE_LEN_OFFSET + 4].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: any 128 bytes are a valid `Entry128`: all of its fields are integers or
    // unions of integers (module doc); the bytes came from a valid entry with one `u32`
    // field changed.
    unsafe { std::mem::transmute::<[u8; 128], Entry128>(b) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::{opcode, types};

    fn bytes(e: Entry128) -> [u8; 128] {
        // SAFETY: as in `sqe128_with_len`: 128 initialised bytes.
        unsafe { std::mem::transmute::<Entry128, [u8; 128]>(e) }
    }

    /// The offsets used are the kernel's: fields the crate sets land where
    /// `struct io_uring_sqe` has them, and `len` lands at 24 without touching them.
    #[test]
    fn len_is_at_the_kernels_offset() {
        let mut cmd = [0u8; 80];
        cmd[0] = 0xC1;
        cmd[79] = 0xC2;
        let e = opcode::UringCmd80::new(types::Fd(0x1234_5678), 0xAABB_CCDD)
            .addr(Some(0x1122_3344_5566_7788))
            .cmd(cmd)
            .build()
            .user_data(0x0102_0304_0506_0708);
        let before = bytes(e.clone());
        let after = bytes(sqe128_with_len(e, 2));
        let u32_at = |b: &[u8; 128], o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |b: &[u8; 128], o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        for b in [&before, &after] {
            assert_eq!(b[0], 46, "opcode IORING_OP_URING_CMD at 0");
            assert_eq!(u32_at(b, 4), 0x1234_5678, "fd at 4");
            assert_eq!(u32_at(b, 8), 0xAABB_CCDD, "cmd_op at 8");
            assert_eq!(u64_at(b, 16), 0x1122_3344_5566_7788, "addr at 16");
            assert_eq!(u64_at(b, 32), 0x0102_0304_0506_0708, "user_data at 32");
            assert_eq!((b[48], b[127]), (0xC1, 0xC2), "cmd at 48..128");
        }
        assert_eq!(u32_at(&before, SQE_LEN_OFFSET), 0);
        assert_eq!(u32_at(&after, SQE_LEN_OFFSET), 2);
        let changed: Vec<usize> = (0..128).filter(|&i| before[i] != after[i]).collect();
        assert_eq!(changed, [SQE_LEN_OFFSET], "only len's low byte changes");
    }
}
