"""Where DistributedQP's nodes live: the reductions of its consensus step in one process (:class:`OneProcess`)
or across MPI ranks (:class:`MPIRanks`, mpi4py), and the nodes' spread over the ranks (:func:`assign_nodes`)."""

from __future__ import annotations

import numpy as np


class OneProcess:
    """The reductions of the consensus step when every node lives in this process (identity)."""

    size, rank = 1, 0

    @staticmethod
    def sum(v: np.ndarray) -> np.ndarray:
        return v

    @staticmethod
    def max(x: float) -> float:
        return x

    @staticmethod
    def max_array(v: np.ndarray) -> np.ndarray:
        return v

    @staticmethod
    def start_sum(v: np.ndarray):
        return v

    @staticmethod
    def finish_sum(pending) -> np.ndarray:
        return pending


class MPIRanks:
    """The reductions across MPI ranks (mpi4py): every rank holds some nodes, and w, the global
    vector, is the same on all ranks after each :meth:`sum`."""

    def __init__(self, comm):
        from mpi4py import MPI

        self.comm, self._MPI = comm, MPI
        self.size, self.rank = comm.Get_size(), comm.Get_rank()
        self._share_cores(comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size())

    @staticmethod
    def _share_cores(local_ranks: int):
        """The ranks on one machine share its cores: each rank's BLAS threads are capped at cores / ranks.

        Notes
        -----
        On 2 cores, 2 ranks with the BLAS's default 2 threads each took 27 ms a DeepDistributedQP
        iteration on a chain of 50,000 variables (1 rank: 7.2 ms); capped at one thread each, 4.2 ms.
        """
        import os

        from threadpoolctl import threadpool_info, threadpool_limits

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        now = [int(lib["num_threads"]) for lib in threadpool_info() if lib.get("user_api") == "blas"]
        cap = max(1, cores // max(1, local_ranks))
        if now and max(now) > cap:
            threadpool_limits(limits=cap, user_api="blas")

    def sum(self, v: np.ndarray) -> np.ndarray:
        out = np.empty_like(v)
        self.comm.Allreduce(np.ascontiguousarray(v), out, op=self._MPI.SUM)
        return out

    def max(self, x: float) -> float:
        return float(self.comm.allreduce(float(x), op=self._MPI.MAX))

    def max_array(self, v: np.ndarray) -> np.ndarray:
        out = np.empty_like(v)
        self.comm.Allreduce(np.ascontiguousarray(v), out, op=self._MPI.MAX)
        return out

    def start_sum(self, v: np.ndarray):
        """A non-blocking :meth:`sum` (Iallreduce); :meth:`finish_sum` waits for it."""
        v = np.ascontiguousarray(v)
        out = np.empty_like(v)
        return self.comm.Iallreduce(v, out, op=self._MPI.SUM), v, out

    @staticmethod
    def finish_sum(pending) -> np.ndarray:
        request, _, out = pending
        request.Wait()
        return out


def assign_nodes(costs, ranks: int) -> list[list[int]]:
    """Nodes per rank, balancing their costs (:func:`node_costs`): the costliest node first to the
    least loaded rank; each rank's nodes in their original order."""
    load = [0.0] * ranks
    owned: list[list[int]] = [[] for _ in range(ranks)]
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        r = min(range(ranks), key=lambda r: (load[r], r))
        owned[r].append(i)
        load[r] += costs[i]
    return [sorted(o) for o in owned]
