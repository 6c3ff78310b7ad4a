#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A process that initialised CUDA forks; the child talks TCP to the
parent (CUDA is unusable in the child: roceshim must not ask its driver
there), and the parent then sends from a pinned tensor.  Prints one line
per step; exits 0 when every byte arrived.  Run plain and preloaded.
Without a GPU the tensor is ordinary memory (a dry run)."""
import hashlib
import os
import socket
import subprocess
import sys
import threading

import torch

if torch.cuda.is_available():
    torch.cuda.init()
    pinned = torch.arange(1 << 20, dtype=torch.int32).pin_memory()
else:
    pinned = torch.arange(1 << 20, dtype=torch.int32)
payload = pinned.numpy().tobytes()
digest = hashlib.sha256(payload).hexdigest().encode()


def read_all(sock, out):
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        out.append(chunk)


lst = socket.create_server(("127.0.0.1", 0))
pid = os.fork()
if pid == 0:
    with socket.create_connection(lst.getsockname()) as s:
        s.sendall(b"child:" + digest)
    os._exit(0)
conn, _ = lst.accept()
got = []
read_all(conn, got)
_, status = os.waitpid(pid, 0)
ok = b"".join(got) == b"child:" + digest
print("child after fork: %s (status %d)" % ("ok" if ok else "WRONG", status))

c = socket.create_connection(lst.getsockname())
d, _ = lst.accept()
got = []
reader = threading.Thread(target=read_all, args=(d, got))
reader.start()
c.sendall(memoryview(pinned.numpy()).cast("B"))
c.close()
reader.join()
ok2 = b"".join(got) == payload
print("parent pinned send: %s (%d bytes)"
      % ("ok" if ok2 else "WRONG", len(b"".join(got))))
if os.environ.get("ROCESHIM_STAT"):
    subprocess.run([os.environ["ROCESHIM_STAT"], str(os.getpid())])
sys.exit(0 if ok and ok2 and status == 0 else 1)
