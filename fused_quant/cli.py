"""The ``fused-quant`` command (probe, selftest, bench): what a cluster operator runs on each node.

Text output is for people (wrapped to ``WIDTH`` columns, or a narrower terminal's); ``--json`` output is for
programs and only ever gains keys. Bad flags and environment values exit 2 with one line naming what was
expected and what came.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap

from fused_quant import envs, gemm
from fused_quant.flags import BROKEN_PIPE, INTERRUPTED, OUTPUT_FAILED, gpu_count, run_guarded, whole_numbers  # noqa: F401

WIDTH = 100  # columns of the text output
INDENT = " " * 11  # under the "platform : " labels

DESCRIPTION = """\
Check one node of a mixed GPU cluster: what the platform probe sees and which backend
fused-quant selects (probe), whether that backend's producers are bit-exact here
(selftest), and how fast its kernels are (bench)."""

EXAMPLES = """\
examples:
  fused-quant probe                           what this node has and which backend runs
  fused-quant probe --json                    the same, for programs
  fused-quant selftest                        conformance of the selected backend
  fused-quant selftest --backend triton_fp8   conformance of one backend
  fused-quant bench gemm --quick              the GEMM benchmarks (GPU, source checkout)
  fused-quant bench mlp --model DIR --tp 2    another decoder's MLP, the share one of 2 GPUs holds"""


def _wrap(prefix: str, text: str, hang: int = 2) -> str:
    """``prefix + text`` wrapped to WIDTH (a narrower terminal's width: ``_text_width``); continuation lines under the
    text, ``hang`` further in."""
    return textwrap.fill(text, _text_width(), initial_indent=prefix, subsequent_indent=" " * (len(prefix) + hang),
                         break_long_words=False, break_on_hyphens=False)


def _section(label: str, rows: list[str], hang: int = 2) -> list[str]:
    """``label    : row`` for the first row, the others under it, each row wrapped."""
    return [_wrap(f"{label:<9}: " if i == 0 else INDENT, row, hang) for i, row in enumerate(rows)]


def _fail(command: str, message: str) -> int:
    print(f"{command}: {message}", file=sys.stderr)
    return 2


# --- probe ------------------------------------------------------------------------------------


def _producer_table() -> dict[str, list[str]]:
    from fused_quant import keys as K
    from fused_quant.registry import producers

    table: dict[str, list[str]] = {}
    for p in producers():
        table.setdefault(p.backend, []).append(f"{p.act} -> {K.key_name(p.key)}")
    return table


def _gemm_table() -> dict[str, list[str]]:
    from fused_quant.selection import BACKENDS

    return {name: [f"{p.name} ({p.kind})" for p in gemm.gemm_providers(name)] for name in BACKENDS}


def _backend_table(info, selected: str | None, requested: str) -> dict[str, dict[str, str]]:
    """Backend name -> status (selected, available, if forced, unavailable) and the reason."""
    from fused_quant.selection import BACKENDS

    table = {}
    for name, row in BACKENDS.items():
        ok, why = row.is_available(info, explicit=name == requested)
        if name == selected:
            status = "selected"
        elif ok:
            status = "available"
        else:
            forced, forced_why = row.is_available(info, explicit=True)
            status = "if forced" if forced else "unavailable"
            # unavailable: why forcing it fails too (auto mode's reason may point at a forced run)
            why = f"{forced_why} (auto mode: {why})" if forced else forced_why
        table[name] = {"status": status, "reason": why}
    return table


def _grouped(rows: list[str]) -> list[str]:
    """``act -> key`` rows as ``act, act -> key, key``: activations with the same keys share a row."""
    keys_of: dict[str, list[str]] = {}
    for row in rows:
        act, _, key = row.partition(" -> ")
        keys_of.setdefault(act, []).append(key)
    acts_of: dict[tuple[str, ...], list[str]] = {}
    for act, keys in keys_of.items():
        acts_of.setdefault(tuple(keys), []).append(act)
    return [f"{', '.join(acts)} -> {', '.join(keys)}" for keys, acts in acts_of.items()]


def _env_errors() -> dict[str, str]:
    """Variable -> what is wrong with its value, for each FUSED_QUANT_* variable set to one the library refuses:
    ``envs.errors()`` and a FUSED_QUANT_BACKEND that names no backend (not one this node lacks)."""
    from fused_quant.selection import backend_name_error

    found = envs.errors()
    wrong = backend_name_error(envs.backend_as_set())
    if wrong:
        found["FUSED_QUANT_BACKEND"] = wrong
    return found


def probe_report(vllm: bool = False) -> tuple[dict[str, object], int]:
    """(the report ``fused-quant probe --json`` prints, its exit status)."""
    import torch

    import fused_quant
    from fused_quant.errors import BackendUnavailableError
    from fused_quant.platforms import probe
    from fused_quant.selection import current_backend, preferred_backend

    info = probe()
    report: dict[str, object] = {"version": fused_quant.__version__, "torch_version": torch.__version__,
                                 "platform": info.as_dict(), "env": envs.snapshot(),
                                 "env_defaults": {name: default for name, (default, *_) in envs.VARIABLES.items()}}
    code = 0
    try:
        selected = current_backend()
        preferred = preferred_backend(info)
        report["backend"] = {"name": selected.name, "reason": selected.reason, "error": None,
                             "requested": selected.requested, "preferred": preferred,
                             # auto mode took the torch backend where the node's own cannot run
                             "fallback": selected.requested == "auto" and selected.name != preferred}
    except BackendUnavailableError as exc:
        report["backend"] = {"name": None, "reason": None, "error": str(exc), "requested": envs.backend(),
                             "preferred": preferred_backend(info), "fallback": False}
        code = 2
    report["backends"] = _backend_table(info, report["backend"]["name"], report["backend"]["requested"])
    report["env_errors"] = _env_errors()
    # warnings, not errors: a provider the application registers is unknown to this command, and a node may never
    # run one kind of GEMM
    report["env_warnings"] = gemm.disabled_gemms_warning(report["backend"]["name"])
    if report["env_errors"]:
        code = 2
    report["producers"] = _producer_table()
    report["gemm_providers"] = _gemm_table()
    try:
        report["small_m_table"] = _small_m_table(info)
    except ValueError as exc:  # a committed table the provider refuses (edited by hand, a bad merge)
        line = f"cannot be read: {exc}"
        report["small_m_table"] = {"arch": info.arch, "device": info.device_name, "error": str(exc), "line": line,
                                   "quantizing_line": line, "int8_tiles_line": ""}
        code = 2
    if vllm:
        from fused_quant.integrations.vllm import describe

        report["vllm_plugin"] = describe()
    return report, code


def _small_m_table(info) -> dict[str, object]:
    """What the small-M GEMM's committed tables hold for this node's GPU: its model's own rows, or its arch's rows
    swept on which GPU (the provider chain takes the small-M GEMM where that sweep measured it faster), or none for
    the arch; where the int8 per-token quantizing calls' configs were measured (``quantizing_line``); and whose
    tiles the Triton int8 GEMM takes past 256 tokens, and how it reads them on this GPU (``int8_tiles_line``)."""
    from fused_quant.kernels.gemm_launch import (INT8_GEMM_DEVICE_CONFIGS, INT8_GEMM_MEASURED_ON,
                                                 SMALL_M_QUANTIZING_FILE, model_metas, table_metas, tma_arch_ok)

    metas, own = table_metas(), model_metas()
    swept, measured = _measured_on(metas), _measured_on(table_metas(SMALL_M_QUANTIZING_FILE))
    out: dict[str, object] = {"arch": info.arch, "device": info.device_name, "swept": swept, "quantizing": measured,
                              "models": _measured_on(own)}
    own_quantizing = model_metas(SMALL_M_QUANTIZING_FILE).get(info.device_name)
    if own_quantizing is not None:
        out["quantizing_line"] = (f"int8 per-token quantizing calls: configs of this GPU model's own "
                                  f"({own_quantizing.get('date', '?')})")
    elif info.arch in measured:
        out["quantizing_line"] = (f"int8 per-token quantizing calls: {info.arch} configs measured on "
                                  f"{measured[info.arch]}")
    else:
        out["quantizing_line"] = (f"int8 per-token quantizing calls: configs measured for {_listed(measured)}"
                                  + (f", none for {info.arch}: the table's rows ({_QUANTIZING} measures them)"
                                     if info.arch is not None else ""))
    kinds = ", ".join(INT8_GEMM_DEVICE_CONFIGS)
    if info.device_name in INT8_GEMM_DEVICE_CONFIGS:
        tiles = f"int8 GEMM past 256 tokens: the tiles measured on this GPU model ({info.device_name})"
    else:
        tiles = (f"int8 GEMM past 256 tokens: the tiles measured on {INT8_GEMM_MEASURED_ON} "
                 f"({f'own tiles for {kinds}' if kinds else 'no GPU model has tiles of its own'}; "
                 f"{_INT8_SWEEP} measures them)")
    if info.device_count and tma_arch_ok(info.arch):  # False for any arch but NVIDIA sm_XY
        tiles += f", read through tensor descriptors (TMA) on this {info.arch}"
    elif info.device_count:
        tiles += f", read through pointers on this {info.arch or 'GPU'} (tensor descriptors need NVIDIA SM90+)"
    out["int8_tiles_line"] = tiles
    rows = f"rows for {_listed(swept)}" + (f"; own rows for {', '.join(own)}" if own else "")
    if info.device_count == 0:
        out["line"] = f"{rows}; no GPU here"
    elif info.arch is None:
        out["line"] = f"{rows}; the probe did not read this GPU's arch (see probed: above)"
    elif info.device_name in own:
        meta = own[info.device_name]
        how = "the arch's configs timed again beside the torch providers here" if meta.get("retime") else "swept here"
        out["line"] = f"{info.arch} rows of this GPU model's own ({meta.get('date', '?')}: {how}{_since(info)})"
        if info.arch in metas:
            out["line"] += f"; the arch's rows ({swept[info.arch]}) where it has none"
    elif info.arch not in metas:
        out["line"] = (f"no rows for {info.arch}: the chain keeps torch._scaled_mm, torch._int_mm and the Triton int8 "
                       f"GEMM; {_SWEEP} measures them on this GPU")
    elif metas[info.arch].get("device") == info.device_name:
        out["line"] = f"{info.arch} rows swept on this GPU model ({swept[info.arch]}{_since(info, arch_rows=True)})"
    else:
        out["line"] = (f"{info.arch} rows swept on {swept[info.arch]}, not on this {info.device_name or 'GPU'}: "
                       f"the provider choices were measured there; {_SWEEP_OWN} measures this model's own")
    return out


def _since(info, arch_rows: bool = False) -> str:
    """'' or how many of the rows a line describes a later part-sweep installed (``gemm_launch.rows_since``)."""
    from fused_quant.kernels.gemm_launch import rows_since

    n = rows_since(info.arch, None if arch_rows else info.device_name)
    return f"; {n} row{'s' if n > 1 else ''} since, each stamped (swept, retimed)" if n else ""


def _measured_on(metas: dict[str, dict]) -> dict[str, str]:
    """``{arch (or GPU model): "GPU, date"}`` of a committed table's metas (``table_metas``, ``model_metas``)."""
    return {arch: f"{m.get('device', '?')}, {m.get('date', '?')}" for arch, m in metas.items()}


def _listed(measured: dict[str, str]) -> str:
    return ", ".join(f"{arch} ({where})" for arch, where in measured.items()) or "no arch"


_SWEEP = "python -m benchmarks.sweep_small_m_gemm --out DIR --install"
_SWEEP_OWN = "python -m benchmarks.sweep_small_m_gemm --out DIR --own-rows --install"
_QUANTIZING = "python -m benchmarks.quantizing_calls --out DIR --install"
_INT8_SWEEP = "python -m benchmarks.sweep_int8_gemm --out DIR"


def render_probe(report: dict[str, object]) -> str:
    """The text form of ``probe_report``."""
    import torch

    p, b = report["platform"], report["backend"]
    lines = _section("platform", [
        p["summary"],
        f"torch {report['torch_version']} ({p['torch_build']} build), triton {p['triton_version'] or 'not installed'}, "
        f"fp8 {p['fp8_dtype'] or 'none'}",
        f"probed: {p['reason']}",
    ])
    lines += _section("backend", [f"{b['name']}  ({b['reason']})" if b["name"] else f"UNAVAILABLE  ({b['error']})"])
    width = max(map(len, report["backends"]))
    lines += _section("backends", [f"{name:<{width}}  {row['status']:<11}  {row['reason']}"
                                   for name, row in report["backends"].items()], hang=width + 15)
    env_width = max(map(len, report["env"]))
    lines += _section("env", [f"{name:<{env_width}}  " + (repr(value) if value is not None else
                                                          f"(unset: {report['env_defaults'][name] or 'empty'})")
                              for name, value in report["env"].items()])
    lines += _section("producers", [f"{backend:<{width}}  {row}" for backend, rows in report["producers"].items()
                                    for row in _grouped(rows)], hang=width + 4)
    lines += _section("gemms", [f"{backend:<{width}}  {', '.join(rows) or '(none)'}"
                                for backend, rows in report["gemm_providers"].items()], hang=width + 4)
    table = report["small_m_table"]
    lines += _section("small-M", [line for line in (table["line"], table["quantizing_line"], table["int8_tiles_line"])
                                  if line])
    if "vllm_plugin" in report:
        v = report["vllm_plugin"]
        lines += _section("vllm", [f"{v['vllm'] or 'not installed'} (tested {v['tested']}); would register: "
                                   f"{v['would_register']}{' - ' + v['reason'] if v['reason'] else ''}"])
        for row in v.get("rows", []):
            lines += _section("vllm row", [f"{row['activation']} -> {row['key']}: {row['action']}"])
        if "kernel" in v:
            lines += _section("vllm", [f"int8 kernel {v['kernel']}; fusion {v['fusion']}"])
    for message in report["env_errors"].values():
        lines += _section("error", [message])
    for message in report["env_warnings"].values():
        lines += _section("warning", [message])
    return "\n".join(lines)


def cmd_probe(args) -> int:
    report, code = probe_report(args.vllm)
    print(json.dumps(report, indent=2, default=str) if args.json else render_probe(report))
    if code:  # the report says it in its place; stderr says it too, as selftest's refusals do
        errors = list(dict.fromkeys([*report["env_errors"].values(), report["backend"].get("error"),
                                     report["small_m_table"].get("error")]))
        print("probe: " + "; ".join(e for e in errors if e), file=sys.stderr)
    return code


# --- selftest ---------------------------------------------------------------------------------


def _cannot_run(row, info, why: str) -> str:
    """``why`` a backend cannot run, saying what hardware it is for when the reason does not."""
    if info.vendor in row.vendors or row.any_device or row.hardware in why:
        return why
    return f"{why}; {row.name} is meant for {row.hardware} (this node: {info.summary()})"


def _selftest_device(flag: str | None, row, info):
    """(the device selftest runs ``row`` on, '') or (None, why ``--device`` cannot be used)."""
    import torch

    # by default where the node's calls run: its GPU, also for a backend that runs anywhere (the torch backend a
    # GPU node fell back to runs its producers on the GPU's tensors, with the GPU's kernels)
    on_gpu = not row.any_device or (info.torch_build != "cpu" and torch.cuda.device_count() > 0)
    text = flag if flag is not None else ("cuda" if on_gpu else "cpu")
    what = f"--device {text}" if flag is not None else f"the default device {text}"
    try:
        device = torch.device(text)
    except RuntimeError:
        return None, f"--device {text!r} is not a device; expected cpu, cuda or cuda:N"
    if device.type not in ("cpu", "cuda"):
        return None, (f"{what}: selftest runs on cpu, cuda or cuda:N (ROCm GPUs are cuda devices too); "
                      f"got device type {device.type!r}")
    if device.type == "cpu":
        if device.index is not None:
            return None, f"{what}: selftest takes cpu without an index; expected cpu, cuda or cuda:N"
        if not row.any_device:
            return None, (f"{what}: {row.name}'s kernels take GPU tensors; expected cuda or cuda:N "
                          "(--backend torch runs on the CPU)")
        return device, ""
    if info.torch_build == "cpu":
        return None, f"{what}: torch {torch.__version__} is a CPU-only build; expected --device cpu"
    count = torch.cuda.device_count()
    if count == 0:
        return None, f"{what}: torch sees no GPU ({info.summary()}); expected --device cpu"
    if device.index is not None and device.index >= count:
        return None, f"{what}: torch sees {count} GPU(s); expected cuda:0 to cuda:{count - 1}"
    return device, ""


def _result_line(r) -> str:
    line = f"{'PASS' if r.ok else 'FAIL'}  {r.seconds * 1e3:8.1f} ms  {r.name}"
    return line if r.ok else f"{line}\n{_wrap(' ' * 6, r.detail)}"


def _columns(stream) -> int:
    """The width of the terminal ``stream`` writes to (WIDTH where it tells none)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or WIDTH
    except (AttributeError, OSError, ValueError):  # no file descriptor (a test's stream), or not a terminal
        return WIDTH


def _text_width() -> int:
    """The text output's width: WIDTH, or the terminal's where stdout is a narrower one (at least 60 columns, which
    the probe's label and table columns need); files and pipes get WIDTH."""
    return max(60, min(WIDTH, _columns(sys.stdout)))


def _fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters (its end marked with ~), at least 20."""
    width = max(width, 20)
    return text if len(text) <= width else text[:width - 1] + "~"


def _progress(stream, lines: bool):
    """(started, finished) callbacks for ``run_selftest``: a line per finished check when ``lines``;
    on a terminal, also the check now running on a status line that the next output replaces."""
    live = stream.isatty()

    def started(i: int, total: int, name: str) -> None:
        if live:
            # within the terminal's width: a line that wraps leaves its first rows behind, which \r cannot clear
            text = _fit(f"[{i}/{total}] {name}", _columns(stream) - 5) + " ..."
            stream.write(f"\r\x1b[K{text}")  # \x1b[K: clear to the end of the line
            stream.flush()

    def finished(i: int, total: int, result) -> None:
        if live:
            stream.write("\r\x1b[K")
        if lines:
            stream.write(_result_line(result) + "\n")
        stream.flush()

    return started, finished


def _selftest_node(info, device) -> dict[str, str]:
    """What an operator collecting selftest reports from many nodes needs to tell them apart: the GPU the checks
    ran on (model and arch) or the CPU, its FP8 format and the versions."""
    import torch

    import fused_quant
    from fused_quant.registry import platform_fp8_dtype

    # the card the checks run on (--device cuda:N), not the probe's first
    name = torch.cuda.get_device_name(device) if torch.cuda.is_available() else info.device_name
    gpu = f"{name or 'GPU'} ({info.arch or 'arch not read'})" if device.type == "cuda" else "cpu"
    fp8 = str(platform_fp8_dtype()).removeprefix("torch.float8_")
    return {"ran on": gpu, "fp8": fp8 if info.has_fp8 else f"none on this arch ({fp8} emulated by the torch backend)",
            "fused-quant": fused_quant.__version__, "torch": torch.__version__,
            "triton": info.triton_version or "not installed"}


def cmd_selftest(args) -> int:
    from fused_quant.errors import BackendUnavailableError
    from fused_quant.platforms import probe
    from fused_quant.selection import current_backend, get_backend
    from fused_quant.selftest import FLOAT64, KNOWN_ANSWER, REFERENCE, run_selftest, summary

    def refuse(message: str) -> int:  # with --json, stdout still says it, as a JSON object
        if args.json:
            print(json.dumps({"passed": False, "error": message}, indent=2))
        return _fail("selftest", message)

    bad_env = _env_errors()
    if bad_env:  # the checks would pass on a node whose calls then refuse the variable (--backend's too)
        return refuse("; ".join(bad_env.values()))
    info = probe()
    refused = ""  # the backend the node's own calls would select, where it cannot run (--backend tests another)
    if args.backend:
        try:
            current_backend()
        except BackendUnavailableError as exc:
            refused = f"{exc}; the node's own calls will refuse it (--backend {args.backend} tested another)"
        row = get_backend(args.backend)  # argparse checked the name
        ok, why = row.is_available(info, explicit=True)
        if not ok:
            return refuse(f"--backend {row.name} cannot run here: {_cannot_run(row, info, why)}")
        # the row's reasons speak of the variable; here the flag forced it
        reason = f"--backend {row.name}: {why.replace('FUSED_QUANT_BACKEND', '--backend')}"
    else:
        try:
            selected = current_backend()
        except BackendUnavailableError as exc:
            return refuse(str(exc))
        row, reason = selected.backend, selected.reason
    device, problem = _selftest_device(args.device, row, info)
    if device is None:
        return refuse(problem)

    node = _selftest_node(info, device)
    if args.json:  # stdout is the JSON alone; a terminal on stderr shows the running check
        started, finished = _progress(sys.stderr, lines=False) if sys.stderr.isatty() else (None, None)
    else:
        print(f"selftest backend={row.name} device={device} ({reason})", flush=True)
        print(_wrap("node: ", ", ".join(f"{k} {v}" for k, v in node.items())), flush=True)
        started, finished = _progress(sys.stdout, lines=True)
    results = run_selftest(row.name, device, started=started, finished=finished)
    failed = [r for r in results if not r.ok]
    kinds = summary(results, row.name)
    # as probe warns (the checks ran with every provider the names leave on; a kind left without one was skipped)
    warnings = gemm.disabled_gemms_warning(row.name)
    if refused:
        warnings["FUSED_QUANT_BACKEND"] = refused
    if args.json:
        print(json.dumps({"backend": row.name, "reason": reason, "device": str(device), "node": node,
                          "passed": not failed, "summary": kinds, "checks": [r.as_dict() for r in results],
                          "env_warnings": warnings}, indent=2))
    else:
        for kind, label in ((KNOWN_ANSWER, "known answers"), (REFERENCE, "vs reference"), (FLOAT64, "GEMMs")):
            k = kinds[kind]
            left_out = f", {k['skipped']} skipped ({k['skipped_why']})" if k["skipped"] else ""
            print(_wrap(f"{label:<14}: ", f"{k['passed']}/{k['total']} passed{left_out}; {k['meaning']}"))
        left_out = sum(k["skipped"] for k in kinds.values())
        print(f"{len(results) - len(failed)}/{len(results)} checks passed"
              + (f", {left_out} skipped (above: why)" if left_out else ""))
        for message in warnings.values():
            print(_wrap("warning: ", message))
    return 1 if failed else 0


# --- bench ------------------------------------------------------------------------------------


def cmd_bench(args) -> int:
    # the benchmarks are the checkout's benchmarks/ package beside fused_quant/, not part of the wheel
    import importlib
    from pathlib import Path

    import fused_quant

    bad_env = _env_errors()
    if bad_env:  # before anything is made: a bad value would stop the run part-way, its folder empty
        return _fail("bench", "; ".join(bad_env.values()))

    root = Path(fused_quant.__file__).resolve().parent.parent
    where = root / "benchmarks"
    if not (where / "bench.py").is_file():
        print(f"bench: no {where / 'bench.py'} beside the fused_quant package; `fused-quant bench` runs from a "
              "source checkout of fused-quant (an installed wheel has no benchmarks)", file=sys.stderr)
        return 2
    if not any(Path(p or ".").resolve() == root for p in sys.path):
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("benchmarks.bench")
    except ModuleNotFoundError as exc:
        if exc.name not in ("benchmarks", "benchmarks.bench"):
            raise
        module = None
    found = getattr(module, "__file__", None)
    if found is None or Path(found).resolve().parent != where:
        # another importable package named benchmarks comes first on sys.path
        print(f"bench: `import benchmarks.bench` finds {found or 'nothing'}, not {where / 'bench.py'}",
              file=sys.stderr)
        return 2
    return module.main(args)


# The most tokens ``--m`` takes: the benchmarks' largest (bench mlp's 16384) four times over; Llama-3-8B's MLP at 65536
# tokens holds 3.8 GB of activations, where a count past it would end in an out-of-memory error mid-run
MAX_BENCH_TOKENS = 65536


def _token_counts(text: str) -> tuple[int, ...]:
    """``--m``: token counts from 1 to ``MAX_BENCH_TOKENS`` separated by commas, in the order given, each once."""
    return whole_numbers(text, "token counts", most=MAX_BENCH_TOKENS)


def _backend_name(text: str) -> str:
    """``--backend``: a backend's name, in any case and with spaces around it, as FUSED_QUANT_BACKEND takes it."""
    from fused_quant.selection import BACKENDS

    name = text.strip().lower()
    if name not in BACKENDS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(BACKENDS)}, got {text!r}")
    return name


def _environment() -> str:
    lines = ["environment (read when first needed; `fused-quant probe` checks them):"]
    width = max(map(len, envs.VARIABLES))
    for name, (default, meaning) in envs.VARIABLES.items():
        lines.append(_wrap(f"  {name:<{width}}  ", f"{meaning} (default: {default or 'empty'})", hang=0))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    import platform

    import torch

    import fused_quant
    from fused_quant.selection import BACKENDS

    formatter = argparse.RawDescriptionHelpFormatter  # the description and epilog as written
    # allow_abbrev=False: a script that came to rely on --js for --json would break when a flag --js... is added
    parser = argparse.ArgumentParser(prog="fused-quant", description=DESCRIPTION, formatter_class=formatter,
                                     epilog=f"{_environment()}\n\n{EXAMPLES}", allow_abbrev=False)
    parser.add_argument("--version", action="version",
                        version=f"fused-quant {fused_quant.__version__} (torch {torch.__version__}, "
                                f"python {platform.python_version()})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("probe", allow_abbrev=False,
                       help="platform, backends, selected backend and why, env, producers and GEMMs",
                       description="What the platform probe sees on this node (it never creates a CUDA or HIP "
                                   "context), which backends can run and why, the one selected, the FUSED_QUANT_* "
                                   "variables (checked: a bad value exits 2) and the registered producers and "
                                   "GEMM providers. Exits 2 when the requested backend cannot run here.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--vllm", action="store_true", help="also show what the vLLM plugin would register")
    p.set_defaults(func=cmd_probe, parser=p)
    s = sub.add_parser("selftest", allow_abbrev=False,
                       help="conformance of a backend against the spec on this device: producers bit for bit, "
                            "GEMMs against float64",
                       description="Runs a backend's producers on this node against hand-written known answers "
                                   "and, bit for bit, against fused_quant/reference.py: every bf16 and fp16 pattern, "
                                   "every bf16 and fp16 gate, adversarial rows, both numerics profiles; then its "
                                   "GEMMs through the checked entry against float64. FP8 checks are skipped, with "
                                   "the reason, where the backend has no FP8 on this node. Exits 1 when a check "
                                   "fails, 2 when the backend or device cannot be used or a FUSED_QUANT_* variable "
                                   "has a bad value.")
    s.add_argument("--backend", type=_backend_name, metavar="NAME",
                   help=f"backend to test, one of: {', '.join(BACKENDS)} (default: the selected one, "
                        "see `fused-quant probe`)")
    s.add_argument("--device", metavar="DEV",
                   help="cpu, cuda or cuda:N (default: cuda where torch sees a GPU, whatever the backend; else "
                        "cpu)")
    s.add_argument("--json", action="store_true", help="print the results as JSON (progress goes to a terminal "
                                                       "on stderr only)")
    s.set_defaults(func=cmd_selftest, parser=s)
    b = sub.add_parser("bench", allow_abbrev=False,
                       help="act_quant, GEMM, host and MLP benchmarks against the peers (GPU, source checkout)",
                       description="The benchmarks of the checkout's benchmarks/ package (GPU): producers, the GEMM "
                                   "providers at M = 1-256, host cost per call, the Llama-3-8B MLP eager and under "
                                   "CUDA-graph replay (another decoder's with --model); JSON and PNG plots into --out.")
    b.add_argument("which", nargs="?", choices=("act_quant", "gemm", "host", "mlp", "all"), default="all",
                   help="which benchmark to run (default: all)")
    b.add_argument("--out", help="folder for the JSON and PNG output (default: a new "
                                 "bench-out/<UTC time>-<host>-<pid> in the checkout); an existing non-empty folder "
                                 "needs --force")
    b.add_argument("--force", action="store_true", help="write into an existing non-empty --out folder, "
                                                        "overwriting files of the same name")
    b.add_argument("--quick", action="store_true", help="fewer repetitions")
    b.add_argument("--m", type=_token_counts, metavar="M[,M...]",
                   help="the token counts act_quant, gemm and mlp time (default: each one's own set; host times "
                        "M = 1), e.g. --m 192,224 for a server whose batches fall between the swept sizes")
    b.add_argument("--model", metavar="CONFIG",
                   help="a Hugging Face config.json, or a model folder holding one: that dense decoder's linears and "
                        "MLP instead of Llama-3-8B's")
    b.add_argument("--tp", type=gpu_count, default=1, metavar="N",
                   help="tensor-parallel GPUs: time the shapes one of N GPUs holds (default: 1; checked against the "
                        "model's head counts and sizes, --model's or Llama-3-8B's)")
    b.set_defaults(func=cmd_bench, parser=b)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = "fused-quant"

    def body() -> int:
        nonlocal command
        try:
            parser = build_parser()
            args, extra = parser.parse_known_args(argv)
            if extra:  # told with the command's usage (the parser's own error shows the top-level one)
                args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
        except SystemExit:  # --help, --version, a usage error: what they printed is flushed here, its failure told
            sys.stdout.flush()
            raise
        command = args.command
        with gemm.unknown_disabled_gemms_told_elsewhere():  # probe, selftest and bench name it in their own warning line
            return args.func(args)

    return run_guarded(body, lambda: command)


if __name__ == "__main__":
    sys.exit(main())
