"""Forty-second round, run 1: is the int8 per-token MLP's slowdown in ``bench mlp``'s sustained sequence at >= 1024
tokens (384.8 us on the H200 against 306.96 in ``trace_mlp``, round 41; FP8 per-token 316.8 against 287.87) the
power cap? Each arm, in rotated turns: after an idle pause a short "cold" timing (seven replays of one graph of
``CALLS`` MLP calls, as ``bench mlp`` and ``trace_mlp`` time), then ``SUSTAIN`` seconds of back-to-back replays
("sustained": blocks of replays, each block timed by events; the blocks of the window's last two thirds, median).
``nvidia-smi`` samples SM clock, power and the throttle reasons every 100 ms; each phase's samples are joined by
wall time: median clock and power, the share of samples with the software power cap active, and the energy per MLP
call (median power x time per call). Arms: bf16, FP8 per-token, the int8 per-token MLP as installed, and the int8
MLP with its Triton int8 GEMM in other tiles (every table row replaced by one; the output bits must equal the
installed arm's).

Usage: python run1_sustained.py M[,M...] OUT.json
"""

import datetime
import json
import statistics
import subprocess
import sys
import time

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import captured, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

CALLS = 8
IDLE_S, SUSTAIN_S = 2.0, 3.0
INSTALLED = g.INT8_GEMM_CONFIGS
TILES = {"int8 128x128x256 flat": (128, 128, 256, 8, 8, 3, "tma persistent flat"),
         "int8 128x256x128 s3 tma": (128, 256, 128, 8, 8, 3, "tma"),
         "int8 128x128x128 w4 persistent": (128, 128, 128, 8, 4, 4, "tma persistent")}
SMI = ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
       "--format=csv,noheader,nounits", "-lms", "100"]
SW_POWER_CAP = 0x4


def use(arm: str) -> None:
    g.INT8_GEMM_CONFIGS = ((1 << 62, *TILES[arm]),) if arm in TILES else INSTALLED
    fused_quant.reset()


def now() -> str:
    return datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")


def cold_us(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(7):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / CALLS)
    return statistics.median(times)


def sustained_us(graph, seconds: float, one_us: float) -> tuple[float, list[float]]:
    per_block = max(1, int(10e3 / (one_us * CALLS)))  # about 10 ms of GPU time a block
    blocks = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(per_block):
            graph.replay()
        end.record()
        end.synchronize()
        blocks.append(start.elapsed_time(end) * 1e3 / (per_block * CALLS))
    tail = blocks[len(blocks) // 3:]
    return statistics.median(tail), blocks


def parse_samples(path: str) -> list[tuple]:
    out = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        try:
            ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
            out.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), int(parts[4], 16)))
        except ValueError:
            continue
    return out


def join(phases: list[dict], samples: list[tuple]) -> None:
    for ph in phases:
        t0 = datetime.datetime.strptime(ph["t0"], "%Y/%m/%d %H:%M:%S.%f")
        t1 = datetime.datetime.strptime(ph["t1"], "%Y/%m/%d %H:%M:%S.%f")
        inside = [s for s in samples if t0 <= s[0] <= t1]
        ph["samples"] = len(inside)
        if inside:
            ph["clock_mhz"] = statistics.median(s[1] for s in inside)
            ph["power_w"] = statistics.median(s[2] for s in inside)
            ph["temp_c"] = max(s[3] for s in inside)
            ph["power_cap_share"] = sum(1 for s in inside if s[4] & SW_POWER_CAP) / len(inside)
            ph["mj_per_call"] = ph["power_w"] * ph["us"] * 1e-3


def main():
    ms = [int(v) for v in sys.argv[1].split(",")]
    out_path = sys.argv[2]
    smi_path = out_path.replace(".json", "_smi.csv")
    smi = subprocess.Popen(SMI, stdout=open(smi_path, "w"), stderr=subprocess.STDOUT)
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    mlps = {"bf16": decode._mlp(None, d, h, 2), "fp8_token": decode._mlp(K.kFp8DynamicTokenSym, d, h, 2)}
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    mlps["int8 installed"] = int8
    for arm in TILES:
        mlps[arm] = int8
    names = list(mlps)
    result = {"versions": versions(), "idle_s": IDLE_S, "sustain_s": SUSTAIN_S, "calls": CALLS, "tiles": TILES,
              "installed": INSTALLED, "phases": []}
    print(result["versions"], flush=True)
    try:
        for m in ms:
            x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
            bits = {}
            for turn in range(3):
                for arm in names[turn:] + names[:turn]:
                    fns = mlps[arm]
                    use(arm)
                    if arm.startswith("int8"):
                        got = fns[0](x).view(torch.int16)
                        bits.setdefault("int8 installed" if arm == "int8 installed" else arm, got)
                    graph = captured([lambda f=f: f(x) for f in fns], CALLS)
                    torch.cuda.synchronize()
                    time.sleep(IDLE_S)
                    t0 = now()
                    cold = cold_us(graph)
                    ph = {"M": m, "turn": turn, "arm": arm, "phase": "cold", "us": cold, "t0": t0, "t1": now()}
                    result["phases"].append(ph)
                    t0 = now()
                    sus, blocks = sustained_us(graph, SUSTAIN_S, cold)
                    result["phases"].append({"M": m, "turn": turn, "arm": arm, "phase": "sustained", "us": sus,
                                             "t0": t0, "t1": now(), "blocks_us": blocks})
                    del graph
                    print(f"M={m} turn {turn} {arm:32s} cold {cold:8.1f} us  sustained {sus:8.1f} us", flush=True)
            ref = bits["int8 installed"]
            result.setdefault("same_bits", {})[m] = {a: bool(torch.equal(v, ref)) for a, v in bits.items()}
            print(f"M={m} int8 arms' bits equal to the installed arm's: {result['same_bits'][m]}", flush=True)
    finally:
        use("int8 installed")
        time.sleep(0.3)
        smi.terminate()
        smi.wait()
    join(result["phases"], parse_samples(smi_path))
    json.dump(result, open(out_path, "w"), indent=1)
    print("\nmedians over turns: arm, phase, us per MLP, x bf16, SM MHz, W, power-cap share, mJ per call")
    for m in ms:
        for phase in ("cold", "sustained"):
            rows = {}
            for arm in names:
                sel = [p for p in result["phases"] if p["M"] == m and p["arm"] == arm and p["phase"] == phase]
                med = lambda key: statistics.median(p[key] for p in sel if key in p) if any(key in p for p in sel) \
                    else float("nan")
                rows[arm] = {k: med(k) for k in ("us", "clock_mhz", "power_w", "power_cap_share", "mj_per_call")}
            for arm, r in rows.items():
                print(f"M={m:5d} {phase:9s} {arm:32s} {r['us']:8.1f} us  x{rows['bf16']['us'] / r['us']:5.2f}  "
                      f"{r['clock_mhz']:6.0f} MHz {r['power_w']:6.0f} W  cap {r['power_cap_share']:4.2f}  "
                      f"{r['mj_per_call']:6.3f} mJ")


if __name__ == "__main__":
    main()
