"""``fused-quant probe`` reads well (item 14 of issue 14): a first line saying what was found, a
table of backends with the reason each can or cannot run, no line wider than the terminal's
100 columns, and every FUSED_QUANT_* value checked here, each problem naming its variable.

On fake nodes (the probe's ``_probe_now`` replaced) and for real on this machine."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys

import pytest
import torch

import fused_quant
from fused_quant import cli, envs, numerics, runtime
from fused_quant.activations import SiluAndMul
from fused_quant.errors import NumericsProfileError
from fused_quant.gemm import register_gemm_provider, unregister_gemm_provider
from fused_quant.platforms import PlatformInfo
from tests.cli_fixtures import H200, node, run_cli  # noqa: F401  (node: a fixture)

CPU = PlatformInfo("cpu", fp8_dtype=torch.float8_e4m3fn, has_fp8=True, torch_build="cpu",
                   reason="pynvml not installed; no GPU found; torch cpu", triton_version="3.7.1")


def _probe(capsys, *argv) -> tuple[int, str]:
    code = cli.main(["probe", *argv])
    return code, capsys.readouterr().out


# --- the text -----------------------------------------------------------------------------------


def test_first_line_says_what_was_found(node, capsys):
    node(CPU)
    assert _probe(capsys)[1].splitlines()[0] == "platform : no GPU found"
    node(H200)
    assert _probe(capsys)[1].splitlines()[0] == "platform : 8 x NVIDIA H200 (nvidia sm_90)"


def test_backend_reason_says_what_was_found(node, capsys):
    node(CPU)
    code, out = _probe(capsys)
    assert code == 0
    assert "backend  : torch  (auto: torch runs on every device; no GPU found)" in out


def test_backends_table_on_a_cpu_node(node, capsys):
    node(CPU)
    out = _probe(capsys)[1]
    table = out[out.index("backends :"):out.index("env      :")]
    assert table.startswith("backends : torch       selected     torch runs on every device\n")
    assert "           triton_fp8  unavailable  triton_fp8 needs an NVIDIA GPU" in table
    assert "           hip_w8a8    unavailable  hip_w8a8 needs an AMD or Hygon GPU" in table


def test_backends_table_on_an_h200(node, capsys):
    node(H200)
    code, out = _probe(capsys, "--json")
    backends = json.loads(out)["backends"]
    assert code == 0
    assert backends["triton_fp8"] == {"status": "selected", "reason": "nvidia sm_90 (NVIDIA H200) with triton 3.5.1"}
    assert backends["torch"]["status"] == "available"
    # hip_w8a8 runs on NVIDIA only when forced: said so, with auto mode's reason
    assert backends["hip_w8a8"]["status"] == "if forced"
    assert backends["hip_w8a8"]["reason"].startswith("forced by FUSED_QUANT_BACKEND on nvidia sm_90 (auto mode: ")


@pytest.mark.parametrize("info", [CPU, H200], ids=["cpu", "h200"])
def test_no_line_wider_than_100_columns(node, capsys, info, monkeypatch):
    node(info)
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "nope")  # the warning names every provider
    out = _probe(capsys)[1]
    wide = [line for line in out.splitlines() if len(line) > cli.WIDTH]
    assert not wide, wide


def test_real_probe_lines_fit():
    r = run_cli("probe", "--vllm")
    assert r.returncode == 0, r.stderr
    assert max(map(len, r.stdout.splitlines())) <= cli.WIDTH


# --- environment variables ----------------------------------------------------------------------


@pytest.mark.parametrize("name,value,choices", [
    ("FUSED_QUANT_NUMERICS", "hcuu", "default, hcu"),
    ("FUSED_QUANT_VLLM_KERNEL", "middle", "first, last, off"),
    ("FUSED_QUANT_VLLM_FUSION", "maybe", "on, off"),
    ("FUSED_QUANT_PDL", "maybe", "on, off"),
])
def test_bad_env_value_exits_2_naming_the_variable(node, capsys, monkeypatch, name, value, choices):
    node(CPU)
    monkeypatch.setenv(name, value)
    code, out = _probe(capsys)
    assert code == 2
    assert f"error    : {name}='{value}' is not one of {choices}" in out
    code, out = _probe(capsys, "--json")
    assert code == 2 and json.loads(out)["env_errors"] == {name: f"{name}='{value}' is not one of {choices}"}


def test_bad_env_value_from_the_shell():
    r = run_cli("probe", env={"FUSED_QUANT_NUMERICS": "hcuu"})
    assert r.returncode == 2
    assert "error    : FUSED_QUANT_NUMERICS='hcuu' is not one of default, hcu" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    # stderr says it in one line too (the report's error line comes after the whole platform section)
    assert r.stderr == "probe: FUSED_QUANT_NUMERICS='hcuu' is not one of default, hcu\n"
    r = run_cli("probe", "--json", env={"FUSED_QUANT_BACKEND": "tritn"})
    assert r.returncode == 2 and json.loads(r.stdout)["backend"]["name"] is None
    assert r.stderr.startswith("probe: FUSED_QUANT_BACKEND='tritn' is not a backend") and r.stderr.count("\n") == 1
    assert run_cli("probe").stderr == ""


def test_text_follows_a_narrower_terminal(node, monkeypatch):
    """probe's text wrapped to 100 columns whatever the terminal: on an 80-column one every line wrapped again. It
    takes the terminal's width where that is narrower (at least 60), and 100 in a file or pipe."""
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

        def fileno(self) -> int:
            return 1

    node(CPU)
    for columns, most in ((80, 80), (200, 100), (40, 60)):
        out = Terminal()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(cli.os, "get_terminal_size", lambda fd, c=columns: os.terminal_size((c, 24)))
        assert cli.main(["probe"]) == 0
        widths = [len(line) for line in out.getvalue().splitlines()]
        assert max(widths) <= most and max(widths) > most - 15, (columns, max(widths))
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal: 100
    assert cli._text_width() == cli.WIDTH == 100


def test_a_bad_backend_value_is_quoted_as_set(node, capsys, monkeypatch):
    """As the other variables' refusals quote theirs: case and spaces kept (it was quoted lower-cased and stripped),
    by the library's selection and by probe. Case and spaces around a good name are still taken."""
    node(CPU)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", " Tortch")
    want = "FUSED_QUANT_BACKEND=' Tortch' is not a backend; valid names: auto, torch"
    with pytest.raises(fused_quant.BackendUnavailableError, match=re.escape(want)):
        fused_quant.current_backend()
    code, out = _probe(capsys)
    assert code == 2 and f"error    : {want}" in out.replace("\n" + " " * 13, " ")
    monkeypatch.setenv("FUSED_QUANT_BACKEND", " Torch ")
    fused_quant.reset()
    assert fused_quant.current_backend().name == "torch"
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "  ")  # spaces alone: unset, as README says (auto)
    fused_quant.reset()
    assert fused_quant.current_backend().requested == "auto" and cli._env_errors() == {}


def test_bad_backend_value_names_the_variable(node, capsys, monkeypatch):
    node(CPU)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "tritn")
    code, out = _probe(capsys)
    assert code == 2
    assert ("backend  : UNAVAILABLE  (FUSED_QUANT_BACKEND='tritn' is not a backend; valid names: auto, torch"
            in out.replace("\n" + " " * 13, " "))
    want = "FUSED_QUANT_BACKEND='tritn' is not a backend; valid names: auto, torch"
    assert f"error    : {want}" in out.replace("\n" + " " * 13, " ")  # an error line, as for the other variables
    code, out = _probe(capsys, "--json")
    assert code == 2 and json.loads(out)["env_errors"]["FUSED_QUANT_BACKEND"].startswith(want)


def test_backend_this_node_cannot_run_is_no_variable_error(node, capsys, monkeypatch):
    node(CPU)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "triton_fp8")
    code, out = _probe(capsys, "--json")
    report = json.loads(out)
    assert code == 2 and report["backend"]["name"] is None and report["env_errors"] == {}


def test_unknown_disabled_gemm_is_reported_with_the_known_providers(node, capsys, monkeypatch):
    node(CPU)
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "scaled_mm, int_mm_int8")
    code, out = _probe(capsys, "--json")
    warning = json.loads(out)["env_warnings"]["FUSED_QUANT_DISABLED_GEMMS"]
    assert code == 0  # a provider the application registers is unknown here: a warning
    assert warning.startswith("FUSED_QUANT_DISABLED_GEMMS names no GEMM provider called 'scaled_mm'; known "
                              "providers: ")
    assert "int_mm_int8" in warning and "torch_int8_f64" in warning and "scaled_mm_fp8" in warning
    assert "warning  : FUSED_QUANT_DISABLED_GEMMS names no GEMM provider called 'scaled_mm'" in _probe(capsys)[1]


def test_disabled_gemms_that_exist_are_not_reported(node, capsys, monkeypatch):
    node(CPU)
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "int_mm_int8, my_gemm")
    register_gemm_provider("my_gemm", lambda *a: None, kind="int8", backends=("torch",))
    try:
        code, out = _probe(capsys, "--json")
    finally:
        unregister_gemm_provider("my_gemm")
    report = json.loads(out)
    assert code == 0 and report["env_warnings"] == {} and report["env_errors"] == {}
    assert "int_mm_int8 (int8)" not in report["gemm_providers"]["triton_fp8"]  # still disabled


def test_a_gpu_node_that_fell_back_to_torch_says_so_in_its_json(node, capsys):
    """auto mode on an H200 without triton runs the torch backend: the JSON names the backend the node wanted and
    marks the fallback (a script scanning a cluster need not parse the reason); a node whose own backend is torch is
    no fallback, nor is a backend asked for by name."""
    node(dataclasses.replace(H200, triton_version=None), gpus=8)
    backend = json.loads(_probe(capsys, "--json")[1])["backend"]
    assert (backend["name"], backend["preferred"], backend["fallback"]) == ("torch", "triton_fp8", True)
    node(CPU)
    backend = json.loads(_probe(capsys, "--json")[1])["backend"]
    assert (backend["name"], backend["preferred"], backend["fallback"]) == ("torch", "torch", False)


def test_an_unavailable_backend_gives_why_forcing_it_fails_too(node, capsys):
    """A backend that cannot run even when forced ("unavailable") shows why forcing fails, not auto mode's reason
    (which may point at forcing it): hip_w8a8 on an NVIDIA node whose torch is a CPU build."""
    from fused_quant.selection import BACKENDS

    cpu_build = dataclasses.replace(H200, torch_build="cpu")
    node(cpu_build, gpus=0)
    row = json.loads(_probe(capsys, "--json")[1])["backends"]["hip_w8a8"]
    forced_ok, forced_why = BACKENDS["hip_w8a8"].is_available(cpu_build, explicit=True)
    assert not forced_ok and row == {"status": "unavailable", "reason": forced_why}
    assert forced_why != BACKENDS["hip_w8a8"].is_available(cpu_build)[1]


def test_json_keeps_its_keys_and_adds_new_ones(node, capsys):
    node(CPU)
    report = json.loads(_probe(capsys, "--json")[1])
    assert set(report) == {"version", "torch_version", "platform", "env", "env_defaults", "backend", "backends",
                           "env_errors", "env_warnings", "producers", "gemm_providers", "small_m_table"}
    assert report["torch_version"] == torch.__version__  # as the text form shows it
    assert report["env_defaults"] == {name: default for name, (default, _) in envs.VARIABLES.items()}
    assert set(report["backend"]) == {"name", "reason", "error", "requested", "preferred", "fallback"}
    assert report["backend"]["error"] is None
    assert set(report["small_m_table"]) == {"arch", "device", "swept", "models", "line", "quantizing",
                                            "quantizing_line", "int8_tiles_line"}
    assert report["env"] == {name: None for name in envs.VARIABLES}
    assert report["platform"]["summary"] == "no GPU found" and report["platform"]["vendor"] == "cpu"


def test_probe_warns_when_disabled_gemms_leave_a_kind_without_a_provider(node, capsys, monkeypatch):
    """Disabling every int8 GEMM of the selected backend's chain (its own and torch's) leaves every int8 GEMM call
    refused: probe says so, a warning (a node may never run one kind), and exits 0."""
    node(CPU)
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "torch_int8_f64")
    code, out = _probe(capsys, "--json")
    report = json.loads(out)
    assert code == 0 and report["env_warnings"] == {"FUSED_QUANT_DISABLED_GEMMS": (
        "FUSED_QUANT_DISABLED_GEMMS leaves no int8 GEMM provider for backend torch: every such GEMM call will be "
        "refused")}
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "torch_int8_f64,torch_fp8_f32,nope")
    runtime.reset()  # the variable is read once per runtime generation, as a new process reads it
    warning = json.loads(_probe(capsys, "--json")[1])["env_warnings"]["FUSED_QUANT_DISABLED_GEMMS"]
    assert "names no GEMM provider called 'nope'" in warning and "leaves no int8 and no fp8 GEMM provider" in warning


def test_selftest_of_a_named_backend_refuses_a_backend_variable_that_names_none(capsys, monkeypatch):
    """--backend picks what the selftest checks, but the node's own calls read FUSED_QUANT_BACKEND and refuse a
    value naming no backend: the selftest says so and exits 2, as probe does (it passed, exit 0)."""
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "nonsense")
    assert cli.main(["selftest", "--backend", "torch"]) == 2
    assert "FUSED_QUANT_BACKEND='nonsense' is not a backend; valid names: auto, torch" in capsys.readouterr().err


def test_numerics_variable_is_named_at_first_use_too(monkeypatch):
    from fused_quant import QuantLinear, kInt8DynamicTokenSym, maybe_fused_act_quant

    monkeypatch.setenv("FUSED_QUANT_NUMERICS", "hcuu")
    layer = QuantLinear.from_float(torch.nn.Linear(4, 8), kInt8DynamicTokenSym)
    with pytest.raises(NumericsProfileError, match="FUSED_QUANT_NUMERICS='hcuu' is not one of default, hcu"):
        maybe_fused_act_quant(SiluAndMul(), torch.randn(3, 8), layer)


def test_numerics_choices_are_the_profiles():
    assert envs.NUMERICS_CHOICES == tuple(numerics.PROFILES)


def test_env_errors_lists_only_bad_values(monkeypatch):
    for name in envs.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert envs.errors() == {}
    monkeypatch.setenv("FUSED_QUANT_VLLM_FUSION", " OFF ")  # readers strip and lower-case
    monkeypatch.setenv("FUSED_QUANT_NUMERICS", "fast")
    assert envs.errors() == {"FUSED_QUANT_NUMERICS": "FUSED_QUANT_NUMERICS='fast' is not one of default, hcu"}
    for blank in ("", "  "):  # set to nothing: unset, the default (README)
        monkeypatch.setenv("FUSED_QUANT_PDL", blank)
        monkeypatch.setenv("FUSED_QUANT_VLLM_KERNEL", blank)
        assert envs.pdl() is True and envs.vllm_kernel() == "last" and "FUSED_QUANT_PDL" not in envs.errors()


# --- the small-M GEMM's table -------------------------------------------------------------------


def test_small_m_table_line_says_where_this_gpus_rows_were_swept(node, capsys, monkeypatch):
    """The committed table's sm_90 rows were swept on an H200: probe says so on an H200, says that a GPU model of the
    same arch without rows of its own was not swept (and how to measure its own), that a model with its own rows takes
    them (the arch's where they have none), that an arch without rows keeps the torch providers, and what a CPU node
    has."""
    from fused_quant.kernels import gemm_launch
    from fused_quant.kernels.gemm_launch import table_metas

    meta = table_metas()["sm_90"]
    swept = f"{meta['device']}, {meta['date']}"
    other = dataclasses.replace(H200, device_name="NVIDIA A GPU MODEL OF SM_90")
    own = dataclasses.replace(H200, device_name="NVIDIA A GPU MODEL WITH ITS OWN ROWS")
    own_rows = {own.device_name: {"device": own.device_name, "date": "2026-12-06", "retime": True}}
    monkeypatch.setattr(gemm_launch, "model_metas", lambda path=None: own_rows)
    mi300 = PlatformInfo("amd", "gfx942", "AMD Instinct MI300X", 8, torch.float8_e4m3fnuz, True, "rocm 6.3",
                         "amdsmi: 8 x MI300X", "3.5.1")
    procfs = PlatformInfo("nvidia", None, "NVIDIA H200", 8, torch.float8_e4m3fn, True, "cuda 12.8",
                          "/proc/driver/nvidia/gpus: 8 x NVIDIA H200; compute capability needs NVML", "3.5.1")
    rows = f"rows for sm_90 ({swept}); own rows for {own.device_name}"
    want = {H200: f"sm_90 rows swept on this GPU model ({swept})" if meta["device"] == H200.device_name else None,
            procfs: f"{rows}; the probe did not read this GPU's arch",
            other: f"sm_90 rows swept on {swept}, not on this {other.device_name}",
            own: ("sm_90 rows of this GPU model's own (2026-12-06: the arch's configs timed again beside the torch "
                  f"providers here); the arch's rows ({swept}) where it has none"),
            mi300: "no rows for gfx942: the chain keeps torch._scaled_mm, torch._int_mm and the Triton int8 GEMM",
            CPU: f"{rows}; no GPU here"}
    assert want[H200] is not None, meta  # the table's sm_90 rows come from an H200
    for info, line in want.items():
        node(info)
        code, out = _probe(capsys, "--json")
        got = json.loads(out)["small_m_table"]
        assert got["line"].startswith(line) and got["arch"] == info.arch, (info.device_name, got)
        assert got["models"] == {own.device_name: f"{own.device_name}, 2026-12-06"}
        text = " ".join(_probe(capsys)[1].split())  # the text form, its wrapping undone
        assert f"small-M : {line}" in text, text
    node(other)
    assert ("python -m benchmarks.sweep_small_m_gemm --out DIR --own-rows --install measures this model's own"
            in " ".join(_probe(capsys)[1].split()))


def test_small_m_line_counts_the_rows_a_later_part_sweep_installed(node, capsys, monkeypatch, tmp_path):
    """A part-sweep (one row retimed) leaves the meta of the rows it describes and stamps its own rows: the probe's
    line counts those, for a GPU model's own rows and for the arch's, so that it does not call every row as the meta
    says."""
    from fused_quant.kernels import gemm_launch as g

    data = json.loads(g.SMALL_M_CONFIG_FILE.read_text())
    model = "NVIDIA H100 80GB HBM3"
    # the committed table's own part-sweep rows (a retime installed since its sweep) count as well
    base_own, base_arch = g.rows_since("sm_90", model), g.rows_since("sm_90", None)
    own = [r for r in data["rows"] if r.get("device") == model and "swept" not in r]
    arch = [r for r in data["rows"] if r.get("device") is None and "swept" not in r]
    assert len(own) >= 2 and len(arch) >= 3
    meta = data["models"][model]
    own[0]["swept"], own[0]["retimed"] = f"{model} 2027-01-02", True  # a later one-row retime
    own[1]["swept"] = f"{meta['device']} {meta['date']}"  # stamped by the meta's own install: not counted
    arch[0]["swept"] = f"{data['metas']['sm_90']['device']} 2027-01-03"
    arch[1]["swept"], arch[2]["swept"] = arch[0]["swept"], arch[0]["swept"]
    table = tmp_path / "t.json"
    table.write_text(json.dumps(data))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    assert g.rows_since("sm_90", model) == base_own + 1 and g.rows_since("sm_90", None) == base_arch + 3
    node(dataclasses.replace(H200, device_name=model))
    line = json.loads(_probe(capsys, "--json")[1])["small_m_table"]["line"]
    rows = f"{base_own + 1} row{'s' if base_own else ''}"
    assert f"({meta['date']}: swept here; {rows} since, each stamped (swept, retimed))" in line, line
    node(dataclasses.replace(H200, device_name=data["metas"]["sm_90"]["device"]))
    line = json.loads(_probe(capsys, "--json")[1])["small_m_table"]["line"]
    assert line.endswith(f"; {base_arch + 3} rows since, each stamped (swept, retimed))"), line


def test_small_m_section_says_where_the_quantizing_configs_were_measured(node, capsys):
    """The int8 per-token quantizing calls' committed configs (``SMALL_M_QUANTIZING_FILE``): measured on which GPU for
    this node's arch, or none for it (the table's rows then) and how to measure them."""
    from fused_quant.kernels.gemm_launch import SMALL_M_QUANTIZING_FILE, table_metas

    meta = table_metas(SMALL_M_QUANTIZING_FILE)["sm_90"]
    where = f"{meta['device']}, {meta['date']}"
    mi300 = PlatformInfo("amd", "gfx942", "AMD Instinct MI300X", 8, torch.float8_e4m3fnuz, True, "rocm 6.3",
                         "amdsmi: 8 x MI300X", "3.5.1")
    want = {H200: f"int8 per-token quantizing calls: sm_90 configs measured on {where}",
            mi300: f"int8 per-token quantizing calls: configs measured for sm_90 ({where}), none for gfx942: the "
                   "table's rows (python -m benchmarks.quantizing_calls --out DIR --install measures them)",
            CPU: f"int8 per-token quantizing calls: configs measured for sm_90 ({where})"}
    for info, line in want.items():
        node(info)
        got = json.loads(_probe(capsys, "--json")[1])["small_m_table"]
        assert got["quantizing_line"] == line and got["quantizing"] == {"sm_90": where}, (info.device_name, got)
        assert line in " ".join(_probe(capsys)[1].split())



def test_small_m_section_names_a_gpu_models_own_quantizing_configs(node, capsys, monkeypatch, tmp_path):
    """Quantizing configs installed with ``--own-rows`` serve their GPU model only: the probe on that model says it
    takes its own, another model of the arch still the arch's."""
    from fused_quant.kernels import gemm_launch as g

    data = json.loads(g.SMALL_M_QUANTIZING_FILE.read_text())
    data["models"] = {"NVIDIA H200": {"device": "NVIDIA H200", "date": "2026-12-07"}}
    data["rows"].append({**data["rows"][0], "device": "NVIDIA H200"})
    table = tmp_path / "q.json"
    table.write_text(json.dumps(data))
    monkeypatch.setattr(g, "SMALL_M_QUANTIZING_FILE", table)
    node(H200)
    got = json.loads(_probe(capsys, "--json")[1])["small_m_table"]
    assert got["quantizing_line"] == "int8 per-token quantizing calls: configs of this GPU model's own (2026-12-07)"
    node(dataclasses.replace(H200, device_name="NVIDIA H100 80GB HBM3"))
    got = json.loads(_probe(capsys, "--json")[1])["small_m_table"]
    assert got["quantizing_line"].startswith("int8 per-token quantizing calls: sm_90 configs measured on")


def test_small_m_section_says_whose_int8_tiles_this_gpu_takes(node, capsys, monkeypatch):
    """The Triton int8 GEMM's tiles past 256 tokens: a GPU model with its own rows (``INT8_GEMM_DEVICE_CONFIGS``)
    is told so; any other node takes the default rows, is told which GPU model measured them, which models have
    their own and how to measure them."""
    from fused_quant.kernels import gemm_launch

    own = dataclasses.replace(H200, device_name="NVIDIA A GPU MODEL")
    a100 = dataclasses.replace(H200, arch="sm_80", device_name="NVIDIA A100-SXM4-80GB")
    mi300 = PlatformInfo("amd", "gfx942", "AMD Instinct MI300X", 8, torch.float8_e4m3fnuz, True, "rocm 6.3",
                         "amdsmi: 8 x MI300X", "3.5.1")
    monkeypatch.setattr(gemm_launch, "INT8_GEMM_DEVICE_CONFIGS", {own.device_name: gemm_launch.INT8_GEMM_CONFIGS})
    others = ("int8 GEMM past 256 tokens: the tiles measured on NVIDIA H100 80GB HBM3 (own tiles for NVIDIA A GPU "
              "MODEL; python -m benchmarks.sweep_int8_gemm --out DIR measures them)")
    want = {own: "int8 GEMM past 256 tokens: the tiles measured on this GPU model (NVIDIA A GPU MODEL), read through "
                 "tensor descriptors (TMA) on this sm_90",
            H200: others + ", read through tensor descriptors (TMA) on this sm_90",
            a100: others + ", read through pointers on this sm_80 (tensor descriptors need NVIDIA SM90+)",
            mi300: others + ", read through pointers on this gfx942 (tensor descriptors need NVIDIA SM90+)",
            CPU: others}
    for info, line in want.items():
        node(info)
        got = json.loads(_probe(capsys, "--json")[1])["small_m_table"]
        assert got["int8_tiles_line"] == line, (info.device_name, got)
        assert line in " ".join(_probe(capsys)[1].split())  # the text form, its wrapping undone


def test_a_config_table_the_provider_refuses_is_one_line_and_exit_2(node, capsys, monkeypatch, tmp_path):
    """A committed small-M table edited into one the provider refuses (a row of 3 warps): probe says so in its
    small-M section and in one stderr line, exit 2, no traceback."""
    from fused_quant.kernels import gemm_launch as g

    data = json.loads(g.SMALL_M_CONFIG_FILE.read_text())
    data["rows"][5]["num_warps"] = 3
    table = tmp_path / "small_m_gemm_configs.json"
    table.write_text(json.dumps(data))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    node(CPU)
    code = cli.main(["probe"])
    out, err = capsys.readouterr()
    assert code == 2 and "small-M  : cannot be read: small-M config table" in out
    assert err.startswith("probe: small-M config table") and "row 5" in err and "num_warps" in err
    assert err.count("\n") == 1
    code, out = _probe(capsys, "--json")
    assert code == 2 and "num_warps" in json.loads(out)["small_m_table"]["error"]
