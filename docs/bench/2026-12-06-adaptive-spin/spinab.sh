#!/bin/bash
# inside the fabric: fabric-ab of old/adaptive spin, then ib_write_lat
cd /work/main/build
for s in 1 1024 4096; do
  for r in 1 2 3; do
    timeout 60 ib_write_lat -d rxe0 -s $s -n 1000 -p 19$r$((s%7)) >/dev/null 2>&1 &
    sleep 1
    printf "ib_write_lat size=%s " $s
    timeout 60 ib_write_lat -d rxe1 -s $s -n 1000 -p 19$r$((s%7)) 10.99.0.1 2>&1 | awk -v s=$s '$1==s && NF>=5 {print "typ_us=" $5}'
    wait
  done
done
/bin/bash /work/main/bench/fabric-ab --inside --builddir /work/main/build --reps ${REPS:-5} \
  --sizes "1 1024 4096" --modes "pingpong pingpong-epoll pingpong-poll" \
  old=/tmp/rout/libroceshim-7419.so \
  new=/tmp/rout/libroceshim-adapt500.so \
  tcp=tcp
