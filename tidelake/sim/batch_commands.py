"""`tikvpb.Tikv/BatchCommands`: client-go's default path for every KV command (docs/wire.md#batchcommands).

TiKV (src/server/service/kv.rs `batch_commands`, `handle_batch_commands_request`) unpacks each
BatchCommandsRequest into (request id, command) pairs, runs every command through the same future
its unary RPC uses, and streams the answers back tagged with the ids, in whatever order they finish.
A request with no command (or one this subset does not declare) gets an empty Response; `Empty`
answers its test_id after `delay_time` ms; a command whose context names another cluster ends
the whole stream with INVALID_ARGUMENT. This module does the same with the store's KvService
methods, so a batched command and its unary twin can never answer differently.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import grpc

from tidelake.kvproto import tikvpb_pb2

# oneof member -> the unary Tikv method TiKV runs for it (kv.rs `handle_cmd!` table)
UNARY_OF: dict[str, str] = {
    "Get": "KvGet",
    "Scan": "KvScan",
    "Prewrite": "KvPrewrite",
    "Commit": "KvCommit",
    "Cleanup": "KvCleanup",
    "BatchGet": "KvBatchGet",
    "BatchRollback": "KvBatchRollback",
    "ScanLock": "KvScanLock",
    "ResolveLock": "KvResolveLock",
    "PessimisticLock": "KvPessimisticLock",
    "PessimisticRollback": "KVPessimisticRollback",
    "CheckTxnStatus": "KvCheckTxnStatus",
    "TxnHeartBeat": "KvTxnHeartBeat",
    "CheckSecondaryLocks": "KvCheckSecondaryLocks",
}

Response = tikvpb_pb2.BatchCommandsResponse.Response
_DONE = object()


class _ClusterIdMismatch(Exception):
    pass


def serve_batch_commands(servicer: object, cluster_id: int, request_iterator: Iterator[tikvpb_pb2.BatchCommandsRequest],
                         context: grpc.ServicerContext, pool: ThreadPoolExecutor
                         ) -> Iterator[tikvpb_pb2.BatchCommandsResponse]:
    """Run each batched command on `pool` through `servicer`'s unary method; yield answers as they finish."""
    answers: queue.Queue = queue.Queue()
    pending = [0]
    mu = threading.Lock()
    reader_done = threading.Event()

    def run(request_id: int, call: Callable[[], Response]) -> None:
        try:
            answers.put((request_id, call()))
        except Exception as err:  # a failed command: TiKV drops its answer and logs; the client times it out
            answers.put((request_id, err))
        finally:
            with mu:
                pending[0] -= 1
                if pending[0] == 0 and reader_done.is_set():
                    answers.put(_DONE)

    def read() -> None:
        try:
            for batch in request_iterator:
                for request_id, req in zip(batch.request_ids, batch.requests):
                    call = _command(servicer, cluster_id, req, context)
                    with mu:
                        pending[0] += 1
                    pool.submit(run, request_id, call)
        except _ClusterIdMismatch as err:
            answers.put(err)
            return
        except Exception:  # the client went away mid-stream
            pass
        with mu:
            reader_done.set()
            if pending[0] == 0:
                answers.put(_DONE)

    threading.Thread(target=read, name="sim-batch-commands-reader", daemon=True).start()
    while True:
        try:
            item = answers.get(timeout=1)
        except queue.Empty:
            if not context.is_active():  # cancelled, or the server stopped: nobody reads the answers
                return
            continue
        if item is _DONE:
            return
        if isinstance(item, _ClusterIdMismatch):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(item))
        request_id, resp = item
        if isinstance(resp, Exception):
            continue
        yield tikvpb_pb2.BatchCommandsResponse(responses=[resp], request_ids=[request_id],
                                               tikv_send_time_ns=time.time_ns())


def _command(servicer: object, cluster_id: int, req: tikvpb_pb2.BatchCommandsRequest.Request,
             context: grpc.ServicerContext) -> Callable[[], Response]:
    which = req.WhichOneof("cmd")
    if which is None:
        return Response  # kv.rs: `None => batch_commands_response::Response::default()`
    if which == "Empty":
        empty = req.Empty

        def answer_empty() -> Response:
            time.sleep(empty.delay_time / 1000)  # kv.rs future_handle_empty
            return Response(Empty=tikvpb_pb2.BatchCommandsEmptyResponse(test_id=empty.test_id))

        return answer_empty
    inner = getattr(req, which)
    requested = inner.context.cluster_id
    if requested and requested != cluster_id:  # kv.rs handle_cluster_id_mismatch!
        raise _ClusterIdMismatch(f"cluster id mismatch, request: {requested}, tikv: {cluster_id}")
    method = getattr(servicer, UNARY_OF[which])
    return lambda: Response(**{which: method(inner, context)})
