"""The backend table (``fused_quant.selection.BACKENDS``) and everything derived from it agree.

A backend's name is also its ``FUSED_QUANT_BACKEND`` value, its pytest marker, a CI row, a row of
README's backend table and (but for the torch backend) its folder under ``fused_quant/backends/``.
Each of those is written by hand somewhere else; these tests fail when one of them drifts from
the table: a backend added, renamed or removed in one place only.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from fused_quant import envs, selection
from fused_quant.platforms.info import VENDORS, PlatformInfo, fp8_dtype_for
from fused_quant.selection import BACKENDS, FALLBACK, select_backend

ROOT = Path(__file__).resolve().parent.parent
NAMES = tuple(BACKENDS)
# the torch backend's folder is named for its role (it computes what other backends decline)
FOLDERS = {FALLBACK: "fallback"}
CI_GPU_HARDWARE = "nvidia-h200"


def _backend_id(name: str) -> str:
    """Test id of a backend parameter. Not the bare name: a parameter id is an item keyword, and
    conftest skips items whose keywords hold a backend marker that cannot run on this node."""
    return f"{name}-backend"


def _matrix_rows() -> dict[str, dict]:
    return json.loads((ROOT / "ci" / "matrix.json").read_text(encoding="utf-8"))["rows"]


def _pytest_markers() -> list[str]:
    """Marker names declared in pyproject.toml's [tool.pytest.ini_options] markers."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10 (requires-python >= 3.10): scan the markers list as text
        section = text.split("[tool.pytest.ini_options]", 1)[1].split("\n[", 1)[0]
        block = re.search(r"^markers\s*=\s*\[(.*?)^\]", section, flags=re.S | re.M)
        assert block, "no markers = [...] list under [tool.pytest.ini_options] in pyproject.toml"
        declared = re.findall(r"""["']([^"']*)["']""", block.group(1))
    else:
        declared = tomllib.loads(text)["tool"]["pytest"]["ini_options"]["markers"]
    return [m.split(":", 1)[0].split("(", 1)[0].strip() for m in declared]


def _readme_backend_column() -> list[str]:
    """The cells of the 'backend' column of the table in README's "## Backends" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Backends\n(.*?)(?=^## |\Z)", readme, flags=re.S | re.M)
    assert match, 'README.md has no "## Backends" section'
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in match.group(1).splitlines() if line.lstrip().startswith("|")]
    assert len(rows) > 2, 'no markdown table in README\'s "## Backends" section'
    header, body = rows[0], [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
    assert "backend" in header, f"README's backend table has no 'backend' column: {header}"
    column = header.index("backend")
    return [r[column] for r in body if len(r) > column]


# --- the environment variable -----------------------------------------------------------------


def test_backend_choices_are_auto_then_the_table():
    assert envs.BACKEND_CHOICES == ("auto", *BACKENDS)


def test_backend_variable_doc_lists_every_backend():
    """The meaning line reads "auto | torch | ...: which backend ..."; its choices are the table's."""
    _, meaning = envs.VARIABLES["FUSED_QUANT_BACKEND"]
    choices = {c.strip() for c in meaning.split(":", 1)[0].split("|")}
    assert choices == {"auto", *BACKENDS}, f"FUSED_QUANT_BACKEND documents {sorted(choices)}; table: {NAMES}"


# --- pytest markers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES, ids=_backend_id)
def test_backend_is_a_declared_pytest_marker(name):
    """conftest skips a backend's marker where it cannot run; with --strict-markers an undeclared
    marker is an error on collection."""
    markers = _pytest_markers()
    assert name in markers, f"{name} is not in pyproject.toml's pytest markers {markers}"


# --- CI matrix --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES, ids=_backend_id)
def test_every_backend_has_a_ci_row(name):
    """A row sets FUSED_QUANT_BACKEND to the backend, or names it first in its 'backend' field (the
    cpu-torch row, whose backend is also what auto picks on a CPU)."""
    rows = _matrix_rows()
    serving = [row_name for row_name, row in rows.items()
               if row.get("env", {}).get("FUSED_QUANT_BACKEND") == name or row.get("backend", "").startswith(name)]
    assert serving, f"no row of ci/matrix.json runs backend {name}; rows: {sorted(rows)}"


def test_ci_rows_force_only_backends_of_the_table():
    bad = {row_name: row["env"]["FUSED_QUANT_BACKEND"] for row_name, row in _matrix_rows().items()
           if "FUSED_QUANT_BACKEND" in row.get("env", {}) and row["env"]["FUSED_QUANT_BACKEND"] not in BACKENDS}
    assert not bad, f"ci/matrix.json rows force a backend not in the table {NAMES}: {bad}"


def test_the_torch_backend_has_a_gpu_ci_row():
    """The torch backend runs on every device, CUDA tensors included (its custom ops, pure torch
    on the GPU): it needs a GPU row as well as cpu-torch (ci/matrix.json's h200-torch)."""
    rows = _matrix_rows()
    gpu_torch = [row_name for row_name, row in rows.items()
                 if row.get("hardware") == CI_GPU_HARDWARE and row.get("backend") == FALLBACK]
    assert gpu_torch, (f"ci/matrix.json has no row with hardware {CI_GPU_HARDWARE!r} and backend {FALLBACK!r}; "
                       f"rows: { {n: (r.get('hardware'), r.get('backend')) for n, r in rows.items()} }")


# --- README -----------------------------------------------------------------------------------


def test_readme_backend_table_names_each_backend():
    cells = _readme_backend_column()
    missing = [name for name in NAMES if not any(f"`{name}`" in cell for cell in cells)]
    assert not missing, f"README's backend table (column 'backend': {cells}) does not name {missing}"
    named = {n for cell in cells for n in re.findall(r"`([^`]+)`", cell)}
    assert named <= set(BACKENDS), f"README's backend table names backends not in the table: {named - set(BACKENDS)}"


# --- packages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES, ids=_backend_id)
def test_backend_package_and_modules_import(name):
    """Importing the modules is registration only (plain Python: no device, no triton import)."""
    backend = BACKENDS[name]
    package = importlib.import_module(backend.package)
    assert hasattr(package, "__path__"), f"{backend.package} is a module, not a package (folder)"
    assert backend.package.rpartition(".")[2] == FOLDERS.get(name, name), (
        f"backend {name}'s folder is {backend.package}; expected fused_quant/backends/{FOLDERS.get(name, name)}")
    assert backend.modules, f"backend {name} lists no modules: nothing would register it"
    for module in backend.modules:
        importlib.import_module(f"{backend.package}.{module}")


# --- selection reads the table ----------------------------------------------------------------


SERVED_VENDORS = sorted({v for b in BACKENDS.values() for v in b.vendors})
EXAMPLE_ARCHS = {"amd": "gfx942", "hygon": "gfx936"}  # an arch with FP8 each; NVIDIA's comes from the row


def _platform_satisfying(backend: selection.Backend, vendor: str) -> PlatformInfo:
    """A fake node of ``vendor`` with what ``backend`` needs: the torch build, the packages, the
    compute capability."""
    unknown = set(backend.needs) - {"triton"}
    assert not unknown, f"{backend.name} needs {unknown}: teach _platform_satisfying to fake them"
    if vendor == "nvidia":
        major, minor = backend.min_capability or (9, 0)
        arch = f"sm_{major}{minor}"
    else:
        arch = EXAMPLE_ARCHS.get(vendor)
    build = selection._BUILDS.get(vendor, ("cpu",))[0]  # the build prefix selection requires of a vendor
    fp8 = fp8_dtype_for(vendor, arch)
    return PlatformInfo(vendor, arch, "GPU", 1, fp8, fp8 is not None, f"{build} 0.0", "fake",
                        "3.6.0" if "triton" in backend.needs else None)


def test_row_vendors_are_probe_vendors():
    """A vendor the probe never reports would make its row unreachable in auto mode."""
    unknown = {b.name: sorted(set(b.vendors) - set(VENDORS)) for b in BACKENDS.values() if set(b.vendors) - set(VENDORS)}
    assert not unknown, f"backend rows list vendors the probe does not know ({VENDORS}): {unknown}"


@pytest.mark.parametrize("vendor", SERVED_VENDORS)
def test_auto_picks_the_row_serving_the_vendor(vendor):
    """Auto mode takes the first row listing the node's vendor, when that row can run there."""
    row = next(b for b in BACKENDS.values() if vendor in b.vendors)
    info = _platform_satisfying(row, vendor)
    ok, why = row.is_available(info)
    assert ok, f"the fake {vendor} platform does not satisfy {row.name}: {why}"
    name, reason = select_backend(info, "auto")
    assert name == row.name, f"auto on {info} picked {name} ({reason}), expected {row.name}"


@pytest.mark.parametrize("vendor", ["cpu", *sorted(set(VENDORS) - set(SERVED_VENDORS) - {"cpu"})])
def test_auto_picks_torch_for_a_vendor_no_row_serves(vendor):
    """The CPU (and any vendor no row lists) gets the pure-torch backend, which runs everywhere."""
    info = PlatformInfo(vendor, None, None, 0, fp8_dtype_for(vendor, None), vendor == "cpu", "cpu", "fake", "3.7.1")
    name, reason = select_backend(info, "auto")
    assert name == FALLBACK == "torch", f"auto on {vendor} picked {name} ({reason})"
