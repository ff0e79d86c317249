"""spark-submit entry point of `tidelake bootstrap` (same arguments; see `tidelake bootstrap --help`)."""

import sys

from tidelake.cli.submitted import run_submitted

if __name__ == "__main__":
    sys.exit(run_submitted("bootstrap", sys.argv[1:]))
