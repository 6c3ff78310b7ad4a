#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A PyTorch job on the Gloo backend, for roceshim's integration tests.

Two modes:

  gloo_job.py launch --world N [--preload] [options]
      Spawn N rank processes on this host (each optionally wrapped in
      $ROCESHIM_RUN), wait for them (hard timeout), collect what they
      report, print one line per digest / measurement and exit 0 when every
      rank succeeded.

  gloo_job.py rank --world N --rank R --master-port P [options]
      Run one rank.  MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK are taken from
      the options (or the environment); init_method is env://.

Inputs are deterministic (seeded by op, size, rank and iteration) and
integer valued, so every result is exact: each rank checks its result against
a locally computed expectation and prints a sha256 digest per op and size,
which lets a run under the preload be compared byte for byte with a plain run.

With --check-stats every rank, after its ops and while its connections are
still open, runs "$ROCESHIM_STAT --json <own pid>" and checks that each Gloo
pair connection of the process (as the kernel sees it in /proc) has a row in
the stats segment, open, on the expected transport and with bytes both ways.

With --bench every rank times each iteration (after a barrier) and rank 0
reports, per op and size, the median over iterations of the slowest rank.

Rank output lines that the launcher reads start with "@@ " followed by JSON.
"""

import argparse
import datetime
import hashlib
import json
import os
import shlex
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib

OPS = ("all_reduce", "broadcast", "all_gather", "send_recv")
MARK = "@@ "
ESTABLISHED = 1


# ---------------------------------------------------------------------------
# Helpers shared by both modes
# ---------------------------------------------------------------------------

def parse_size(text):
    """'4096', '4K', '4KiB', '1M', '64MiB', '1G' -> bytes."""
    t = text.strip().upper()
    if t.endswith("IB"):
        t = t[:-2]
    elif t.endswith("B"):
        t = t[:-1]
    mult = 1
    if t and t[-1] in "KMG":
        mult = 1 << {"K": 10, "M": 20, "G": 30}[t[-1]]
        t = t[:-1]
    value = int(t) * mult
    if value <= 0:
        raise argparse.ArgumentTypeError("size must be > 0: %r" % text)
    return value


def parse_sizes(text):
    try:
        return [parse_size(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError("bad size list %r: %s" % (text, exc))


def parse_ops(text):
    ops = [o.strip() for o in text.split(",") if o.strip()]
    if ops == ["all"]:
        return list(OPS)
    for op in ops:
        if op not in OPS:
            raise argparse.ArgumentTypeError(
                "unknown op %r (known: %s)" % (op, ",".join(OPS)))
    return ops


def fmt_size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return "%dB" % n


def free_port(addr):
    """A port that was free a moment ago (bind port 0, read it, close)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def iface_for_addr(addr):
    """Name of the local interface that holds IPv4 address addr, or None."""
    siocgifaddr = 0x8915
    try:
        import fcntl
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex():
                req = struct.pack("256s", name.encode()[:15])
                try:
                    res = fcntl.ioctl(s.fileno(), siocgifaddr, req)
                except OSError:
                    continue
                if socket.inet_ntoa(res[20:24]) == addr:
                    return name
    except OSError:
        pass
    return None


def add_common_args(p):
    p.add_argument("--world", type=int, required=True, help="world size")
    p.add_argument("--ops", type=parse_ops, default=list(OPS),
                   help="comma list of %s, or 'all' (default all)"
                   % ",".join(OPS))
    p.add_argument("--sizes", type=parse_sizes,
                   default=parse_sizes("1K,1M,4M"),
                   help="comma list of message sizes in bytes "
                   "(suffix K/M/G, binary), default 1K,1M,4M")
    p.add_argument("--iters", type=int, default=None,
                   help="iterations per op and size (default 2, bench 10)")
    p.add_argument("--repeat-for", type=float, default=0,
                   help="verify mode: go on past --iters until this many "
                   "seconds have passed (a job that is sure to be busy "
                   "when a fault test strikes)")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed iterations per op and size in --bench")
    p.add_argument("--bench", action="store_true",
                   help="time iterations; rank 0 reports the median of "
                   "the slowest rank (no result verification)")
    p.add_argument("--check-stats", action="store_true",
                   help="check $ROCESHIM_STAT --json for this process")
    p.add_argument("--join-stats-check", action="store_true",
                   help="take part in the other ranks' --check-stats "
                   "(its pair exchange and barriers) without a check of "
                   "this rank's own: a rank without roceshim")
    p.add_argument("--show-stats", action="store_true",
                   help="each rank prints roceshim-stat's table of itself "
                   "before it closes its connections")
    p.add_argument("--expect-transport", type=expect_spec, default="tcp",
                   help="transport the connections must show "
                   "(--check-stats): rdma, tcp, or tcp:REASON[,REASON...] "
                   "for a fallback with one of those reasons")
    p.add_argument("--expect-peer", action="append", default=[],
                   type=expect_peer, metavar="ADDR=SPEC",
                   help="--expect-transport's SPEC for the connections to "
                   "peer address ADDR (a mixed cluster); repeatable")
    p.add_argument("--addr", default="127.0.0.1",
                   help="address of the master and of the Gloo pairs")
    p.add_argument("--rank-addrs", default=None,
                   help="hook: comma list of one address per rank; rank 0's "
                   "is MASTER_ADDR, each rank's Gloo device is the interface "
                   "holding its address (GLOO_SOCKET_IFNAME); in a fabric "
                   "cluster, a rank whose address is another host's runs "
                   "there through rsf-exec, on --ifname")
    p.add_argument("--ifname", default=None,
                   help="GLOO_SOCKET_IFNAME (default: interface of --addr)")
    p.add_argument("--pg-timeout", type=float, default=120.0,
                   help="process group timeout in seconds (default 120)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the tensors live (cuda: ProcessGroupGloo "
                   "stages them through pinned host memory)")
    p.add_argument("--check-memory", action="store_true",
                   help="after the ops, check the preloaded process's "
                   "memory classes in the stats: pinned bytes sent where "
                   "all_reduce or broadcast staged CUDA tensors, and no "
                   "call refused")
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads (default 1)")


# ---------------------------------------------------------------------------
# Rank mode
# ---------------------------------------------------------------------------

def emit(kind, **fields):
    fields["type"] = kind
    sys.stdout.write(MARK + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def log(args, msg):
    sys.stderr.write("[rank %d] %s\n" % (args.rank, msg))
    sys.stderr.flush()


def make_input(torch, op, size, rank, it):
    """Deterministic integer-valued float32 tensor of size bytes."""
    numel = max(1, size // 4)
    seed = zlib.crc32(("%s:%d:%d:%d" % (op, size, rank, it)).encode())
    gen = torch.Generator()
    gen.manual_seed(seed)
    return torch.randint(-1000, 1000, (numel,), generator=gen,
                         dtype=torch.int32).to(torch.float32)


def tensor_bytes(t):
    return t.cpu().contiguous().numpy().tobytes()


class OpRunner:
    """Runs one op on prepared inputs; expected() gives the exact result."""

    def __init__(self, torch, dist, op, size, rank, world, device="cpu"):
        self.torch, self.dist = torch, dist
        self.op, self.size = op, size
        self.rank, self.world = rank, world
        self.device = device

    def inputs(self, it):
        torch = self.torch
        src = make_input(torch, self.op, self.size, self.rank,
                         it).to(self.device)
        if self.op == "all_reduce":
            return {"buf": src.clone()}
        if self.op == "broadcast":
            root = it % self.world
            buf = src.clone() if self.rank == root else torch.zeros_like(src)
            return {"buf": buf, "root": root}
        if self.op == "all_gather":
            return {"src": src,
                    "out": [torch.empty_like(src) for _ in range(self.world)]}
        return {"src": src, "buf": torch.empty_like(src)}   # send_recv

    def run(self, io):
        dist = self.dist
        if self.op == "all_reduce":
            dist.all_reduce(io["buf"])
        elif self.op == "broadcast":
            dist.broadcast(io["buf"], src=io["root"])
        elif self.op == "all_gather":
            dist.all_gather(io["out"], io["src"])
        else:
            nxt = (self.rank + 1) % self.world
            prv = (self.rank - 1) % self.world
            req = dist.isend(io["src"], dst=nxt)
            dist.recv(io["buf"], src=prv)
            req.wait()

    def result(self, io):
        if self.op == "all_gather":
            return self.torch.cat(io["out"]).cpu()
        return io["buf"].cpu()

    def expected(self, it):
        torch = self.torch

        def inp(r):
            return make_input(torch, self.op, self.size, r, it)
        if self.op == "all_reduce":
            total = inp(0)
            for r in range(1, self.world):
                total += inp(r)
            return total
        if self.op == "broadcast":
            return inp(it % self.world)
        if self.op == "all_gather":
            return torch.cat([inp(r) for r in range(self.world)])
        return inp((self.rank - 1) % self.world)


def more_time(torch, dist, end):
    """Whether rank 0 has time left: every rank must run as many ops."""
    flag = torch.tensor([int(time.monotonic() < end)])
    dist.broadcast(flag, 0)
    return bool(flag.item())


def run_verify(args, torch, dist, op, size):
    """Run --iters iterations, check each result, emit one digest."""
    runner = OpRunner(torch, dist, op, size, args.rank, args.world,
                      args.device)
    digest = hashlib.sha256()
    end = time.monotonic() + args.repeat_for
    it = 0
    while it < args.iters or (args.repeat_for and
                              more_time(torch, dist, end)):
        io = runner.inputs(it)
        runner.run(io)
        got = runner.result(io)
        want = runner.expected(it)
        if not torch.equal(got, want):
            bad = (got != want).nonzero()
            first = int(bad[0][0]) if len(bad) else -1
            raise RuntimeError(
                "%s size %s iteration %d: result differs from expected in "
                "%d of %d elements (first at element %d: got %r want %r)"
                % (op, fmt_size(size), it, len(bad), got.numel(), first,
                   float(got[first]), float(want[first])))
        digest.update(tensor_bytes(got))
        it += 1
    emit("digest", rank=args.rank, op=op, size=size,
         sha256=digest.hexdigest())


def run_bench(args, torch, dist, op, size):
    """Time iterations; rank 0 emits per-iteration max over ranks."""
    runner = OpRunner(torch, dist, op, size, args.rank, args.world)
    io = runner.inputs(0)
    pristine = {k: v.clone() for k, v in io.items()
                if isinstance(v, torch.Tensor)}
    times = []
    for it in range(args.warmup + args.iters):
        for k, v in pristine.items():
            io[k].copy_(v)
        dist.barrier()
        t0 = time.perf_counter()
        runner.run(io)
        t1 = time.perf_counter()
        if it >= args.warmup:
            times.append((t1 - t0) * 1e3)
    mine = torch.tensor(times, dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(args.world)]
    dist.all_gather(every, mine)
    if args.rank == 0:
        slowest = [max(float(t[i]) for t in every) for i in range(len(times))]
        emit("bench", op=op, size=size, world=args.world,
             ms_slowest=slowest, median_ms=statistics.median(slowest),
             min_ms=min(slowest), max_ms=max(slowest))


def touch_all_pairs(torch, dist, rank, world):
    """Exchange a small tensor with every peer so every pair moved bytes."""
    reqs = []
    bufs = []
    for peer in range(world):
        if peer == rank:
            continue
        reqs.append(dist.isend(torch.full((16,), float(rank)), dst=peer))
        buf = torch.empty(16)
        bufs.append((peer, buf))
        reqs.append(dist.irecv(buf, src=peer))
    for req in reqs:
        req.wait()
    for peer, buf in bufs:
        if not torch.equal(buf, torch.full((16,), float(peer))):
            raise RuntimeError("pair exchange with rank %d got wrong data"
                               % peer)


# --- stats check -----------------------------------------------------------

def parse_hostport(text):
    """'127.0.0.1:5000' or '[::ffff:127.0.0.1]:5000' -> ('127.0.0.1', 5000)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if host.lower().startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, int(port)


def _proc_addr(hexaddr):
    ip_hex, port_hex = hexaddr.split(":")
    raw = bytes.fromhex(ip_hex)
    # /proc prints each 32-bit word in host byte order
    words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]
    packed = b"".join(words) if sys.byteorder == "little" else raw
    if len(packed) == 4:
        host = socket.inet_ntop(socket.AF_INET, packed)
    else:
        host = socket.inet_ntop(socket.AF_INET6, packed)
        if host.lower().startswith("::ffff:") and "." in host:
            host = host[7:]
    return host, int(port_hex, 16)


def expect_spec(text):
    """argparse type of an expectation: rdma, tcp or tcp:REASON,..."""
    transport, _, reasons = text.partition(":")
    if transport not in ("tcp", "rdma") or (reasons and transport != "tcp"):
        raise argparse.ArgumentTypeError("%r: expected rdma, tcp or "
                                         "tcp:REASON[,REASON...]" % text)
    return text


def expect_peer(text):
    addr, sep, spec = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("%r: expected ADDR=SPEC" % text)
    return addr, expect_spec(spec)


def expectation(args, peer_addr):
    """(transport, fallback reasons allowed or None) for a peer address."""
    spec = dict(args.expect_peer).get(peer_addr, args.expect_transport)
    transport, _, reasons = spec.partition(":")
    return transport, set(reasons.split(",")) if reasons else None


def check_row(args, cands, fd, loc, peer, gloo_pair):
    """Problems with the stats row of the connection on fd (kernel's view:
    loc, peer): its transport, and for a Gloo pair bytes both ways."""
    problems = []
    t, reasons = expectation(args, peer[0])
    what = "fd %d (%s:%d <-> %s:%d)" % (fd, loc[0], loc[1], peer[0], peer[1])
    if len(cands) != 1:
        return ["%s: %d open rows in stats" % (what, len(cands))]
    row = cands[0]
    try:
        rloc = parse_hostport(row["local"])
        rpeer = parse_hostport(row["peer"])
    except (KeyError, ValueError) as exc:
        return ["%s: bad address in row %r (%s)" % (what, row, exc)]
    if rloc != loc or rpeer != peer:
        problems.append("%s: row says %s -> %s" % (what, row["local"],
                                                   row["peer"]))
    if row.get("role") not in ("active", "passive"):
        problems.append("%s: role %r" % (what, row.get("role")))
    if row.get("transport") != t:
        problems.append("%s: transport %r, expected %r (fallback %r)"
                        % (what, row.get("transport"), t,
                           row.get("fallback")))
    if t == "rdma" and row.get("fallback") != "none":
        problems.append("%s: fallback %r on an rdma connection"
                        % (what, row.get("fallback")))
    if reasons and row.get("fallback") not in reasons:
        problems.append("%s: fallback %r, expected one of %s"
                        % (what, row.get("fallback"),
                           ", ".join(sorted(reasons))))
    for d in ("tx", "rx") if gloo_pair else ():
        if not row.get("%s_%s_bytes" % (t, d), 0) > 0:
            problems.append("%s: %s_%s_bytes is %r, expected > 0"
                            % (what, t, d, row.get("%s_%s_bytes" % (t, d))))
    if row.get("errors", 0):
        log(args, "warning: %s: errors %r" % (what, row.get("errors")))
    return problems


def kernel_tcp_sockets(pid):
    """{fd: (local, peer, state)} for the TCP sockets that pid holds."""
    by_inode = {}
    for name in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, name)) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    by_inode[cols[9]] = (_proc_addr(cols[1]),
                                         _proc_addr(cols[2]),
                                         int(cols[3], 16))
        except OSError:
            pass
    result = {}
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inode = link[8:-1]
            if inode in by_inode:
                result[int(fd)] = by_inode[inode]
    return result


def read_stats(args):
    stat = os.environ.get("ROCESHIM_STAT")
    if not stat:
        raise RuntimeError("--check-stats needs $ROCESHIM_STAT")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)      # the reader need not be intercepted
    cmd = shlex.split(stat) + ["--json", str(os.getpid())]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60,
                          universal_newlines=True)
    if proc.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd),
                           proc.returncode, proc.stderr.strip()))
    try:
        return json.loads(proc.stdout)
    except ValueError as exc:
        raise RuntimeError("%s printed no JSON (%s): %r" % (
            " ".join(cmd), exc, proc.stdout[:500]))


def check_stats(args, master_port):
    """Return a list of problems (empty when everything is as expected)."""
    problems = []
    try:
        data = read_stats(args)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return ["cannot read the stats segment: %s" % exc]
    emit("stats", rank=args.rank, stats=data)
    if data.get("pid") != os.getpid():
        problems.append("stats pid %r is not ours (%d)"
                        % (data.get("pid"), os.getpid()))
    if data.get("layout_version") != 5:
        problems.append("layout_version %r, expected 5"
                        % data.get("layout_version"))
    glob = data.get("global", {})
    rows = data.get("connections", [])

    # What the kernel says this process holds: the Gloo pairs are the
    # established connections that do not involve the TCPStore's port;
    # the store's client connections (a second one serves watchKey) are
    # those to its port.
    kernel = kernel_tcp_sockets(os.getpid())
    established = {fd: (loc, peer) for fd, (loc, peer, state)
                   in kernel.items() if state == ESTABLISHED}
    pairs = {fd: lp for fd, lp in established.items()
             if lp[0][1] != master_port and lp[1][1] != master_port}
    store = {fd: lp for fd, lp in established.items()
             if lp[1][1] == master_port}
    if len(pairs) != args.world - 1:
        problems.append("kernel shows %d Gloo pair connections, expected %d: "
                        "%r" % (len(pairs), args.world - 1, pairs))
    if not store:
        problems.append("kernel shows no TCPStore client connection")

    open_rows = {}
    for row in rows:
        if row.get("state") == "open" and row.get("role") != "listener":
            open_rows.setdefault(row.get("fd"), []).append(row)
    for fd, (loc, peer) in sorted(pairs.items()):
        problems += check_row(args, open_rows.get(fd, []), fd, loc, peer,
                              True)
    # The store's client may have found the store not yet listening, and
    # retried: the connections it keeps must be on the same transport.
    for fd, (loc, peer) in sorted(store.items()):
        problems += check_row(args, open_rows.get(fd, []), fd, loc, peer,
                              False)

    for key in ("tcp_tx_bytes", "tcp_rx_bytes", "rdma_tx_bytes",
                "rdma_rx_bytes"):
        total = sum(r.get(key, 0) for r in rows)
        if key not in glob:
            problems.append("global.%s missing" % key)
        elif total > glob[key]:
            problems.append("sum of rows' %s (%d) > global %d"
                            % (key, total, glob[key]))
    opened = glob.get("connections_opened", 0)
    if opened < len(pairs):
        problems.append("global.connections_opened %r < %d pair connections"
                        % (opened, len(pairs)))
    for t in ("tcp", "rdma"):
        want = sum(1 for loc, peer in pairs.values()
                   if expectation(args, peer[0])[0] == t)
        if glob.get("connections_%s" % t, 0) < want:
            problems.append("global.connections_%s %r < %d pair connections"
                            % (t, glob.get("connections_%s" % t), want))
    return problems


def check_memory(args):
    """The process's bytes by memory class, as roceshim-stat reports them."""
    out = subprocess.run([os.environ["ROCESHIM_STAT"], "--json",
                          str(os.getpid())], capture_output=True, text=True)
    try:
        mem = json.loads(out.stdout)["global"]["memory"]
    except (ValueError, KeyError) as exc:
        return ["no memory stats (%s): %s" % (exc, out.stderr.strip())]
    emit("memory", rank=args.rank, memory=mem)
    problems = []
    staged = {"all_reduce", "broadcast"} & set(args.ops)
    if args.device == "cuda" and staged and not mem["pinned_tx_bytes"]:
        problems.append("%s of CUDA tensors sent no pinned bytes"
                        % "/".join(sorted(staged)))
    if args.device == "cpu" and mem["pinned_tx_bytes"]:
        problems.append("CPU tensors counted as pinned")
    if mem["device_refused"]:
        problems.append("%d calls refused as GPU memory"
                        % mem["device_refused"])
    return problems


def rank_main(args):
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.master_port)
    os.environ["WORLD_SIZE"] = str(args.world)
    os.environ["RANK"] = str(args.rank)
    if args.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    import torch
    import torch.distributed as dist
    torch.set_num_threads(args.threads)

    t0 = time.monotonic()
    dist.init_process_group(
        "gloo", init_method="env://", world_size=args.world, rank=args.rank,
        timeout=datetime.timedelta(seconds=args.pg_timeout))
    log(args, "process group up in %.1f s (pid %d, master %s:%d, iface %s)"
        % (time.monotonic() - t0, os.getpid(), args.master_addr,
           args.master_port, args.ifname or "default"))
    for op in args.ops:
        for size in args.sizes:
            if args.bench:
                run_bench(args, torch, dist, op, size)
            else:
                run_verify(args, torch, dist, op, size)
    problems = []
    if args.check_stats or args.join_stats_check:
        touch_all_pairs(torch, dist, args.rank, args.world)
        dist.barrier()
        if args.check_stats:
            problems = check_stats(args, args.master_port)
            for p in problems:
                log(args, "stats: " + p)
            emit("stats_check", rank=args.rank, problems=problems)
        dist.barrier()     # nobody closes before everybody has looked
    if args.check_memory:
        problems += check_memory(args)
    if args.show_stats:
        dist.barrier()
        table = subprocess.run([os.environ["ROCESHIM_STAT"],
                                str(os.getpid())], capture_output=True,
                               text=True)
        emit("stats_table", rank=args.rank, pid=os.getpid(),
             text=table.stdout + table.stderr)
        dist.barrier()
    dist.destroy_process_group()
    emit("done", rank=args.rank, ok=not problems)
    return 1 if problems else 0


# ---------------------------------------------------------------------------
# Launch mode
# ---------------------------------------------------------------------------

def rank_command(args, rank, master_addr, port):
    cmd = [sys.executable, os.path.abspath(__file__), "rank",
           "--world", str(args.world), "--rank", str(rank),
           "--master-addr", master_addr, "--master-port", str(port),
           "--ops", ",".join(args.ops),
           "--sizes", ",".join(str(s) for s in args.sizes),
           "--iters", str(args.iters), "--warmup", str(args.warmup),
           "--expect-transport", args.expect_transport,
           *("--expect-peer=%s=%s" % ap for ap in args.expect_peer),
           "--pg-timeout", str(args.pg_timeout),
           "--threads", str(args.threads)]
    remote = None
    if args.rank_addrs:
        addr = args.rank_addrs.split(",")[rank]
        iface = iface_for_addr(addr)
        # In a fabric cluster, an address of another host runs its rank
        # there (rsf-exec), on the interface --ifname names.
        if iface is None and os.environ.get("ROCESHIM_FABRIC_HOSTS"):
            remote, iface = addr, args.ifname
    else:
        iface = args.ifname or iface_for_addr(args.addr)
    if iface:
        cmd += ["--ifname", iface]
    if args.bench:
        cmd.append("--bench")
    if args.repeat_for:
        cmd += ["--repeat-for", str(args.repeat_for)]
    if args.check_stats:
        cmd.append("--check-stats")
    if args.join_stats_check:
        cmd.append("--join-stats-check")
    if args.show_stats:
        cmd.append("--show-stats")
    if args.check_memory:
        cmd.append("--check-memory")
    cmd += ["--device", args.device]
    if args.preload:
        run = os.environ.get("ROCESHIM_RUN")
        if not run:
            raise SystemExit("gloo_job: --preload needs $ROCESHIM_RUN")
        cmd = shlex.split(run) + cmd
    return ["rsf-exec", remote] + cmd if remote else cmd


def kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        pass


def stop_all(procs, patience=3.0):
    """SIGTERM every rank's process group, SIGKILL what is left later."""
    for p in procs:
        if p.poll() is None:
            kill_group(p, signal.SIGTERM)
    end = time.monotonic() + patience
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            kill_group(p, signal.SIGKILL)
        p.wait()


def wait_ranks(procs, timeout, grace):
    """Wait for all ranks; kill all on timeout, or grace s after a failure."""
    deadline = time.monotonic() + timeout
    failed_at = None
    reason = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return reason
        now = time.monotonic()
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        if now > deadline or (failed_at and now > failed_at + grace):
            reason = ("timeout after %d s" % timeout if now > deadline else
                      "a rank failed; killed the others after %d s" % grace)
            stop_all(procs)
            return reason
        time.sleep(0.05)


def launch_once(args, port):
    master = args.rank_addrs.split(",")[0] if args.rank_addrs else args.addr
    procs, outs, errs = [], [], []
    for rank in range(args.world):
        out = tempfile.TemporaryFile(mode="w+")
        err = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, MASTER_ADDR=master, MASTER_PORT=str(port),
                   WORLD_SIZE=str(args.world), RANK=str(rank))
        cmd = rank_command(args, rank, master, port)
        if args.verbose:
            sys.stderr.write("gloo_job: %s\n" % " ".join(map(shlex.quote,
                                                               cmd)))
        procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                                      start_new_session=True))
        outs.append(out)
        errs.append(err)
    try:
        reason = wait_ranks(procs, args.timeout, args.grace)
    except BaseException:
        stop_all(procs, patience=1.0)
        raise
    ranks = []
    for rank, (p, out, err) in enumerate(zip(procs, outs, errs)):
        out.seek(0)
        err.seek(0)
        text, etext = out.read(), err.read()
        records = [json.loads(line[len(MARK):]) for line in
                   text.splitlines() if line.startswith(MARK)]
        ranks.append({"rank": rank, "rc": p.returncode, "records": records,
                      "stdout": text, "stderr": etext})
    return {"port": port, "failure": reason, "ranks": ranks}


def summarize(args, res):
    ok = res["failure"] is None and all(r["rc"] == 0 for r in res["ranks"])
    digests, bench, stats_problems = [], [], []
    for r in res["ranks"]:
        done = any(x["type"] == "done" for x in r["records"])
        ok = ok and done
        for x in r["records"]:
            if x["type"] == "digest":
                digests.append("%s size=%d rank=%d sha256=%s" % (
                    x["op"], x["size"], x["rank"], x["sha256"]))
            elif x["type"] == "bench":
                bench.append(x)
            elif x["type"] == "stats_check":
                stats_problems += ["rank %d: %s" % (x["rank"], p)
                                   for p in x["problems"]]
    res.update(ok=ok and not stats_problems, digests=sorted(digests),
               bench=bench, stats_problems=stats_problems,
               world=args.world, preload=args.preload)
    return res


def on_sigterm(signum, frame):
    raise SystemExit(128 + signum)     # unwinds through stop_all()


def launch_main(args):
    signal.signal(signal.SIGTERM, on_sigterm)
    port_in_use = "Address already in use"
    t0 = time.monotonic()
    for attempt in range(3):
        port = args.master_port or free_port(
            args.rank_addrs.split(",")[0] if args.rank_addrs else args.addr)
        res = launch_once(args, port)
        if res["failure"] is None and all(r["rc"] == 0 for r in res["ranks"]):
            break
        if args.master_port or not any(port_in_use in r["stderr"]
                                       for r in res["ranks"]):
            break
        sys.stderr.write("gloo_job: port %d was taken, retrying\n" % port)
    res = summarize(args, res)
    res["seconds"] = time.monotonic() - t0
    report(args, res)
    return 0 if res["ok"] else 1


def report(args, res):
    tag = "preload" if args.preload else "plain"
    for line in res["digests"]:
        print("digest %s" % line)
    for r in res["ranks"]:
        for x in r["records"]:
            if x["type"] == "stats_table":
                print("--- rank %d: roceshim-stat %d ---" % (x["rank"],
                                                           x["pid"]))
                print(x["text"].rstrip())
            if x["type"] == "memory":
                print("memory rank=%d %s" % (x["rank"], " ".join(
                    "%s=%s" % kv for kv in sorted(x["memory"].items()))))
    for b in res["bench"]:
        print("bench op=%s world=%d size=%d median_ms=%.3f min_ms=%.3f "
              "max_ms=%.3f" % (b["op"], b["world"], b["size"],
                               b["median_ms"], b["min_ms"], b["max_ms"]))
    if args.digests_out:
        with open(args.digests_out, "w") as f:
            f.write("".join(line + "\n" for line in res["digests"]))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
    if not res["ok"]:
        if res["failure"]:
            print("gloo_job: %s" % res["failure"])
        for p in res["stats_problems"]:
            print("gloo_job: stats: %s" % p)
        for r in res["ranks"]:
            if r["rc"] != 0 or args.verbose or not any(
                    x["type"] == "done" for x in r["records"]):
                print("gloo_job: rank %d exit %s; stderr tail:" % (
                    r["rank"], r["rc"]))
                for line in r["stderr"].splitlines()[-25:]:
                    print("    " + line)
    elif args.verbose:
        for r in res["ranks"]:
            for line in r["stderr"].splitlines():
                sys.stderr.write("  rank %d: %s\n" % (r["rank"], line))
    print("gloo_job: world %d %s %s in %.1f s (port %d)" % (
        args.world, tag, "ok" if res["ok"] else "FAILED", res["seconds"],
        res["port"]))


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)

    lp = sub.add_parser("launch", help="spawn all ranks on this host")
    add_common_args(lp)
    lp.add_argument("--preload", action="store_true",
                    help="wrap each rank in $ROCESHIM_RUN")
    lp.add_argument("--master-port", type=int, default=0,
                    help="TCPStore port (default: a free one)")
    lp.add_argument("--timeout", type=float, default=300.0,
                    help="kill all ranks after this many seconds")
    lp.add_argument("--grace", type=float, default=15.0,
                    help="after a rank fails, kill the rest after this long")
    lp.add_argument("--digests-out", help="write sorted digest lines here")
    lp.add_argument("--json-out", help="write the full result as JSON here")
    lp.add_argument("-v", "--verbose", action="store_true")

    rp = sub.add_parser("rank", help="run one rank")
    add_common_args(rp)
    rp.add_argument("--rank", type=int,
                    default=int(os.environ.get("RANK", "-1")))
    rp.add_argument("--master-addr",
                    default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    rp.add_argument("--master-port", type=int,
                    default=int(os.environ.get("MASTER_PORT", "0")))

    args = p.parse_args(argv)
    if args.iters is None:
        args.iters = 10 if args.bench else 2
    if args.world < 1 or args.iters < 1:
        p.error("--world and --iters must be >= 1")
    if "send_recv" in args.ops and args.world < 2:
        p.error("send_recv needs --world >= 2")
    if args.rank_addrs and len(args.rank_addrs.split(",")) != args.world:
        p.error("--rank-addrs needs one address per rank")
    if args.mode == "launch":
        return launch_main(args)
    if not 0 <= args.rank < args.world or not args.master_port:
        p.error("rank mode needs 0 <= --rank < --world and --master-port")
    try:
        return rank_main(args)
    except Exception as exc:            # report, then let Gloo's peers fail
        log(args, "FAILED: %s: %s" % (type(exc).__name__, exc))
        raise


if __name__ == "__main__":
    sys.exit(main())
