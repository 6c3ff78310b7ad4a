# sourced by run scripts inside the guest
set -u
A=$ROCESHIM_FABRIC_ADDR_A; B=$ROCESHIM_FABRIC_ADDR_B
RUN=$ROCESHIM_RUN; STAT=$ROCESHIM_STAT
AD=${AD:-/tmp/adv}
O=/work/main/build/adv-out/${OUTNAME:-run}
rm -rf "$O"; mkdir -p "$O"
W=/tmp/advg; mkdir -p $W; chmod 755 $W
T0=$SECONDS
log() { echo "[$((SECONDS-T0))s] $*" | tee -a $O/summary.txt; }
budget() { [ $((SECONDS-T0)) -lt ${BUDGET:-380} ] || { log "SKIP $1: out of time"; return 1; }; }
# R MODE: prefix for running preloaded in MODE (rdma|tcp)
R() { if [ "$1" = tcp ]; then echo "env ROCESHIM_RDMA=0 $RUN"; else echo "$RUN"; fi; }
stat_srv() { # NAME PID
	$STAT "$2" >"$O/$1.stat" 2>&1
	$STAT -j "$2" >"$O/$1.json" 2>&1
	python3 - "$O/$1.json" <<'PY' | tee -a $O/summary.txt
import json, sys, collections
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("   stat: unreadable", e); sys.exit()
procs = d if isinstance(d, list) else [d]
for p in procs:
    g = p.get("global", {})
    fb = {k: v for k, v in g.get("fallbacks", {}).items() if v}
    dg = {k: v for k, v in g.get("downgrades", {}).items() if v}
    print("   stat %s pid %s: opened=%s rdma=%s tcp=%s fallbacks=%s downgrades=%s errors=%s credit_stalls=%s rdma_tx=%s tcp_tx=%s" % (sys.argv[1].split("/")[-1], p.get("pid"), g.get("connections_opened"), g.get("connections_rdma"), g.get("connections_tcp"), fb, dg, g.get("errors"), g.get("credit_stalls"), g.get("rdma_tx_bytes"), g.get("tcp_tx_bytes")))
PY
}
waitport() { for i in $(seq 600); do timeout 5 bash -c "echo >/dev/tcp/$1/$2" 2>/dev/null && return 0; sleep 0.2; done; return 1; }
waitfile() { for i in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done; return 1; }
