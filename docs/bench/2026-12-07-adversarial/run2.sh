OUTNAME=run2; . /tmp/adv/common.sh
BUDGET=${BUDGET:-400}
log "start A=$A B=$B"
mkdir -p $W/www; head -c $((3<<20)) /dev/urandom >$W/www/big.bin; head -c 2048 /dev/urandom | base64 >$W/www/small.html
chmod -R a+rX $W
bigsha=$(sha256sum <$W/www/big.bin | cut -d' ' -f1)

# ---- 5. nginx reverse proxy (upstream keepalive, proxy_bind B) -> backend nginx
ngx_conf() { # NAME PORT EXTRA_HTTP SERVER_BODY
	mkdir -p $W/$1
	cat >$W/$1/nginx.conf <<NG
daemon off; master_process off; worker_processes 1;
pid $W/$1.pid; error_log $W/$1/error.log info;
worker_rlimit_nofile 4096;
events { worker_connections 2048; }
http {
	access_log off;
	client_body_temp_path $W/$1/body; proxy_temp_path $W/$1/proxy;
	fastcgi_temp_path $W/$1/fcgi; uwsgi_temp_path $W/$1/uwsgi; scgi_temp_path $W/$1/scgi;
	keepalive_timeout 60; keepalive_requests 100000;
	$3
	server { listen $A:$2; $4 }
}
NG
}
ngx_shape() { local m=$1 bp=$2 fp=$3 t rc ok=0 i
	budget ngx_$m || return
	ngx_conf back_$m $bp "sendfile on;" "root $W/www;"
	ngx_conf front_$m $fp "upstream up { server $A:$bp; keepalive 32; }" \
		"location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_bind $B; }"
	ulimit -n 8192
	$(R $m) nginx -c $W/back_$m/nginx.conf -e $W/back_$m/error.log >$O/ngx_back_$m.out 2>&1 & local bk=$!
	$(R $m) nginx -c $W/front_$m/nginx.conf -e $W/front_$m/error.log >$O/ngx_front_$m.out 2>&1 & local fr=$!
	waitport $A $bp; waitport $A $fp
	t=$SECONDS
	for i in 1 2; do
		got=$(timeout 120 $(R $m) curl -sS -m 100 --interface $B http://$A:$fp/big.bin 2>>$O/ngx_$m.curl.err | sha256sum | cut -d' ' -f1)
		[ "$got" = "$bigsha" ] && ok=$((ok+1))
	done
	log "nginx-proxy $m curl 3MiB sha ok $ok/2 $((SECONDS-t)) s $(head -3 $O/ngx_$m.curl.err)"
	t=$SECONDS
	timeout 120 $(R $m) wrk -c 200 -t 2 -d 6s --timeout 30s http://$A:$fp/small.html >$O/ngx_$m.wrk 2>&1; rc=$?
	log "nginx-proxy $m wrk rc=$rc $((SECONDS-t)) s: $(grep -E 'requests in|Socket errors|Non-2xx|Requests/sec' $O/ngx_$m.wrk | tr '\n' '|')"
	t=$SECONDS
	timeout 200 $(R $m) ab -q -k -s 60 -c 50 -n 3000 -B $B http://$A:$fp/small.html >$O/ngx_$m.abk 2>&1; rc=$?
	log "nginx-proxy $m ab -k rc=$rc $((SECONDS-t)) s: $(grep -E '^(Complete|Failed|Non-2xx|Keep-Alive req|Requests per)' $O/ngx_$m.abk | tr -s ' ' | tr '\n' '|')"
	t=$SECONDS
	timeout 200 $(R $m) ab -q -s 60 -c 50 -n 1000 -B $B http://$A:$fp/small.html >$O/ngx_$m.ab 2>&1; rc=$?
	log "nginx-proxy $m ab (no -k) rc=$rc $((SECONDS-t)) s: $(grep -E '^(Complete|Failed|Non-2xx|Requests per)' $O/ngx_$m.ab | tr -s ' ' | tr '\n' '|')"
	stat_srv ngx_front_$m $fr
	stat_srv ngx_back_$m $bk
	grep -E '\[(error|crit|alert|emerg)\]' $W/front_$m/error.log $W/back_$m/error.log | head -5 | sed 's/^/   /' | tee -a $O/summary.txt
	grep -cE '\[(error|crit|alert)\]' $W/front_$m/error.log $W/back_$m/error.log | sed 's/^/   errcount /' | tee -a $O/summary.txt
	cp $W/front_$m/error.log $O/ngx_front_$m.error.log; cp $W/back_$m/error.log $O/ngx_back_$m.error.log
	kill $fr $bk; wait $fr $bk 2>/dev/null
}
ngx_shape rdma 19510 19511
ngx_shape tcp 19610 19611

# ---- 6. ssh -L forwarding, 4 MiB each way
ssh_shape() { local m=$1 sp=$2 t rc
	budget ssh_$m || return
	local S=$W/ssh_$m; mkdir -p $S /run/sshd; chmod 700 $S
	ssh-keygen -q -t ed25519 -N '' -f $S/host; ssh-keygen -q -t ed25519 -N '' -f $S/id; cp $S/id.pub $S/ak
	printf 'ListenAddress %s\nAuthorizedKeysFile %s\nStrictModes no\nPermitRootLogin yes\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPidFile %s\nAllowTcpForwarding yes\nLogLevel VERBOSE\n' $A $S/ak $S/pid >$S/cfg
	$(R $m) /usr/sbin/sshd -f $S/cfg -D -e -p $sp -h $S/host >$O/sshd_$m.out 2>&1 & local sd=$!
	head -c $((4<<20)) /dev/urandom >$S/blob; local bs=$(sha256sum <$S/blob | cut -d' ' -f1)
	# targets: download (sends blob) and upload sink
	$(R $m) socat -u FILE:$S/blob TCP-LISTEN:$((sp+1)),bind=$A,reuseaddr >$O/ssh_tgt1_$m.out 2>&1 & local t1=$!
	$(R $m) socat -u TCP-LISTEN:$((sp+2)),bind=$A,reuseaddr CREATE:$S/up >$O/ssh_tgt2_$m.out 2>&1 & local t2=$!
	waitfile $O/sshd_$m.out 'Server listening'
	t=$SECONDS
	timeout 200 $(R $m) ssh -F /dev/null -i $S/id -b $B -p $sp -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ExitOnForwardFailure=yes -N -L 127.0.0.1:$((sp+11)):$A:$((sp+1)) -L 127.0.0.1:$((sp+12)):$A:$((sp+2)) root@$A >$O/ssh_cli_$m.out 2>&1 & local cl=$!
	for i in $(seq 600); do ss -ltn | grep -q "127.0.0.1:$((sp+12)) " && break; sleep 0.2; done
	got=$(timeout 150 socat -u TCP:127.0.0.1:$((sp+11)) - | sha256sum | cut -d' ' -f1)
	log "ssh -L $m download 4MiB sha $([ "$got" = "$bs" ] && echo OK || echo BAD:$got) $((SECONDS-t)) s"
	t=$SECONDS
	timeout 150 socat -u FILE:$S/blob TCP:127.0.0.1:$((sp+12)); rc=$?
	for i in $(seq 300); do kill -0 $t2 2>/dev/null || break; sleep 0.2; done
	log "ssh -L $m upload 4MiB rc=$rc sha $([ "$(sha256sum <$S/up | cut -d' ' -f1)" = "$bs" ] && echo OK || echo BAD size=$(stat -c %s $S/up)) $((SECONDS-t)) s"
	for p in $(pgrep -x sshd) $(pgrep -f "sshd:"); do stat_srv sshd_${m}_$p $p; done
	stat_srv ssh_cli_$m $cl
	stat_srv ssh_tgt1_$m $t1
	log "ssh $m: ps: $(pgrep -af sshd | tr '\n' '|')"
	kill $cl $t1 $t2 $sd 2>/dev/null; wait $cl $t1 $t2 $sd 2>/dev/null
	grep -iE 'error|fatal' $O/sshd_$m.out | head -5 | sed 's/^/   sshd: /' | tee -a $O/summary.txt
	cat $O/ssh_cli_$m.out | head -5 | sed 's/^/   ssh: /' | tee -a $O/summary.txt
}
ssh_shape rdma 19520
ssh_shape tcp 19620
log "run2 done"
