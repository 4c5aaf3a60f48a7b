"""Output files: devices and FIFOs are written in place, outputs never overwrite inputs, and every
output is checked before the solve (exit 2, one line, nothing written)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest


def char_device(tmp_path: Path) -> Path:
    """A character device to write to: a private node of the null device where this process may make one
    (root), else /dev/null itself, which no one else can replace."""
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with open(node, "wb") as f:  # a filesystem mounted nodev refuses to open it
            f.write(b"")
        return node
    except OSError:
        node.unlink(missing_ok=True)
        return Path("/dev/null")


class FifoReader:
    """A named pipe at ``path`` read by a thread; :meth:`close` returns what was written to it. A writer
    end held here keeps the pipe open, so the reader sees end-of-file only after :meth:`close`."""

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.hold = os.open(path, os.O_WRONLY)
        os.set_blocking(self.fd, True)
        self.data = bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while chunk := os.read(self.fd, 1 << 16):
            self.data += chunk

    def close(self) -> bytes:
        os.close(self.hold)
        self.thread.join(30)
        os.close(self.fd)
        return bytes(self.data)


def is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def is_char_device(path: Path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


# --------------------------------------------------------------------------- devices and FIFOs

def test_device_given_to_output_and_arrays_stays_a_device(cli, small_ot, tmp_path):
    path, _ = small_ot
    device = char_device(tmp_path)
    r = cli("ot", path, "-o", device, "--arrays", device, "-q")
    assert r.exit_code == 0, r.stderr
    assert is_char_device(device)
    assert not list(device.parent.glob(".optsolve-*")), "a temporary file was left beside the device"


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_output_naming_stdout_appends_where_the_shell_sent_it(small_ot, tmp_path, name):
    """``-o /dev/stdout >> log``: the document goes through the descriptor the shell opened, after what the
    log held (a rename or a truncating open of the file behind it replaced the log)."""
    import sys

    if not os.path.exists(name):
        pytest.skip(f"{name} does not exist here")
    path, _ = small_ot
    log = tmp_path / "log.txt"
    log.write_text("previous line\n")
    with open(log, "ab") as out:
        r = subprocess.run([sys.executable, "-m", "optsolve", "ot", str(path), "-o", name, "-q"], stdout=out,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    first, rest = log.read_text().split("\n", 1)
    assert first == "previous line"
    assert json.loads(rest)["status"] == "optimal"
    assert not list(tmp_path.glob(".optsolve-*"))


def test_verify_output_to_a_device_stays_a_device(cli, small_ot, tmp_path):
    path, _ = small_ot
    device = char_device(tmp_path)
    sol = tmp_path / "s.json"
    assert cli("ot", path, "-o", sol, "-q").exit_code == 0
    r = cli("verify", path, sol, "-q", "-o", device)
    assert r.exit_code == 0, r.stderr
    assert is_char_device(device)


def test_fifo_given_to_output_and_arrays_receives_the_whole_documents(cli, small_ot, tmp_path):
    path, arrays = small_ot
    doc_pipe, arrays_pipe = FifoReader(tmp_path / "doc.fifo"), FifoReader(tmp_path / "plan.fifo")
    try:
        r = cli("ot", path, "-o", doc_pipe.path, "--arrays", arrays_pipe.path, "-q")
    finally:
        doc_text, plan_bytes = doc_pipe.close(), arrays_pipe.close()
    assert r.exit_code == 0, r.stderr
    assert is_fifo(doc_pipe.path) and is_fifo(arrays_pipe.path)
    doc = json.loads(doc_text)
    assert doc["status"] == "optimal"
    plan = np.load(io.BytesIO(plan_bytes), allow_pickle=False)["plan"]
    assert plan.shape == (arrays["a"].size, arrays["b"].size)
    np.testing.assert_allclose(plan.sum(axis=1), arrays["a"], atol=1e-8)


def test_verify_output_to_a_fifo(cli, small_ot, tmp_path):
    path, _ = small_ot
    sol = tmp_path / "s.json"
    assert cli("ot", path, "-o", sol, "-q").exit_code == 0
    pipe = FifoReader(tmp_path / "report.fifo")
    try:
        r = cli("verify", path, sol, "-q", "-o", pipe.path)
    finally:
        text = pipe.close()
    assert r.exit_code == 0, r.stderr
    assert is_fifo(pipe.path)
    assert json.loads(text)["holds"] is True


def test_symbolic_link_output_is_written_through(cli, small_ot, tmp_path):
    path, _ = small_ot
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert cli("ot", path, "-o", link, "-q").exit_code == 0
    assert link.is_symlink()
    assert json.loads(target.read_text())["status"] == "optimal"


# --------------------------------------------------------------------------- an output that is an input

def _qp_problem(tmp_path: Path, name: str = "same.json") -> Path:
    p = tmp_path / name
    p.write_text('{"P": [[2.0]], "q": [-1.0]}')
    return p


def _usage_error(r, *needles):
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr


def test_output_naming_the_problem_is_refused(cli, tmp_path):
    problem = _qp_problem(tmp_path)
    before = problem.read_bytes()
    _usage_error(cli("qp", problem, "-o", problem), "problem file", "overwrite")
    assert problem.read_bytes() == before


def test_output_naming_the_problem_by_another_path_is_refused(cli, tmp_path, monkeypatch):
    problem = _qp_problem(tmp_path)
    before = problem.read_bytes()
    hard = tmp_path / "hard.json"
    os.link(problem, hard)
    _usage_error(cli("qp", problem, "-o", hard), "problem file")
    monkeypatch.chdir(tmp_path)
    _usage_error(cli("qp", "same.json", "-o", "./sub/../same.json"), "problem file")
    assert problem.read_bytes() == before


def test_arrays_naming_the_problem_is_refused(cli, small_ot):
    path, _ = small_ot
    before = path.read_bytes()
    _usage_error(cli("ot", path, "--arrays", path), "'--arrays'", "problem file")
    _usage_error(cli("ot", path, "--plan", path), "'--plan'", "problem file")
    assert path.read_bytes() == before


@pytest.mark.parametrize("exists", [False, True])
def test_output_and_arrays_naming_one_file_are_refused(cli, small_ot, tmp_path, exists):
    path, _ = small_ot
    out = tmp_path / "both.out"
    if exists:
        out.write_text("kept")
    _usage_error(cli("ot", path, "-o", out, "--arrays", out), "'--arrays'", "own file")
    assert (out.read_text() == "kept") if exists else not out.exists()


def test_warm_start_file_is_an_input(cli, tmp_path):
    problem = _qp_problem(tmp_path, "p.json")
    start = tmp_path / "start.json"
    assert cli("qp", problem, "-o", start, "-q").exit_code == 0
    before = start.read_bytes()
    _usage_error(cli("qp", problem, "--warm-start", start, "-o", start), "--warm-start")
    assert start.read_bytes() == before


@pytest.mark.parametrize("which", ["problem", "solution"])
def test_verify_output_naming_an_input_is_refused(cli, small_ot, tmp_path, which):
    path, _ = small_ot
    sol = tmp_path / "s.json"
    assert cli("ot", path, "-o", sol, "-q").exit_code == 0
    target = path if which == "problem" else sol
    before = target.read_bytes()
    _usage_error(cli("verify", path, sol, "-o", target), f"{which} file")
    assert target.read_bytes() == before


# --------------------------------------------------------------------------- outputs checked before the solve

@pytest.mark.parametrize("option", ["-o", "--arrays"])
@pytest.mark.parametrize("name, needle", [("", "empty"), ("nodir/", "directory"), ("nodir/x.out", "does not exist"),
                                          ("file.txt/x.out", "is not a directory")])
def test_unwritable_outputs_are_usage_errors_before_the_solve(cli, small_ot, tmp_path, monkeypatch, option,
                                                              name, needle):
    path, _ = small_ot
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("a file, not a folder")
    monkeypatch.setattr("optsolve.core.runner.run_command", lambda *a, **k: pytest.fail("the solve started"))
    r = cli("ot", path, option, name)
    _usage_error(r, needle)
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and len([line for line in r.stderr.splitlines() if line.strip()]) <= 3, r.stderr


def test_folder_that_refuses_files_is_a_usage_error(cli, small_ot, tmp_path, monkeypatch):
    """A folder where no file can be made (immutable: root too is refused; else without write permission)."""
    path, _ = small_ot
    folder = tmp_path / "locked"
    folder.mkdir()
    locked = shutil.which("chattr") and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    if not locked:
        if os.geteuid() == 0:
            pytest.skip("root writes into any folder, and this filesystem has no immutable flag")
        folder.chmod(0o555)
    monkeypatch.setattr("optsolve.core.runner.run_command", lambda *a, **k: pytest.fail("the solve started"))
    try:
        _usage_error(cli("ot", path, "--arrays", folder / "plan.npz"), "cannot write")
        _usage_error(cli("ot", path, "-o", folder / "s.json"), "cannot write")
    finally:
        if locked:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)
    assert not list(folder.iterdir())


def test_verify_output_in_a_missing_folder_is_a_usage_error(cli, small_ot, tmp_path, monkeypatch):
    path, _ = small_ot
    sol = tmp_path / "s.json"
    assert cli("ot", path, "-o", sol, "-q").exit_code == 0
    monkeypatch.setattr("optsolve.core.verify.run_verify", lambda *a, **k: pytest.fail("verify started"))
    _usage_error(cli("verify", path, sol, "-o", tmp_path / "nodir" / "v.json"), "does not exist")
