"""``fused-quant selftest`` for an operator (item 15 of issue 14): a line per check as it finishes
(and the running check on a terminal), a summary telling the known answers from the comparisons
with the reference, ``--device`` checked before anything runs, errors that name the flag or
variable that chose the backend, and what hardware a backend is for.

Fake nodes replace the probe's ``_probe_now``; the real runs use the torch backend on the CPU."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys

import pytest
import torch

import fused_quant
from fused_quant import cli, selftest
from fused_quant import keys as K
from fused_quant.platforms import PlatformInfo
from tests.cli_fixtures import H200, node, run_cli  # noqa: F401  (node: a fixture)

CPU_NO_TRITON = PlatformInfo("cpu", fp8_dtype=torch.float8_e4m3fn, has_fp8=True, torch_build="cpu",
                             reason="no GPU found; torch cpu", triton_version=None)
H200_NO_TRITON = dataclasses.replace(H200, triton_version=None)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_run(monkeypatch):
    """Stand in for run_selftest (the fake nodes have no GPU to run on); records what it was asked."""
    asked = []

    def fake(backend, device, **progress):
        asked.append((backend, device))
        return [selftest.CheckResult("known answer: fake", True, "", 0.0, selftest.KNOWN_ANSWER)]

    monkeypatch.setattr(selftest, "run_selftest", fake)
    return asked


def _error_line(capsys, argv) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    return line


# --- progress -----------------------------------------------------------------------------------


def test_a_line_per_check_as_it_finishes(monkeypatch):
    """Each check starts with the result lines of all the checks before it already written."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    seen = []
    real_known, real_ref = selftest._known_answer, selftest._check_against_reference
    monkeypatch.setattr(selftest, "_known_answer",
                        lambda *a: seen.append(len(out.getvalue().splitlines())) or real_known(*a))
    monkeypatch.setattr(selftest, "_check_against_reference",
                        lambda *a: seen.append(len(out.getvalue().splitlines())) or real_ref(*a))
    real_gemm = selftest._gemm
    monkeypatch.setattr(selftest, "_gemm", lambda *a: seen.append(len(out.getvalue().splitlines())) or real_gemm(*a))
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    lines = out.getvalue().splitlines()
    results = [line for line in lines if line.startswith("PASS")]
    assert lines[0].startswith("selftest backend=torch device=cpu") and lines[1].startswith("node: ran on cpu")
    assert lines[2:len(results) + 2] == results  # then one line per check, then the summary
    # the known answers and the identity / relu2 sweeps start after 2 + i lines; a silu sweep compares 8 times
    assert seen[:20] == list(range(2, 22))
    assert sorted(set(seen)) == list(range(2, len(results) + 2))


def test_a_terminal_also_shows_the_running_check(monkeypatch):
    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    text = out.getvalue()
    total = text.count("\r\x1b[KPASS")  # each result line replaces the status line
    assert "\r\x1b[K[1/" in text and f"[{total}/{total}] gemm " in text
    assert "known answer: relu2 fp8 static: RNE tie, NaN, saturation ...\r\x1b[KPASS" in text


def test_the_status_line_fits_the_terminal(monkeypatch):
    """On an 80-column terminal a check's status line wrapped (names run to 94 characters), and ``\\r`` cleared only
    its last row: it is cut to the terminal's width, its end marked; a short one is written whole."""
    class Narrow(Terminal):
        def fileno(self) -> int:
            return 1

    monkeypatch.setattr(cli.os, "get_terminal_size", lambda fd: os.terminal_size((80, 24)))
    out = Narrow()
    started, finished = cli._progress(out, lines=False)
    names = [c.name for c in selftest.all_checks("torch", torch.device("cpu"))]
    long = max(names, key=len)
    assert len(long) > 80
    for i, name in enumerate((long, "gemm int8"), 1):
        started(i, 128, name)
    first, second = out.getvalue().split("\r\x1b[K")[1:]
    assert len(first) == 79 and first.endswith("~ ...") and first.startswith(f"[1/128] {long[:40]}")
    assert second == "[2/128] gemm int8 ..."


def test_json_stdout_is_json_alone_with_progress_on_a_terminal_stderr(monkeypatch, capsys):
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(["selftest", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert f"[{len(report['checks'])}/{len(report['checks'])}]" in err.getvalue()
    assert "PASS" not in err.getvalue()


def test_run_selftest_reports_progress():
    events = []
    results = selftest.run_selftest("torch", torch.device("cpu"),
                                    started=lambda i, n, name: events.append(("start", i, n, name)),
                                    finished=lambda i, n, r: events.append(("done", i, n, r.name)))
    n = len(results)
    assert events[:2] == [("start", 1, n, results[0].name), ("done", 1, n, results[0].name)]
    assert events[-1] == ("done", n, n, results[-1].name) and len(events) == 2 * n


# --- the summary --------------------------------------------------------------------------------


def test_summary_tells_known_answers_from_reference_comparisons(capsys):
    assert cli.main(["selftest", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    kinds = {c["kind"] for c in report["checks"]}
    known = sum(c["kind"] == "known answer" for c in report["checks"])
    gemms = sum(c["kind"] == "float64" for c in report["checks"])
    assert kinds == {"known answer", "reference", "float64"} and gemms == 16
    assert report["summary"]["known answer"]["passed"] == report["summary"]["known answer"]["total"] == known
    assert report["summary"]["reference"]["total"] == len(report["checks"]) - known - gemms
    assert report["summary"]["float64"]["passed"] == report["summary"]["float64"]["total"] == gemms
    assert "against float64" in report["summary"]["float64"]["meaning"]
    assert "independent of reference.py" in report["summary"]["known answer"]["meaning"]
    assert "compare the reference with itself" in report["summary"]["reference"]["meaning"]

    assert cli.main(["selftest"]) == 0
    out = capsys.readouterr().out.replace("\n" + " " * 18, " ")
    assert f"known answers : {known}/{known} passed; hand-written" in out
    n = len(report["checks"]) - known - gemms
    assert (f"vs reference  : {n}/{n} passed; the torch backend's producers are reference.py, so these compare "
            "the reference with itself") in out
    assert f"GEMMs         : {gemms}/{gemms} passed; torch's GEMMs through the checked entry" in out


def test_summary_of_another_backend_is_a_real_comparison():
    results = [selftest.CheckResult("a", True, "", 0, selftest.REFERENCE),
               selftest.CheckResult("b", False, "q differs", 0, selftest.REFERENCE),
               selftest.CheckResult("c", True, "", 0, selftest.KNOWN_ANSWER)]
    s = selftest.summary(results, "triton_fp8")
    assert (s["reference"]["passed"], s["reference"]["total"]) == (1, 2)
    assert (s["known answer"]["passed"], s["known answer"]["total"]) == (1, 1)
    assert s["reference"]["meaning"] == ("triton_fp8's producers bit for bit against fused_quant/reference.py "
                                         "on the same device")


# --- --device -----------------------------------------------------------------------------------


@pytest.mark.parametrize("device,message", [
    ("cuda", "selftest: --device cuda: torch {torch} is a CPU-only build; expected --device cpu"),
    ("cuda:1", "selftest: --device cuda:1: torch {torch} is a CPU-only build; expected --device cpu"),
    ("bogus", "selftest: --device 'bogus' is not a device; expected cpu, cuda or cuda:N"),
    ("", "selftest: --device '' is not a device; expected cpu, cuda or cuda:N"),  # was taken for no --device
    ("meta", "selftest: --device meta: selftest runs on cpu, cuda or cuda:N (ROCm GPUs are cuda devices too); "
             "got device type 'meta'"),
])
def test_bad_device_is_one_line_and_exit_2(node, capsys, device, message):
    node(CPU_NO_TRITON)
    assert _error_line(capsys, ["selftest", "--device", device]) == message.format(torch=torch.__version__)


def test_bad_device_from_the_shell():
    if torch.version.cuda or torch.version.hip:
        pytest.skip("needs a CPU-only build of torch")
    r = run_cli("selftest", "--device", "cuda")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [f"selftest: --device cuda: torch {torch.__version__} is a CPU-only build; "
                                     "expected --device cpu"]


def test_device_index_beyond_the_gpus(node, capsys):
    node(H200, gpus=2)
    line = _error_line(capsys, ["selftest", "--backend", "torch", "--device", "cuda:2"])
    assert line == "selftest: --device cuda:2: torch sees 2 GPU(s); expected cuda:0 to cuda:1"


def test_gpu_backend_on_cpu_device(node, capsys):
    node(H200, gpus=8)
    line = _error_line(capsys, ["selftest", "--backend", "triton_fp8", "--device", "cpu"])
    assert line == ("selftest: --device cpu: triton_fp8's kernels take GPU tensors; expected cuda or cuda:N "
                    "(--backend torch runs on the CPU)")


def test_cuda_build_without_a_visible_gpu(node, capsys):
    node(H200, gpus=0)
    line = _error_line(capsys, ["selftest", "--backend", "torch", "--device", "cuda"])
    assert line == "selftest: --device cuda: torch sees no GPU (8 x NVIDIA H200 (nvidia sm_90)); expected --device cpu"


def test_good_device_reaches_the_run(node, capsys, no_run):
    node(H200, gpus=8)
    assert cli.main(["selftest", "--device", "cuda:7"]) == 0
    assert no_run == [("triton_fp8", torch.device("cuda:7"))]
    # the torch backend on a GPU node runs where the node's calls do: the GPU (the CPU only where torch sees none)
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    assert no_run[-1] == ("torch", torch.device("cuda"))
    node(H200, gpus=0)
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    assert no_run[-1] == ("torch", torch.device("cpu"))
    node(CPU_NO_TRITON)
    assert cli.main(["selftest"]) == 0 and no_run[-1] == ("torch", torch.device("cpu"))


def test_backend_flag_with_a_variable_the_node_cannot_run_warns(node, capsys, monkeypatch, no_run):
    """``--backend torch`` tests the torch backend, but FUSED_QUANT_BACKEND=triton_fp8 on a CPU node makes the node's
    own calls refuse: the checks run and pass, and a warning line says so."""
    node(CPU_NO_TRITON)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "triton_fp8")
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the wrapped lines as one
    assert "warning: FUSED_QUANT_BACKEND=triton_fp8" in out
    assert "the node's own calls will refuse it (--backend torch tested another)" in out


def test_a_gpu_node_that_fell_back_to_torch_is_tested_on_its_gpu(node, capsys, no_run):
    """An H200 without triton runs the torch backend (auto's fallback): its calls run the reference on the GPU's
    tensors, so the selftest's default device is the GPU, and the header says the fallback."""
    node(H200_NO_TRITON, gpus=8)
    assert cli.main(["selftest"]) == 0
    assert no_run == [("torch", torch.device("cuda"))]
    assert "selftest backend=torch device=cuda (auto: " in capsys.readouterr().out


MI300 = PlatformInfo("amd", "gfx942", "AMD Instinct MI300X", 8, torch.float8_e4m3fnuz, True, "rocm 6.3",
                     "amdsmi: 8 x MI300X", "3.5.1")
HYGON = PlatformInfo("hygon", "gfx928", "K100_AI", 8, None, False, "hip 6.2 (dtk 25.04)", "hy-smi: 8 x K100_AI",
                     "3.1.0")


def test_a_node_quantizing_to_e4m3fnuz_checks_the_e4m3fnuz_known_answers(node, capsys):
    """A gfx942 node (e4m3fnuz) runs the known answers written in e4m3fnuz codes and the int8 ones, not the e4m3fn
    ones; on the torch backend (reference.py with the node's format) every check passes, which checks the
    reference's e4m3fnuz path against hand-written bytes. Nothing is reported skipped: the e4m3fn vectors are
    another node's."""
    node(MI300, gpus=0)
    names = {c.name for c in selftest.checks("torch", torch.device("cpu"))}
    fnuz = {f"known answer: {v.name}" for v in selftest.VECTORS if v.fp8 == "e4m3fnuz"}
    fn_fp8 = {f"known answer: {v.name}" for v in selftest.VECTORS if v.fp8 == "e4m3fn" and v.key.startswith("fp8")}
    int8 = {f"known answer: {v.name}" for v in selftest.VECTORS if v.key.startswith("int8")}
    assert fnuz and fn_fp8 and int8
    assert fnuz | int8 <= names and not fn_fp8 & names
    assert cli.main(["selftest", "--backend", "torch", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and report["node"]["fp8"] == "e4m3fnuz"
    known = report["summary"]["known answer"]
    assert known["passed"] == known["total"] == len(fnuz | int8) and known["skipped"] == 0
    node(H200, gpus=0)
    names = {c.name for c in selftest.checks("torch", torch.device("cpu"))}
    assert fn_fp8 | int8 <= names and not fnuz & names


def test_a_node_without_fp8_skips_the_fp8_checks_of_a_backend_that_refuses_them(node, capsys, monkeypatch):
    """A Hygon gfx928 has no FP8: hip_w8a8 refuses FP8 keys there, so its FP8 checks are skipped with the reason and
    counted as skipped (not failed: a healthy node), in text and JSON; the torch backend emulates FP8 and runs
    them all."""
    node(HYGON, gpus=0)
    every = list(selftest.all_checks("hip_w8a8", torch.device("cpu")))
    skipped = [c for c in every if c.skip]
    fp8 = [c for c in every if "fp8" in c.name]
    assert skipped == fp8 and len(fp8) > 20
    assert {c.skip for c in skipped} == {"gfx928 has no FP8: hip_w8a8 runs int8 keys only here"}
    ran = [c.name for c in selftest.checks("hip_w8a8", torch.device("cpu"))]
    assert ran == [c.name for c in every if not c.skip]
    assert not [c for c in selftest.all_checks("torch", torch.device("cpu")) if c.skip]
    kind_of = {c.name: c.kind for c in every}
    results = [selftest.CheckResult(name, True, "", 0.0, kind_of[name]) for name in ran]
    kinds = selftest.summary(results, "hip_w8a8")
    assert sum(k["skipped"] for k in kinds.values()) == len(fp8)
    assert kinds["float64"]["skipped"] == 2 * 4 and kinds["float64"]["total"] == 2 * 4  # the int8 keys' GEMMs ran
    for kind in kinds.values():
        assert kind["skipped_why"] == "gfx928 has no FP8: hip_w8a8 runs int8 keys only here"
    # the CLI's last line counts them (the run itself needs the GPU: stood in for)
    node(HYGON, gpus=8)
    monkeypatch.setattr(selftest, "run_selftest", lambda backend, device, **progress: results)
    code = cli.main(["selftest", "--backend", "hip_w8a8"])
    out = capsys.readouterr()
    assert code == 0, out
    assert f"{len(ran)}/{len(ran)} checks passed, {len(fp8)} skipped (above: why)" in out.out


def test_a_refused_selftest_with_json_still_prints_json(capsys):
    """``--json`` promises JSON on stdout: a refusal (exit 2) prints an object saying so, as well as the line on
    stderr."""
    assert cli.main(["selftest", "--backend", "triton_fp8", "--json"]) == 2
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["passed"] is False and report["error"].startswith("--backend triton_fp8 cannot run here")
    assert captured.err.startswith("selftest: --backend triton_fp8 cannot run here")


def test_the_header_names_the_node(capsys):
    """The header (and the JSON's ``node``) say what the checks ran on and with which versions, for an operator who
    collects reports from many nodes."""
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (f"node: ran on cpu, fp8 e4m3fn, fused-quant {fused_quant.__version__}, torch "
                        f"{torch.__version__}, triton {selftest_triton()}")


def selftest_triton() -> str:
    from fused_quant.platforms import probe

    return probe().triton_version or "not installed"


# --- which backend, and why not -----------------------------------------------------------------


def test_unavailable_backend_names_the_flag(capsys):
    line = _error_line(capsys, ["selftest", "--backend", "triton_fp8"])
    assert line.startswith("selftest: --backend triton_fp8 cannot run here: triton_fp8 needs an NVIDIA GPU")
    assert "FUSED_QUANT_BACKEND" not in line


def test_unavailable_backend_from_the_env_names_the_variable(node, capsys, monkeypatch):
    node(CPU_NO_TRITON)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "triton_fp8")
    line = _error_line(capsys, ["selftest"])
    assert line.startswith("selftest: FUSED_QUANT_BACKEND=triton_fp8 cannot run here: triton_fp8 needs an NVIDIA GPU")


def test_a_bad_variable_is_one_line_and_exit_2(node, capsys, monkeypatch, no_run):
    """The checks would pass on a node whose calls then refuse the variable: the operator hears of it first."""
    node(H200, gpus=8)
    monkeypatch.setenv("FUSED_QUANT_NUMERICS", "xyz")
    assert _error_line(capsys, ["selftest"]) == "selftest: FUSED_QUANT_NUMERICS='xyz' is not one of default, hcu"
    assert no_run == []


def test_gemm_kinds_the_disabled_gemms_leave_without_a_provider_are_skipped_with_a_warning(node, capsys, monkeypatch):
    """FUSED_QUANT_DISABLED_GEMMS=torch_int8_f64 leaves the torch backend no int8 GEMM: every such call of the node is
    refused, by the operator's choice. The int8 GEMM checks are skipped with that reason (they failed, exit 1) and
    the warning line probe prints is printed (text and JSON); every other check runs and passes."""
    node(CPU_NO_TRITON)
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "torch_int8_f64")
    skipped = {c.name: c.skip for c in selftest.all_checks("torch", torch.device("cpu")) if c.skip}
    want = ("FUSED_QUANT_DISABLED_GEMMS leaves no int8 GEMM provider for backend torch: every such GEMM call will be "
            "refused")
    assert len(skipped) == 8 and all(n.startswith("gemm int8_") and why == want for n, why in skipped.items()), skipped
    ran = []
    real = selftest._gemm
    monkeypatch.setattr(selftest, "_gemm", lambda key, *a: ran.append(key) or real(key, *a))
    monkeypatch.setattr(selftest, "_check_against_reference", lambda *a: "")  # the producer sweeps: not this test's
    assert cli.main(["selftest", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and report["env_warnings"] == {"FUSED_QUANT_DISABLED_GEMMS": want}
    assert report["summary"]["float64"]["skipped"] == 8 and len(ran) == 8 and all(K.is_fp8(k) for k in ran)
    assert cli.main(["selftest"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "8 skipped (FUSED_QUANT_DISABLED_GEMMS leaves no int8 GEMM provider" in out and f"warning: {want}" in out


def test_forced_backend_reason_names_the_flag(node, capsys, no_run):
    node(H200, gpus=8)
    assert cli.main(["selftest", "--backend", "hip_w8a8"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header == "selftest backend=hip_w8a8 device=cuda (--backend hip_w8a8: forced by --backend on nvidia sm_90)"


def test_hip_w8a8_on_a_cpu_node_asks_for_the_gpu_not_triton(node, capsys):
    node(CPU_NO_TRITON)
    line = _error_line(capsys, ["selftest", "--backend", "hip_w8a8"])
    assert line == ("selftest: --backend hip_w8a8 cannot run here: hip_w8a8 needs an AMD or Hygon GPU "
                    "(or a forced CUDA GPU); this node is cpu")


def test_hip_w8a8_on_nvidia_without_triton_says_both(node, capsys):
    node(H200_NO_TRITON, gpus=8)
    line = _error_line(capsys, ["selftest", "--backend", "hip_w8a8"])
    assert line == ("selftest: --backend hip_w8a8 cannot run here: hip_w8a8 needs triton; install "
                    "fused-quant[triton]; hip_w8a8 is meant for an AMD or Hygon GPU (or a forced CUDA GPU) "
                    "(this node: 8 x NVIDIA H200 (nvidia sm_90))")


def test_missing_triton_on_the_right_gpu_asks_for_triton_only(node, capsys):
    node(H200_NO_TRITON, gpus=8)
    line = _error_line(capsys, ["selftest", "--backend", "triton_fp8"])
    assert line == ("selftest: --backend triton_fp8 cannot run here: triton_fp8 needs triton; "
                    "install fused-quant[triton]")


def test_no_line_wider_than_100_columns(capsys):
    """The text output is wrapped to ``cli.WIDTH``, a check's result line included (the longest check names)."""
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    wide = [line for line in capsys.readouterr().out.splitlines() if len(line) > cli.WIDTH]
    assert not wide, wide
