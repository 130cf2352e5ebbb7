"""Timers shared by the benchmarks (GPU): medians of ``triton.testing.do_bench`` (L2 flushed), GPU time
replayed from a CUDA graph, wall time of back-to-back calls (host included), host enqueue time, the
device copy ceiling and the versions a result is recorded with; matplotlib for the plots; and the scripts'
command-line checks (a GPU, ``--out``, token counts), each a line and exit 2 where it fails."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import fused_quant
from fused_quant.flags import whole_numbers


def bench_us(fn, quick: bool) -> float:
    """Median microseconds of ``fn`` (triton.testing.do_bench)."""
    import triton

    return 1e3 * triton.testing.do_bench(fn, warmup=10 if quick else 25, rep=30 if quick else 100,
                                         return_mode="median")


def bench_graph_us(fn) -> float:
    """Median microseconds of ``fn`` replayed from a CUDA graph (no host launch cost)."""
    import triton

    return 1e3 * triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median")


def copy_ceiling(quick: bool) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written), on a 2 GiB buffer."""
    src = torch.empty(1 << 30, dtype=torch.int16, device="cuda").random_()  # random bits, not whatever memory held
    dst = torch.empty_like(src)
    us = bench_us(lambda: dst.copy_(src), quick)
    return 2 * src.numel() * 2 / (us * 1e-6) / 1e9


def require_gpu(ap, prog: str) -> None:
    """Exit 2 with one line, as the scripts of benchmarks/ refuse what they cannot run, where torch sees no GPU."""
    if not torch.cuda.is_available():
        ap.exit(2, f"{prog}: needs a GPU (torch.cuda.is_available() is False)\n")


def token_counts(ap, flag: str, text: str, allowed=()) -> list[int]:
    """A script's comma-separated token counts (``--ms``): each a whole number >= 1, each once, and one of
    ``allowed`` where given, read as the ``fused-quant`` command reads its own; anything else exits 2 with one line
    naming the flag and what came."""
    try:
        return list(whole_numbers(text, "token counts", allowed=tuple(allowed)))
    except argparse.ArgumentTypeError as exc:
        ap.error(f"{flag}: {exc}")


class Log:
    """A script's log at ``path``, used as ``with Log(path) as log:``: a call prints its line and writes it to the
    file at once, ``quiet`` writes it to the file only (line-buffered: a run stopped part-way keeps every line it
    logged); the file is closed as the block ends. ``append``: after the lines already there (a run resumed)."""

    def __init__(self, path, append: bool = False) -> None:
        self.file = open(path, "a" if append else "w", buffering=1)

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.file.write(line + "\n")

    def quiet(self, line: str) -> None:
        self.file.write(line + "\n")


def rows_so_far(path):
    """A script's save of the rows it timed so far (``save(rows)``, after each row) into ``path``, with the
    versions, until the run's own JSON replaces it: a run stopped part-way keeps what it measured."""
    return lambda rows: path.write_text(json.dumps({"versions": versions(), "rows": rows}, indent=1))


def made_folder(out) -> str:
    """Make the folder ``out`` (and its parents); '' once it is there, else why it cannot be made."""
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--out {out} cannot be made: {exc.strerror or exc}"
    return ""


def out_folder(ap, out: str, prog: str):
    """``--out``'s folder, made now (before any timing): a path that is a file or cannot be made exits 2 with one
    line."""
    problem = made_folder(out)
    if problem:
        ap.exit(2, f"{prog}: {problem}\n")
    return Path(out)


def pyplot():
    """``matplotlib.pyplot`` drawing to files (the Agg backend), or None where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(fig, ax, path, ylabel: str | None = None, legend_size: int | None = None, dpi: int = 100) -> bool:
    """The end of a plot function: the first panel ``ax``'s y label and legend, the panels laid out, the picture
    written to ``path``; True, what the plot functions return once drawn (False, said on stderr, where the file
    cannot be written: a full disk)."""
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=dpi)
    except OSError as exc:
        print(f"cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def tree() -> str | None:
    """The commit of the checkout the package runs from, with ``+changes-<hash of the diff>`` where tracked files
    differ from it (a copy of a working tree whose git metadata is older than its files: two such copies of
    different files are told apart), or None outside a git checkout: two runs of one table must come from one
    tree."""
    root = Path(fused_quant.__file__).resolve().parent.parent
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10)
        if top.returncode or Path(top.stdout.strip()).resolve() != root:  # a wheel in a venv inside another checkout
            return None
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        diff = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--no-ext-diff", "--binary"],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):  # no git on the node
        return None
    if head.returncode or diff.returncode:  # not a checkout (an installed wheel)
        return None
    changes = f"+changes-{hashlib.sha1(diff.stdout).hexdigest()[:10]}" if diff.stdout else ""
    return head.stdout.strip() + changes


def versions() -> dict[str, object]:
    """What a result was measured with: the package's version and tree, versions, the GPU, the date, the backend
    that ran "ours" and every FUSED_QUANT_* variable (a forced backend, a disabled GEMM or PDL off change the
    numbers)."""
    import triton

    from fused_quant import envs
    from fused_quant.errors import BackendUnavailableError
    from fused_quant.selection import current_backend_name

    try:
        backend = current_backend_name()
    except BackendUnavailableError as exc:  # a sweep times its kernels directly: recorded, not refused
        backend = f"none ({exc})"
    return {"fused_quant": fused_quant.__version__, "tree": tree(), "torch": torch.__version__,
            "triton": triton.__version__, "python": platform.python_version(),
            "device": torch.cuda.get_device_name(), "cuda": str(torch.version.cuda),
            "date": time.strftime("%Y-%m-%d"), "backend": backend,
            "env": {name: value for name, value in envs.snapshot().items() if value is not None}}


def captured(fns: list, calls: int) -> torch.cuda.CUDAGraph:
    """One CUDA graph of ``calls`` calls of ``fns`` (called in turn), captured after a warm-up on a side
    stream (compiles and first-call binding happen outside the capture), replayed once."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in fns * 2:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fns[i % len(fns)]()
    graph.replay()
    torch.cuda.synchronize()
    return graph


@functools.cache
def _foreign_operand() -> torch.Tensor:
    return torch.zeros(1, device="cuda")


def foreign_kernel() -> None:
    """A one-element add: a plain ATen kernel, launched without programmatic dependent launch, as a decoder's
    RMSNorm before qkv and gate_up (attention before o) is to our kernels (``graph_us_after_foreign``)."""
    _foreign_operand().add_(1)


def graph_us_after_foreign(fns: list, calls: int | None = None, replays: int = 7) -> float:
    """``graph_us`` of ``fns`` with ``foreign_kernel`` before each call, less the foreign kernels' own time (a
    graph of them alone). Back to back, each of our calls may start while the one before it ends (PDL), which a
    call after another library's kernel cannot: on an H100 that made o and qkv's weight TB/s read up to 11% high
    and the MLP speed-ups up to 0.03x (benchmarks/RESULTS.md, fifty-fifth round)."""
    calls = calls or max(len(fns), 8)
    pairs = [f for fn in fns for f in (foreign_kernel, fn)]
    return 2 * graph_us(pairs, calls=2 * calls, replays=replays) - graph_us([foreign_kernel], calls, replays)


def timed_in_orders(calls: dict, time_of, orders) -> dict[str, list[float]]:
    """Each named call's times, ``time_of(call)`` once per order of ``orders`` (sequences of the names), in that
    order: the benchmarks time peers in turns whose order changes, so that no peer always runs first or last while
    the GPU's clocks drift."""
    out: dict[str, list[float]] = {name: [] for name in calls}
    for order in orders:
        for name in order:
            out[name].append(time_of(calls[name]))
    return out


def timed_passes(calls: dict, time_of) -> dict[str, list[float]]:
    """Each call's times (``time_of(call)``) over two passes, the second in the reverse order: on an H100 at its
    power cap one timing of the same tile moved by up to 14% within a sweep (benchmarks/RESULTS.md, fortieth round,
    run 4), and a drift over one pass favours the calls timed first; callers keep the lesser of a call's two."""
    names = list(calls)
    return timed_in_orders(calls, time_of, (names, names[::-1]))


HOLD_CYCLES = 1_000_000  # about 0.5 ms at the H100's / H200's clocks: longer than the host's launch of any graph here


def hold_stream() -> None:
    """Keep the stream busy (a GPU sleep of ``HOLD_CYCLES``) while the host launches the graph that follows, so that
    a start event recorded between them is reached when the graph can start, not before the host has launched it.
    With the stream idle each replay's window also held the host's launch of the graph, a bias toward its cost over
    the graph's calls, largest for the shortest calls (benchmarks/RESULTS.md, fifty-sixth round)."""
    torch.cuda._sleep(HOLD_CYCLES)


def graph_us(fns: list, calls: int | None = None, replays: int = 7) -> float:
    """Median GPU microseconds per call of ``fns`` (called in turn, each typically on its own copy of
    the operands) replayed from one CUDA graph of ``calls`` calls (``captured``), each replay's start event recorded
    behind ``hold_stream``."""
    calls = calls or max(len(fns), 8)
    graph = captured(fns, calls)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        hold_stream()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    del graph
    return statistics.median(times)


def sustained_us(fns: list, calls: int, seconds: float, block_ms: float = 10.0) -> float:
    """Median GPU microseconds per call of ``fns`` replayed back to back from one CUDA graph of ``calls`` calls
    (``captured``) for about ``seconds``: blocks of about ``block_ms`` of replays, each timed by events, the median
    of the blocks after the first third (``settled_median``). What a server running these calls without pause
    sees, at the power cap where the load takes the GPU there. ``graph_us``'s seven replays read whatever state
    the work before them left: at 1024 tokens one graph of the int8 MLP read 313-424 us in four such timings on
    an H100 (benchmarks/RESULTS.md, forty-second round, run 3), where three seconds of replays read that MLP at
    342-346 us in three turns (run 1)."""
    graph = captured(fns, calls)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    hold_stream()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    one_us = max(start.elapsed_time(end) * 1e3, 1.0)  # one replay; a timer reading of 0 taken as 1 us
    per_block = max(1, round(block_ms * 1e3 / one_us))
    blocks = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop or not blocks:  # no hold here: it would idle the GPU 0.5 ms in each 10 ms
        # block of a load meant to be without pause; the one launch in a block's window is about 0.2% of it
        start.record()
        for _ in range(per_block):
            graph.replay()
        end.record()
        end.synchronize()
        blocks.append(start.elapsed_time(end) * 1e3 / (per_block * calls))
    del graph
    return settled_median(blocks)


def settled_median(blocks: list[float]) -> float:
    """The median of ``blocks`` (times in the order they were taken) after the first third: under a sustained
    load the GPU's clocks settle within a fraction of a second (on an H100 from the second of fifteen slices of three
    seconds on, benchmarks/RESULTS.md, forty-second round)."""
    return statistics.median(blocks[len(blocks) // 3:])


def loop_us(fns: dict, target_ms: float = 40.0, rounds: int = 7) -> dict[str, float]:
    """Wall microseconds per call of back-to-back calls, host work included: best of ``rounds`` rounds
    of about ``target_ms`` each, the peers taking turns within each round."""
    n = {}
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        n[name] = int(min(1000, max(10, target_ms * 1e3 / ((time.perf_counter() - t0) / 5 * 1e6))))
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(n[name]):
                fn()
            torch.cuda.synchronize()
            best[name] = min(best[name], (time.perf_counter() - t0) / n[name] * 1e6)
    return best


def host_us(fn, calls: int = 1000, chunk: int = 100) -> float:
    """Host microseconds per call to enqueue ``calls`` back-to-back calls (``host_chunks``' mean)."""
    chunks = host_chunks(fn, calls, chunk)
    return sum(chunks) / len(chunks)


def host_chunks(fn, calls: int = 1000, chunk: int = 100) -> list[float]:
    """Host microseconds per call of each chunk of ``chunk`` back-to-back calls, ``calls // chunk`` chunks: a sync
    between chunks (outside the timing), so the launch queue never fills and the GPU is never what is timed. A
    chunk far above the others' median is the host's noise (another process), not the call's cost."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(max(calls // chunk, 1)):
        t0 = time.perf_counter()
        for _ in range(chunk):
            fn()
        out.append((time.perf_counter() - t0) / chunk * 1e6)
        torch.cuda.synchronize()
    return out


def progress(done: int, total: int, since: float, now: float | None = None) -> str:
    """``[done/total, elapsed, about N s left]`` for the lines of a long run (a sweep), the rest estimated at the rate
    so far; ``since`` and ``now`` from ``time.perf_counter()``."""
    elapsed = (time.perf_counter() if now is None else now) - since
    left = f", about {elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
    return f"[{done}/{total}, {elapsed:.0f} s{left}]"
