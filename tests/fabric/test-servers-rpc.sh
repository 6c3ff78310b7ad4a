#!/bin/bash
# SPDX-License-Identifier: MIT
#
# RPC, messaging and database stacks under roceshim with default settings
# (RDMA on), each with its own client; every reply is checked against a
# digest of what was sent, and roceshim-stat, sampled meanwhile, says how
# each connection went:
#   ZeroMQ ROUTER, 2 I/O threads            50 DEALER sockets in one
#                                           context, 1000 messages -> rdma
#   gRPC (SO_REUSEPORT, its default,        6 channels: 240 unary calls up
#   alone on its port)                      to 3 MB, 6 bidi streams -> rdma
#   aiohttp (one event loop)                300 POSTs at once -> rdma
#   stunnel (TLS in front of http.server)   8 curls of 3 MiB at once ->
#                                           both legs on rdma
#   openssl s_server -WWW                   3 curls of 3 MiB -> rdma
#   mosquitto (MQTT broker)                 300 messages, QoS 1 -> rdma
#   mariadbd (a thread per connection)      mariadb-slap 30 clients, a
#                                           3 MB row -> TCP where it set
#                                           up io_uring (reason io_uring)
# A program that is not installed skips its shape, with a line saying so.
# shellcheck source=servers_lib.sh
. "$top_srcdir/tests/fabric/servers_lib.sh"
RPC="$top_srcdir/tests/fabric/rpc.py"

trap servers_cleanup EXIT

# have_module MODULE: Python can import it, else a skip line
have_module() {
	"$PYTHON" -c "import $1" 2>/dev/null && return
	echo "SKIP $shape: Python module $1 is not installed"
	return 1
}

# wait_listen PORT [SECONDS]: until A:PORT listens, at most SECONDS (60)
wait_listen() {
	local i

	for i in $(seq $((${2:-60} * 5))); do
		[ -n "$(ss -Hltn "sport = :$1")" ] && return
		sleep 0.2
	done
}

# server_only NAME KEY...: the shape is over; its server's side of PORT
# had at least one connection, each of them one of the KEYs
server_only() {
	local name=$1

	shift
	sample_stop
	s=$(report server $PORT)
	at_least "${name}_server_conns" 1 \
		"$(awk '{n += $2} END {print n + 0}' <<<"$s")"
	check_eq "${name}_server_no_other_transport" "" "$(others "$@" "$s")"
}

mkdir -p "$tmp/www"
head -c $((3 << 20)) /dev/urandom >"$tmp/www/big.bin"
big_sha=$(sha <"$tmp/www/big.bin")
chmod -R a+rX "$tmp"

# ------------------------------------------------------------------- zmq
shape=zmq
PORT=18301
if have_module zmq; then
	sample_start "$tmp/$shape.stats"
	# (bounded: a client that fails never sends the server its stop)
	timeout 400 "$RUN" "$PYTHON" "$RPC" zmq-server "$A" $PORT \
		>"$tmp/zmq.s" 2>&1 &
	pid=$!
	wait_for "$tmp/zmq.s" '^listening' 600
	check_eq zmq_50_dealers_1000_messages_exact "zmq_client ok 1000 bad 0" \
		"$(timeout 300 "$RUN" "$PYTHON" -u "$RPC" zmq-client "$A" $PORT \
			50 2>"$tmp/zmq.err" | tail -n1)"
	sed 's/^/    zmq client: /' "$tmp/zmq.err"
	wait $pid
	check_eq zmq_server_exit_0 0 $?
	server_only zmq rdma/none/none
	at_least zmq_server_conns_on_rdma 50 "$(count rdma/none/none "$s")"
fi

# ------------------------------------------------------------------ gRPC
shape=grpc
PORT=18302
if have_module grpc; then
	sample_start "$tmp/$shape.stats"
	"$RUN" "$PYTHON" "$RPC" grpc-server "$A" $PORT 300 >"$tmp/grpc.s" 2>&1 &
	pid=$!
	wait_for "$tmp/grpc.s" '^listening' 600
	check_eq grpc_6_channels_246_calls_exact "grpc_client ok 246 bad 0" \
		"$(GRPC_VERBOSITY=debug GRPC_TRACE=subchannel timeout 300 \
			"$RUN" "$PYTHON" "$RPC" grpc-client "$A" $PORT \
			2>"$tmp/grpc.err" | tail -n1)"
	stop $pid
	# gRPC 1.51 makes one connect in a few dozen fail (rpc.py's
	# grpc_client says why): "connect" with errno 2.  No other.
	echo "    grpc: $(grep -c 'connect failed' "$tmp/grpc.err")" \
		"connects failed by gRPC's errno bug"
	check_eq grpc_connects_fail_only_by_the_errno_bug "" \
		"$(awk '/connect failed/ &&
			!(/syscall:"connect"/ && /errno:2[,}]/)' "$tmp/grpc.err")"
	# Its listener has SO_REUSEPORT, alone on its port: it holds the
	# port's RDMA CM listener, and both ends are on RDMA.  A connect gRPC
	# shuts down in the background goes out over TCP (abandoned).
	server_only grpc rdma/none/none tcp/peer_tcp/none
	at_least grpc_server_conns_on_rdma 6 "$(count rdma/none/none "$s")"
	c=$(report client $PORT)
	at_least grpc_client_conns_on_rdma 6 "$(count rdma/none/none "$c")"
	check_eq grpc_clients_on_rdma_or_abandoned "" \
		"$(others rdma/none/none tcp/abandoned/none "$c")"
fi

# --------------------------------------------------------------- aiohttp
shape=aiohttp
PORT=18303
if have_module aiohttp; then
	sample_start "$tmp/$shape.stats"
	"$RUN" "$PYTHON" "$RPC" aio-server "$A" $PORT >"$tmp/aio.s" 2>&1 &
	pid=$!
	wait_listen $PORT 120
	check_eq aiohttp_300_posts_at_once_exact "aio_client ok 300 bad 0" \
		"$(timeout 300 "$RUN" "$PYTHON" "$RPC" aio-client "$A" $PORT 300 \
			2>"$tmp/aio.err" | tail -n1)"
	stop $pid
	# A handshake the CM could not admit in time goes over TCP.
	server_only aiohttp rdma/none/none tcp/none/accept_queue
	at_least aiohttp_server_conns_on_rdma 250 "$(count rdma/none/none "$s")"
fi

# ----------------------------------------------------- stunnel, s_server
shape=stunnel
PORT=18304
BACK=18305
if have stunnel4 openssl curl; then
	sample_start "$tmp/$shape.stats"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" \
		-out "$tmp/cert.pem" -days 2 -subj /CN=roceshim >/dev/null 2>&1
	(cd "$tmp/www" && exec "$RUN" "$PYTHON" -m http.server $BACK \
		--bind "$A" >"$tmp/back.log" 2>&1) &
	back=$!
	wait_listen $BACK
	cat >"$tmp/stunnel.conf" <<EOF
foreground = yes
pid =
[front]
accept = $A:$PORT
connect = $A:$BACK
cert = $tmp/cert.pem
key = $tmp/key.pem
EOF
	"$RUN" stunnel4 "$tmp/stunnel.conf" >"$tmp/stunnel.log" 2>&1 &
	pid=$!
	wait_for "$tmp/stunnel.log" 'Configuration successful' 600
	check_eq stunnel_8_tls_downloads_at_once_exact 8 \
		"$(curls stunnel "https://$A:$PORT/big.bin" 8)"
	stop $pid
	stop $back
	server_only stunnel rdma/none/none
	b=$(report client $BACK)
	at_least stunnel_back_leg_on_rdma 8 "$(count rdma/none/none "$b")"

	shape=s_server
	PORT=18306
	sample_start "$tmp/$shape.stats"
	(cd "$tmp/www" && exec "$RUN" openssl s_server -accept "$A:$PORT" \
		-cert "$tmp/cert.pem" -key "$tmp/key.pem" -WWW -quiet \
		>"$tmp/s_server.log" 2>&1) &
	pid=$!
	wait_listen $PORT
	n=0
	for i in 1 2 3; do
		[ "$(timeout 60 "$RUN" curl -sSk -m 50 \
			"https://$A:$PORT/big.bin" | sha)" = "$big_sha" ] &&
			n=$((n + 1))
	done
	check_eq s_server_3_tls_downloads_exact 3 $n
	stop $pid
	server_only s_server rdma/none/none
fi

# -------------------------------------------------------------- mosquitto
shape=mosquitto
PORT=18307
if have mosquitto mosquitto_pub mosquitto_sub; then
	sample_start "$tmp/$shape.stats"
	cat >"$tmp/mosquitto.conf" <<EOF
listener $PORT $A
allow_anonymous true
EOF
	"$RUN" mosquitto -c "$tmp/mosquitto.conf" >"$tmp/mosquitto.log" 2>&1 &
	pid=$!
	wait_listen $PORT
	head -c 15000 /dev/urandom | base64 -w0 >"$tmp/payload"
	{
		for i in $(seq 30); do
			cat "$tmp/payload"
			echo
		done
		seq -f 'line %g' 270
	} >"$tmp/expected"
	# A persistent session (-c): the broker keeps the QoS 1 messages
	# published while its subscriber is away, and sends them in order.
	sub() {
		timeout 200 "$RUN" mosquitto_sub -h "$A" -p $PORT -t t -q 1 \
			-c -i roceshim-sub "$@"
	}
	sub -E
	for i in $(seq 30); do
		timeout 60 "$RUN" mosquitto_pub -h "$A" -p $PORT -t t -q 1 \
			-f "$tmp/payload"
	done
	seq -f 'line %g' 270 | timeout 60 "$RUN" mosquitto_pub -h "$A" \
		-p $PORT -t t -q 1 -l
	sub -C 300 >"$tmp/received" 2>"$tmp/sub.err"
	check_eq mosquitto_300_messages_in_order_exact \
		"$(sha <"$tmp/expected")" "$(sha <"$tmp/received")"
	stop $pid
	server_only mosquitto rdma/none/none
	at_least mosquitto_server_conns_on_rdma 33 "$(count rdma/none/none "$s")"
fi

# ---------------------------------------------------------------- mariadb
shape=mariadb
PORT=18308
if have mariadbd mariadb-install-db mariadb mariadb-slap; then
	sample_start "$tmp/$shape.stats"
	mkdir "$tmp/db"
	mariadb-install-db --no-defaults --datadir="$tmp/db" --user=root \
		>"$tmp/db.install" 2>&1
	"$RUN" mariadbd --no-defaults --datadir="$tmp/db" --user=root \
		--bind-address="$A" --port=$PORT --socket="$tmp/db.sock" \
		--skip-grant-tables --innodb-buffer-pool-size=32M \
		>"$tmp/db.log" 2>&1 &
	pid=$!
	wait_listen $PORT 240
	timeout 300 "$RUN" mariadb-slap -h "$A" -P $PORT --concurrency=30 \
		--iterations=2 --number-of-queries=600 --auto-generate-sql \
		--auto-generate-sql-load-type=mixed >"$tmp/slap.out" 2>&1
	check_eq mariadb_slap_30_clients_exit_0 0 $?
	query() {
		timeout 60 "$RUN" mariadb -h "$A" -P $PORT -N -e "$1"
	}
	x3m() { head -c 3000000 /dev/zero | tr '\0' x; }
	check_eq mariadb_3MB_row_exact "$(x3m | sha)" \
		"$(query "select repeat('x', 3000000)" | tr -d '\n' | sha)"
	check_eq mariadb_3MB_statement_digest "$(x3m | sha)" \
		"$({ printf "select sha2('"; x3m; printf "', 256);\n"; } |
			timeout 60 "$RUN" mariadb -h "$A" -P $PORT -N)"
	stop $pid
	# InnoDB's io_uring reads and writes the process's descriptors
	# unseen: it gives up RDMA before it listens (io_uring).
	server_only mariadb tcp/io_uring/none rdma/none/none
fi

finish
