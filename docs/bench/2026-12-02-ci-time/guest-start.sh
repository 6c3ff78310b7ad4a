#!/bin/bash
# In the fabric guest: how long program starts take (docs/bench/2026-12-02-ci-time).
# fabric/roceshim-fabric run -- /bin/bash guest-start.sh
t() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; echo "$(echo "$(date +%s.%N) - $s" | bc) $*"; }
t /usr/bin/python3 -c pass
t /usr/bin/python3 -c pass
t /usr/bin/python3 -c "import torch"
t /usr/bin/python3 -c "import torch"
t /usr/bin/python3 -c "import asyncio, ssl, hashlib; hashlib.sha256(b'x'*50000000).hexdigest()"
t sh -c 'for i in $(seq 200); do /bin/true; done'
