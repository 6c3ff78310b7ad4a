# mixfork.py server HOST PORT | client HOST PORT BIND NCONN ROUNDS NBYTES
# server: thread per connection echo; a side thread keeps spawning subprocesses (subprocess.run) and raw os.fork() children
import socket, sys, os, threading, subprocess, time, hashlib
mode = sys.argv[1]
if mode == "server":
    host, port = sys.argv[2], int(sys.argv[3])
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port)); l.listen(128)
    stats = {"spawn": 0, "fork": 0, "err": 0}
    def spawner():
        while True:
            try:
                subprocess.run(["/bin/true"]); stats["spawn"] += 1
                if stats["spawn"] % 4 == 0:
                    pid = os.fork()
                    if pid == 0:
                        time.sleep(0.3); os._exit(0)
                    os.waitpid(pid, 0); stats["fork"] += 1
            except Exception as e:
                print("spawner", repr(e), flush=True)
            time.sleep(0.05)
    def serve(c):
        try:
            while True:
                d = c.recv(65536)
                if not d: break
                c.sendall(d)
        except OSError as e:
            stats["err"] += 1; print("serve error", repr(e), flush=True)
        c.close()
    def acceptor():
        while True:
            c, _ = l.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=acceptor, daemon=True).start()
    print("listening", flush=True)
    started = False
    while True:
        time.sleep(1)
        if os.path.exists("/tmp/advg/mixfork.go") and not started:
            started = True; threading.Thread(target=spawner, daemon=True).start()
        print("stats", stats, flush=True)
else:
    host, port, bind, n, rounds, nb = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    res = []
    def one(i):
        bad = 0
        s = socket.socket(); s.bind((bind, 0)); s.settimeout(120)
        try:
            s.connect((host, port))
            for r in range(rounds):
                data = hashlib.sha256(b"%d.%d" % (i, r)).digest() * (nb // 32)
                t = threading.Thread(target=s.sendall, args=(data,)); t.start()
                got = bytearray()
                while len(got) < len(data):
                    b = s.recv(65536)
                    if not b: break
                    got += b
                t.join()
                if bytes(got) != data: bad += 1
                if r == 0 and i == 0: open("/tmp/advg/mixfork.go", "w").close()
                time.sleep(0.1)
        except Exception as e:
            print("client", i, repr(e), flush=True); bad += 1000
        s.close(); res.append(bad)
    t0 = time.time()
    ths = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    [t.start() for t in ths]; [t.join() for t in ths]
    print("mixfork_client n=%d rounds=%d bad=%s t=%.2f" % (n, rounds, res, time.time() - t0))
    sys.exit(0 if len(res) == n and sum(res) == 0 else 1)
