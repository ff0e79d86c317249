"""spark-submit entry point of `tidelake syncpoint` (same arguments; see `tidelake syncpoint --help`)."""

import sys

from tidelake.cli.submitted import run_submitted

if __name__ == "__main__":
    sys.exit(run_submitted("syncpoint", sys.argv[1:]))
