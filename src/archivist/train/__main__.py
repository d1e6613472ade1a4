"""``python -m archivist.train judge [...]``: the same as ``archivist train judge``."""

from __future__ import annotations

import sys

from .judge import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["judge"]:
        args = args[1:]
    sys.exit(main(args))
