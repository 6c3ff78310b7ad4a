# SPDX-License-Identifier: MIT
"""torchrun (python3 -m torch.distributed.run), with the one fix that
Debian 12's torch 1.13 needs under its Python 3.11: Std.from_str() checks
each value with "in Std", which Python 3.11's enum answers False for
every value that is not a single flag, so it returns None and every
torchrun run fails at start ("'NoneType' object has no attribute 'get'").
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def from_str(cls, text):
    if re.fullmatch(r"[0-3]", text):
        return cls(int(text))
    pairs = (item.split(":") for item in text.split(","))
    return {int(rank): cls(int(value)) for rank, value in pairs}


api.Std.from_str = classmethod(from_str)

from torch.distributed.run import main  # noqa: E402 (after the fix)

sys.exit(main())
