"""Every script in examples/ runs at its small size (``--small``) in a fresh interpreter and says what it measured."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {  # script -> a word its output must contain
    "01_token_selection.py": "alignment",
    "02_your_tokens.py": "round trip exact: True",
    "03_digits_vit_head_probe.py": "wrote",
    "04_empirical_ntk_lazy_training.py": "kernel_drift",
}


def _outputs_of_example_3(out: Path) -> None:
    table = pd.read_csv(out / "head_probe.csv")
    assert set(table["optimizer"]) == {"SGD", "NGD"}
    assert table["alignment"].dropna().between(-1, 1).all()
    assert (out / "head_probe.png").stat().st_size > 10_000  # a drawn figure, not an empty canvas


def test_every_example_is_listed_here():
    assert sorted(p.name for p in (ROOT / "examples").glob("0[1-4]_*.py")) == sorted(EXAMPLES)


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_runs_at_small_size(script, tmp_path):
    path = ROOT / "examples" / script
    args = [sys.executable, str(path), "--small"]
    if "--out" in path.read_text():
        args += ["--out", str(tmp_path)]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert EXAMPLES[script] in done.stdout
    if script.startswith("03_"):
        _outputs_of_example_3(tmp_path)
