"""``fused-quant probe | selftest | bench``: what a cluster operator runs on each node."""

from __future__ import annotations

import argparse
import json
import sys

from fused_quant import envs


def _producer_table() -> dict[str, list[str]]:
    from fused_quant import keys as K
    from fused_quant.registry import producers

    table: dict[str, list[str]] = {}
    for p in producers():
        table.setdefault(p.backend, []).append(f"{p.act} -> {K.key_name(p.key)}")
    return table


def _gemm_table() -> dict[str, list[str]]:
    from fused_quant.selection import BACKENDS
    from fused_quant.gemm import gemm_providers

    return {name: [f"{p.name} ({p.kind})" for p in gemm_providers(name)] for name in BACKENDS}


def cmd_probe(args) -> int:
    from fused_quant.selection import current_backend
    from fused_quant.platforms import probe
    from fused_quant.validation import BackendUnavailableError

    info = probe()
    report: dict[str, object] = {"platform": info.as_dict(), "env": envs.snapshot()}
    code = 0
    try:
        selected = current_backend()
        report["backend"] = {"name": selected.name, "reason": selected.reason, "requested": selected.requested}
    except BackendUnavailableError as exc:
        report["backend"] = {"name": None, "error": str(exc), "requested": envs.backend()}
        code = 2
    report["producers"] = _producer_table()
    report["gemm_providers"] = _gemm_table()
    if args.vllm:
        from fused_quant.integrations.vllm import describe

        report["vllm_plugin"] = describe()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return code
    p = report["platform"]
    print(f"platform : {p['vendor']} {p['arch'] or ''} {p['device_name'] or ''} x{p['device_count']}".rstrip())
    print(f"           torch {p['torch_build']}, triton {p['triton_version'] or 'not installed'}, "
          f"fp8 {p['fp8_dtype'] or 'none'}")
    print(f"           found by: {p['reason']}")
    b = report["backend"]
    if b["name"]:
        print(f"backend  : {b['name']}  ({b['reason']})")
    else:
        print(f"backend  : UNAVAILABLE  ({b['error']})")
    for name, value in report["env"].items():
        print(f"env      : {name}={value if value is not None else '(unset)'}")
    for backend, rows in report["producers"].items():
        print(f"producers[{backend}]: {', '.join(rows)}")
    for backend, rows in report["gemm_providers"].items():
        print(f"gemms[{backend}]: {', '.join(rows) or '(none)'}")
    if "vllm_plugin" in report:
        v = report["vllm_plugin"]
        print(f"vllm     : {v['vllm'] or 'not installed'} (tested {v['tested']}); would register: "
              f"{v['would_register']}{' - ' + v['reason'] if v['reason'] else ''}")
        for row in v.get("rows", []):
            print(f"vllm row : {row['activation']} -> {row['key']}: {row['action']}")
        if "kernel" in v:
            print(f"vllm     : int8 kernel {v['kernel']}; fusion {v['fusion']}")
    return code


def cmd_selftest(args) -> int:
    import torch

    from fused_quant.selection import current_backend, get_backend, select_backend
    from fused_quant.platforms import probe
    from fused_quant.selftest import run_selftest
    from fused_quant.validation import BackendUnavailableError

    try:
        if args.backend:
            get_backend(args.backend)
            name, reason = select_backend(probe(), args.backend)
        else:
            sel = current_backend()
            name, reason = sel.name, sel.reason
    except BackendUnavailableError as exc:
        print(f"selftest: {exc}", file=sys.stderr)
        return 2
    device = torch.device(args.device or ("cpu" if name == "torch" else "cuda"))
    results = run_selftest(name, device)
    failed = [r for r in results if not r.ok]
    if args.json:
        print(json.dumps({"backend": name, "reason": reason, "device": str(device), "passed": not failed,
                          "checks": [r.as_dict() for r in results]}, indent=2))
    else:
        width = max(len(r.name) for r in results)
        print(f"selftest backend={name} device={device} ({reason})")
        for r in results:
            print(f"{'PASS' if r.ok else 'FAIL'}  {r.name:<{width}}  {r.seconds * 1e3:8.1f} ms  {r.detail}")
        print(f"{len(results) - len(failed)}/{len(results)} checks passed")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    # the benchmarks are the checkout's benchmarks/ package beside fused_quant/, not part of the wheel
    import importlib
    from pathlib import Path

    import fused_quant

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fused-quant", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe", help="platform, selected backend and why, registered producers and GEMMs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--vllm", action="store_true", help="also show what the vLLM plugin would register")
    p.set_defaults(func=cmd_probe)
    s = sub.add_parser("selftest", help="bitwise conformance of a backend against the spec on this device")
    s.add_argument("--backend", help="backend to test (default: the selected one)")
    s.add_argument("--device", help="torch device (default: cpu for torch, cuda otherwise)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_selftest)
    b = sub.add_parser("bench", help="act_quant, GEMM and MLP benchmarks against the peers (GPU, source checkout)")
    b.add_argument("which", nargs="?", choices=("act_quant", "gemm", "host", "mlp", "all"), default="all",
                   help="which benchmark to run (default: all)")
    b.add_argument("--out", help="folder for the JSON and PNG output (default: a new bench-out/<UTC timestamp> "
                                 "in the checkout); an existing non-empty folder needs --force")
    b.add_argument("--force", action="store_true", help="write into an existing non-empty --out folder, "
                                                        "overwriting files of the same name")
    b.add_argument("--quick", action="store_true", help="fewer repetitions")
    b.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
