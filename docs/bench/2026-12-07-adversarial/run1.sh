OUTNAME=run1; . /tmp/adv/common.sh
BUDGET=${BUDGET:-400}
log "start A=$A B=$B"; uname -r | tee -a $O/summary.txt
head -c $((3<<20)) /dev/urandom >$W/big.bin; sha256sum $W/big.bin >$O/big.sha

# ---- 1. perl forking echo server, 30 python clients x 200 KB
perl_shape() { # MODE PORT SUBMODE NCLIENTS
	local m=$1 p=$2 sm=$3 n=$4 t pids rcs ok=0 i
	budget perl_${sm}_$m || return
	$(R $m) perl $AD/perl_echo.pl $A $p $sm 2>$O/perl_${sm}_$m.srv.err & local srv=$!
	waitport $A $p
	t=$SECONDS; pids=()
	for i in $(seq $n); do
		timeout 200 $(R $m) python3 $AD/echo_client.py $A $p $B 204800 $i >$O/perl_${sm}_$m.c$i 2>&1 & pids+=($!)
	done
	for i in "${pids[@]}"; do wait $i && ok=$((ok+1)); done
	log "perl_$sm $m: $ok/$n clients ok, $((SECONDS-t)) s"
	grep -h -v "match=True err=\[\]" $O/perl_${sm}_$m.c* | head -5 | sed 's/^/   /' | tee -a $O/summary.txt
	stat_srv perl_${sm}_$m $srv
	kill $srv; wait $srv 2>/dev/null
}
perl_shape rdma 19501 fork 30
perl_shape tcp 19601 fork 30
perl_shape rdma 19502 exec 15
perl_shape tcp 19602 exec 15

# ---- 2. 300 concurrent non-blocking connects (single process each side)
nb_shape() { local m=$1 p=$2 t
	budget nb_$m || return
	$(R $m) python3 $AD/nb_connect.py server $A $p >$O/nb_$m.srv 2>&1 & local srv=$!
	waitfile $O/nb_$m.srv listening
	t=$SECONDS
	timeout 280 $(R $m) python3 $AD/nb_connect.py client $A $p $B 300 >$O/nb_$m.cli 2>&1; local rc=$?
	log "nb $m rc=$rc $((SECONDS-t)) s: $(cat $O/nb_$m.cli | tail -3)"
	stat_srv nb_$m $srv
	kill $srv; wait $srv 2>/dev/null
}
nb_shape rdma 19503
nb_shape tcp 19603

# ---- 3. fd passing: parent accepts, SCM_RIGHTS to 3 pre-forked workers
fd_shape() { local m=$1 p=$2 t
	budget fd_$m || return
	$(R $m) python3 $AD/fdpass.py server $A $p 3 >$O/fd_$m.srv 2>&1 & local srv=$!
	waitfile $O/fd_$m.srv listening
	t=$SECONDS
	timeout 200 $(R $m) python3 $AD/fdpass.py client $A $p $B 20 102400 >$O/fd_$m.cli 2>&1; local rc=$?
	log "fdpass $m rc=$rc $((SECONDS-t)) s: $(tail -3 $O/fd_$m.cli)"
	stat_srv fd_$m $srv
	for c in $(pgrep -P $srv); do stat_srv fd_${m}_worker$c $c; done
	cat $O/fd_$m.srv | grep -v listening | head -5 | sed 's/^/   srv: /' | tee -a $O/summary.txt
	kill $srv; wait $srv 2>/dev/null
}
fd_shape rdma 19504
fd_shape tcp 19604

# ---- 4. redis: benchmark -c 100 -P 16, then pipelined SET/GET verify
redis_shape() { local m=$1 p=$2 t
	budget redis_$m || return
	mkdir -p $W/redis_$m
	$(R $m) redis-server --bind $A --port $p --save '' --appendonly no --dir $W/redis_$m --protected-mode no --maxclients 1000 >$O/redis_$m.srv 2>&1 & local srv=$!
	waitfile $O/redis_$m.srv 'Ready to accept'
	t=$SECONDS
	timeout 240 $(R $m) redis-benchmark -h $A -p $p -c 100 -P 16 -n 20000 -q -t set,get,lpush >$O/redis_$m.bench 2>&1; local rc=$?
	log "redis-bench $m rc=$rc $((SECONDS-t)) s: $(tr '\r' '\n' <$O/redis_$m.bench | grep -v rps= | grep -v '^ *$' | tr '\n' '|')"
	t=$SECONDS
	timeout 200 $(R $m) python3 $AD/redis_check.py $A $p $B 4 300 >$O/redis_$m.chk 2>&1; rc=$?
	log "redis-check $m rc=$rc $((SECONDS-t)) s: $(tail -3 $O/redis_$m.chk)"
	stat_srv redis_$m $srv
	kill $srv; wait $srv 2>/dev/null
}
redis_shape rdma 19505
redis_shape tcp 19605
log "run1 done"
