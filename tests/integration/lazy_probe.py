#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Does ACTION, then prints "ACTION mapped=M shm=S" about this process:
M is how many of libibverbs and librdmacm it has mapped, S whether its
stats segment exists.  Actions: none; socket (a socket, no connect);
connect (a listener, a connection to it, 200 KB checked byte for byte);
thread (connect on a thread while the main thread waits in epoll); fork
(connect in a fork child, which prints its own line first); refused (a
connect to a closed port: prints "refused: ERRNO" first).  With STAT and
OUT, writes `STAT --json` of this process to OUT.  The address is
$PROBE_ADDR, else 127.0.0.1.

usage: lazy_probe.py ACTION [STAT OUT]
"""
import errno, os, select, socket, sys, threading

def state(pid=None):
    pid = pid or os.getpid()
    maps = open(f"/proc/{pid}/maps").read()
    mapped = ("libibverbs" in maps) + ("librdmacm" in maps)
    shm = os.path.exists(f"/dev/shm/roceshim-{pid}")
    return f"mapped={mapped} shm={int(shm)}"

ADDR = os.environ.get("PROBE_ADDR", "127.0.0.1")

def echo_pair():
    lst = socket.socket()
    lst.bind((ADDR, 0))
    lst.listen()
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    payload = os.urandom(200000)
    cli.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += srv.recv(65536)
    assert got == payload, "bytes differ"
    return [lst, cli, srv]

action = sys.argv[1]
keep = []
if action == "socket":
    keep.append(socket.socket())
elif action == "connect":
    keep += echo_pair()
elif action == "thread":
    ep = select.epoll()
    r, w = os.pipe()
    ep.register(r, select.EPOLLIN)
    def connect_then_wake():
        keep.extend(echo_pair())
        os.write(w, b"x")
    t = threading.Thread(target=connect_then_wake)
    t.start()
    assert ep.poll(30), "epoll_wait never woke"
    t.join()
elif action == "fork":
    pid = os.fork()
    if pid == 0:
        echo_pair()
        print("child", state(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
elif action == "refused":
    s = socket.socket()
    s.bind((ADDR, 0))
    port = s.getsockname()[1]
    s.close()
    try:
        socket.create_connection((ADDR, port))
        print("refused: connected")
    except OSError as e:
        print("refused:", errno.errorcode[e.errno])
print(action, state(), flush=True)
if len(sys.argv) > 2:
    out = os.popen(f"{sys.argv[2]} --json {os.getpid()}").read()
    open(sys.argv[3], "w").write(out)
