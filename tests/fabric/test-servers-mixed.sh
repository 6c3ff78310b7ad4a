#!/bin/bash
# SPDX-License-Identifier: MIT
#
# More real programs under roceshim with default settings (RDMA on), of
# shapes that mix threads, processes and event loops; kernel TCP is the
# specification, so every result is checked by digest, and roceshim-stat,
# sampled meanwhile, says how each connection went:
#   lighttpd (one process, event loop)     curl 3 MiB x3, wrk 2 threads x 20
#                                          connections -> rdma
#   python http.server (a thread per       20 curls at once -> rdma
#   connection)
#   rsync --daemon (forks per connection)  a tree copied -> moved to TCP
#                                          (fork), or refused (handoff)
#   git daemon (forks, execs upload-pack   git clone -> moved to TCP (fork),
#   with the socket as its stdio)          or refused (handoff)
#   iperf3 -P 4 -R                         4 parallel streams -> rdma
#   iperf 2 -P 4 (sets SO_TIMESTAMP on     4 parallel streams -> rdma
#   its sockets)
#   multiprocessing.connection: 3 forked   40 exchanges from a fork pool:
#   workers accept, a fork pool connects   the children of a process that
#                                          began RDMA stay on TCP
#   asyncio server, 3 client threads each  300 exchanges -> rdma
#   with its own loop of 100 connections
#   redis replication (diskless: the       the replica's data digest equals
#   master forks to send its snapshot)     the master's -> rdma
#   nc -l (an SO_REUSEPORT listener,       3 MB piped, half-close -> rdma
#   alone on its port)
#   a JVM: com.sun.net.httpserver (a      40 POSTs and 32 echoes from
#   thread pool) and a java.nio Selector  blocking sockets on 20 and 16
#   echo server, dual-stack sockets       threads -> rdma
# A program that is not installed skips its shape, with a line saying so.
# shellcheck source=servers_lib.sh
. "$top_srcdir/tests/fabric/servers_lib.sh"
MIXED="$top_srcdir/tests/fabric/mixed.py"

trap servers_cleanup EXIT

# wait_port PORT: until something accepts on A:PORT, at most 60 s; the
# probe is preloaded too, so that its connection is one of roceshim's
wait_port() {
	"$RUN" "$PYTHON" - "$A" "$1" <<'EOF'
import socket, sys, time
for _ in range(300):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(1)
EOF
}

# all_on_rdma NAME PID MIN: ends the server PID, which served at least MIN
# connections, all on RDMA
all_on_rdma() {
	stop "$2"
	rdma_at_least "$1" "$3"
	check_eq "$1_no_other_transport" "" "$(others rdma/none/none "$s")"
}

# rdma_at_least NAME MIN: the shape is over; its server's side of PORT had
# at least MIN connections on RDMA (its summary left in s)
rdma_at_least() {
	sample_stop
	s=$(report server $PORT)
	at_least "$1_conns_on_rdma" "$2" "$(count rdma/none/none "$s")"
}

# moved_by_fork NAME PID: ends the server PID, a daemon whose fork child
# serves each connection, which then moves to TCP; once a child has taken
# one over, the daemon refuses the next ones (handoff), which start on
# TCP (peer_tcp on its side).  The test's port probe may stay on RDMA:
# its child finds it closed.
moved_by_fork() {
	stop "$2"
	sample_stop
	s=$(report server $PORT)
	at_least "$1_server_moved_by_the_fork_or_refused" 1 \
		"$(($(count tcp/none/fork "$s") + $(count tcp/peer_tcp/none "$s")))"
	check_eq "$1_server_no_other_transport" "" \
		"$(others rdma/none/none tcp/none/fork tcp/peer_tcp/none "$s")"
	c=$(report client $PORT)
	check_eq "$1_client_moved_or_refused_as_handoff" "" \
		"$(others rdma/none/none tcp/none/peer tcp/handoff/none \
			tcp/negative_cache/none "$c")"
}

mkdir -p "$tmp/www"
head -c $((3 << 20)) /dev/urandom >"$tmp/www/big.bin"
head -c 2048 /dev/urandom | base64 >"$tmp/www/small.html"
big_sha=$(sha <"$tmp/www/big.bin")
chmod -R a+rX "$tmp"

# --------------------------------------------------------------- lighttpd
shape=lighttpd
PORT=18201
if have lighttpd wrk curl; then
	sample_start "$tmp/$shape.stats"
	cat >"$tmp/lighttpd.conf" <<EOF
server.document-root = "$tmp/www"
server.bind = "$A"
server.port = $PORT
server.errorlog = "$tmp/lighttpd.err"
EOF
	"$RUN" lighttpd -D -f "$tmp/lighttpd.conf" &
	pid=$!
	wait_port $PORT
	check_eq lighttpd_curl_3MiB_sha256_x3 3 \
		"$(curls lighttpd "http://$A:$PORT/big.bin" 3)"
	timeout 120 "$RUN" wrk -t2 -c20 -d4s "http://$A:$PORT/small.html" \
		>"$tmp/wrk.out" 2>&1
	sed 's/^/    wrk: /' "$tmp/wrk.out"
	at_least lighttpd_wrk_requests 20 \
		"$(awk '/requests in/ {print $1}' "$tmp/wrk.out")"
	check_eq lighttpd_wrk_no_socket_errors_or_non2xx 0 \
		"$(grep -cE 'Socket errors|Non-2xx' "$tmp/wrk.out")"
	all_on_rdma lighttpd_server $pid 20
fi

# ----------------------------------------------------------- http.server
shape=http_server
PORT=18202
if have curl; then
	sample_start "$tmp/$shape.stats"
	(cd "$tmp/www" && exec "$RUN" "$PYTHON" -m http.server $PORT \
		--bind "$A" >"$tmp/http_server.log" 2>&1) &
	pid=$!
	wait_port $PORT
	check_eq http_server_20_concurrent_curls_exact 20 \
		"$(curls http_server "http://$A:$PORT/big.bin" 20)"
	# Its listen backlog is socketserver's 5: connections beyond the
	# handshakes it admits go over TCP, as they would wait over TCP.
	stop $pid
	rdma_at_least http_server 5
	check_eq http_server_no_other_transport "" "$(others rdma/none/none \
		tcp/none/accept_queue tcp/peer_tcp/none "$s")"
fi

# ------------------------------------------------------------------ rsync
shape=rsync
PORT=18203
if have rsync; then
	sample_start "$tmp/$shape.stats"
	mkdir -p "$tmp/rsrc/sub" "$tmp/rdst"
	cp "$tmp/www/big.bin" "$tmp/rsrc/"
	head -c 300000 /dev/urandom >"$tmp/rsrc/sub/b"
	printf 'use chroot = no\n[m]\npath = %s\nread only = yes\n' \
		"$tmp/rsrc" >"$tmp/rsyncd.conf"
	"$RUN" rsync --daemon --no-detach --config="$tmp/rsyncd.conf" \
		--address="$A" --port=$PORT &
	pid=$!
	wait_port $PORT
	timeout 180 "$RUN" rsync -a "rsync://$A:$PORT/m/" "$tmp/rdst/" \
		>"$tmp/rsync.out" 2>&1
	echo "rc $?" >>"$tmp/rsync.out"
	check_eq rsync_exits_0 "rc 0" "$(tail -n1 "$tmp/rsync.out")"
	check_eq rsync_tree_identical "" \
		"$(diff -r "$tmp/rsrc" "$tmp/rdst" 2>&1)"
	# The daemon's fork child serves the connection: it moves to TCP.
	moved_by_fork rsync $pid
fi

# -------------------------------------------------------------------- git
shape=git
PORT=18204
if have git; then
	sample_start "$tmp/$shape.stats"
	mkdir -p "$tmp/git"
	(cd "$tmp/git" && git init -q repo && cd repo &&
		cp "$tmp/www/big.bin" . && git add big.bin &&
		git -c user.email=t@t -c user.name=t commit -qm big)
	"$RUN" git daemon --export-all --base-path="$tmp/git" --listen="$A" \
		--port=$PORT --reuseaddr 2>"$tmp/git-daemon.err" &
	pid=$!
	wait_port $PORT
	timeout 180 "$RUN" git clone -q "git://$A:$PORT/repo" "$tmp/clone" \
		>"$tmp/git.out" 2>&1
	echo "rc $?" >>"$tmp/git.out"
	check_eq git_clone_exits_0 "rc 0" "$(tail -n1 "$tmp/git.out")"
	check_eq git_clone_3MiB_sha256 "$big_sha" \
		"$(sha <"$tmp/clone/big.bin" 2>/dev/null)"
	# The daemon forks, the child execs upload-pack: moved to TCP.
	moved_by_fork git $pid
fi

# ----------------------------------------------------------------- iperf3
shape=iperf3
PORT=18205
if have iperf3; then
	sample_start "$tmp/$shape.stats"
	timeout 120 "$RUN" iperf3 -s -B "$A" -p $PORT -1 >"$tmp/iperf3.s" 2>&1 &
	pid=$!
	sleep 2
	timeout 120 "$RUN" iperf3 -c "$A" -p $PORT -P 4 -R -t 3 \
		>"$tmp/iperf3.c" 2>&1
	echo "rc $?" >>"$tmp/iperf3.c"
	grep -E 'SUM.*(sender|receiver)' "$tmp/iperf3.c" | sed 's/^/    /'
	check_eq iperf3_4_reverse_streams_exit_0 "rc 0" \
		"$(tail -n1 "$tmp/iperf3.c")"
	wait $pid
	sample_stop
	s=$(report server $PORT)
	# The control connection and the 4 streams.
	check_eq iperf3_server_5_conns_on_rdma 5 \
		"$(count rdma/none/none "$s")"
fi

# ----------------------------------------------------------------- iperf2
shape=iperf2
PORT=18211
if have iperf; then
	sample_start "$tmp/$shape.stats"
	timeout 120 "$RUN" iperf -s -B "$A" -p $PORT >"$tmp/iperf2.s" 2>&1 &
	pid=$!
	wait_port $PORT
	timeout 120 "$RUN" iperf -c "$A" -p $PORT -P 4 -t 3 \
		>"$tmp/iperf2.c" 2>&1
	echo "rc $?" >>"$tmp/iperf2.c"
	grep -E 'SUM' "$tmp/iperf2.c" | sed 's/^/    /'
	check_eq iperf2_4_streams_exit_0 "rc 0" "$(tail -n1 "$tmp/iperf2.c")"
	kill $pid 2>/dev/null
	wait $pid
	sample_stop
	s=$(report server $PORT)
	# Its sockets' SO_TIMESTAMP keeps them on RDMA (the probe's too).
	at_least iperf2_server_4_streams_on_rdma 4 \
		"$(count rdma/none/none "$s")"
	check_eq iperf2_server_no_other_transport "" \
		"$(others rdma/none/none "$s")"
fi

# -------------------------------------------------------- multiprocessing
shape=multiprocessing
PORT=18206
sample_start "$tmp/$shape.stats"
check_eq multiprocessing_40_exchanges_exact "mp 40" "$(timeout 300 "$RUN" \
	"$PYTHON" "$MIXED" mp "$A" $PORT 40 2>"$tmp/mp.err" | tail -n1)"
sample_stop
report server $PORT >/dev/null
check_eq multiprocessing_no_errors "" "$(cat "$tmp/mp.err")"

# ---------------------------------------------------------------- asyncio
shape=asyncio
PORT=18207
sample_start "$tmp/$shape.stats"
"$RUN" "$PYTHON" "$MIXED" aio-server "$A" $PORT >"$tmp/aio.server" 2>&1 &
pid=$!
wait_for "$tmp/aio.server" '^listening' 600
check_eq asyncio_3_threads_x100_exact "aio 300" "$(timeout 300 "$RUN" \
	"$PYTHON" "$MIXED" aio-clients "$A" $PORT 3 100 2>"$tmp/aio.err" |
	tail -n1)"
head -n5 "$tmp/aio.err" | sed 's/^/    /'
stop $pid
rdma_at_least asyncio_server 250

# -------------------------------------------------------------- redis
shape=redis_replication
PORT=18208
REPLICA=18209
if have redis-server redis-cli; then
	sample_start "$tmp/$shape.stats"
	rcli() { timeout 60 "$RUN" redis-cli -h "$A" "$@" 2>&1 | tr -d '\r'; }
	"$RUN" redis-server --bind "$A" --port $PORT --save '' \
		--protected-mode no --enable-debug-command yes \
		--repl-diskless-sync yes \
		--repl-diskless-sync-delay 0 --dir "$tmp" \
		>"$tmp/redis-master.log" 2>&1 &
	master=$!
	wait_port $PORT
	rcli -p $PORT DEBUG POPULATE 20000 key 200 >/dev/null
	"$RUN" redis-server --bind "$A" --port $REPLICA --save '' \
		--protected-mode no --enable-debug-command yes \
		--replicaof "$A" $PORT --dir "$tmp" \
		>"$tmp/redis-replica.log" 2>&1 &
	replica=$!
	wait_port $REPLICA
	for i in $(seq 120); do
		rcli -p $REPLICA INFO replication |
			grep -qx 'master_link_status:up' && break
		sleep 0.5
	done
	rcli -p $PORT SET after-sync yes >/dev/null
	for i in $(seq 60); do
		[ "$(rcli -p $REPLICA GET after-sync)" = yes ] && break
		sleep 0.5
	done
	check_eq redis_replica_dbsize 20001 "$(rcli -p $REPLICA DBSIZE)"
	digest=$(rcli -p $PORT DEBUG DIGEST)
	check redis_master_digest_is_one grep -qxE '[0-9a-f]{40}' <<<"$digest"
	check_eq redis_replica_digest_equals_master "$digest" \
		"$(rcli -p $REPLICA DEBUG DIGEST)"
	stop $replica
	stop $master
	rdma_at_least redis_master 1
fi

# --------------------------------------------------------------------- nc
shape=nc
PORT=18210
if have nc; then
	timeout 120 "$RUN" nc -l "$A" $PORT >"$tmp/nc.out" &
	pid=$!
	# (a probe's connection would be the one nc takes)
	for i in $(seq 300); do
		ss -Hltn "sport = :$PORT" | grep -q . && break
		sleep 0.2
	done
	ROCESHIM_LOG_LEVEL=debug timeout 120 "$RUN" nc -N "$A" $PORT \
		<"$tmp/www/big.bin" 2>"$tmp/nc.log"
	wait $pid
	check_eq nc_3MiB_sha256_after_half_close "$big_sha" \
		"$(sha <"$tmp/nc.out")"
	# OpenBSD nc listens with SO_REUSEPORT, alone on its port: it holds
	# the port's RDMA CM listener.  (nc lives too briefly for the
	# sampler: its log says how it went.)
	check_eq nc_client_on_rdma 1 \
		"$(grep -c "connect to $A:$PORT on rdma" "$tmp/nc.log")"
fi

# -------------------------------------------------------------------- jvm
shape=jvm
PORT=18210
if have java && have javac; then
	javac -d "$tmp/jvm" "$top_srcdir/tests/fabric/JavaShapes.java"
	sample_start "$tmp/$shape.stats"
	# A JVM that crashes writes its report there: shown below.  C1 only:
	# under the fabric's multi-threaded TCG, a thread may fault inside
	# the jump that HotSpot patches over a method it replaces, an address
	# no CPU faults at (docs/bench/2026-12-07-hub-race/).
	jvm=(java -XX:TieredStopAtLevel=1 -XX:ErrorFile="$tmp/hs_err_%p.log"
		-cp "$tmp/jvm" JavaShapes)
	"$RUN" "${jvm[@]}" serve "$A" $PORT >"$tmp/jvm.server" 2>&1 &
	pid=$!
	wait_for "$tmp/jvm.server" '^listening' 600
	timeout 600 "$RUN" "${jvm[@]}" client "$A" $PORT "$B" \
		>"$tmp/jvm.client" 2>&1
	sed 's/^/    jvm: /' "$tmp/jvm.client"
	for f in "$tmp"/hs_err_*.log; do
		[ -e "$f" ] && sed -n '1,/^---------------  P R O C E S S/p' \
			"$f" | head -n 150 | sed 's/^/    hs_err: /'
	done
	check_eq jvm_40_posts_byte_exact "java_http ok 40 bad 0" \
		"$(grep '^java_http' "$tmp/jvm.client")"
	check_eq jvm_32_echoes_byte_exact "java_echo ok 32 bad 0" \
		"$(grep '^java_echo' "$tmp/jvm.client")"
	stop $pid
	rdma_at_least jvm_http_server 40
	check_eq jvm_http_server_no_other_transport "" \
		"$(others rdma/none/none "$s")"
	s=$(report server $((PORT + 1)))
	at_least jvm_echo_server_conns_on_rdma 32 "$(count rdma/none/none "$s")"
	check_eq jvm_echo_server_no_other_transport "" \
		"$(others rdma/none/none "$s")"
fi

finish
