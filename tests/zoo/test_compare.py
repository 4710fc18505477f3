"""zoo.compare: reading the per-step losses of plain and ReWE runs."""

import pytest

from zoo.compare import compare_runs, moving_average, nll_curve


def test_moving_average_uses_fewer_values_at_the_start():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert moving_average([2.0, 4.0], 1) == [2.0, 4.0]
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0], 0)


def test_nll_curve_reads_the_nll_column_of_either_layout(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "loss_curves.csv").write_text("step,epoch,loss\n1,1,6.5\n2,1,6.0\n")
    rewe = tmp_path / "rewe"
    rewe.mkdir()
    (rewe / "loss_curves.csv").write_text(
        "step,epoch,loss,logits_loss,rewe_loss,weighted_rewe_loss\n"
        "1,1,26.5,6.5,1.0,20.0\n2,1,21.0,6.0,0.75,15.0\n")
    assert nll_curve(str(plain)) == ([1, 2], [6.5, 6.0])
    assert nll_curve(str(rewe)) == ([1, 2], [6.5, 6.0])  # not the Eq. 7 total


def test_missing_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="loss_curves.csv"):
        nll_curve(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="results.json"):
        compare_runs([str(tmp_path)], str(tmp_path / "out"))
    (tmp_path / "loss_curves.csv").write_text("step,epoch,accuracy\n1,1,0.5\n")
    with pytest.raises(ValueError, match="loss"):
        nll_curve(str(tmp_path))
