"""README is executable documentation: its quickstart runs, its commands are what CI runs,
and its environment table lists exactly the variables envs.py reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fused_quant import envs

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_quickstart_runs(capsys):
    (code,) = _blocks("python")
    exec(compile(code, "README.md:quickstart", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "backend:" in out
    assert "expected K=128" in out and "received K=256" in out and "placeholder" in out


def test_ci_runs_readme_install_then_test_commands():
    install, test = (b.strip() for b in _blocks("bash"))
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in ci and test in ci, "README's commands must appear verbatim in .ci/run"
    assert ci.index(install) < ci.index(test)


def test_env_table_lists_every_variable():
    documented = set(re.findall(r"^\| `(FUSED_QUANT_[A-Z_]+)` \|", README, flags=re.M))
    assert documented == set(envs.VARIABLES)
    for name, (default, meaning) in envs.VARIABLES.items():
        row = next(line for line in README.splitlines() if line.startswith(f"| `{name}` |")).replace("\\|", "|")
        assert meaning in row, f"README row for {name} must say: {meaning}"
        assert (f"`{default}`" in row) if default else "(empty)" in row


def test_env_reads_happen_only_in_envs_and_the_probe():
    """FUSED_QUANT_* come from envs.py; the probe reads the vendors' device-visibility variables."""
    readers = {p.relative_to(ROOT).as_posix() for p in (ROOT / "fused_quant").rglob("*.py")
               if re.search(r"os\.environ|getenv", p.read_text())}
    assert readers == {"fused_quant/envs.py", "fused_quant/platforms/probe.py"}
