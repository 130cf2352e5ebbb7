"""``examples/hcu_mlp.py`` from the command line (item 16 of issue 14): every token count the library
takes runs, 0 included (an empty batch), and a count it cannot take is a usage error, no traceback."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "hcu_mlp.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("hcu_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("tokens", [0, 1, 3])  # 0: an empty batch; 1: decode; 3: odd
def test_runs_for_every_token_count(example, capsys, tokens):
    result = example.main(["--tokens", str(tokens), "--hidden", "64", "--intermediate", "128"])
    assert result["fused_vs_unfused_max_abs"] == 0.0
    assert (result["gemm_vs_float64_max_rel"] == 0.0) if tokens == 0 else (0 < result["gemm_vs_float64_max_rel"] < 0.05)
    assert f"out ({tokens}, 64) torch.bfloat16; fused vs unfused max |diff| = 0.0;" in capsys.readouterr().out


def test_zero_tokens_from_the_shell():
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSED_QUANT_")}
    r = subprocess.run([sys.executable, str(EXAMPLE), "--tokens", "0"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "out (0, 256) torch.bfloat16" in r.stdout


@pytest.mark.parametrize("flag,value,minimum", [("--tokens", "-1", 0), ("--tokens", "many", 0),
                                                ("--hidden", "0", 1), ("--intermediate", "-4", 1)])
def test_bad_sizes_are_usage_errors(example, capsys, flag, value, minimum):
    with pytest.raises(SystemExit) as exc:
        example.main([flag, value])
    assert exc.value.code == 2
    shown = value if value.lstrip("-").isdigit() else repr(value)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.endswith(f"error: argument {flag}: expected an integer >= {minimum}, got {shown}")


@pytest.mark.parametrize("given", ["HCU", " hcu ", "Default"])
def test_numerics_folds_case_and_spaces_as_the_variable_does(example, capsys, given):
    example.main(["--tokens", "2", "--hidden", "64", "--intermediate", "128", "--numerics", given])
    assert "fused vs unfused" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        example.main(["--numerics", "hcuu"])
    assert exc.value.code == 2 and "invalid choice: 'hcuu'" in capsys.readouterr().err


TRANSFORMERS_EXAMPLE = EXAMPLE.parent / "transformers_w8a8.py"


def test_the_transformers_example_says_what_it_needs_without_its_extra(capsys, monkeypatch):
    """Without transformers installed the example failed at import with a ModuleNotFoundError traceback, --help
    included: --help works anywhere, and a run names the missing extra in one line, exit 2."""
    r = subprocess.run([sys.executable, str(TRANSFORMERS_EXAMPLE), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and 'needs the transformers extra: pip install -e ".[transformers]"' in r.stdout, r.stderr
    spec = importlib.util.spec_from_file_location("transformers_w8a8", TRANSFORMERS_EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = "transformers is not installed (pip install 'fused-quant[transformers]')"
    monkeypatch.setattr(module, "check_versions", lambda: (False, missing))
    with pytest.raises(SystemExit) as done:
        module.main([])
    assert done.value.code == 2 and capsys.readouterr().err == f"transformers_w8a8: {missing}\n"
