OUTNAME=run5; . /tmp/adv/common.sh
log "start"
for m in rdma tcp; do
	p=19507; [ $m = tcp ] && p=19607
	$(R $m) python3 $AD/rst.py server $A $p >$O/rst_$m.srv 2>&1 & srv=$!
	waitfile $O/rst_$m.srv listening
	timeout 100 $(R $m) python3 $AD/rst.py client $A $p $B >$O/rst_$m.cli 2>&1
	sleep 1
	stat_srv rst_$m $srv
	log "rst $m: $(cat $O/rst_$m.srv $O/rst_$m.cli | tr '\n' '|')"
	kill $srv 2>/dev/null; wait $srv 2>/dev/null
done
log "run5 done"
