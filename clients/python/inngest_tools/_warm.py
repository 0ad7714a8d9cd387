"""A warm sandbox's first stage: the interpreter and the client loaded, waiting for a snippet.

``python -m inngest_tools._warm`` imports the client and the snippet runner (gRPC with them),
then blocks reading one assignment from stdin, a JSON line ``{"env": {...}, "argv": [...]}``.
It makes that environment its own (the command's token reaches it only here), puts
``/dev/null`` on stdin, and runs the snippet as ``python -m inngest_tools._runner ARGV`` would.
The daemon gives each warm sandbox one assignment at most, then discards it; stdin closed
without one ends it quietly.
"""

from __future__ import annotations

import gc
import json
import os
import sys

from inngest_tools import _runner

# What is loaded now lives as long as the process: the collector need not look at it again,
# and the runner's collection at the end looks only at what the snippet made.
gc.freeze()


def main() -> int:
    line = sys.stdin.buffer.readline()
    if not line.strip():
        return 0  # let go unused
    assignment = json.loads(line)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.clear()
    os.environ.update(assignment["env"])
    sys.argv = [_runner.__file__, *assignment["argv"]]
    return _runner.main()


if __name__ == "__main__":
    _runner.leave(main())
