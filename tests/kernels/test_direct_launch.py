"""The direct launch's contract with the installed Triton: version range and launcher layout.

``fused_quant.kernels.direct_launch`` calls Triton's private compiled-kernel launcher with the
arguments in ``LAUNCHER_PARAMS`` order, as Triton's own ``CompiledKernel.__getitem__`` runner does.
These tests read the installed Triton (no GPU needed), so a Triton upgrade that moves an argument
fails here instead of in a launch; outside ``TESTED_TRITON`` the direct launch is off.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

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
def test_launcher_takes_the_arguments_in_our_order(module, cls):
    import importlib

    launcher = getattr(importlib.import_module(module), cls)
    assert dl.launcher_params(launcher) == dl.LAUNCHER_PARAMS
    params = list(inspect.signature(launcher.__call__).parameters.values())
    assert params[-1].kind is inspect.Parameter.VAR_POSITIONAL, "the kernel arguments follow as *args"


def test_tritons_own_runner_calls_the_launcher_as_we_do():
    """``CompiledKernel.__getitem__``'s runner passes (grid x3, stream, function, packed metadata,
    launch metadata, enter hook, exit hook, *args): the direct launch passes the same, with the
    metadata and hooks None (it runs only when no hook is set)."""
    from triton.compiler.compiler import CompiledKernel

    tree = ast.parse(textwrap.dedent(inspect.getsource(CompiledKernel.__getitem__)))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "self.run"]
    assert len(calls) == 1, "one launcher call in the runner"
    got = [ast.unparse(a) for a in calls[0].args]
    assert got == ["grid[0]", "grid[1]", "grid[2]", "stream", "self.function", "self.packed_metadata",
                   "launch_metadata", "knobs.runtime.launch_enter_hook", "knobs.runtime.launch_exit_hook", "*args"]


def test_a_launcher_of_another_layout_is_not_used():
    class Moved:
        def __call__(self, gridX, gridY, gridZ, function, stream, kernel_metadata, launch_metadata,
                     launch_enter_hook, launch_exit_hook, *args):
            raise AssertionError("never called")

    class Compiled:
        function = packed_metadata = "x"
        run = Moved()

        def __getitem__(self, grid):
            raise AssertionError("never called")

    assert dl.launcher_params(Moved) != dl.LAUNCHER_PARAMS
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
