# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""One torch.distributed job measured on every node, each node's devices once.

    import torch.distributed as dist
    import joule.distributed

    dist.init_process_group("nccl")              # or "gloo"; torchrun, mpirun or srun set the rest
    monitor = joule.distributed.DistributedMonitor(timeout_s=60)   # on every rank
    for epoch in range(epochs):
        with monitor.window(f"epoch-{epoch}") as w:
            train_one_epoch()
        if w.report is not None:                 # rank 0 (every rank with broadcast=True)
            print(w.report.text)                 # per node, per device, total; w.report.json: a dict

Every rank builds a DistributedMonitor after init_process_group (the
construction is collective). The ranks are grouped by node (the host name,
or $JOULE_NODE_NAME; $JOULE_RANKS_PER_NODE=K makes nodes of K ranks, for
tests on one machine); the lowest rank of each node is its leader and the
only one that opens devices, with the options of joule.Monitor. So a node's
GPUs, CPU packages and DRAM are counted once however many ranks share it.

Windows are collective: every rank calls begin_window and end_window (or
uses window()) in the same order. Each is an edge that every rank reaches;
the edge is released when the last rank arrives, and the leaders take their
local edge at that instant, so a window covers the same span of the job on
every node. At the end each leader settles its measurement and sends it to
rank 0, which returns a ClusterReport (the same JSON and text as
`joule measure --mpi`); other ranks get None.

Channels. joule's own messages never go through the job's process group:
at construction the ranks exchange their node names on a separate Gloo
group (dist.new_group(backend="gloo")), whatever the job's backend (NCCL's
object collectives need CUDA tensors and NCCL has no usable timeout), and
the window edges and reports go through the job's rendezvous store (a
TCPStore under torchrun and env://), on a client connection of joule's own,
where every wait has a deadline and a missed deadline leaves the channel
usable. (A Gloo receive that times out closes its connection for good, and
so does a store client's wait: joule opens a fresh client after one.)

Timeouts (timeout_s, default 60 s). No rank waits longer than timeout_s for
an edge: timeout_s after the first rank that is still waiting arrived, the
edge is released without the ranks that have not arrived, and those ranks
are *lost*: they are named in the reports, no later edge waits for them,
and a lost leader's node is reported missing from then on (so a dead node
costs one timeout, not one per window). A rank that arrives late finds
itself lost, warns, and takes no further part (its windows return None at
once). Rank 0 waits at most timeout_s more for the leaders' reports after
the end edge; a leader that does not report by then is a missing node
("sent no report within N s"). A leader whose devices fail or whose
measurement raises is a missing node with the error. The other nodes' data
is always kept. Rank 0 itself is never lost: if it is late, the others go
on without it and it still assembles the window from their reports.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import time
import uuid
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import torch.distributed as dist

from . import _joule

__all__ = ["ClusterReport", "DistributedMonitor", "DistributedWindow"]

# compare_set's expected value that no stored value has: the store answers
# with it when the key is absent, so compare_set reads without blocking.
_ABSENT = "\x00joule-absent"


@dataclasses.dataclass
class ClusterReport:
    """The job's measurement of one window, as rank 0 assembled it.

    json: the dict of `joule measure --mpi --json` ("window", "world_size",
    "nodes" (each: "node", "ranks", "elapsed_s", "devices" (each "kind",
    "name", "energy_j"), "warnings", "total_energy_j"), "missing_nodes",
    "elapsed_s", "edge_skew_s", "gpu_energy_j", "cpu_package_energy_j",
    "dram_energy_j", "total_energy_j") plus "lost_ranks" (each "rank",
    "node", "reason"). text: the human report. str(report) is the text.
    """

    window: str
    json: Dict[str, Any]
    text: str

    @property
    def nodes(self) -> List[Dict[str, Any]]:
        return self.json["nodes"]

    @property
    def missing_nodes(self) -> List[str]:
        """Nodes without a report, each "NAME (rank R): why"."""
        return self.json["missing_nodes"]

    @property
    def partial(self) -> bool:
        """True when some node's report is missing: the totals leave it out."""
        return bool(self.json["missing_nodes"])

    @property
    def total_energy_j(self) -> float:
        return self.json["total_energy_j"]

    @property
    def gpu_energy_j(self) -> float:
        return self.json["gpu_energy_j"]

    def __str__(self) -> str:
        return self.text


class DistributedWindow:
    """`with monitor.window("epoch") as w:` ... `w.report` (rank 0; None elsewhere).

    The window ends even when the body raises (so the other ranks are not
    kept waiting); the body's exception is the one that propagates.
    """

    def __init__(self, monitor: "DistributedMonitor", name: str) -> None:
        self.monitor = monitor
        self.name = name
        self.report: Optional[ClusterReport] = None

    def __enter__(self) -> "DistributedWindow":
        self.monitor.begin_window(self.name)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        try:
            self.report = self.monitor.end_window(self.name)
        except Exception:
            if exc_type is None:
                raise
        return False


class _ChannelError(RuntimeError):
    """The job's store could not be reached (its server is gone)."""


class _Channel:
    """Keys in the job's store under a prefix of this monitor's own.

    Over a TCPStore, joule talks to the store's server on connections of its
    own (never the job's client) and replaces one whose wait timed out: such
    a client is out of step with the server for good. Every failure to reach
    the store raises _ChannelError.
    """

    def __init__(self, store: "dist.Store", prefix: str, timeout_s: float) -> None:
        self._base = store
        self._prefix = prefix
        self._timeout = datetime.timedelta(seconds=timeout_s)
        tcp = store
        while isinstance(tcp, dist.PrefixStore):
            tcp = tcp.underlying_store
        self._address = (tcp.host, tcp.port) if isinstance(tcp, dist.TCPStore) else None
        self._store = self._run(self._connect)

    def _connect(self) -> "dist.Store":
        if self._address is None:  # FileStore, HashStore: waits without a connection to spoil
            return dist.PrefixStore(self._prefix, self._base)
        host, port = self._address
        client = dist.TCPStore(host, port, None, False, self._timeout, False)
        return dist.PrefixStore(self._prefix, client)

    @staticmethod
    def _run(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except RuntimeError as e:
            raise _ChannelError(f"the job's store cannot be reached: {e}") from e

    def set(self, key: str, value: str) -> None:
        self._run(lambda: self._store.set(key, value))

    def get(self, key: str) -> bytes:
        return self._run(lambda: self._store.get(key))

    def add(self, key: str, amount: int) -> int:
        return self._run(lambda: self._store.add(key, amount))

    def delete(self, key: str) -> None:
        self._run(lambda: self._store.delete_key(key))

    def probe(self, key: str) -> Optional[bytes]:
        """The key's value, or None when it is not there (does not wait)."""
        value = self._run(lambda: self._store.compare_set(key, _ABSENT, _ABSENT))
        return None if value == _ABSENT.encode() else value

    def release(self, key: str, value: str) -> None:
        """Sets key to value unless it is set (the first release decides), and
        wakes the ranks waiting for key + "!" (compare_set wakes no waiter)."""
        self._run(lambda: self._store.compare_set(key, "", value))
        self._run(lambda: self._store.add(key + "!", 1))

    def wait(self, keys: Sequence[str], timeout_s: float) -> bool:
        """True when every key is there within timeout_s; False after the deadline."""
        if not keys:
            return True
        if timeout_s > 0.0:
            try:
                self._store.wait(list(keys), datetime.timedelta(seconds=timeout_s))
                return True
            except RuntimeError:  # the deadline (or a lost connection: then connecting fails)
                if self._address is not None:
                    self._store = self._run(self._connect)
        return all(self.probe(k) is not None for k in keys)


@dataclasses.dataclass
class _Edge:
    wall_s: float  # this rank's wall clock when the edge released it
    late: bool  # this rank arrived after the edge had been released without it


class DistributedMonitor:
    """Measures a torch.distributed job on every node, each node once.

    Build one on every rank after dist.init_process_group (collective).
    backend, sim, gpus, interval_ms: as joule.Monitor, for the leaders'
    monitors (gpus: the node's GPU indices to measure; default: those its
    ranks may use, the union of their CUDA_VISIBLE_DEVICES (NVIDIA) and
    HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES (AMD), or all of the node's
    where a rank has none set, as `joule measure --mpi`).
    synchronize: called on every rank before it reaches an edge (e.g.
    joule.torch.synchronizer(), so each rank's queued GPU work counts in the
    window that launched it). timeout_s: the longest any rank waits at an
    edge, and rank 0 for the reports after it (see the module's docstring).
    settle_timeout_s: how long a leader waits for the data that covers the
    window's end. broadcast: every rank gets the report (a rank waits at
    most timeout_s + settle_timeout_s + 1 s for it after the edge).
    group: a Gloo group of all ranks for the start-up exchange (default: one
    made here with timeout_s).

    Attributes: rank, world_size, node (this rank's node), nodes (node name
    -> its ranks, in the order of their lowest rank), leader (this rank
    measures its node), monitor (the leader's joule.Monitor, else None),
    lost_ranks (rank -> why it is no longer waited for).
    """

    def __init__(
        self,
        backend: str = "auto",
        sim: str = "",
        gpus: Sequence[int] = (),
        interval_ms: float = 100.0,
        *,
        synchronize: Optional[Callable[[], None]] = None,
        timeout_s: float = 60.0,
        settle_timeout_s: float = 1.0,
        broadcast: bool = False,
        group: Optional["dist.ProcessGroup"] = None,
    ) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise _joule.UsageError("joule.distributed: call torch.distributed.init_process_group first")
        if timeout_s <= 0 or settle_timeout_s < 0:
            raise _joule.UsageError("joule.distributed: timeout_s must be > 0 and settle_timeout_s >= 0")
        self.rank: int = dist.get_rank()
        self.world_size: int = dist.get_world_size()
        self.timeout_s = float(timeout_s)
        self.settle_timeout_s = float(settle_timeout_s)
        self.broadcast = broadcast
        self._synchronize = synchronize
        if group is None:
            group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
        self.group = group
        self.node: str = _joule.cluster_node_name(self.rank)

        # One exchange: every rank's node and visible GPUs (CUDA_VISIBLE_DEVICES,
        # HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES), and rank 0's name for
        # this monitor's keys.
        mine = (self.node, _joule.cluster_visible_gpus(), uuid.uuid4().hex if self.rank == 0 else None)
        everyone: List[Any] = [None] * self.world_size
        dist.all_gather_object(everyone, mine, group=group)
        self._node_of: List[str] = [name for name, _, _ in everyone]
        self.nodes: Dict[str, List[int]] = {}
        for r, name in enumerate(self._node_of):
            self.nodes.setdefault(name, []).append(r)
        self._leaders: List[int] = [ranks[0] for ranks in self.nodes.values()]
        self.leader: bool = self.nodes[self.node][0] == self.rank
        self._channel = _Channel(dist.distributed_c10d._get_default_store(), f"joule/{everyone[0][2]}/", timeout_s)

        self.lost_ranks: Dict[int, str] = {}
        self._edges = 0
        self._window_errors: Dict[str, str] = {}  # a leader's windows whose begin failed
        self._late_begins: Dict[str, str] = {}  # rank 0's windows it began late
        self.monitor: Optional[_joule.Monitor] = None
        self._monitor_error: Optional[str] = None
        if self.leader:
            # The GPUs this node's ranks may use (as joule measure --mpi); gpus= wins.
            job_gpus = _joule.cluster_job_gpus([everyone[r][1] for r in self.nodes[self.node]])
            try:
                if job_gpus is not None and not gpus:
                    self.monitor = _joule.cluster_monitor(backend, sim, job_gpus, interval_ms)
                else:
                    self.monitor = _joule.Monitor(backend, sim, list(gpus), interval_ms)
            except Exception as e:  # the node is reported missing, with why (every window)
                self._monitor_error = f"its devices could not be opened: {e}"
                warnings.warn(f"joule.distributed: node {self.node}: {self._monitor_error}", RuntimeWarning)

    # -- windows ---------------------------------------------------------

    def window(self, name: str) -> DistributedWindow:
        """A collective window as a context manager; its report is w.report."""
        return DistributedWindow(self, name)

    def begin_window(self, name: str) -> None:
        """Collective: every rank calls it; the leaders begin at the edge."""
        try:
            self._begin_window(name)
        except _ChannelError as e:
            self._store_failed(name, e)

    def end_window(self, name: str) -> Optional[ClusterReport]:
        """Collective: every rank calls it. Rank 0 gets the ClusterReport (all
        ranks with broadcast=True); the others None. Returns on every rank
        within timeout_s of reaching the edge, plus at most timeout_s on rank 0
        for the leaders' reports (see the module's docstring). Where the job's
        store cannot be reached, rank 0 raises joule.Error; another rank warns,
        takes no further part and returns None."""
        try:
            return self._end_window(name)
        except _ChannelError as e:
            self._store_failed(name, e)
            return None

    def _store_failed(self, name: str, error: _ChannelError) -> None:
        if self.rank == 0:
            raise _joule.Error(f"joule.distributed: window '{name}': {error}") from error
        self.lost_ranks[self.rank] = f"{error} (at window '{name}')"
        warnings.warn(f"joule.distributed: rank {self.rank}, window '{name}': {error}; this rank takes no "
                      "further part in the measurement", RuntimeWarning)

    def _begin_window(self, name: str) -> None:
        self._window_errors.pop(name, None)
        self._late_begins.pop(name, None)

        misuse: List[Exception] = []

        def begin() -> None:  # at the edge: the leader's window begins here
            if self.monitor is None:
                return
            try:
                self.monitor.begin_window(name)
            except _joule.UsageError as e:  # a window of that name is open: the caller's mistake
                misuse.append(e)
            except Exception as e:
                self._window_errors[name] = f"its measurement could not begin: {e}"

        edge = self._edge("begin", name, begin if self.leader else None)
        if misuse:
            raise misuse[0]
        if edge is not None and edge.late and self.leader:
            self._late_begins[name] = (
                f"this node began window '{name}' late: the begin edge had been released "
                f"{self.timeout_s:g} s after the first rank reached it")

    def _end_window(self, name: str) -> Optional[ClusterReport]:
        e = self._edges
        measured: Dict[str, Any] = {}

        def end() -> None:  # at the edge: the leader's window ends here
            if self.monitor is None or name in self._window_errors:
                return
            try:
                measured["m"] = self.monitor.end_window(name)
            except Exception as exc:
                measured["error"] = exc

        edge = self._edge("end", name, end if self.leader else None)
        if edge is None:
            return None

        message = ""
        if self.leader:
            message = self._leader_message(name, edge, measured)
            if self.rank != 0:
                self._channel.set(f"e{e}/m/{self.rank}", message)

        if self.rank == 0:
            report = self._assemble(name, e, message)
            if self.broadcast:
                self._channel.set(f"e{e}/report", json.dumps({"json": report.json, "text": report.text}))
            return report
        if self.broadcast:
            key = f"e{e}/report"
            if self._channel.wait([key], self.timeout_s + self.settle_timeout_s + 1.0):
                shared = json.loads(self._channel.get(key))
                return ClusterReport(name, shared["json"], shared["text"])
            warnings.warn(f"joule.distributed: no report of window '{name}' from rank 0 within "
                          f"{self.timeout_s + self.settle_timeout_s + 1.0:g} s", RuntimeWarning)
        return None

    # -- the parts -------------------------------------------------------

    def _edge(self, which: str, name: str, at_release: Optional[Callable[[], None]]) -> Optional[_Edge]:
        """Arrives at the next edge and returns once it is released (the last
        rank arrived, or timeout_s passed); at_release runs at that instant.
        None: this rank is lost (now or before) and takes no part."""
        e = self._edges
        self._edges += 1
        if self.rank in self.lost_ranks:
            return None
        if self._synchronize is not None:
            self._synchronize()
        ch = self._channel
        # Keys of two edges ago: everyone has read them by now. The releases
        # ("go") stay, so that a rank late by many edges still finds the one
        # it missed (two small keys per edge).
        if e >= 2:
            with contextlib.suppress(Exception):
                ch.delete(f"e{e - 2}/a/{self.rank}")
                if self.rank == 0:
                    ch.delete(f"e{e - 2}/n")
                    ch.delete(f"e{e - 2}/report")
        go = f"e{e}/go"
        deadline = time.monotonic() + self.timeout_s
        ch.set(f"e{e}/a/{self.rank}", "1")
        arrived = ch.add(f"e{e}/n", 1)
        if arrived >= self.world_size - len(self.lost_ranks):
            ch.release(go, json.dumps({"missing": [], "by": self.rank}))
        elif not ch.wait([go + "!"], deadline - time.monotonic()):
            # Nobody released it in time: name the ranks that have not arrived
            # and release the others (the first to get here decides).
            missing = [r for r in range(self.world_size)
                       if r not in self.lost_ranks and ch.probe(f"e{e}/a/{r}") is None]
            ch.release(go, json.dumps({"missing": missing, "by": self.rank}))
        wall_s = time.time()
        if at_release is not None:
            at_release()
        released = json.loads(ch.get(go))
        late = False
        for r in released["missing"]:
            if r == self.rank:
                late = True
            if r != 0 and r not in self.lost_ranks:  # rank 0 assembles: never lost
                self.lost_ranks[r] = (f"did not reach the {which} of window '{name}' within {self.timeout_s:g} s; "
                                      "not waited for since")
        if late and self.rank != 0:
            warnings.warn(f"joule.distributed: rank {self.rank} reached the {which} of window '{name}' after "
                          f"the other ranks had gone on without it ({self.timeout_s:g} s); this rank takes no "
                          "further part in the measurement", RuntimeWarning)
            return None
        return _Edge(wall_s, late)

    def _leader_message(self, name: str, edge: _Edge, measured: Dict[str, Any]) -> str:
        """This node's report of the window (JSON), or why there is none."""
        error = self._monitor_error or self._window_errors.pop(name, None)
        if error is None and "error" in measured:
            error = f"its measurement failed: {measured['error']}"
        if error is None:
            try:
                m = self.monitor.settle(measured["m"], self.settle_timeout_s)
                notes = []
                if name in self._late_begins:
                    notes.append(self._late_begins.pop(name))
                if edge.late:
                    notes.append(f"this node ended window '{name}' late: the end edge had been released "
                                 f"{self.timeout_s:g} s after the first rank reached it")
                return _joule.cluster_leader_message(self.monitor, m, self.node, self.nodes[self.node],
                                                     edge.wall_s, notes)
            except Exception as e:
                error = f"its measurement failed: {e}"
        warnings.warn(f"joule.distributed: node {self.node}, window '{name}': {error}", RuntimeWarning)
        return _joule.cluster_leader_error(self.node, error, edge.wall_s)

    def _assemble(self, name: str, e: int, own_message: str) -> ClusterReport:
        """Rank 0: the leaders' reports of edge e, waiting at most timeout_s."""
        ch = self._channel
        keys = {r: f"e{e}/m/{r}" for r in self._leaders if r != 0 and r not in self.lost_ranks}
        received: Dict[int, str] = {}
        if ch.wait(list(keys.values()), self.timeout_s):
            received = {r: ch.get(k).decode() for r, k in keys.items()}
        else:
            for r, k in keys.items():
                value = ch.probe(k)
                if value is not None:
                    received[r] = value.decode()
        for r in received:
            with contextlib.suppress(Exception):
                ch.delete(keys[r])
        outcomes = []
        for r in self._leaders:
            node = self._node_of[r]
            if r == 0:
                outcomes.append((r, node, own_message, ""))
            elif r in received:
                outcomes.append((r, node, received[r], ""))
            elif r in self.lost_ranks:
                outcomes.append((r, node, None, self.lost_ranks[r]))
            else:
                outcomes.append((r, node, None, f"reached the end of window '{name}' but sent no report "
                                                f"within {self.timeout_s:g} s"))
        data, text = _joule.cluster_report(name, self.world_size, outcomes)
        data["lost_ranks"] = [{"rank": r, "node": self._node_of[r], "reason": why}
                              for r, why in sorted(self.lost_ranks.items())]
        for r, why in sorted(self.lost_ranks.items()):
            if r not in self._leaders:  # a leader's is already among the missing nodes
                text += f"  LOST rank {r} of node {self._node_of[r]}: {why}\n"
        return ClusterReport(name, data, text)

    def __repr__(self) -> str:
        role = "leader" if self.leader else "member"
        return (f"<DistributedMonitor rank {self.rank}/{self.world_size}, node {self.node} ({role}), "
                f"{len(self.nodes)} nodes>")
