"""``optsolve batch --scheduler ADDRESS`` / ``--local-cluster N``: a batch on a Dask cluster.

The files are cut into tasks of a few files each (``--chunk``; one task per file costs the
scheduler a round trip per file, which dominates for small problems), submitted to
``dask.distributed`` and collected as they complete. A task whose worker dies is retried by
Dask's scheduler on another worker (``distributed.scheduler.allowed-failures``); when it still
fails, its files are submitted again one per task; a file whose own task fails is run once more
alone at the end, so that the file at fault is reported (status ``internal_error``) and the
files that were only beside it are solved. Nothing a file does stops the batch.

The files are read by the workers at their absolute paths: on a multi-machine cluster they must
be on a file system the workers share. The solutions come back to this process, which writes
``--out-dir`` and stdout.
"""

from __future__ import annotations

import os

from optsolve.core.errors import UsageError

MAX_CHUNK = 64
TASKS_PER_WORKER = 4


def start_method() -> str:
    """How a LocalCluster starts its workers: forked from this process where that is safe enough
    (Linux, before Python 3.12 warns about forking threaded processes), so that they inherit the
    solver's modules imported by :func:`preload`; spawned otherwise."""
    import multiprocessing
    import sys

    if sys.platform.startswith("linux") and sys.version_info < (3, 12) and \
            "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def preload(kind: str) -> None:
    """Import the solver package and the heavy modules it names in ``PRELOAD`` (POT, scikit-learn...)."""
    import importlib

    pkg = importlib.import_module(f"optsolve.{kind}")
    for name in getattr(pkg, "PRELOAD", ()):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


class DaskEngine:
    """A Dask client on ``scheduler`` (an address) or on a new LocalCluster of ``local_workers``."""

    def __init__(self, scheduler: str | None = None, local_workers: int | None = None, chunk: int | None = None,
                 kind: str | None = None):
        try:
            import dask
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            raise UsageError(f"a Dask batch needs dask.distributed ({exc}); install it with "
                             "pip install 'optsolve[dist]'.") from None
        self.chunk = chunk
        self.cluster = None
        self.where = scheduler
        try:
            if scheduler:
                self.client = Client(scheduler, timeout="20s")
            else:
                if kind is not None and start_method() == "fork":
                    preload(kind)
                with dask.config.set({"distributed.worker.daemon": False, "distributed.admin.tick.limit": "1h",
                                      "distributed.worker.multiprocessing-method": start_method()}):
                    self.cluster = LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True,
                                                dashboard_address=None, silence_logs=50)
                self.client = Client(self.cluster)
                self.where = f"a local Dask cluster of {local_workers} workers"
        except (OSError, TimeoutError) as exc:
            self.close()
            what = f"connect to the Dask scheduler {scheduler!r}" if scheduler else "start a local Dask cluster"
            raise UsageError(f"cannot {what} ({exc}).") from None
        except KeyboardInterrupt:  # Ctrl-C or a signal while starting: leave nothing running
            self.close()
            raise

    def describe(self) -> str:
        return self.where if self.cluster is not None else f"the Dask cluster at {self.where}"

    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def chunks(self, items: list) -> list:
        size = self.chunk or max(1, min(MAX_CHUNK, -(-len(items) // (TASKS_PER_WORKER * self.workers()))))
        return [items[i:i + size] for i in range(0, len(items), size)]

    def run(self, kind: str, items: list, params: dict, done) -> None:
        """Solve ``items`` ((index, path) pairs); ``done(solved)`` for each, as tasks complete."""
        from dask.distributed import as_completed

        from optsolve.core.batch import died, solve_chunk

        if not items:
            return
        shown = dict(items)  # the paths as the user gave them
        absolute = [(i, os.path.abspath(p)) for i, p in items]

        def submit(chunk):
            return self.client.submit(solve_chunk, kind, chunk, params, pure=False)

        def deliver(answers):
            for solved in answers:
                solved.path = shown[solved.index]
                if (solved.doc.get("problem") or {}).get("path"):
                    solved.doc["problem"]["path"] = shown[solved.index]
                done(solved)

        futures = {submit(c): c for c in self.chunks(absolute)}
        suspects = []  # files whose own task failed: a worker died while it ran, or while it waited there
        queue = as_completed(list(futures))
        for fut in queue:
            chunk = futures.pop(fut)
            try:
                answers = fut.result()
            except Exception:  # the task failed outside the solver: its worker died
                if len(chunk) > 1:  # one task per file, to find the file at fault
                    for one in chunk:
                        new = submit([one])
                        futures[new] = [one]
                        queue.add(new)
                else:
                    suspects.append(chunk[0])
                continue
            finally:
                fut.release()
            deliver(answers)
        for one in suspects:  # alone on the cluster now: a file that failed beside the culprit passes
            fut = submit([one])
            try:
                answers = fut.result()
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                answers = [died(kind, one[0], shown[one[0]], params, reason)]
            finally:
                fut.release()
            deliver(answers)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self.cluster is not None:
            self.cluster.close()
