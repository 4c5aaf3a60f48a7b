"""On a terminal a solve prints a few readable lines; a pipe, a file and ``-o -`` get the document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from conftest import ROOT

from optsolve.core.view import brief, terminal_view


def test_long_lists_are_counted_and_numbers_shortened():
    assert brief([1.0, 2.0]) == "[1, 2]"
    assert brief(list(range(5))) == "[5 values]"
    assert brief([{"a": 1}]) == "[1 entries]"
    assert brief({"a": {"b": {"c": 1}}}) == "{a {b {...}}}"
    assert brief(0.123456789) == "0.123457" and brief(0.123456789, digits=3) == "0.123"
    assert brief(None) == "null" and brief(True) == "true"


def test_the_view_names_what_failed_and_how_to_get_the_document():
    doc = {"command": "qp", "method": "admm", "status": "optimal_inaccurate", "message": "Certificate checks failed.",
           "problem": {"path": "p.npz", "size": {"n": 3, "m": 1}}, "objective": -1.5,
           "solution": {"x": [0.0] * 3000, "y": [1.0]},
           "certificate": {"holds": False, "checks": [{"name": "primal_residual", "value": 0.5, "limit": 1e-3,
                                                       "holds": False},
                                                      {"name": "dual_residual", "value": 0.0, "limit": 1e-3,
                                                       "holds": True}]},
           "stats": {"iterations": 40, "time_s": {"solve": 0.0123456, "total": 0.5}, "history": {"k": [1]}}}
    lines = terminal_view(doc).splitlines()
    assert lines[0] == "optsolve qp: optimal_inaccurate (admm), objective -1.5"
    assert "message: Certificate checks failed." in lines
    assert "problem: p.npz (n 3, m 1)" in lines
    assert "certificate: fails: primal_residual 0.5 (limit 0.001)" in lines
    assert "  x: [3000 values]" in lines and "  y: [1]" in lines
    assert "stats: iterations 40" in lines and "time (s): solve 0.0123, total 0.5" in lines
    assert "-o -" in lines[-1] and len(lines) < 15


def test_a_qualifier_follows_the_status_in_the_view_and_the_summary_line():
    """A document's qualifier (the answer is to another problem than the file's) is printed after its status
    wherever a person reads it; a document without one is printed as before."""
    from optsolve.core.result import Result
    from optsolve.core.runner import summary_line

    said = "regularised at 0.1; gap <= 0.02, 5% of the cost"
    doc = {"command": "qp", "method": "admm", "status": "optimal", "qualifier": said, "objective": 0.4}
    assert terminal_view(doc).splitlines()[0] == f"optsolve qp: optimal (admm: {said}), objective 0.4"
    assert terminal_view(dict(doc, qualifier=None)).splitlines()[0] == "optsolve qp: optimal (admm), objective 0.4"
    result = Result("qp", "admm", "optimal", objective=0.4, qualifier=said)
    assert summary_line("qp", result) == f"optsolve qp: optimal ({said}), objective 0.4"
    assert result.to_dict()["qualifier"] == said
    assert summary_line("qp", Result("qp", "admm", "optimal", objective=0.4)) == "optsolve qp: optimal, objective 0.4"
    assert Result("qp", "admm", "optimal").to_dict()["qualifier"] is None


def _on_a_terminal(args, cwd):
    """stdout of ``optsolve ARGS`` run with a pseudo-terminal as its stdout, and its exit code."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "optsolve", *args], stdout=slave, stderr=subprocess.PIPE,
                            cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(slave)
    chunks = []

    def read():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed with the process
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    proc.stderr.read()
    code = proc.wait(timeout=120)
    reader.join(10)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n"), code


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
def test_a_terminal_gets_the_view_and_dash_o_dash_the_document(tmp_path):
    example = str(ROOT / "data" / "ot" / "example.npz")
    out, code = _on_a_terminal(["ot", example], tmp_path)
    assert code == 0
    assert out.splitlines()[0].startswith("optsolve ot: optimal (exact), objective 0.0470430")
    assert "certificate: holds" in out and "  f: [1024 values]" in out and len(out.splitlines()) < 15
    out, code = _on_a_terminal(["ot", example, "-o", "-"], tmp_path)
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "optimal" and len(doc["solution"]["f"]) == 1024
