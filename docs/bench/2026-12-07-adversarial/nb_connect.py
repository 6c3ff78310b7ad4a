# nb_connect.py server HOST PORT | client HOST PORT BIND N
import socket, selectors, sys, os, time, errno
mode = sys.argv[1]
if mode == "server":
    host, port = sys.argv[2], int(sys.argv[3])
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port)); l.listen(512); l.setblocking(False)
    sel = selectors.DefaultSelector(); sel.register(l, selectors.EVENT_READ, None)
    print("listening", flush=True)
    acc = 0
    while True:
        for key, ev in sel.select():
            if key.data is None:
                while True:
                    try: c, _ = l.accept()
                    except BlockingIOError: break
                    c.setblocking(False); sel.register(c, selectors.EVENT_READ, b""); acc += 1
            else:
                c = key.fileobj
                try: b = c.recv(65536)
                except (BlockingIOError, InterruptedError): continue
                except OSError as e:
                    print("server recv error", e, flush=True); sel.unregister(c); c.close(); continue
                if not b:
                    sel.unregister(c); c.close(); continue
                c.setblocking(True); c.sendall(b); c.setblocking(False)
else:
    host, port, bind, n = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    t0 = time.time()
    sel = selectors.DefaultSelector()
    socks = {}
    for i in range(n):
        s = socket.socket(); s.bind((bind, 0)); s.setblocking(False)
        r = s.connect_ex((host, port))
        if r not in (0, errno.EINPROGRESS):
            print("connect_ex", i, errno.errorcode.get(r, r)); continue
        msg = ("%05d" % i).encode() * 200
        socks[s] = [i, msg, bytearray(), "connecting"]
        sel.register(s, selectors.EVENT_WRITE, socks[s])
    done = ok = bad = 0; errs = {}
    deadline = time.time() + 240
    while socks and time.time() < deadline:
        for key, ev in sel.select(5):
            s = key.fileobj; st = key.data
            if st[3] == "connecting":
                e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if e:
                    errs[errno.errorcode.get(e, e)] = errs.get(errno.errorcode.get(e, e), 0) + 1
                    sel.unregister(s); s.close(); del socks[s]; bad += 1; continue
                s.setblocking(True); s.sendall(st[1]); s.setblocking(False)
                st[3] = "reading"; sel.modify(s, selectors.EVENT_READ, st)
            else:
                try: b = s.recv(65536)
                except BlockingIOError: continue
                except OSError as e:
                    errs[repr(e)] = errs.get(repr(e), 0) + 1; sel.unregister(s); s.close(); del socks[s]; bad += 1; continue
                if not b:
                    errs["early_eof"] = errs.get("early_eof", 0) + 1; sel.unregister(s); s.close(); del socks[s]; bad += 1; continue
                st[2] += b
                if len(st[2]) >= len(st[1]):
                    if bytes(st[2]) == st[1]: ok += 1
                    else: bad += 1; errs["mismatch"] = errs.get("mismatch", 0) + 1
                    sel.unregister(s); s.close(); del socks[s]
    print("nb_client n=%d ok=%d bad=%d left=%d errs=%s t=%.2f" % (n, ok, bad, len(socks), errs, time.time() - t0))
    sys.exit(0 if ok == n else 1)
