"""SimCluster: PD plus N TiKV stores, each a real gRPC server on its own loopback port.

Stores share one MvccStore (the raft groups' data) and one RegionMap (who leads what). Stopping a
store closes its port; after `leader_failover_delay_s` its regions elect leaders among live peers,
as raft would. Background workers play TiKV's split checker and TiDB's GC leader.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.errors import InputError
from tidelake.kvproto import etcdserverpb_pb2_grpc, metapb_pb2, pdpb_pb2_grpc, tikvpb_pb2_grpc
from tidelake.sim.call_counter import CallCounter
from tidelake.sim.cdc_service import ChangeDataService
from tidelake.sim.etcd_keyspace import EtcdKeyspace
from tidelake.sim.etcd_kv import GC_SAVED_SAFE_POINT_KEY, EtcdKvService
from tidelake.sim.fault_state import FaultState
from tidelake.sim.gc_safepoints import GC_WORKER, GcSafePoints
from tidelake.sim.kv_service import KvService
from tidelake.sim.lock_waits import LockWaits
from tidelake.sim.mvcc import MAX_TS, Lock, MvccStore
from tidelake.sim.forwarding import ForwardingInterceptor
from tidelake.sim.pd_service import PD_MEMBER_ID, PdService
from tidelake.sim.regions import RegionMap, SimRegion
from tidelake.sim.tso_oracle import TsoOracle
from tidelake.tso import compose, physical_ms

log = logging.getLogger(__name__)

DEFAULT_CLUSTER_ID = 7_316_000_000_000_000_001
# TiKV's server tolerates clients' keepalive pings without data (tikv src/server/server.rs:
# http2_max_ping_strikes(i32::MAX)); gRPC's default answers client-go's 10 s pings with GOAWAY
# "too_many_pings" after two. 0 = unlimited strikes in gRPC core.
SERVER_OPTIONS = [("grpc.http2.max_ping_strikes", 0)]
MAX_INT64 = 2**63 - 1


@dataclass
class _Store:
    id: int
    port: int
    up: bool = False
    server: grpc.Server | None = None
    kv: KvService | None = None
    health: health.HealthServicer | None = None
    cdc: Any = None
    start_timestamp: int = 0
    last_heartbeat: int = 0


class SimCluster:
    def __init__(self, n_stores: int = 3, cluster_id: int = DEFAULT_CLUSTER_ID, seed: int = 0,
                 host: str = "127.0.0.1", pd_port: int = 0, store_ports: list[int] | None = None,
                 store_version: str = "8.5.0", *, leader_failover_delay_s: float = 0.5,
                 split_check_interval_s: float = 1.0, region_max_keys: int = 20_000,
                 region_max_bytes: int = 16 << 20, gc_interval_s: float = 10.0, gc_life_time_s: float = 600.0,
                 server_workers: int = 32, cdc_options: dict[str, Any] | None = None,
                 server_credentials: grpc.ServerCredentials | None = None) -> None:
        if n_stores < 1:
            raise InputError(f"n_stores must be at least 1, got {n_stores}")
        if store_ports is not None and len(store_ports) != n_stores:
            raise InputError(f"store_ports has {len(store_ports)} ports for {n_stores} stores")
        self.cluster_id = cluster_id
        self.host = host
        self.store_version = store_version
        self.tso = TsoOracle()
        self.mvcc = MvccStore()
        self.regions = RegionMap(list(range(1, n_stores + 1)))
        self.faults = FaultState()
        self.gc_safe_points = GcSafePoints()
        self.etcd = EtcdKeyspace(derived=(GC_SAVED_SAFE_POINT_KEY,))  # PD's embedded etcd: outlives a PD restart
        self.lock_waits = LockWaits()
        self.pd_calls = CallCounter()  # PD RPCs received, by method (kept across PD restarts)
        self.leader_failover_delay_s = leader_failover_delay_s
        self.split_check_interval_s = split_check_interval_s
        self.region_max_keys = region_max_keys
        self.region_max_bytes = region_max_bytes
        self.gc_interval_s = gc_interval_s
        self.gc_life_time_s = gc_life_time_s
        self._rng = random.Random(seed)
        self._workers = server_workers
        self._cdc_options = cdc_options or {}
        self._server_credentials = server_credentials  # TLS on PD and every store, as TiDB's [security]
        self._pd_port = pd_port
        self._pd_server: grpc.Server | None = None
        self._stores = {i: _Store(i, (store_ports or [0] * n_stores)[i - 1]) for i in range(1, n_stores + 1)}
        self._mu = threading.RLock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> SimCluster:
        self._stopping.clear()
        self.start_pd()
        for store_id in self._stores:
            self.start_store(store_id)
        for name, interval, fn in (("split-check", self.split_check_interval_s, self.check_splits),
                                   ("gc", self.gc_interval_s, self.run_gc_once)):
            if interval > 0:
                thread = threading.Thread(target=self._loop, args=(interval, fn), name=f"sim-{name}", daemon=True)
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        for store_id in self._stores:
            self._shutdown_store(store_id)
        self.stop_pd()

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start_pd(self) -> None:
        """(Re)start PD on the port it had. Its state (TSO, regions, safepoints, etcd keys) lives in the
        cluster, as a restarted PD reloads it from etcd, so clients resume where they were."""
        with self._mu:
            if self._pd_server is not None:
                return
            server = self._new_server("pd", self.pd_calls)
            pdpb_pb2_grpc.add_PDServicer_to_server(PdService(self), server)
            etcdserverpb_pb2_grpc.add_KVServicer_to_server(EtcdKvService(self, PD_MEMBER_ID), server)
            _serve_health(server)
            self._pd_port = self._bind(server, self._pd_port, "PD")
            server.start()
            self._pd_server = server

    def stop_pd(self) -> None:
        """Take PD down (its port refuses connections): TSO, region and safepoint calls fail until
        start_pd(). The stores keep serving, as TiKV does while PD is unavailable."""
        with self._mu:
            server, self._pd_server = self._pd_server, None
        if server is not None:
            server.stop(None).wait()

    @property
    def pd_is_up(self) -> bool:
        return self._pd_server is not None

    def stop_store(self, store_id: int) -> None:
        """Take a store down (its port refuses connections); its leaders move after the failover delay."""
        self._shutdown_store(store_id)
        timer = threading.Timer(self.leader_failover_delay_s, self._fail_over, args=(store_id,))
        timer.daemon = True
        timer.start()

    def start_store(self, store_id: int) -> None:
        """(Re)start a store on the same port it had."""
        with self._mu:
            store = self._require_store(store_id)
            if store.up:
                return
            server = self._new_server(f"store-{store_id}", ForwardingInterceptor(
                lambda: self.store_addresses[store_id], self.kv_service_at))
            kv = KvService(store_id, self)
            tikvpb_pb2_grpc.add_TikvServicer_to_server(kv, server)
            store_health = _serve_health(server)
            cdc = ChangeDataService(store_id, self, **self._cdc_options)
            cdc.add_to_server(server)
            store.port = self._bind(server, store.port, f"store {store_id}")
            server.start()
            store.server, store.kv, store.health, store.cdc, store.up = server, kv, store_health, cdc, True
            store.start_timestamp = store.last_heartbeat = int(time.time())

    def _shutdown_store(self, store_id: int) -> None:
        with self._mu:
            store = self._require_store(store_id)
            if not store.up:
                return
            store.up = False
            store.last_heartbeat = int(time.time())
            cdc, server, kv, store_health = store.cdc, store.server, store.kv, store.health
            store.cdc = store.server = store.kv = store.health = None
        store_health.enter_graceful_shutdown()  # NOT_SERVING while in-flight calls finish
        if cdc is not None:
            cdc.close()
        server.stop(None).wait()
        kv.close()

    def _fail_over(self, store_id: int) -> None:
        """Raft election after a leader store died: a live peer becomes leader."""
        with self._mu:
            if self._stores[store_id].up:
                return
            for region in self.regions.leaders_on(store_id):
                live = [s for s in region.store_ids() if self._stores[s].up]
                if live:
                    self.regions.transfer_leader(region.id, self._rng.choice(live))

    # ---- addresses and store metadata -------------------------------------------------------

    @property
    def pd_address(self) -> str:
        return f"{self.host}:{self._pd_port}"

    @property
    def store_addresses(self) -> dict[int, str]:
        return {sid: f"{self.host}:{s.port}" for sid, s in self._stores.items()}

    def kv_service_at(self, address: str) -> KvService | None:
        """The KvService of the running store listening on `address` (the target of a forwarded call)."""
        with self._mu:
            for store in self._stores.values():
                if store.up and f"{self.host}:{store.port}" == address:
                    return store.kv
        return None

    def store_is_up(self, store_id: int) -> bool:
        return self._require_store(store_id).up

    def store_meta(self, store_id: int) -> metapb_pb2.Store | None:
        """What PD reports for a store; a stopped store stays Up until PD's max-store-down-time."""
        store = self._stores.get(store_id)
        if store is None:
            return None
        address = f"{self.host}:{store.port}"
        return metapb_pb2.Store(id=store_id, address=address, state=metapb_pb2.Up, version=self.store_version,
                                peer_address=address, status_address=address,
                                start_timestamp=store.start_timestamp, last_heartbeat=store.last_heartbeat * 10**9,
                                node_state=metapb_pb2.Serving)

    def store_metas(self) -> list[metapb_pb2.Store]:
        return [self.store_meta(sid) for sid in sorted(self._stores)]

    def write_info(self, path: str | Path, sql: str | None = None) -> None:
        """Write where PD, the stores and the SQL front (when one serves) listen, so other processes
        (puller, CLI, SQL clients) can find this cluster."""
        info = {"pd": [self.pd_address], "stores": {str(k): v for k, v in self.store_addresses.items()},
                "cluster_id": self.cluster_id}
        if sql is not None:
            info["sql"] = sql
        Path(path).write_text(json.dumps(info, indent=2) + "\n")

    @staticmethod
    def read_info(path: str | Path) -> dict[str, Any]:
        try:
            info = json.loads(Path(path).read_text())
            return {"pd": list(info["pd"]), "stores": {int(k): v for k, v in info["stores"].items()},
                    "cluster_id": int(info["cluster_id"])}
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}: not a tidelake sim info file ({err})") from err

    # ---- region conveniences ----------------------------------------------------------------

    def split_region(self, region_id: int, split_enc_key: bytes) -> tuple[SimRegion, SimRegion]:
        return self.regions.split(region_id, split_enc_key)

    def split_table(self, table_id: int) -> SimRegion:
        return self.regions.split_table(table_id)

    def merge_regions(self, left_id: int, right_id: int) -> SimRegion:
        return self.regions.merge(left_id, right_id)

    def transfer_leader(self, region_id: int, store_id: int) -> SimRegion:
        return self.regions.transfer_leader(region_id, store_id)

    # ---- background workers -----------------------------------------------------------------

    def check_splits(self) -> int:
        """TiKV's split checker: split every region over the key/size thresholds at its middle key."""
        splits = 0
        for region in self.regions.all():
            lo, hi = region.raw_range()
            keys, size = self.mvcc.approximate_stats(lo, hi)
            if keys <= self.region_max_keys and size <= self.region_max_bytes:
                continue
            middle = self.mvcc.middle_key(lo, hi)
            if middle is None:
                continue
            split_key = encode_bytes(middle)
            current = self.regions.get(region.id)
            if current is None or current.version != region.version or split_key == current.start_key:
                continue
            self.regions.split(region.id, split_key)
            splits += 1
        return splits

    def run_gc_once(self) -> int:
        """TiDB's GC leader round (docs/metadata.md#server-semantics): safepoint = min service safepoint."""
        now = self.tso.next()
        life_ts = compose(max(0, physical_ms(now) - int(self.gc_life_time_s * 1000)))
        current_min, _ = self.gc_safe_points.update_service(GC_WORKER, MAX_INT64, life_ts)
        safe_point = current_min.safe_point
        if safe_point <= self.gc_safe_points.gc_safe_point:
            return 0
        for lock in self.mvcc.scan_locks(b"", b"", safe_point - 1):
            self._resolve_for_gc(lock)
        self.gc_safe_points.advance_gc_safe_point(safe_point)
        return self.mvcc.gc(self.gc_safe_points.gc_safe_point)

    def _resolve_for_gc(self, lock: Lock) -> None:
        """client-go `BatchResolveLocks`: caller ts 0 and current ts MaxUint64, so any lock below the
        safepoint is either committed or rolled back now (docs/wire.md#transactional-writes for async commit)."""
        status = self.mvcc.check_txn_status(lock.primary, lock.start_ts, 0, MAX_TS, True, verify_is_primary=False)
        if status.lock is not None and status.lock.use_async_commit:  # decided by all its keys (docs/wire.md#transactional-writes)
            self.mvcc.resolve_async_commit(status.lock)
            return
        self.mvcc.resolve_lock(lock.start_ts, status.commit_ts, keys=[lock.key])

    def _loop(self, interval: float, fn) -> None:
        while not self._stopping.wait(interval):
            try:
                fn()
            except Exception:
                log.exception("sim background worker %s failed", fn.__name__)

    # ---- internals --------------------------------------------------------------------------

    def _new_server(self, name: str, *interceptors: grpc.ServerInterceptor) -> grpc.Server:
        return grpc.server(ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=f"sim-{name}"),
                           interceptors=interceptors, options=SERVER_OPTIONS)

    def _bind(self, server: grpc.Server, port: int, what: str) -> int:
        try:
            address = f"{self.host}:{port}"
            if self._server_credentials is None:
                bound = server.add_insecure_port(address)
            else:
                bound = server.add_secure_port(address, self._server_credentials)
        except RuntimeError as err:
            raise InputError(f"{what}: cannot listen on {self.host}:{port} ({err})") from err
        if not bound:
            raise InputError(f"{what}: cannot listen on {self.host}:{port}")
        return bound

    def _require_store(self, store_id: int) -> _Store:
        store = self._stores.get(store_id)
        if store is None:
            raise InputError(f"unknown store {store_id}; stores are {sorted(self._stores)}")
        return store


def _serve_health(server: grpc.Server) -> health.HealthServicer:
    """grpc.health.v1 with the whole server SERVING, as TiKV (src/server/server.rs registers grpcio's
    health service) and PD's embedded etcd (server/etcdserver/api/v3rpc/grpc.go) answer it."""
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return servicer
