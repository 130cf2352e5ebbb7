"""docs/ is executable documentation: every python example of docs/ARCHITECTURE.md runs as written,
every package path it names exists, and the package cites the spec by its path, docs/NUMERICS.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "ARCHITECTURE.md"
_FENCED = re.compile(r"^```([\w-]*)\n(.*?)^```", flags=re.S | re.M)


def _python_blocks() -> list[tuple[int, str]]:
    """(line number, code) of every ```python block of ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(2)) for m in _FENCED.finditer(text)
            if m.group(1) == "python"]


def _clean_env() -> dict[str, str]:
    """The environment of a fresh process: no FUSED_QUANT_* setting, the checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSED_QUANT_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


BLOCKS = _python_blocks()


def test_architecture_has_its_examples():
    assert len(BLOCKS) >= 3, "ARCHITECTURE.md shows a backend, a producer and a GEMM provider as python blocks"


@pytest.mark.parametrize("line,code", BLOCKS, ids=[f"line{line}" for line, _ in BLOCKS])
def test_architecture_example_runs(line, code):
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (f"docs/ARCHITECTURE.md: the python block at line {line} exited with "
                                  f"{done.returncode}; stderr:\n{done.stderr}")


def test_numerics_spec_is_in_docs():
    spec = ROOT / "docs/NUMERICS.md"
    assert spec.is_file()
    text = spec.read_text()
    assert "docs/NUMERICS.md" in text and "fused_quant/reference.py" in text


def test_package_cites_the_spec_by_its_path():
    bare = re.compile(r"(?<!docs/)NUMERICS\.md")
    found = []
    for path in sorted((ROOT / "fused_quant").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        for n, line in enumerate(path.read_bytes().decode("utf-8", "replace").splitlines(), 1):
            if bare.search(line):
                found.append(f"{path.relative_to(ROOT).as_posix()}:{n}: {line.strip()}")
    assert not found, "cite the spec as docs/NUMERICS.md:\n" + "\n".join(found)


def test_architecture_paths_exist():
    prose = _FENCED.sub("", ARCHITECTURE.read_text())
    paths = [s for s in re.findall(r"`([^`\n]+)`", prose) if re.fullmatch(r"fused_quant/[\w./]*(?:\.py|/)", s)]
    assert len(paths) >= 20, f"expected ARCHITECTURE.md to name the package's files, found {paths}"
    missing = [p for p in dict.fromkeys(paths)
               if not ((ROOT / p).is_dir() if p.endswith("/") else (ROOT / p).is_file())]
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"
