"""spark-submit entry point of `tidelake maintenance` (same arguments; see `tidelake maintenance --help`)."""

import sys

from tidelake.cli.submitted import run_submitted

if __name__ == "__main__":
    sys.exit(run_submitted("maintenance", sys.argv[1:]))
