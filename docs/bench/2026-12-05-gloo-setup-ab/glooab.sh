#!/bin/bash
cd /work/main/build
export top_srcdir=/work/main top_builddir=/work/main/build ROCESHIM_RUN=$PWD/tools/roceshim-run PYTHON=/usr/bin/python3 ROCESHIM_FABRIC_CACHE=$PWD/fabric/cache
ROCESHIM_FABRIC_MEM=8192 flock /tmp/fabric.lock ../fabric/roceshim-fabric run --timeout 2400 -- /bin/bash -c '
for rep in 1 2; do
for v in tcp old new; do
	wrap=()
	[ "$v" != tcp ] && wrap=(-- env ROCESHIM_LIB=/tmp/rout/libroceshim-$v.so "$ROCESHIM_RUN")
	echo "ab: $v rep $rep" >&2
	/usr/bin/python3 "$top_srcdir/bench/gloo_scale.py" launch --world 16 --groups 4 --label "$v" --timeout 1200 "${wrap[@]}" 2>&1 | grep "^gloo " || echo "gloo label=$v failed"
done
done' > /tmp/glooab.out 2>&1
