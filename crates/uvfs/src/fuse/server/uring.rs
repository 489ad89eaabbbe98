//! FUSE over io_uring, the entry codec: a request the kernel put in one ring entry's two
//! buffers (a 288-byte `fuse_uring_req_header` and a payload buffer) served through
//! [`UvfsFuse::dispatch`], its reply written back into the same buffers, as the kernel's
//! `fuse_uring_commit` reads them.
//!
//! Linux analogue: the server side of fs/fuse/dev_uring.c (`fuse_uring_args_to_ring` fills
//! an entry, `fuse_uring_copy_from_ring` reads the reply); libfuse 3.18 lib/fuse_uring.c.
//!
//! The kernel splits a request three ways: `fuse_in_header` in `in_out`, the first
//! argument (the opcode's fixed struct, empty for those whose first argument is a name) in
//! `op_in`, every other argument back to back in the payload buffer, `payload_sz` bytes. It
//! does not say how long the first argument is; the header's `len` still counts all of
//! them (`fuse_send_one`; `fuse_request_queue_background_uring` for background requests),
//! so it is `len - 40 - payload_sz`. Joined again, the request is
//! exactly what `/dev/fuse` would have delivered, and [`UvfsFuse::dispatch`] decodes it
//! with every check of the classic path. The reply goes the other way: `fuse_out_header`
//! into `in_out`, its payload into the payload buffer, its length into `payload_sz`.

use zerocopy::{FromBytes, IntoBytes};

use super::{abi, UvfsFuse};
use crate::errno::{Errno, Result};

/// The scratch space one ring worker reuses for every entry it serves: the joined request
/// and the reply (each up to the largest WRITE or READ plus headers).
#[derive(Debug, Default)]
pub struct UringScratch {
    req: Vec<u8>,
    reply: Vec<u8>,
}

/// The size of an entry's header buffer (`sizeof(struct fuse_uring_req_header)`).
pub const URING_HEADER_SIZE: usize = std::mem::size_of::<abi::UringReqHeader>();

impl UvfsFuse {
    /// Serves the request in one FUSE-over-io_uring entry and leaves the reply in the same
    /// buffers, ready for `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`. `header` is the entry's
    /// header buffer ([`URING_HEADER_SIZE`] bytes, `struct fuse_uring_req_header`), `payload`
    /// its payload buffer (as registered: at least the connection's `max_write`). Returns
    /// the commit id to send with the commit (`fuse_uring_ent_in_out.commit_id`, the
    /// request's `unique`).
    ///
    /// A request the kernel could not have sent (a header whose `len` is less than the
    /// header and payload it describes, a first argument over 128 bytes, `payload_sz` past
    /// the buffer) is answered `EINVAL`; a reply larger than the payload buffer (none of
    /// uvfs's: READ is capped at `max_write`) `EIO`. Either is an answer the kernel takes
    /// for that request (`fuse_uring_out_header_has_err`), so the entry is never lost.
    ///
    /// # Errors
    /// `EINVAL` if `header` is shorter than [`URING_HEADER_SIZE`]: there is no request
    /// to answer.
    ///
    /// # References
    /// Linux fs/fuse/dev_uring.c `fuse_uring_args_to_ring`, `fuse_uring_commit`,
    /// `fuse_uring_copy_from_ring`; include/uapi/linux/fuse.h `fuse_uring_req_header`.
    pub fn serve_uring_entry(
        &self,
        header: &mut [u8],
        payload: &mut [u8],
        scratch: &mut UringScratch,
    ) -> Result<u64> {
        let h = header
            .get_mut(..URING_HEADER_SIZE)
            .and_then(|h| abi::UringReqHeader::mut_from_bytes(h).ok())
            .ok_or(Errno::EINVAL)?;
        let ent = h.ring_ent_in_out;
        let (inh, _) = abi::InHeader::read_from_prefix(&h.in_out[..]).map_err(|_| Errno::EINVAL)?;
        let hsize = std::mem::size_of::<abi::InHeader>();
        let psize = ent.payload_sz as usize;
        let op_size = (inh.len as usize)
            .checked_sub(hsize + psize)
            .filter(|&n| n <= abi::uring::OP_IN_OUT_SZ && psize <= payload.len());
        let reply = &mut scratch.reply;
        let answered = match op_size {
            Some(op_size) => {
                let req = &mut scratch.req;
                req.clear();
                req.extend_from_slice(&h.in_out[..hsize]);
                req.extend_from_slice(&h.op_in[..op_size]);
                req.extend_from_slice(&payload[..psize]);
                self.dispatch(req, reply)
            }
            None => false,
        };
        let ohsize = std::mem::size_of::<abi::OutHeader>();
        let mut oh = abi::OutHeader {
            len: ohsize as u32,
            error: -Errno::EINVAL.raw(),
            unique: inh.unique,
        };
        let mut n = 0;
        if answered {
            if let Ok((got, body)) = abi::OutHeader::read_from_prefix(&reply[..]) {
                match payload.get_mut(..body.len()) {
                    Some(dst) => {
                        dst.copy_from_slice(body);
                        oh = got;
                        n = body.len();
                    }
                    None => {
                        oh.error = -Errno::EIO.raw();
                    }
                }
            }
        }
        h.in_out[..ohsize].copy_from_slice(oh.as_bytes());
        h.ring_ent_in_out.payload_sz = n as u32;
        Ok(ent.commit_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuse::server::FuseOptions;
    use abi::opcode as op;
    use zerocopy::FromZeros;

    /// Splits a classic request as `fuse_uring_args_to_ring` does: the header, the first
    /// `op_size` argument bytes into `op_in`, the rest into the payload.
    fn entry(req: &[u8], op_size: usize, commit_id: u64) -> (Vec<u8>, Vec<u8>) {
        let mut h = abi::UringReqHeader::new_zeroed();
        h.in_out[..40].copy_from_slice(&req[..40]);
        h.op_in[..op_size].copy_from_slice(&req[40..40 + op_size]);
        let payload = &req[40 + op_size..];
        h.ring_ent_in_out.payload_sz = payload.len() as u32;
        h.ring_ent_in_out.commit_id = commit_id;
        let mut buf = payload.to_vec();
        buf.resize(1 << 20, 0xAA);
        (h.as_bytes().to_vec(), buf)
    }

    fn request(unique: u64, opcode: u32, nodeid: u64, args: &[&[u8]]) -> Vec<u8> {
        let body = args.concat();
        let h = abi::InHeader {
            len: (40 + body.len()) as u32,
            opcode,
            unique,
            nodeid,
            ..Default::default()
        };
        [h.as_bytes(), &body].concat()
    }

    /// The reply left in an entry, as the classic path would have written it.
    fn reply_of(header: &[u8], payload: &[u8]) -> Vec<u8> {
        let h = abi::UringReqHeader::read_from_bytes(&header[..URING_HEADER_SIZE]).unwrap();
        let (oh, _) = abi::OutHeader::read_from_prefix(&h.in_out[..]).unwrap();
        let n = h.ring_ent_in_out.payload_sz as usize;
        assert_eq!(oh.len as usize, 16 + n, "out header len counts the payload");
        [oh.as_bytes(), &payload[..n]].concat()
    }

    /// Every request through an entry gets the same reply bytes as through `/dev/fuse`'s
    /// framing: LOOKUP (name in the payload, empty `op_in`), MKDIR, CREATE, WRITE (data in
    /// the payload), READ, GETATTR, on two servers fed the same sequence.
    #[test]
    fn entries_answer_as_the_classic_framing() {
        let (m1, m2) = (
            crate::tmpfs::mount(Default::default()),
            crate::tmpfs::mount(Default::default()),
        );
        let (a, b) = (
            UvfsFuse::new(&m1, FuseOptions::default()),
            UvfsFuse::new(&m2, FuseOptions::default()),
        );
        let mk = abi::MkdirIn {
            mode: 0o700,
            umask: 0,
        };
        let ci = abi::CreateIn {
            flags: (crate::types::OpenFlags::RDWR | crate::types::OpenFlags::CREAT).bits(),
            mode: crate::types::S_IFREG | 0o600,
            ..Default::default()
        };
        let mut scratch = UringScratch::default();
        let mut classic = Vec::new();
        let mut run = |req: Vec<u8>, op_size: usize| -> Vec<u8> {
            assert!(a.dispatch(&req, &mut classic));
            let (mut h, mut p) = entry(&req, op_size, 77);
            assert_eq!(b.serve_uring_entry(&mut h, &mut p, &mut scratch), Ok(77));
            let got = reply_of(&h, &p);
            // The two servers' times may differ by a tick: the header (length, error,
            // unique) must match exactly; the payloads are checked per request below.
            assert_eq!(got.len(), classic.len());
            assert_eq!(got[..16], classic[..16]);
            got
        };
        run(request(2, op::FUSE_LOOKUP, 1, &[b"nope\0"]), 0);
        let e = run(request(4, op::FUSE_MKDIR, 1, &[mk.as_bytes(), b"d\0"]), 8);
        let ent = abi::EntryOut::read_from_bytes(&e[16..]).unwrap();
        assert_eq!(ent.attr.mode, crate::types::S_IFDIR | 0o700);
        let r = run(
            request(6, op::FUSE_CREATE, ent.nodeid, &[ci.as_bytes(), b"f\0"]),
            16,
        );
        let open = abi::OpenOut::read_from_bytes(&r[16 + 128..]).unwrap();
        let w = abi::WriteIn {
            fh: open.fh,
            size: 5,
            ..Default::default()
        };
        let out = run(request(8, op::FUSE_WRITE, 2, &[w.as_bytes(), b"hello"]), 40);
        assert_eq!(abi::WriteOut::read_from_bytes(&out[16..]).unwrap().size, 5);
        let rd = abi::ReadIn {
            fh: open.fh,
            size: 100,
            ..Default::default()
        };
        assert_eq!(
            &run(request(10, op::FUSE_READ, 2, &[rd.as_bytes()]), 40)[16..],
            b"hello"
        );
        run(
            request(
                12,
                op::FUSE_GETATTR,
                1,
                &[abi::GetattrIn::default().as_bytes()],
            ),
            16,
        );
    }

    /// Entries the kernel could not have filled are answered EINVAL, never left unanswered;
    /// a header buffer too short is refused.
    #[test]
    fn inconsistent_entries_are_answered_einval() {
        let m = crate::tmpfs::mount(Default::default());
        let fs = UvfsFuse::new(&m, FuseOptions::default());
        let mut scratch = UringScratch::default();
        let req = request(2, op::FUSE_LOOKUP, 1, &[b"x\0"]);
        let err = |h: &[u8]| {
            let h = abi::UringReqHeader::read_from_bytes(&h[..URING_HEADER_SIZE]).unwrap();
            let (oh, _) = abi::OutHeader::read_from_prefix(&h.in_out[..]).unwrap();
            (oh.unique, oh.error, h.ring_ent_in_out.payload_sz)
        };
        // payload_sz larger than `len` allows.
        let (mut h, mut p) = entry(&req, 0, 9);
        h[256 + 16..256 + 20].copy_from_slice(&50u32.to_ne_bytes());
        assert_eq!(fs.serve_uring_entry(&mut h, &mut p, &mut scratch), Ok(9));
        assert_eq!(err(&h), (2, -Errno::EINVAL.raw(), 0));
        // A first argument of more than 128 bytes.
        let big = request(4, op::FUSE_LOOKUP, 1, &[&[b'a'; 200], b"\0"]);
        let (mut h, mut p) = entry(&big, 0, 9);
        h[256 + 16..256 + 20].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(fs.serve_uring_entry(&mut h, &mut p, &mut scratch), Ok(9));
        assert_eq!(err(&h), (4, -Errno::EINVAL.raw(), 0));
        // payload_sz past the payload buffer.
        let (mut h, _) = entry(&req, 0, 9);
        let mut small = vec![0u8; 1];
        assert_eq!(
            fs.serve_uring_entry(&mut h, &mut small, &mut scratch),
            Ok(9)
        );
        assert_eq!(err(&h).1, -Errno::EINVAL.raw());
        assert_eq!(
            fs.serve_uring_entry(&mut [0; 100], &mut small, &mut scratch),
            Err(Errno::EINVAL)
        );
    }
}
