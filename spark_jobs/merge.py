"""spark-submit entry point of `tidelake merge` (same arguments; see `tidelake merge --help`)."""

import sys

from tidelake.cli.submitted import run_submitted

if __name__ == "__main__":
    sys.exit(run_submitted("merge", sys.argv[1:]))
