"""A process that takes replica lease 1 of the lake in $LEASE_ROOT and holds it, renewing, until
killed: the other writer of tests/lake/test_lease.py. Prints `held TOKEN` once it holds it."""

from __future__ import annotations

import json
import os
import time

from tidelake.config import LeaseSettings
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import hold, replica_lease

if __name__ == "__main__":
    settings = LeaseSettings(ttl_s=float(os.environ["LEASE_TTL"]), renew_s=float(os.environ["LEASE_RENEW"]))
    layout = LakeLayout(os.environ["LEASE_ROOT"], json.loads(os.environ["LEASE_OPTIONS"]) or None, settings)
    with hold(layout, {1: (replica_lease(1), "replica of shop.orders")}) as leases:
        print("held", leases.held[1].token, flush=True)
        time.sleep(600)
