"""Shell habits: stdout composes with jq, Click's completion, bin/solve-folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_OT = ROOT / "data" / "ot" / "example.npz"
ENV = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
MAIN = "from optsolve.cli import main; main(prog_name='optsolve')"  # as the installed `optsolve` script
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def bash(script: str, cwd=ROOT, env=None):
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, env=env or ENV,
                          timeout=300)


@needs_jq
def test_stdout_is_one_document_for_jq():
    r = bash(f"{sys.executable} -m optsolve ot {EXAMPLE_OT} -q -o - | jq -r '.status, .certificate.holds'")
    assert r.returncode == 0 and r.stdout.split() == ["optimal", "true"], r.stderr


def test_click_completion_knows_the_lazy_commands_and_their_options():
    def complete(words: str, cword: int) -> list[str]:
        env = dict(ENV, _OPTSOLVE_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(cword))
        out = subprocess.run([sys.executable, "-c", MAIN], capture_output=True, text=True, env=env).stdout
        return [line.split(",", 1)[1] for line in out.splitlines()]

    assert complete("optsolve pl", 1) == ["plot"]
    assert "--engine" in complete("optsolve qp --eng", 2)
    assert complete("optsolve batch ot --local", 3) == ["--local-cluster"]
    source = subprocess.run([sys.executable, "-c", MAIN], capture_output=True, text=True,
                            env=dict(ENV, _OPTSOLVE_COMPLETE="bash_source")).stdout
    assert "complete -o nosort -F _optsolve_completion optsolve" in source


@needs_jq
def test_solve_folder_summarises_and_resumes(tmp_path, small_ot):
    good, _ = small_ot
    folder = tmp_path / "problems"
    folder.mkdir()
    for name in ("one.npz", "two.npz"):
        shutil.copy(good, folder / name)
    (folder / "broken.json").write_text("{")
    script = ROOT / "bin" / "solve-folder"
    r = bash(f"{script} ot {folder} --method sinkhorn --reg 0.05 -j 2")
    assert r.returncode == 7, r.stderr
    rows = [line.split() for line in r.stdout.strip().splitlines()]
    assert [row[:2] for row in rows[:3]] == [["one.npz", "optimal"], ["two.npz", "optimal"],
                                              ["broken.json", "invalid_input"]]
    assert rows[-1] == ["1", "invalid_input,", "2", "optimal"]
    lines = [json.loads(x) for x in (folder / "solutions" / "batch.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    again = bash(f"{script} ot {folder} --method sinkhorn --reg 0.05")
    assert again.returncode == 7 and again.stdout.count("resumed") == 2
    usage = bash(f"{script}")
    assert usage.returncode == 2 and "solve-folder KIND DIR" in usage.stderr
