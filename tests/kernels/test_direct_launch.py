"""The direct launch's contract with the installed Triton: version range, launcher layout and
the launcher's integer pointers.

``fused_quant.kernels.direct_launch`` calls Triton's private compiled-kernel launcher with the
arguments in ``RUNNER_ARGS`` order, as Triton's own ``CompiledKernel.__getitem__`` runner does.
These tests read the installed Triton (no GPU needed), so a Triton upgrade that moves an argument
fails here instead of in a launch; outside ``TESTED_TRITON`` the direct launch is off.
"""

from __future__ import annotations

import inspect

import pytest

triton = pytest.importorskip("triton")

from packaging.version import Version  # noqa: E402

from fused_quant.kernels import direct_launch as dl  # noqa: E402

INSTALLED = Version(triton.__version__)
TESTED = dl.TESTED_TRITON.contains(INSTALLED, prereleases=True)


def test_ci_triton_is_inside_the_tested_range():
    """CI pins the Triton the direct launch is tested with (ci/constraints-cpu.txt)."""
    assert TESTED, f"triton {INSTALLED} is outside {dl.TESTED_TRITON}: widen the range only after testing it"
    assert dl.version_ok()


@pytest.mark.parametrize("module,cls", [("triton.backends.nvidia.driver", "CudaLauncher"),
                                        ("triton.backends.amd.driver", "HIPLauncher")])
def test_launchers_take_nine_leading_arguments_then_the_kernels(module, cls):
    """What Triton's runner passes (grid x3, stream, function, metadata, launch metadata, two hooks)."""
    import importlib

    params = list(inspect.signature(getattr(importlib.import_module(module), cls).__call__).parameters.values())
    leading = [p for p in params[1:] if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert len(leading) == 9 and params[-1].kind is inspect.Parameter.VAR_POSITIONAL, params


@pytest.mark.parametrize("backend", ["nvidia", "amd"])
def test_launchers_take_integer_addresses_for_pointers(backend):
    """The direct launch passes pointer arguments as integer addresses: the launcher's C source
    (``driver.c``, or the template in ``driver.py`` in older releases) takes a Python int as the
    address itself before it would call ``data_ptr()``."""
    import importlib
    from pathlib import Path

    folder = Path(importlib.import_module(f"triton.backends.{backend}").__file__).parent
    sources = [f.read_text() for f in (folder / "driver.c", folder / "driver.py") if f.is_file()]
    text = "\n".join(sources)
    assert "PyLong_Check(obj)" in text and "PyLong_AsUnsignedLongLong(obj)" in text, (
        f"triton {INSTALLED}'s {backend} launcher does not read an int as a pointer: pass tensors instead")


def test_tritons_own_runner_calls_the_launcher_as_we_do():
    """``CompiledKernel.__getitem__``'s runner passes (grid x3, stream, function, packed metadata,
    launch metadata, enter hook, exit hook, *args): the direct launch passes the same."""
    from triton.compiler.compiler import CompiledKernel

    assert dl.runner_call_args(CompiledKernel) == dl.RUNNER_ARGS
    assert dl.layout_ok()


def test_a_runner_of_another_layout_disables_the_direct_launch(monkeypatch):
    class Moved:
        def __getitem__(self, grid):
            def runner(*args, stream=None):
                self.run(grid[0], grid[1], grid[2], self.function, stream, *args)

            return runner

    assert dl.runner_call_args(Moved) != dl.RUNNER_ARGS

    class Compiled:
        function = packed_metadata = run = "x"

        def __getitem__(self, grid):
            raise AssertionError("never called")

    monkeypatch.setattr(dl, "layout_ok", lambda: dl.runner_call_args(Moved) == dl.RUNNER_ARGS)
    assert not dl.usable(Compiled())


@pytest.mark.parametrize("version,expected", [("3.5.1", False), ("3.6.0", True), ("3.7.1", True),
                                              ("3.8.0", False), ("3.7.0+git1234", True), ("3.8.0rc1", False)])
def test_version_gate(monkeypatch, version, expected):
    monkeypatch.setattr(triton, "__version__", version)
    dl.version_ok.cache_clear()
    try:
        assert dl.version_ok() is expected
    finally:
        dl.version_ok.cache_clear()
