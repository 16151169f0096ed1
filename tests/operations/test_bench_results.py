"""bench/results.py: what it keeps of a benchmark's output for bench/RESULTS.md."""

import importlib.util
import subprocess
import sys

from tests.support.processes import ROOT


def load_results():
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_tables_are_kept_with_their_captions():
    results = load_results()
    output = "starting...\nnoise\n\nDispatch lag at 1,000 jobs/s\n\n| a | b |\n|---|---|\n| 1 | 2 |\nbye\n  | c |\n"
    assert results.markdown_blocks(output) == (
        "Dispatch lag at 1,000 jobs/s\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nbye\n\n| c |")


def test_plain_output_has_no_tables():
    assert load_results().markdown_blocks("rate 1,000 /s\nratio 2x\n") is None


def test_a_quick_run_writes_the_file_with_machine_date_and_commit(tmp_path):
    results = load_results()
    out = tmp_path / "RESULTS.md"
    code = results.main(["--only", "bench_schedules", "--args", "bench_schedules=--calls 100 --rounds 1",
                         "--output", str(out)])
    text = out.read_text()
    assert code == 0
    assert "## bench_schedules" in text and "cronsvc.schedules next_run" in text
    for field in ("- Date: ", "- Machine: ", "CPUs", "RAM", "- Commit: "):
        assert field in text
    assert results.main(["--only", "nothing-by-that-name", "--output", str(out)]) == 2


def test_merge_keeps_the_sections_not_run_now_in_benchmark_order(tmp_path):
    results = load_results()
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\n- Date: earlier\n\n## soak\n\nsoak table\n\n### Chaos soak\n\n"
                   "| a |\n\n## bench_schedules\n\nold schedules figures\n")
    code = results.main(["--only", "bench_schedules", "--args", "bench_schedules=--calls 100 --rounds 1",
                         "--output", str(out), "--merge"])
    text = out.read_text()
    assert code == 0
    assert "old schedules figures" not in text and "cronsvc.schedules next_run" in text
    assert "soak table\n\n### Chaos soak\n\n| a |" in text  # kept whole, sub-headings included
    assert text.index("## bench_schedules") < text.index("## soak")  # bench_* first, the soak last
    assert "merged: only bench_schedules ran now" in text


def test_the_commit_is_marked_changed_by_code_changes_not_by_the_figures_written(tmp_path):
    results = load_results()

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "bench").mkdir()
    for path in (*results.FIGURE_FILES, "app.py"):
        (tmp_path / path).write_text("committed\n")
    git("add", ".")
    git("commit", "-qm", "first")
    for path in results.FIGURE_FILES:
        (tmp_path / path).write_text("a first run's figures\n")
    assert not results.commit(tmp_path).endswith("(with uncommitted changes)")
    (tmp_path / "app.py").write_text("changed\n")
    assert results.commit(tmp_path).endswith("(with uncommitted changes)")
