# Record locks (fcntl) and flock(2) between processes, run by run.rs's
# `file_locks_match_linux` natively and under `uvfs run`: the output must be equal.
# argv[1]: a directory to work in.
import fcntl, os, struct, time, signal, sys
d = sys.argv[1]
fd = os.open(d + '/p', os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)
pid = os.fork()
if pid == 0:
    fd2 = os.open(d + '/p', os.O_RDWR)
    r = fcntl.fcntl(fd2, fcntl.F_GETLK, struct.pack('hhqqi4x', 1, 0, 0, 0, 0))
    print('getlk: write lock of the parent', struct.unpack('hhqqi4x', r)[0::4] == (1, os.getppid()), flush=True)
    t = time.time(); fcntl.lockf(fd2, fcntl.LOCK_EX)
    print('child waited for the lock', time.time() - t > 0.2, flush=True)
    os._exit(0)
time.sleep(0.4); fcntl.lockf(fd, fcntl.LOCK_UN); os.waitpid(pid, 0)
print('parent relocks after the child exited', fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB) is None, flush=True)
fcntl.lockf(fd, fcntl.LOCK_UN)
# A holder killed: its locks go.
r, w = os.pipe()
a = os.fork()
if a == 0:
    f = os.open(d + '/p', os.O_RDWR); fcntl.lockf(f, fcntl.LOCK_EX); os.write(w, b'x'); time.sleep(100); os._exit(0)
os.read(r, 1)
b = os.fork()
if b == 0:
    time.sleep(0.3); os.kill(a, signal.SIGKILL); os._exit(0)
t = time.time(); fcntl.lockf(fd, fcntl.LOCK_EX)
print('granted when the holder was killed', time.time() - t > 0.2, flush=True)
os.waitpid(a, 0); os.waitpid(b, 0)
# A signal to a waiter: EINTR (the handler raises).
class Intr(Exception): pass
def h(*a): raise Intr()
signal.signal(signal.SIGUSR1, h)
c = os.fork()
if c == 0:
    f = os.open(d + '/p', os.O_RDWR)
    try:
        fcntl.lockf(f, fcntl.LOCK_EX); print('no EINTR', flush=True)
    except Intr:
        print('waiter interrupted by a signal', flush=True)
    os._exit(0)
time.sleep(0.3); os.kill(c, signal.SIGUSR1); os.waitpid(c, 0)
# A waiter killed leaves nothing behind.
c = os.fork()
if c == 0:
    f = os.open(d + '/p', os.O_RDWR); fcntl.lockf(f, fcntl.LOCK_EX); os._exit(3)
time.sleep(0.3); os.kill(c, signal.SIGKILL); os.waitpid(c, 0)
fcntl.lockf(fd, fcntl.LOCK_UN)
c = os.fork()
if c == 0:
    f = os.open(d + '/p', os.O_RDWR); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); os._exit(0)
print('free after the killed waiter', os.waitpid(c, 0)[1] == 0, flush=True)
# flock: blocking, converted, released at the last close.
g = os.open(d + '/q', os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(g, fcntl.LOCK_EX)
c = os.fork()
if c == 0:
    os.close(g); g2 = os.open(d + '/q', os.O_RDWR); t = time.time(); fcntl.flock(g2, fcntl.LOCK_SH)
    print('flock waited', time.time() - t > 0.2, flush=True); os._exit(0)
time.sleep(0.3); fcntl.flock(g, fcntl.LOCK_SH); os.waitpid(c, 0)
# A signal whose handler has SA_RESTART: the wait is restarted and then granted.
got = []
signal.signal(signal.SIGUSR2, lambda *a: got.append(1))
signal.siginterrupt(signal.SIGUSR2, False)
fcntl.lockf(fd, fcntl.LOCK_EX)
c = os.fork()
if c == 0:
    f = os.open(d + '/p', os.O_RDWR)
    fcntl.lockf(f, fcntl.LOCK_EX); print('restarted and granted; handler ran', got, flush=True)
    os._exit(0)
time.sleep(0.3); os.kill(c, signal.SIGUSR2); time.sleep(0.3); fcntl.lockf(fd, fcntl.LOCK_UN); os.waitpid(c, 0)
# A lock of a child that has exited and been reaped is gone for F_GETLK too.
h = os.open(d + '/r', os.O_RDWR | os.O_CREAT, 0o644)
c = os.fork()
if c == 0:
    fcntl.lockf(h, fcntl.LOCK_EX); os._exit(0)
os.waitpid(c, 0)
r = fcntl.fcntl(h, fcntl.F_GETLK, struct.pack('hhqqi4x', 1, 0, 0, 0, 0))
print('getlk: none after the holder exited', struct.unpack('hhqqi4x', r)[0] == fcntl.F_UNLCK, flush=True)
print('done', flush=True)
