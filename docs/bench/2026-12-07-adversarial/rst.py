# rst.py server HOST PORT | client HOST PORT BIND : abortive-close semantics
import socket, sys, time, struct, errno
mode = sys.argv[1]
def res(f):
    try: return repr(f())
    except OSError as e: return "ERR " + errno.errorcode.get(e.errno, str(e.errno))
if mode == "server":
    host, port = sys.argv[2], int(sys.argv[3])
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port)); l.listen(16); print("listening", flush=True)
    for case in ["unread", "linger0", "normal"]:
        c, _ = l.accept()
        c.sendall(b"hello" * 1000)
        c.recv(1)  # client's go byte
        time.sleep(1.5)
        r1 = res(lambda: c.recv(100))
        r2 = res(lambda: c.send(b"x" * 10))
        time.sleep(0.3)
        r3 = res(lambda: c.send(b"x" * 10))
        r4 = res(lambda: c.recv(100))
        print("server case=%s recv1=%s send1=%s send2=%s recv2=%s SO_ERROR=%s" % (case, r1, r2, r3, r4, c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)), flush=True)
        c.close()
    time.sleep(60)
else:
    host, port, bind = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    for case in ["unread", "linger0", "normal"]:
        s = socket.socket(); s.bind((bind, 0)); s.connect((host, port))
        time.sleep(0.5)
        s.send(b"g")
        if case == "linger0":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if case == "normal":
            n = 0
            s.settimeout(5)
            while n < 5000: n += len(s.recv(65536))
        s.close()
        time.sleep(2.5)
    print("client done", flush=True)
