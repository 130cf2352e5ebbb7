"""The operator's commands: probe (human and --json, non-zero for an impossible override),
selftest (passes on the torch backend, fails loudly when a producer is wrong) and the parser
itself (plain-text help, a help line for every flag, --version).

More: tests/test_cli_probe.py, tests/test_cli_selftest.py, tests/test_bench_cli.py."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fused_quant
from fused_quant import cli, envs, flags
from tests.cli_fixtures import run_cli


def test_probe_names_the_torch_backend_and_why():
    r = run_cli("probe")
    assert r.returncode == 0, r.stderr
    assert "backend  : torch" in r.stdout and "torch runs on every device" in r.stdout
    producers = r.stdout[r.stdout.index("producers:"):r.stdout.index("gemms    :")]
    assert "triton_fp8  silu_and_mul, relu2, identity -> fp8_static_tensor" in producers
    assert "int8_dynamic_token" in producers


def test_probe_json():
    r = run_cli("probe", "--json")
    report = json.loads(r.stdout)
    assert report["platform"]["vendor"] == "cpu"
    assert report["backend"]["name"] == "torch"
    assert "relu2 -> fp8_static_tensor" in report["producers"]["torch"]
    assert "torch_int8_f64 (int8)" in report["gemm_providers"]["torch"]


def test_probe_with_impossible_override_exits_nonzero_with_reason():
    r = run_cli("probe", env={"FUSED_QUANT_BACKEND": "triton_fp8"})
    assert r.returncode == 2
    assert "cannot run here" in r.stdout and "NVIDIA GPU" in r.stdout


def test_selftest_passes_on_torch_backend(capsys):
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "checks passed" in out
    assert "known answer" in out and "65,536" in out


def test_selftest_json(capsys):
    assert cli.main(["selftest", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and report["backend"] == "torch"
    assert len(report["checks"]) > 30


def test_selftest_warns_of_a_disabled_gemm_name_that_names_no_provider(capsys, monkeypatch):
    """A misspelt FUSED_QUANT_DISABLED_GEMMS entry disables nothing: selftest says so, as probe does (a warning,
    exit 0: a provider the application registers is unknown to the command)."""
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "int_mm_int8,scaled_mm")
    fused_quant.reset()
    try:
        assert cli.main(["selftest", "--backend", "torch"]) == 0
        out = capsys.readouterr().out
        assert "warning: FUSED_QUANT_DISABLED_GEMMS names no GEMM provider called 'scaled_mm'" in out
        assert cli.main(["selftest", "--json"]) == 0
        warning = json.loads(capsys.readouterr().out)["env_warnings"]["FUSED_QUANT_DISABLED_GEMMS"]
        assert "'scaled_mm'" in warning and "'int_mm_int8'" not in warning
        monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "int_mm_int8")
        fused_quant.reset()
        assert cli.main(["selftest", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["env_warnings"] == {}
    finally:
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fused_quant.reset()


def test_selftest_unavailable_backend_exits_2(capsys):
    assert cli.main(["selftest", "--backend", "triton_fp8"]) == 2
    with pytest.raises(SystemExit) as exc:  # not a backend: argparse's usage error
        cli.main(["selftest", "--backend", "nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --backend: expected one of torch, triton_fp8, hip_w8a8, got 'nope'" in err


def test_selftest_catches_a_wrong_producer(monkeypatch, capsys):
    """Known answers make selftest meaningful even though the torch backend is the reference."""
    from fused_quant import selftest
    from fused_quant.selftest_vectors import VECTORS

    real = selftest._run

    def off_by_one(act, x, key, scale, numerics, backend):
        q, s = real(act, x, key, scale, numerics, backend)
        if q.dtype == torch.int8:
            q = torch.where(q == 127, torch.full_like(q, 126), q)
        return q, s

    monkeypatch.setattr(selftest, "_run", off_by_one)
    assert cli.main(["selftest"]) == 1
    out = capsys.readouterr().out
    failed = [line.split(" ms  ", 1)[1] for line in out.splitlines() if line.startswith("FAIL")]
    assert "known answer: silu_and_mul int8 per-token" in failed
    this_node = [v for v in VECTORS if not (v.key.startswith("fp8") and v.fp8 != "e4m3fn")]
    with_127 = [v for v in this_node if v.key.startswith("int8") and any(127 in row for row in v.q)]
    assert len(with_127) >= 5 and sorted(f"known answer: {v.name}" for v in with_127) == sorted(
        name for name in failed if name.startswith("known answer"))
    assert f"known answers : {len(this_node) - len(with_127)}/{len(this_node)} passed" in out


@pytest.mark.parametrize("argv", [["bench", "act_quant", "--quick"]])
def test_bench_without_gpu_says_so(argv, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(argv) == 2
    assert "needs a GPU" in capsys.readouterr().err


# --- the parser (item 13 of issue 14) ---------------------------------------------------------


def _all_parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_version(capsys):
    out = _help(capsys, "--version")
    assert out.startswith(f"fused-quant {fused_quant.__version__} (torch {torch.__version__}, python ")


@pytest.mark.parametrize("args", [(), ("probe",), ("selftest",), ("bench",)], ids=lambda a: " ".join(a) or "top")
def test_help_is_plain_text(args, capsys):
    out = _help(capsys, *args, "--help")
    assert "``" not in out and ":func:" not in out
    assert out.startswith("usage: fused-quant")
    assert len(out.split("\n\n")) >= 3, "usage, a description, the options"


def test_top_help_lists_commands_environment_and_examples(capsys):
    out = _help(capsys, "--help")
    for command in ("probe", "selftest", "bench"):
        assert f"    {command} " in out
    for name in envs.VARIABLES:
        assert f"  {name}  " in out
    assert "examples:" in out and "fused-quant selftest --backend triton_fp8" in out


def test_every_flag_has_a_help_line():
    missing = [f"{parser.prog} {action.dest}" for parser in _all_parsers(cli.build_parser())
               for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction) and not action.help]
    assert not missing, f"flags without help: {missing}"


def test_backend_flag_lists_the_backend_table(capsys):
    from fused_quant.selection import BACKENDS

    (selftest,) = [p for p in _all_parsers(cli.build_parser()) if p.prog == "fused-quant selftest"]
    (flag,) = [a for a in selftest._actions if "--backend" in a.option_strings]
    assert [flag.type(name) for name in BACKENDS] == list(BACKENDS)  # the flag takes every backend's name
    assert f"one of: {', '.join(BACKENDS)}" in _help(capsys, "selftest", "--help").replace("\n" + " " * 18, " ")


def test_probe_into_a_closed_pipe_is_quiet():
    """`fused-quant probe | head -1`: no BrokenPipeError traceback once the reader has gone."""
    done = subprocess.run(f"{sys.executable} -m fused_quant probe | head -1", shell=True, capture_output=True,
                          text=True)
    assert done.stdout.startswith("platform : ")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


def test_selftest_into_a_closed_pipe_exits_141_not_a_failed_check():
    """`fused-quant selftest | head -2`: the checks left unrun are not a failed check (1) but a reader that left,
    the status a shell gives a command SIGPIPE ended (141), with no traceback."""
    done = subprocess.run(f"{sys.executable} -m fused_quant selftest | head -2; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="bash", capture_output=True, text=True)
    assert done.returncode == cli.BROKEN_PIPE == 141, done.stderr
    assert done.stdout.startswith("selftest backend=torch") and "Traceback" not in done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device every write to fails)")
@pytest.mark.parametrize("command", ["probe", "selftest --json", "--help", "--version", "probe --help"])
def test_output_that_cannot_be_written_is_one_line_and_status_74(command):
    """`fused-quant probe > /dev/full` (a full disk): one line naming why, sysexits' EX_IOERR, no traceback; also
    what argparse prints (help, version: it exited 0 with nothing said)."""
    done = subprocess.run(f"{sys.executable} -m fused_quant {command} > /dev/full", shell=True, capture_output=True,
                          text=True, env={**os.environ, "FUSED_QUANT_BACKEND": "torch"})
    assert done.returncode == cli.OUTPUT_FAILED == 74, done.stderr
    who = "fused-quant" if command.startswith("--") or command.endswith("--help") else command.split()[0]
    assert done.stderr == f"{who}: cannot write its output: No space left on device\n"


@pytest.mark.parametrize("error", [FileNotFoundError(2, "No such file or directory", "somewhere"),
                                   OSError(28, "No space left on device", "cache/kernel.cubin")], ids=["ENOENT", "ENOSPC"])
def test_other_os_errors_are_not_taken_for_the_output(error, monkeypatch, capsys):
    """Only a write to stdout that failed is "cannot write its output": another OSError, a full disk under a
    kernel cache included, is raised as it is, and what was printed before it stays printed."""
    def failing(*args, **kwargs):
        print("a line before it")
        raise error

    monkeypatch.setattr(cli, "build_parser", _parser_calling(cli.build_parser, "selftest", failing))
    with pytest.raises(type(error)) as raised:
        cli.main(["selftest"])
    assert raised.value is error and capsys.readouterr().out == "a line before it\n"
    assert not isinstance(sys.stdout, flags._Stdout)  # stdout given back


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", _parser_calling(cli.build_parser, "selftest", interrupted))
    assert cli.main(["selftest"]) == cli.INTERRUPTED == 130
    assert capsys.readouterr().err == "\nselftest: interrupted\n"


def _parser_calling(build, command: str, func):
    def built():
        parser = build()
        for sub in _all_parsers(parser):
            if sub.prog.endswith(command):
                sub.set_defaults(func=func)
        return parser

    return built


@pytest.mark.parametrize("argv, said", [
    (["probe", "--js"], "unrecognized arguments: --js"),
    (["selftest", "--dev", "cpu"], "unrecognized arguments: --dev"),
    (["bench", "gemm", "gemm"], "unrecognized arguments: gemm"),
    (["bench", "--tp", "0"], "argument --tp: expected a whole number of GPUs >= 1, got '0'"),
    (["bench", "--tp", "1.5"], "argument --tp: expected a whole number of GPUs >= 1, got '1.5'"),
    (["bench", "--tp", "9" * 19], f"argument --tp: expected a whole number of GPUs >= 1 of at most 18 digits, got "
                                  f"'{'9' * 19}'"),
])
def test_abbreviated_flags_and_a_bad_gpu_count_are_refused(argv, said, capsys):
    """Each with the command's usage and name (an unknown flag after a command showed the top-level usage)."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and said in err
    assert err.startswith(f"usage: fused-quant {argv[0]} ") and f"\nfused-quant {argv[0]}: error: " in err, err


def test_backend_flag_names_what_was_typed_when_it_is_no_backend(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["selftest", "--backend", "TRITON"])
    assert exc.value.code == 2
    assert "argument --backend: expected one of torch, triton_fp8, hip_w8a8, got 'TRITON'" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["TORCH", " torch ", "Torch"])
def test_backend_flag_folds_case_and_spaces_as_the_variable_does(flag, capsys):
    assert cli.main(["selftest", "--backend", flag, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "torch"


def test_a_cpu_device_index_is_refused(capsys):
    assert cli.main(["selftest", "--device", "cpu:5"]) == 2
    assert capsys.readouterr().err == ("selftest: --device cpu:5: selftest takes cpu without an index; expected cpu, "
                                       "cuda or cuda:N\n")


def test_bench_checks_the_variables_before_it_makes_anything(tmp_path, capsys, monkeypatch):
    """A bad FUSED_QUANT_* value would stop a GPU run part-way (its first layer refuses it): refused first, one line,
    no folder made."""
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "nonsense")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    out = tmp_path / "run"
    assert cli.main(["bench", "gemm", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("bench: FUSED_QUANT_BACKEND='nonsense' is not a backend")
    assert not out.exists()


def test_bench_out_that_cannot_be_looked_at_is_one_line(capsys):
    assert cli.main(["bench", "--out", "a" * 300]) == 2
    assert capsys.readouterr().err == f"bench: --out {'a' * 300} cannot be used: File name too long\n"


def _fake_vllm(root, init: str, envs_py: str | None = None):
    pkg = root / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(init)
    if envs_py is not None:
        (pkg / "envs.py").write_text(envs_py)
    return {"PYTHONPATH": f"{root}:{Path(fused_quant.__file__).resolve().parent.parent}"}


@pytest.mark.parametrize("init, envs_py, said", [
    ("raise RuntimeError('libcudart.so.13: cannot open shared object file')", None,
     "vLLM import failed (RuntimeError: libcudart.so.13: cannot open shared object file)"),
    ("__version__ = '0.32.0'", "raise OSError('no config')",
     "vLLM's settings (vllm.envs.VLLM_PLUGINS) could not be read (OSError: no config)"),
])
def test_probe_vllm_reports_a_broken_vllm_install(tmp_path, init, envs_py, said):
    """vLLM installed but failing at import (a missing CUDA library) or in its settings: the probe's vllm row says
    so; the report is still made, no traceback."""
    r = run_cli("probe", "--vllm", "--json", env=_fake_vllm(tmp_path, init, envs_py))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    plugin = json.loads(r.stdout)["vllm_plugin"]  # README's install puts the plugin's entry point in place
    assert plugin["would_register"] is False and plugin["reason"] == said


def test_probe_json_backend_keeps_its_keys_when_the_backend_cannot_run():
    r = run_cli("probe", "--json", env={"FUSED_QUANT_BACKEND": "triton_fp8"})
    backend = json.loads(r.stdout)["backend"]
    assert r.returncode == 2 and set(backend) == set(json.loads(run_cli("probe", "--json").stdout)["backend"])
    assert backend["name"] is None and backend["reason"] is None and "cannot run here" in backend["error"]


def test_bench_force_without_out_is_refused(capsys):
    assert cli.main(["bench", "--force"]) == 2
    assert capsys.readouterr().err == "bench: --force writes into an existing --out folder; name one with --out DIR\n"


@pytest.mark.parametrize("text", ["9" * 19, "9" * 5000, "1," + "9" * 5000])
def test_numbers_past_any_count_are_refused_in_the_one_wording(text):
    """Python's int() refuses more than 4300 digits with its own ValueError, which escaped as a traceback from the
    scripts' --ms (and as argparse's "invalid <lambda> value" from the flags)."""
    with pytest.raises(argparse.ArgumentTypeError, match="expected token counts >= 1"):
        flags.whole_numbers(text, "token counts")
    with pytest.raises(argparse.ArgumentTypeError, match="expected a whole number >= 1"):
        flags.whole_number(text.split(",")[-1])
    assert flags.whole_numbers(" 1 , 18,1", "token counts") == (1, 18) and flags.whole_number(" 2 ") == 2
