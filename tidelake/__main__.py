import sys

from tidelake.cli import main

sys.exit(main())
