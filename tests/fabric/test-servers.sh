#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Real third-party servers and their own clients, every one under roceshim
# with default settings (RDMA on): each server listens on the A address,
# each client connects from the B address where it can bind (curl, ssh,
# socat, haproxy's "source"), else unbound (ab, redis-benchmark, pgbench,
# libmemcached tools: both ends then sit on rxe0).  Kernel TCP is the
# specification: every result is checked for being correct and complete,
# and roceshim-stat, sampled while the programs run, says how each
# connection went:
#   nginx, one process (sendfile)          curl 3 MiB x3 sha256, ab -n 200
#                                          -> server and client on rdma
#   nginx, master + 2 workers              the same -> moved to TCP (fork):
#                                          the workers inherit the listener;
#                                          then refused (prefork)
#   apache2 (prefork, custom -f config)    the same -> TCP: its listener
#                                          has TCP_DEFER_ACCEPT
#   haproxy (2 threads; SO_REUSEPORT, its  curl, ab -> front leg on rdma,
#   default) in front of the nginx         back leg moved by the workers
#   workers
#   redis-server                           redis-benchmark, 2 MB SET/GET,
#                                          BGSAVE (a fork of the server)
#                                          -> rdma
#   memcached (4 threads)                  memccapable, memcslap, 512 KB
#                                          value -> rdma
#   socat                                  download, upload: rdma; fork +
#                                          EXEC: moved to TCP (fork), then
#                                          refused (handoff)
#   sshd (forks and re-execs per conn.)    ssh cat / sha256sum of 2 MiB
#                                          -> moved to TCP by the fork,
#                                          then refused (handoff)
#   postgres (backend forked per conn.)    pgbench -i, -C, -S, a 1.6 MB
#                                          result -> moved to TCP (fork),
#                                          then refused (handoff)
#   Node.js http, one process, and with    its own http client, 60 POSTs of
#   the cluster module (the primary        300 KB, 20 at a time, each
#   accepts, passes each connection to     answered with 1 MiB -> rdma; in
#   one of 2 workers); libuv closes with   the cluster moved to TCP (fd
#   syscall(SYS_close)                     passed), then refused (handoff)
#   supervisord, an fcgi-program of 2      6 clients echoing 200 KB each
#   workers it starts as new programs      -> moved to TCP by the workers,
#                                          then refused (prefork)
#   with its listener as their stdin
# A program that is not installed skips its shape, with a line saying so.
# shellcheck source=servers_lib.sh
. "$top_srcdir/tests/fabric/servers_lib.sh"

# handed_over NAME CLIENT-SUMMARY: a server that hands each connection
# to a child, met by clients one after another, each its own process:
# the first connection moves to TCP when the child takes it over, and the
# server refuses the later ones (handoff).
handed_over() {
	at_least "$1_first_client_conn_moved_by_server" 1 \
		"$(count tcp/none/peer "$2")"
	at_least "$1_later_client_conns_refused_as_handoff" 1 \
		"$(count tcp/handoff/none "$2")"
	check_eq "$1_client_no_other_transport" "" \
		"$(others tcp/none/peer tcp/handoff/none "$2")"
}

cleanup() {
	local f

	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
	for f in "$tmp"/*.pid "$tmp"/pg/postmaster.pid; do
		[ -f "$f" ] && kill -INT "$(head -n1 "$f")" 2>/dev/null
	done
	kill $(jobs -p) 2>/dev/null
	sleep 1
	kill -9 $(jobs -p) 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# Data: random blobs (a 3 MiB download, a 2 MiB ssh and socat payload,
# a 512 KiB memcached value) and a small page for the request storms.
mkdir -p "$tmp/www"
head -c $((3 << 20)) /dev/urandom >"$tmp/www/big.bin"
head -c $((2 << 20)) /dev/urandom >"$tmp/blob2m"
head -c $((512 << 10)) /dev/urandom >"$tmp/val512k"
head -c 2048 /dev/urandom | base64 >"$tmp/www/small.html"
big_sha=$(sha <"$tmp/www/big.bin")
blob_sha=$(sha <"$tmp/blob2m")
chmod -R a+rX "$tmp"

# curl_get NAME URL: three downloads of big.bin from B, each checked;
# the first is rate-limited so that the sampler sees curl's own row.
curl_get() {
	local i got ok=0

	for i in 1 2 3; do
		got=$(timeout 120 "$RUN" curl -sS -m 60 --interface "$B" \
			$([ "$i" = 1 ] && echo --limit-rate 1M) "$2" 2>>"$tmp/$1.curl.err" | sha)
		[ "$got" = "$big_sha" ] && ok=$((ok + 1))
	done
	check_eq "${1}_curl_3MiB_sha256_x3" 3 "$ok"
	[ "$ok" = 3 ] || sed "s/^/    curl: /" "$tmp/$1.curl.err"
}

# ab_storm NAME URL: ab -n 200 -c 10, every request complete and good.
ab_storm() {
	timeout 240 "$RUN" ab -q -s 30 -n 200 -c 10 "$2" >"$tmp/$1.ab" 2>&1
	echo "rc $?" >>"$tmp/$1.ab"
	check_eq "${1}_ab_200_complete" 200 \
		"$(awk '/^Complete requests:/ {print $3}' "$tmp/$1.ab")"
	check_eq "${1}_ab_0_failed" 0 \
		"$(awk '/^Failed requests:/ {print $3}' "$tmp/$1.ab")"
	check_eq "${1}_ab_no_non2xx" 0 \
		"$(grep -c '^Non-2xx' "$tmp/$1.ab")"
	grep -qE '^Failed requests: +0$' "$tmp/$1.ab" ||
		sed "s/^/    ab: /" "$tmp/$1.ab"
}

# ------------------------------------------------------------------ nginx
NGINX_PORT=18080
# start_nginx NAME PORT MASTER(on/off): its pid file is $tmp/NAME.pid
start_nginx() {
	mkdir -p "$tmp/$1"
	cat >"$tmp/$1/nginx.conf" <<EOF
daemon off;
master_process $3;
worker_processes 2;
pid $tmp/$1.pid;
error_log $tmp/$1/error.log info;
events { worker_connections 256; }
http {
	access_log $tmp/$1/access.log;
	client_body_temp_path $tmp/$1/body;
	proxy_temp_path $tmp/$1/proxy;
	fastcgi_temp_path $tmp/$1/fastcgi;
	uwsgi_temp_path $tmp/$1/uwsgi;
	scgi_temp_path $tmp/$1/scgi;
	sendfile on;
	keepalive_timeout 30;
	server {
		listen $A:$2;
		root $tmp/www;
	}
}
EOF
	"$RUN" nginx -c "$tmp/$1/nginx.conf" -e "$tmp/$1/error.log" \
		>"$tmp/$1/out" 2>&1 &
	for i in $(seq 300); do
		[ -s "$tmp/$1.pid" ] && break
		sleep 0.1
	done
	sleep 1
}

# One process (master_process off): every connection stays on RDMA.
shape=nginx
if have nginx curl ab; then
	sample_start "$tmp/$shape.stats"
	start_nginx nginx $NGINX_PORT off
	curl_get nginx "http://$A:$NGINX_PORT/big.bin"
	ab_storm nginx "http://$A:$NGINX_PORT/small.html"
	sample_stop
	s=$(report server $NGINX_PORT)
	at_least nginx_server_conns_on_rdma 203 "$(count rdma/none/none "$s")"
	check_eq nginx_server_no_other_transport "" "$(others rdma/none/none "$s")"
	c=$(report client $NGINX_PORT)
	at_least nginx_client_conns_on_rdma 1 "$(count rdma/none/none "$c")"
	check_eq nginx_client_no_other_transport "" "$(others rdma/none/none "$c")"
	# haproxy reuses this nginx: it stays up until then.
fi

# A master and 2 workers that inherit its listener: a connection is
# accepted on RDMA and moved to TCP (cause fork) before its first byte;
# once a worker has claimed one, the master refuses the handshakes
# (prefork), and the connections go straight to TCP.
shape=nginx_workers
NGINXW_PORT=18082
if have nginx curl ab; then
	sample_start "$tmp/$shape.stats"
	start_nginx nginx_workers $NGINXW_PORT on
	curl_get nginx_workers "http://$A:$NGINXW_PORT/big.bin"
	# A client that asks only once the sampler saw its connection
	# refused: the fast clients may end between two samples.
	(wait_seen client $NGINXW_PORT tcp/prefork/none 1
		printf 'GET /small.html HTTP/1.0\r\n\r\n') |
		timeout 120 "$RUN" socat -t 30 - \
			TCP:"$A":$NGINXW_PORT,bind="$B" >"$tmp/nginx_workers.probe"
	check_eq nginx_workers_probe_200 "HTTP/1.1 200 OK" \
		"$(head -n1 "$tmp/nginx_workers.probe" | tr -d '\r')"
	ab_storm nginx_workers "http://$A:$NGINXW_PORT/small.html"
	sample_stop
	s=$(report server $NGINXW_PORT)
	at_least nginx_workers_server_conns_moved_fork 1 "$(count tcp/none/fork "$s")"
	# (a connection may fall back to TCP with its reason: the data
	# checks above decide)
	check_eq nginx_workers_server_no_other_transport "" \
		"$(others tcp/none/fork tcp/peer_tcp/none "$s")"
	c=$(report client $NGINXW_PORT)
	# Once a worker has claimed one, the master refuses the handshakes,
	# and each client remembers it.  (A row the sampler saw only before
	# its move says rdma.)
	at_least nginx_workers_client_conns_refused_as_prefork 1 \
		"$(count tcp/prefork/none "$c")"
	check_eq nginx_workers_client_no_other_transport "" \
		"$(others tcp/none/peer rdma/none/none tcp/prefork/none \
			tcp/negative_cache/none "$c")"
	kill -QUIT "$(cat "$tmp/nginx_workers.pid")" 2>/dev/null
fi

# ---------------------------------------------------------------- haproxy
shape=haproxy
HAPROXY_PORT=18443
if have nginx haproxy curl ab && [ -f "$tmp/nginx.pid" ]; then
	cat >"$tmp/haproxy.cfg" <<EOF
global
	maxconn 200
	nbthread 2
defaults
	mode http
	timeout connect 20s
	timeout client 120s
	timeout server 120s
frontend fe
	bind $A:$HAPROXY_PORT
	default_backend be
backend be
	server nginx $A:$NGINX_PORT source $B
EOF
	sample_start "$tmp/$shape.stats"
	"$RUN" haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.out" 2>&1 &
	haproxy=$!
	for i in $(seq 300); do
		timeout 5 bash -c "echo >/dev/tcp/$A/$HAPROXY_PORT" 2>/dev/null && break
		sleep 0.1
	done
	curl_get haproxy "http://$A:$HAPROXY_PORT/big.bin"
	ab_storm haproxy "http://$A:$HAPROXY_PORT/small.html"
	sample_stop
	s=$(report server $HAPROXY_PORT)
	at_least haproxy_frontend_conns_on_rdma 200 "$(count rdma/none/none "$s")"
	# the readiness probe above is plain bash: one peer_tcp row
	check_eq haproxy_frontend_no_other_transport "" \
		"$(others rdma/none/none tcp/peer_tcp/none "$s")"
	b=$(report client $NGINX_PORT)
	at_least haproxy_backend_conns_on_rdma 1 "$(count rdma/none/none "$b")"
	check_eq haproxy_backend_no_other_transport "" "$(others rdma/none/none "$b")"
	kill "$haproxy" 2>/dev/null
fi
[ -f "$tmp/nginx.pid" ] && kill -QUIT "$(cat "$tmp/nginx.pid")" 2>/dev/null

# ---------------------------------------------------------------- apache2
shape=apache2
APACHE_PORT=18081
if have apache2 curl ab && [ -f /usr/lib/apache2/modules/mod_mpm_prefork.so ]; then
	mkdir -p "$tmp/apache"
	m=/usr/lib/apache2/modules
	cat >"$tmp/apache/httpd.conf" <<EOF
ServerRoot $tmp/apache
ServerName localhost
DefaultRuntimeDir $tmp/apache
PidFile $tmp/apache2.pid
Listen $A:$APACHE_PORT
LoadModule mpm_prefork_module $m/mod_mpm_prefork.so
LoadModule authz_core_module $m/mod_authz_core.so
LoadModule mime_module $m/mod_mime.so
User www-data
Group www-data
StartServers 3
MinSpareServers 2
MaxSpareServers 6
MaxRequestWorkers 12
ErrorLog $tmp/apache/error.log
LogLevel info
TypesConfig /etc/mime.types
EnableSendfile On
DocumentRoot $tmp/www
<Directory $tmp/www>
	Require all granted
</Directory>
EOF
	sample_start "$tmp/$shape.stats"
	# setsid: prefork's shutdown signals its whole process group
	ROCESHIM_LOG_LEVEL=info ROCESHIM_LOG_FILE="$tmp/apache/rs.%p.log" \
		setsid "$RUN" apache2 -f "$tmp/apache/httpd.conf" -DFOREGROUND \
		>"$tmp/apache/out" 2>&1 &
	wait_for "$tmp/apache/error.log" 'resuming normal operations' 300
	# The clients log each connect's verdict: the sampler can miss
	# their short-lived rows on a loaded host.
	ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE="$tmp/apache/client.%p.log" \
		curl_get apache2 "http://$A:$APACHE_PORT/big.bin"
	ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE="$tmp/apache/client.%p.log" \
		ab_storm apache2 "http://$A:$APACHE_PORT/small.html"
	sample_stop
	# Apache's AcceptFilter sets TCP_DEFER_ACCEPT on its listener: the
	# kernel holds a connection back until bytes come over TCP, so the
	# listener takes none over RDMA (the client's request is refused).
	s=$(report server $APACHE_PORT)
	at_least apache2_server_conns_on_tcp_defer_accept 1 \
		"$(count tcp/unsupported/none "$s")"
	check_eq apache2_server_no_other_transport "" \
		"$(others tcp/unsupported/none "$s")"
	c=$(report client $APACHE_PORT)
	verdicts() {
		cat "$tmp"/apache/client.*.log 2>/dev/null |
			grep -c "connect to $A:$APACHE_PORT on tcp ($1)"
	}
	at_least apache2_client_conns_refused_rdma 1 "$(verdicts peer_rejected)"
	# ab's connections after its first refusals go straight to TCP: only
	# its first 10 (-c 10) can be refused, and the 3 curls' (a process
	# each); the other 190 remember the refusal.
	at_most apache2_client_conns_refused_only_at_first 13 \
		"$(verdicts peer_rejected)"
	at_least apache2_client_conns_remember_the_refusal 187 \
		"$(verdicts negative_cache)"
	# (a row sampled while its request was still out reads rdma/none)
	check_eq apache2_client_no_other_transport "" \
		"$(others tcp/peer_rejected/none tcp/negative_cache/none \
			rdma/none/none "$c")"
	at_least apache2_listener_stays_on_tcp 1 \
		"$(cat "$tmp"/apache/rs.*.log 2>/dev/null |
			grep -c 'TCP_DEFER_ACCEPT: the listener stays on TCP')"
	check_eq apache2_no_failed_move_to_tcp 0 \
		"$(cat "$tmp"/apache/rs.*.log 2>/dev/null | grep -c 'could not move to TCP')"
	grep -h 'could not move' "$tmp"/apache/rs.*.log 2>/dev/null | head -3 |
		sed 's/^/    apache2 roceshim: /'
	kill -TERM "$(cat "$tmp/apache2.pid")" 2>/dev/null
	grep -E 'AH[0-9]+.*(error|rror)' "$tmp/apache/error.log" | head -5 |
		sed 's/^/    apache2 error.log: /'
fi

# ------------------------------------------------------------------ redis
shape=redis
REDIS_PORT=16379
if have redis-server redis-benchmark redis-cli; then
	sample_start "$tmp/$shape.stats"
	mkdir -p "$tmp/redis"
	"$RUN" redis-server --bind "$A" --port $REDIS_PORT --save '' \
		--appendonly no --dir "$tmp/redis" --pidfile "$tmp/redis.pid" \
		--protected-mode no >"$tmp/redis/out" 2>&1 &
	wait_for "$tmp/redis/out" 'Ready to accept connections' 300
	timeout 240 "$RUN" redis-benchmark -h "$A" -p $REDIS_PORT -n 2000 -c 10 \
		-q -t set,get,incr,lpush,lpop >"$tmp/redis.bench" 2>&1
	echo "rc $?" >>"$tmp/redis.bench"
	timeout 240 "$RUN" redis-benchmark -h "$A" -p $REDIS_PORT -n 2000 -c 4 \
		-P 16 -q -t set,get >>"$tmp/redis.bench" 2>&1
	echo "rc $?" >>"$tmp/redis.bench"
	tr '\r' '\n' <"$tmp/redis.bench" | grep -v '^ *$' | grep -v 'rps=' |
		sed 's/^/    redis-benchmark: /'
	check_eq redis_benchmark_7_tests_done 7 \
		"$(tr '\r' '\n' <"$tmp/redis.bench" | grep -cE '^[A-Z_]+( \(.*\))?: [0-9.]+ requests per second')"
	check_eq redis_benchmark_exits_0 "rc 0 rc 0" \
		"$(grep '^rc ' "$tmp/redis.bench" | tr '\n' ' ' | sed 's/ $//')"
	check_eq redis_benchmark_no_errors 0 \
		"$(grep -ci 'error' "$tmp/redis.bench")"
	"$PYTHON" -c 'import base64, sys
sys.stdout.write(base64.b64encode(open(sys.argv[1], "rb").read()).decode())' \
		"$tmp/blob2m" >"$tmp/redis.val"
	check_eq redis_set_2MB_value OK "$(timeout 120 "$RUN" redis-cli -h "$A" \
		-p $REDIS_PORT -x SET big <"$tmp/redis.val" 2>&1)"
	check_eq redis_get_2MB_value "$( (cat "$tmp/redis.val"; echo) | sha)" \
		"$(timeout 120 "$RUN" redis-cli -h "$A" -p $REDIS_PORT --raw GET big | sha)"
	check_eq redis_dbsize_after_bench_and_set ok "$(
		n=$(timeout 60 "$RUN" redis-cli -h "$A" -p $REDIS_PORT DBSIZE)
		[ "${n:-0}" -ge 3 ] && echo ok || echo "dbsize '$n'")"
	# BGSAVE forks the server, whose allocator (jemalloc) has fork
	# handlers of its own: roceshim's must not call an allocator.
	timeout 60 "$RUN" redis-cli -h "$A" -p $REDIS_PORT BGSAVE >/dev/null 2>&1
	check_eq redis_bgsave_completes ok "$(
		for i in $(seq 60); do
			timeout 10 "$RUN" redis-cli -h "$A" -p $REDIS_PORT INFO \
				persistence | tr -d '\r' >"$tmp/redis.info"
			grep -qx 'rdb_bgsave_in_progress:0' "$tmp/redis.info" &&
				grep -qx 'rdb_last_bgsave_status:ok' \
					"$tmp/redis.info" && { echo ok; exit; }
			sleep 0.5
		done
		echo "still saving")"
	sample_stop
	s=$(report server $REDIS_PORT)
	at_least redis_server_conns_on_rdma 40 "$(count rdma/none/none "$s")"
	# BGSAVE's client may close while the save's fork child still holds
	# a copy of its connection, which then moves to TCP first (fork).
	check_eq redis_server_no_other_transport "" \
		"$(others rdma/none/none tcp/none/fork "$s")"
	c=$(report client $REDIS_PORT)
	at_least redis_client_conns_on_rdma 10 "$(count rdma/none/none "$c")"
	check_eq redis_client_no_other_transport "" "$(others rdma/none/none "$c")"
	kill "$(cat "$tmp/redis.pid")" 2>/dev/null
fi

# -------------------------------------------------------------- memcached
shape=memcached
MC_PORT=11311
if have memcached memccapable memcslap memccp memccat; then
	sample_start "$tmp/$shape.stats"
	"$RUN" memcached -l "$A" -p $MC_PORT -U 0 -u nobody -m 64 -I 2m -t 4 \
		-v >"$tmp/memcached.out" 2>&1 &
	mc=$!
	for i in $(seq 300); do
		timeout 5 bash -c "echo >/dev/tcp/$A/$MC_PORT" 2>/dev/null && break
		sleep 0.1
	done
	timeout 240 "$RUN" memccapable -h "$A" -p $MC_PORT -t 60 \
		>"$tmp/memccapable" 2>&1
	echo "rc $?" >>"$tmp/memccapable"
	grep -vE '\[pass\]|\[skip\]' "$tmp/memccapable" | sed 's/^/    memccapable: /'
	check_eq memccapable_all_pass "rc 0" "$(tail -n1 "$tmp/memccapable")"
	check_eq memccapable_no_fail 0 "$(grep -c '\[FAIL\]' "$tmp/memccapable")"
	timeout 240 "$RUN" memcslap -s "$A:$MC_PORT" -c 4 -e 500 -t set \
		>"$tmp/memcslap" 2>&1
	echo "rc $?" >>"$tmp/memcslap"
	timeout 240 "$RUN" memcslap -s "$A:$MC_PORT" -c 4 -e 500 -t get \
		>>"$tmp/memcslap" 2>&1
	echo "rc $?" >>"$tmp/memcslap"
	sed 's/^/    memcslap: /' "$tmp/memcslap"
	check_eq memcslap_set_get_exit_0 "rc 0 rc 0" \
		"$(grep '^rc ' "$tmp/memcslap" | tr '\n' ' ' | sed 's/ $//')"
	(cd "$tmp" && timeout 120 "$RUN" memccp -s "$A:$MC_PORT" val512k) \
		>"$tmp/memccp" 2>&1
	check_eq memccp_512KiB_stored 0 "$?"
	# memccat ends the value with a newline
	check_eq memccat_512KiB_value "$( (cat "$tmp/val512k"; echo) | sha)" \
		"$(timeout 120 "$RUN" memccat -s "$A:$MC_PORT" val512k 2>/dev/null | sha)"
	sample_stop
	s=$(report server $MC_PORT)
	at_least memcached_server_conns_on_rdma 10 "$(count rdma/none/none "$s")"
	check_eq memcached_server_no_other_transport "" \
		"$(others rdma/none/none tcp/peer_tcp/none "$s")"
	c=$(report client $MC_PORT)
	at_least memcached_client_conns_on_rdma 1 "$(count rdma/none/none "$c")"
	kill "$mc" 2>/dev/null
fi

# ------------------------------------------------------------------ socat
shape=socat
SOCAT_PORT=18090
if have socat; then
	sample_start "$tmp/$shape.stats"
	# download: the server sends the blob to one client.  socat exits
	# 0.5 s after its input's EOF by default, and a sender that exits
	# with bytes the reader has not taken yet moves them to TCP (exit):
	# -t 60 lets the reader, which a slow guest may hold up, take them.
	"$RUN" socat -u -t 60 OPEN:"$tmp/blob2m" \
		TCP-LISTEN:$SOCAT_PORT,bind="$A",reuseaddr >"$tmp/socat1" 2>&1 &
	sleep 1
	# (the reader waits until the sampler saw the sender, which waits
	# with it)
	got=$(timeout 120 "$RUN" socat -u TCP:"$A":$SOCAT_PORT,bind="$B",retry=50,interval=0.2 \
		STDOUT 2>>"$tmp/socat.err" |
		(wait_seen server $SOCAT_PORT rdma/none/none 1; sha))
	check_eq socat_download_2MiB_sha256 "$blob_sha" "$got"
	# upload: the client sends, the server writes a file
	"$RUN" socat -u TCP-LISTEN:$((SOCAT_PORT + 1)),bind="$A",reuseaddr \
		CREATE:"$tmp/socat.up" >"$tmp/socat2" 2>&1 &
	up=$!
	sleep 1
	(wait_seen server $((SOCAT_PORT + 1)) rdma/none/none 1
		cat "$tmp/blob2m") | timeout 120 "$RUN" socat -u -t 60 STDIN \
		TCP:"$A":$((SOCAT_PORT + 1)),bind="$B",retry=50,interval=0.2 \
		2>>"$tmp/socat.err"
	wait $up
	check_eq socat_upload_2MiB_sha256 "$blob_sha" "$(sha <"$tmp/socat.up")"
	# fork + EXEC: the child that runs sha256sum has the connection
	"$RUN" socat TCP-LISTEN:$((SOCAT_PORT + 2)),bind="$A",reuseaddr,fork \
		EXEC:sha256sum >"$tmp/socat3" 2>&1 &
	forker=$!
	sleep 1
	ok=0
	for i in 1 2 3; do
		got=$( (wait_handed_over $((SOCAT_PORT + 2)) $i
			cat "$tmp/blob2m") |
			timeout 120 "$RUN" socat -t 60 STDIO \
			TCP:"$A":$((SOCAT_PORT + 2)),bind="$B",retry=50,interval=0.2 \
			2>>"$tmp/socat.err" | cut -d' ' -f1)
		[ "$got" = "$blob_sha" ] && ok=$((ok + 1))
	done
	check_eq socat_fork_exec_sha256sum_x3 3 "$ok"
	sample_stop
	sed 's/^/    socat: /' "$tmp/socat.err"
	s=$(report server $SOCAT_PORT)
	check_eq socat_download_server_rdma 1 "$(count rdma/none/none "$s")"
	s=$(report server $((SOCAT_PORT + 1)))
	check_eq socat_upload_server_rdma 1 "$(count rdma/none/none "$s")"
	s=$(report server $((SOCAT_PORT + 2)))
	check_eq socat_fork_server_no_rdma_left "" \
		"$(others tcp/none/fork tcp/none/exec tcp/peer_tcp/none "$s")"
	# The first connection moves; once its child has taken it over, the
	# server refuses the next ones (handoff).
	c=$(report client $((SOCAT_PORT + 2)))
	handed_over socat_fork "$c"
	kill "$forker" 2>/dev/null
fi

# ------------------------------------------------------------------- sshd
shape=sshd
SSH_PORT=18022
if have /usr/sbin/sshd ssh ssh-keygen; then
	mkdir -p /run/sshd "$tmp/ssh"
	chmod 700 "$tmp/ssh"
	ssh-keygen -q -t ed25519 -N '' -f "$tmp/ssh/host" >/dev/null
	ssh-keygen -q -t ed25519 -N '' -f "$tmp/ssh/id" >/dev/null
	cp "$tmp/ssh/id.pub" "$tmp/ssh/authorized_keys"
	cat >"$tmp/ssh/sshd_config" <<EOF
ListenAddress $A
AuthorizedKeysFile $tmp/ssh/authorized_keys
StrictModes no
PermitRootLogin yes
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PidFile $tmp/sshd.pid
LogLevel VERBOSE
EOF
	sample_start "$tmp/$shape.stats"
	"$RUN" /usr/sbin/sshd -f "$tmp/ssh/sshd_config" -D -e -p $SSH_PORT \
		-h "$tmp/ssh/host" >"$tmp/sshd.out" 2>&1 &
	wait_for "$tmp/sshd.out" 'Server listening on' 300
	ssh_to() {
		timeout 180 "$RUN" ssh -F /dev/null -i "$tmp/ssh/id" -b "$B" \
			-p $SSH_PORT -o BatchMode=yes -o StrictHostKeyChecking=no \
			-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
			"root@$A" "$@"
	}
	# (each remote command reads a line first, which comes once the
	# sampler saw the client's row in its last state: a client cannot end
	# unseen)
	seen() { wait_handed_over $SSH_PORT "$1"; echo; }
	check_eq ssh_cat_2MiB_sha256 "$blob_sha" \
		"$(seen 1 | ssh_to "read x; cat $tmp/blob2m" 2>>"$tmp/ssh.err" | sha)"
	check_eq ssh_upload_2MiB_sha256sum "$blob_sha" \
		"$( (seen 2; cat "$tmp/blob2m") |
			ssh_to "read x; sha256sum" 2>>"$tmp/ssh.err" | cut -d' ' -f1)"
	check_eq ssh_echo_x3 "hi1 hi2 hi3" \
		"$(for i in 1 2 3; do seen $((i + 2)) |
			ssh_to "read x; echo hi$i" 2>>"$tmp/ssh.err"; done |
			tr '\n' ' ' | sed 's/ $//')"
	sample_stop
	sed 's/^/    ssh: /' "$tmp/ssh.err"
	s=$(report server $SSH_PORT)
	check_eq sshd_server_no_rdma_left "" \
		"$(others tcp/none/fork tcp/none/exec tcp/peer_tcp/none "$s")"
	c=$(report client $SSH_PORT)
	handed_over sshd "$c"
	kill "$(cat "$tmp/sshd.pid")" 2>/dev/null
	grep -iE 'error|fatal' "$tmp/sshd.out" | head -5 | sed 's/^/    sshd: /'
fi

# --------------------------------------------------------------- postgres
shape=postgres
PG_PORT=15432
pgbin=/usr/lib/postgresql/15/bin
if have $pgbin/initdb $pgbin/postgres $pgbin/pgbench $pgbin/psql runuser &&
	id postgres >/dev/null 2>&1; then
	mkdir -p "$tmp/pg"
	chown postgres: "$tmp/pg"
	runuser -u postgres -- $pgbin/initdb -D "$tmp/pg" -A trust -U postgres \
		--no-sync >"$tmp/initdb.out" 2>&1 || sed 's/^/    initdb: /' "$tmp/initdb.out"
	echo "host all all $A/24 trust" >>"$tmp/pg/pg_hba.conf"
	sample_start "$tmp/$shape.stats"
	runuser -u postgres -- "$RUN" $pgbin/postgres -D "$tmp/pg" -p $PG_PORT \
		-c listen_addresses="$A" -c unix_socket_directories="$tmp/pg" \
		-c shared_buffers=16MB -c fsync=off -c max_connections=20 \
		>"$tmp/postgres.out" 2>&1 &
	wait_for "$tmp/postgres.out" 'ready to accept connections' 600
	pg=(-h "$A" -p $PG_PORT -U postgres)
	timeout 300 "$RUN" $pgbin/pgbench "${pg[@]}" -i -s 1 -q postgres \
		>"$tmp/pgbench.init" 2>&1
	check_eq pgbench_init_exit_0 0 "$?"
	grep -v '^[0-9]* of ' "$tmp/pgbench.init" | sed 's/^/    pgbench -i: /'
	psql() { timeout 120 "$RUN" $pgbin/psql "${pg[@]}" -X -At "$@" postgres; }
	check_eq pg_accounts_100000 100000 \
		"$(psql -c 'select count(*) from pgbench_accounts' 2>&1)"
	timeout 300 "$RUN" $pgbin/pgbench "${pg[@]}" -C -c 4 -j 2 -t 25 \
		postgres >"$tmp/pgbench.C" 2>&1
	echo "rc $?" >>"$tmp/pgbench.C"
	sed 's/^/    pgbench -C: /' "$tmp/pgbench.C"
	check_eq pgbench_C_100_transactions "100/100" \
		"$(awk '/number of transactions actually processed/ {print $NF}' "$tmp/pgbench.C")"
	check_eq pgbench_C_0_failed "0" \
		"$(awk '/number of failed transactions/ {print $5}' "$tmp/pgbench.C")"
	check_eq pgbench_C_exit_0 "rc 0" "$(tail -n1 "$tmp/pgbench.C")"
	timeout 300 "$RUN" $pgbin/pgbench "${pg[@]}" -S -c 4 -j 2 -t 200 \
		postgres >"$tmp/pgbench.S" 2>&1
	echo "rc $?" >>"$tmp/pgbench.S"
	check_eq pgbench_S_800_transactions "800/800" \
		"$(awk '/number of transactions actually processed/ {print $NF}' "$tmp/pgbench.S")"
	check_eq pgbench_S_exit_0 "rc 0" "$(tail -n1 "$tmp/pgbench.S")"
	want=$("$PYTHON" -c 'import hashlib
print(hashlib.sha256(("".join(hashlib.md5(str(i).encode()).hexdigest()
    for i in range(1, 50001)) + "\n").encode()).hexdigest())')
	check_eq pg_1600KB_result_sha256 "$want" "$(psql -c \
		"select string_agg(md5(i::text), '' order by i) from generate_series(1, 50000) i" | sha)"
	sample_stop
	s=$(report server $PG_PORT)
	check_eq postgres_server_no_rdma_left "" \
		"$(others tcp/none/fork tcp/none/exec tcp/peer_tcp/none "$s")"
	c=$(report client $PG_PORT)
	# (pgbench -C's connections are short: the sampler sees some, and
	# some last before the backend's first read moved them)
	at_least postgres_client_conns_moved_or_refused 10 \
		"$(($(count tcp/none/peer "$c") + $(count tcp/handoff/none "$c") +
			$(count tcp/negative_cache/none "$c")))"
	at_least postgres_client_conns_refused_as_handoff 1 \
		"$(($(count tcp/handoff/none "$c") +
			$(count tcp/negative_cache/none "$c")))"
	check_eq postgres_client_no_other_transport "" \
		"$(others tcp/none/peer rdma/none/none tcp/handoff/none \
			tcp/negative_cache/none "$c")"
	kill -INT "$(head -n1 "$tmp/pg/postmaster.pid")" 2>/dev/null
	grep -E 'ERROR|FATAL|PANIC|LOG: .*terminated' "$tmp/postgres.out" |
		head -5 | sed 's/^/    postgres: /'
fi

# ------------------------------------------------------------------- node
# node_shape NAME PORT WORKERS: the server, then 60 POSTs from B.
node_shape() {
	shape=$1
	have node || return 1
	sample_start "$tmp/$shape.stats"
	"$RUN" node "$top_srcdir/tests/fabric/node_http.js" serve "$A" "$2" "$3" \
		>"$tmp/$shape.out" 2>&1 &
	echo $! >"$tmp/$shape.pid"
	wait_for "$tmp/$shape.out" '^listening' 300
	timeout 300 "$RUN" node "$top_srcdir/tests/fabric/node_http.js" client \
		"$A" "$2" 20 60 "$B" >"$tmp/$shape.client" 2>&1
	sed "s/^/    $shape: /" "$tmp/$shape.client"
	check_eq "${shape}_60_posts_byte_exact" "node_client ok 60 bad 0" \
		"$(grep '^node_client' "$tmp/$shape.client")"
	sample_stop
	# Failed socket calls on the server's connections (node writes empty
	# buffers too, which TCP answers with 0, not an error).
	"$ROCESHIM_STAT" --json "$(cat "$tmp/$shape.pid")" 2>/dev/null |
		"$PYTHON" -c 'import json, sys
print(sum(c["errors"] for c in json.load(sys.stdin)["connections"]))' \
			>"$tmp/$shape.errors"
	kill -INT "$(cat "$tmp/$shape.pid")" 2>/dev/null
}
if node_shape node 18080 0; then
	check_eq node_server_calls_fail_as_over_tcp 0 "$(cat "$tmp/node.errors")"
	s=$(report server 18080)
	at_least node_server_conns_on_rdma 20 "$(count rdma/none/none "$s")"
	check_eq node_server_no_other_transport "" "$(others rdma/none/none "$s")"
	c=$(report client 18080)
	at_least node_client_conns_on_rdma 20 "$(count rdma/none/none "$c")"
	check_eq node_client_no_other_transport "" "$(others rdma/none/none "$c")"
fi
if node_shape node-cluster 18081 2; then
	# The first connections move as the primary passes them on; once
	# one has been, the primary refuses the handshakes (handoff).
	s=$(report server 18081)
	at_least node_cluster_primary_conns_moved_by_passing 1 \
		"$(count tcp/none/fd_passed "$s")"
	check_eq node_cluster_primary_no_other_transport "" \
		"$(others rdma/none/none tcp/none/fd_passed tcp/peer_tcp/none "$s")"
	c=$(report client 18081)
	at_least node_cluster_client_conns_moved_by_server 1 \
		"$(count tcp/none/peer "$c")"
	at_least node_cluster_client_conns_refused_as_handoff 1 \
		"$(($(count tcp/handoff/none "$c") +
			$(count tcp/negative_cache/none "$c")))"
	check_eq node_cluster_client_no_other_transport "" \
		"$(others tcp/none/peer rdma/none/none tcp/handoff/none \
			tcp/negative_cache/none "$c")"
fi

# ------------------------------------------------------------- supervisor
# supervisord starts the workers as new programs, with its listener as
# their stdin; the RDMA listener stays with supervisord.
SUPERVISOR_PORT=18112
shape=supervisor
if have supervisord; then
	cat >"$tmp/supervisord.conf" <<EOF
[supervisord]
nodaemon=true
logfile=$tmp/supervisord.log
pidfile=$tmp/supervisord.pid
[fcgi-program:echo]
socket=tcp://$A:$SUPERVISOR_PORT
command=$PYTHON $top_srcdir/tests/fabric/shapes.py worker 0
process_name=%(program_name)s_%(process_num)s
numprocs=2
stderr_logfile=$tmp/supervisor-worker.err
EOF
	"$RUN" supervisord -c "$tmp/supervisord.conf" >"$tmp/supervisord.out" 2>&1 &
	wait_for "$tmp/supervisord.log" 'echo_1 entered RUNNING' 300
	timeout 300 "$RUN" "$PYTHON" "$top_srcdir/tests/fabric/shapes.py" \
		client "$A" $SUPERVISOR_PORT >"$tmp/supervisor.client" 2>&1
	sed "s/^/    supervisor: /" "$tmp/supervisor.client"
	check_eq supervisor_workers_echo_6_clients ok \
		"$(awk '$1 == "echo" {print $2}' "$tmp/supervisor.client")"
	at_least supervisor_client_connections_moved_by_the_workers 1 \
		"$(grep -c '^conn tcp none moved:peer$' "$tmp/supervisor.client")"
	# Once a worker has claimed one, supervisord refuses the handshakes.
	check_eq supervisor_client_connections_moved_or_refused 6 \
		"$(grep -cE '^conn tcp (none moved:peer|prefork|negative_cache)$' \
			"$tmp/supervisor.client")"
	# It stops its workers before it exits.
	pid=$(cat "$tmp/supervisord.pid")
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
fi

finish
