# SPDX-License-Identifier: MIT
"""roceshim-stat's view of the calling process, for the fabric tests'
checks: `roceshim-stat --json PID` parsed once, here.

    stats()        the whole report; {} without ROCESHIM_STAT, or when
                   roceshim published nothing for this process
    connections()  its connection ends, listeners and closed ends left out
    row(fd)        fd's connection end as "TRANSPORT REASON[ moved:CAUSE]",
                   "none none" if it has none
"""
import json
import os
import subprocess


def stats():
    stat = os.environ.get("ROCESHIM_STAT")
    if not stat:
        return {}
    out = subprocess.run([stat, "--json", str(os.getpid())],
                         capture_output=True, text=True).stdout
    return json.loads(out) if out else {}


def connections():
    return [c for c in stats().get("connections", [])
            if c["role"] != "listener" and c["state"] != "closed"]


def row(fd):
    ends = [c for c in connections() if c["fd"] == fd]
    if not ends:
        return "none none"
    end = ends[-1]
    moved = end.get("downgrade", "none")
    return "%s %s%s" % (end["transport"], end["fallback"],
                        "" if moved == "none" else " moved:" + moved)
