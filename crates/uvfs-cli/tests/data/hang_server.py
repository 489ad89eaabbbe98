#!/usr/bin/env python3
"""A FUSE server for uvfs-cli's mount_interrupt test: LOOKUP of "slow" (or "slow<anything>") in the root never gets an
answer until the client interrupts it (then EINTR, as a libfuse server that checks
fuse_req_interrupted answers); everything else is answered at once. argv: the /dev/fd/N
the client hands over, and a log file (one line per event)."""
import os, struct, sys, errno

fd = int(sys.argv[1].rsplit('/', 1)[1]) if sys.argv[1].startswith('/dev/fd/') else os.open(sys.argv[1], os.O_RDWR)
log = open(sys.argv[2], 'a', buffering=1)
hung = set()

def reply(unique, err=0, body=b''):
    try:
        os.write(fd, struct.pack('<IiQ', 16 + len(body), -err, unique) + body)
    except OSError as e:  # the client is gone (unmounted)
        log.write(f'write error {e}\n')

def attr(ino, mode, nlink):
    return struct.pack('<QQQQQQIIIIIIIIII', ino, 0, 0, 0, 0, 0, 0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)

while True:
    try:
        m = os.read(fd, 1 << 21)
    except OSError as e:
        log.write(f'read error {e}\n'); break
    if not m:
        break
    ln, op, unique, nodeid = struct.unpack_from('<IIQQ', m)
    body = m[40:ln]
    if op == 26:  # INIT
        major, minor, ra, flags = struct.unpack_from('<IIII', body)
        reply(unique, 0, struct.pack('<IIIIHHIIHHII', 7, min(minor, 31), ra, 0, 16, 12, 65536, 1, 16, 0, 0, 0) + b'\0' * 24)
    elif op == 36:  # INTERRUPT
        (target,) = struct.unpack_from('<Q', body)
        log.write(f'interrupt {target} hung={target in hung}\n')
        if target in hung:
            hung.discard(target)
            reply(target, errno.EINTR)
            log.write(f'answered {target} EINTR; still hung {len(hung)}\n')
    elif op == 1:  # LOOKUP
        name = body.split(b'\0', 1)[0]
        if nodeid == 1 and name.startswith(b'slow'):
            hung.add(unique)
            log.write(f'hung {unique} {name.decode()}\n')
        else:
            reply(unique, errno.ENOENT)
    elif op == 3:  # GETATTR
        reply(unique, 0, struct.pack('<QII', 1, 0, 0) + attr(nodeid, 0o40755, 2))
    elif op in (2, 42):  # FORGET, BATCH_FORGET
        pass
    elif op == 38:  # DESTROY
        reply(unique); break
    else:
        reply(unique, errno.ENOSYS)
