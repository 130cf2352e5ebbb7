"""Shared test helpers: bitwise comparison, the float64 GEMM reference, adversarial inputs."""

from __future__ import annotations

import torch

from fused_quant.reference import gemm_outside_bound
from fused_quant.selftest import adversarial_rows, all_bf16_patterns  # noqa: F401  (shared with selftest)

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)


def bit_patterns(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bit patterns as integers (FP8 as uint8, fp16 / bf16 as int16, fp32 as int32); others as they are."""
    if t.dtype in FP8_DTYPES:
        return t.view(torch.uint8)
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16)
    return t


def assert_bits_equal(actual: torch.Tensor, expected: torch.Tensor, what: str = "tensor") -> None:
    """Zero-tolerance equality: FP8 as uint8, floats as their bit patterns, ints as ints."""
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a, e = bit_patterns(actual).cpu(), bit_patterns(expected).cpu()
    diff = a != e
    if diff.any():
        idx = diff.nonzero()[:5].tolist()
        n = int(diff.sum())
        samples = [(i, a[tuple(i)].item(), e[tuple(i)].item()) for i in idx]
        raise AssertionError(f"{what}: {n}/{a.numel()} elements differ; first (index, got, want): {samples}")


def int8_accumulator(xq: torch.Tensor, wq: torch.Tensor) -> torch.Tensor:
    """The spec's int32 accumulator ``xq @ wq^T`` of int8 codes, exact in float64, with int32's one zero: a float64
    sum of negative zeros is -0.0 (at K = 1 torch's CPU matmul keeps 0 * -w's sign), + 0.0 makes it +0.0."""
    return xq.cpu().double() @ wq.cpu().double().T + 0.0


def assert_gemm_close(out: torch.Tensor, xq, xs, wq, ws, bias=None, *, exact_acc: bool, what: str = "gemm") -> None:
    """Check a W8A8 GEMM against float64 with a sound error bound (``reference.gemm_outside_bound``)."""
    bad = gemm_outside_bound(out, xq, xs, wq, ws, bias, exact_acc=exact_acc)
    assert not bad, f"{what}: {bad}"


def capture_graph(fn, *args):
    """``(graph, out)``: ``fn(*args)`` run once on a side stream (kernels compiled, calls bound outside the
    capture), then captured into a CUDA graph whose replays write ``out``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    return graph, out


def graphs_summary(graphs) -> str:
    """What each compiled graph takes (its placeholders' shapes) and calls: the message of a
    compile-count assertion, so a second compile says what it was."""
    lines = []
    for i, gm in enumerate(graphs):
        inputs = [str(n.meta.get("example_value", n.name)).split("(")[0] + str(
            tuple(getattr(n.meta.get("example_value"), "shape", ()))) for n in gm.graph.nodes if n.op == "placeholder"]
        calls = sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        code = getattr(gm, "compiled_code", None)
        where = f"{code[0]} ({code[1].rsplit('/', 1)[-1]}:{code[2]})" if code else "?"
        lines.append(f"graph {i}: inputs {inputs}; calls {calls}; compiled from {where}")
        if not calls:
            lines.append(gm.code.strip())
    return "\n".join(lines)


def _code_being_compiled():
    """(name, file, first line) of the code Dynamo is compiling (its ``convert_frame._compile(code, ...)``
    frame), or None; not the code object itself, which Inductor's graph cache cannot pickle."""
    import sys
    import types

    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_locals.get("code") if frame.f_code.co_name == "_compile" else None
        if isinstance(code, types.CodeType) and "convert_frame" in frame.f_code.co_filename:
            return _code_id(code)
        frame = frame.f_back
    return None


def _code_id(code) -> tuple:
    return code.co_name, code.co_filename, code.co_firstlineno


def compiled_frames(graphs, fn) -> list:
    """The graphs of ``graphs`` (from ``compile_counting``) that Dynamo compiled from ``fn``'s code."""
    return [gm for gm in graphs if gm.compiled_code == _code_id(fn.__code__)]


def compile_counting(module, **kwargs):
    """``torch.compile(module, **kwargs)`` with Inductor, plus the list of graphs it compiled."""
    import torch._dynamo
    from torch._inductor.compile_fx import compile_fx

    graphs = []

    def backend(gm, example_inputs):
        gm.compiled_code = _code_being_compiled()
        graphs.append(gm)
        return compile_fx(gm, example_inputs)

    torch._dynamo.reset()
    return torch.compile(module, backend=backend, **kwargs), graphs
