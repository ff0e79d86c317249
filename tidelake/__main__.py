"""`python -m tidelake`: the `tidelake` command line (tidelake.cli). Owner: the `tidelake` CLI."""

import sys

from tidelake.cli import main

sys.exit(main())
