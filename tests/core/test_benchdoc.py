"""``bin/bench-* --doc FILE``: a run replaces its own block and keeps the rest of the file."""

from __future__ import annotations

import pytest

from optsolve.core import benchdoc


def test_a_block_is_appended_then_replaced_and_the_rest_kept(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nwritten by hand\n")
    with benchdoc.recorded("bench-x", ["bench-x", "--quick", "--doc", str(doc)]):
        print("# bench-x: 2 cores")
        print("| a | b |")
    first = doc.read_text()
    assert doc.stat().st_mode & 0o777 == 0o644  # readable by others, as the file it replaces
    assert first.startswith("# Benchmarks\n\nwritten by hand\n")
    assert "<!-- begin bench-x -->\n`bin/bench-x --quick`\n\nRun on: bench-x: 2 cores\n| a | b |\n<!-- end bench-x -->" \
        in first
    doc.write_text(first + "\nafter the block\n")
    with benchdoc.recorded("bench-x", ["bench-x", f"--doc={doc}"]):
        print("| c |")
    second = doc.read_text()
    assert "| a | b |" not in second and "<!-- begin bench-x -->\n`bin/bench-x`\n\n| c |\n<!-- end bench-x -->" in second
    assert second.startswith("# Benchmarks\n\nwritten by hand\n") and second.endswith("after the block\n")
    assert second.count("<!-- begin bench-x -->") == 1


def test_the_scripts_headings_sit_under_its_section():
    text = benchdoc.block("bench-x", "bin/bench-x", "# bench-x: 2 cores\n## Summary\n| a |\n")
    assert text.splitlines()[3:6] == ["Run on: bench-x: 2 cores", "### Summary", "| a |"]


def test_a_run_that_fails_leaves_the_file_as_it_was(tmp_path, capsys):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("kept\n")
    with pytest.raises(RuntimeError):
        with benchdoc.recorded("bench-x", ["bench-x", "--doc", str(doc)]):
            print("half a table")
            raise RuntimeError("stopped")
    assert doc.read_text() == "kept\n"
    assert "half a table" in capsys.readouterr().out  # printed as usual


def test_without_doc_nothing_is_written(tmp_path, capsys):
    with benchdoc.recorded("bench-x", ["bench-x", "--quick"]):
        print("table")
    assert capsys.readouterr().out == "table\n" and not list(tmp_path.iterdir())


def test_a_scripts_second_block_shows_the_scripts_command_under_its_own_heading(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("<!-- begin bench-x -->\nfirst\n<!-- end bench-x -->\n")
    with benchdoc.recorded("bench-x-mode", ["bench-x", "--mode", "--doc", str(doc)], script="bench-x",
                           title="`bin/bench-x --mode`"):
        print("| m |")
    text = doc.read_text()
    assert text.startswith("<!-- begin bench-x -->\nfirst\n<!-- end bench-x -->\n")
    assert text.endswith("## `bin/bench-x --mode`\n\n<!-- begin bench-x-mode -->\n`bin/bench-x --mode`\n\n| m |\n"
                         "<!-- end bench-x-mode -->\n")
