"""stderr-only progress and logs; third-party stdout is redirected at the descriptor level."""

from __future__ import annotations

import io
import subprocess
import sys

from optsolve.core.progress import NORMAL, QUIET, VERBOSE, Progress


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_only_on_a_tty():
    plain, tty = io.StringIO(), FakeTTY()
    Progress("ot", NORMAL, stream=plain, every_s=0).update(3, err=1e-3)
    p = Progress("ot", NORMAL, stream=tty, every_s=0)
    p.update(3, err=1e-3)
    assert plain.getvalue() == ""
    assert "iter 3" in tty.getvalue() and "err=1.000e-03" in tty.getvalue()
    p.close()
    assert tty.getvalue().endswith("\r\x1b[K")
    quiet = FakeTTY()
    Progress("ot", QUIET, stream=quiet, every_s=0).update(1)
    assert quiet.getvalue() == ""


def test_verbose_progress_logs(caplog):
    import logging

    p = Progress("ot", VERBOSE, stream=io.StringIO())
    with caplog.at_level(logging.DEBUG, logger="optsolve"):
        logging.getLogger("optsolve").propagate = True
        p.update(7, gap=0.5)
    assert any("iter 7" in rec.message for rec in caplog.records)


def test_stdout_to_stderr_catches_c_level_writes():
    code = ("import os, sys\nfrom optsolve.core.progress import stdout_to_stderr\n"
            "with stdout_to_stderr():\n    os.write(1, b'from-c\\n')\n    print('from-python')\n"
            "print('after')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout == "after\n"
    assert "from-c" in proc.stderr and "from-python" in proc.stderr
