"""`make soak` (python -m tidelake.demos.soak): the stack of `make integration` run for
--minutes of traffic, a fault every --fault-every seconds in rotation (the S3 endpoint down for
10 s, the triggerer and the scheduler SIGKILLed, PostgreSQL restarted), and every --sample-every
seconds the memory of each component and the lag a reader sees (tidelake.demos.soak_samples).
Then the integration's own ending: merges past a target taken after the last fault, the
bootstrap, maintenance and `tidelake verify`. It writes soak.jsonl (the samples), soak.json (the
faults and whether each series stayed flat) and soak.html (the charts) under the workdir's
soak/ folder, and exits 1 when verify fails or a series grew. Owner: the soak.

More: docs/operations.md#soak.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tidelake.demos.integration import IntegrationOptions, run
from tidelake.demos.soak_run import SoakOptions
from tidelake.errors import InputError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidelake.demos.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=SoakOptions.minutes, help="traffic and faults (default 120)")
    parser.add_argument("--fault-every", type=float, default=SoakOptions.fault_every_s, metavar="S",
                        help="seconds between the end of one fault and the next (default 300)")
    parser.add_argument("--sample-every", type=float, default=SoakOptions.sample_every_s, metavar="S",
                        help="seconds between samples (default 15)")
    parser.add_argument("--workdir", type=Path, default=IntegrationOptions.workdir.parent / "soak")
    args = parser.parse_args(argv)
    try:
        soak = SoakOptions(args.minutes, args.fault_every, args.sample_every)
    except InputError as err:
        print(err, file=sys.stderr)
        return 2
    return run(IntegrationOptions(workdir=args.workdir.resolve(), traffic_s=soak.traffic_s, soak=soak))


if __name__ == "__main__":
    sys.exit(main())
