"""``record(**fields)``: what a Celery app module under test writes for the test to read.

A task in a worker (or a prefork child, or beat) cannot hand a value back to
the test except through the broker, and what a test of coordination wants to
know is when each run started and ended, in which process. Each call appends
one JSON line to ``$RECORD_FILE`` (set by :class:`CeleryProject` for every
process it starts): the fields, plus ``pid`` and ``t`` (``time.time()``), which
override fields of the same name. The line goes out in one ``os.write`` on a
descriptor opened with ``O_APPEND``, so lines written at the same time by
several processes do not interleave.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any


def record(**fields: Any) -> None:
    """Append ``{**fields, "pid": ..., "t": ...}`` as one JSON line to ``$RECORD_FILE``."""
    entry = {**fields, "pid": os.getpid(), "t": time.time()}
    line = (json.dumps(entry, sort_keys=True, default=repr) + "\n").encode("utf-8")
    fd = os.open(os.environ["RECORD_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):  # only for lines far longer than any record should be
        raise OSError(f"record: short write ({written} of {len(line)} bytes)")
