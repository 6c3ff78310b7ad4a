# prefork server: parent listens, 3 forked children accept; client: N conns, C threads
import os, socket, sys, threading, time, errno
mode = sys.argv[1]
if mode == 'server':
    host, port = sys.argv[2], int(sys.argv[3])
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port)); ls.listen(128)
    kids = []
    for k in range(int(os.environ.get('KIDS', '3'))):
        pid = os.fork()
        if pid == 0:
            n = 0
            while True:
                c, a = ls.accept(); n += 1
                t0 = time.time()
                try:
                    buf = b''
                    while not buf.endswith(b'\n'):
                        d = c.recv(65536)
                        if not d: print('child %d conn %d from %s: EOF after %d bytes' % (os.getpid(), n, a, len(buf)), flush=True); break
                        buf += d
                    if buf:
                        c.sendall(b'ok ' + buf)
                except OSError as e:
                    print('child %d conn %d from %s: %r after %.3fs' % (os.getpid(), n, a, e, time.time() - t0), flush=True)
                dt = time.time() - t0
                if dt > 1: print('child %d conn %d slow %.2fs' % (os.getpid(), n, dt), flush=True)
                c.close()
        kids.append(pid)
    print('server ready', flush=True)
    try:
        for p in kids: os.waitpid(p, 0)
    except KeyboardInterrupt: pass
else:
    host, port, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    src = sys.argv[6] if len(sys.argv) > 6 else None
    lock = threading.Lock(); idx = [0]; errs = []; lat = []
    def w():
        while True:
            with lock:
                if idx[0] >= n: return
                idx[0] += 1; i = idx[0]
            t0 = time.time()
            try:
                s = socket.socket()
                if src: s.bind((src, 0))
                s.settimeout(60)
                s.connect((host, port))
                msg = b'req %d\n' % i
                s.sendall(msg)
                got = b''
                while True:
                    d = s.recv(65536)
                    if not d: break
                    got += d
                s.close()
                if got != b'ok ' + msg: errs.append('conn %d got %r' % (i, got))
            except OSError as e:
                errs.append('conn %d %r after %.2fs' % (i, e, time.time() - t0))
            lat.append(time.time() - t0)
    t0 = time.time()
    ts = [threading.Thread(target=w) for _ in range(c)]; [t.start() for t in ts]; [t.join() for t in ts]
    lat.sort()
    print('client: n=%d errs=%d time=%.2fs median=%.3fs max=%.3fs' % (n, len(errs), time.time() - t0, lat[len(lat)//2], lat[-1]))
    for e in errs[:10]: print('  ', e)
