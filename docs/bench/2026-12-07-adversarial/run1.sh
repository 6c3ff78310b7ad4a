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

# (300 non-blocking connects, fd passing and redis: run3.sh)
log "run1 done"
