"""Shared test helpers: bitwise comparison, the float64 GEMM reference, adversarial inputs."""

from __future__ import annotations

import torch

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
    """Check a W8A8 GEMM against float64 with a sound error bound.

    exact_acc (int8): the int32 accumulator is exact, so the error is the fp32 scaling
    (<= 4 ulp32 of |p|, p = acc * xs * ws), the rounding of p to Tout and of the bias add: each a rounding to
    nearest, at most half of Tout's eps relative (``gemm.dequant_epilogue``'s order).
    Otherwise (FP8: fp32 accumulation in any order, on GPUs after tensor-core partial sums of
    reduced precision) the bound uses sum |x||w| * xs * ws, and a whole ulp for each of two roundings, twice (a
    kernel may apply the two scales in either order and round once more). Half of it with a bias, a quarter without
    one, failed on an H100: torch's FP8 GEMM through its fp32 product and our epilogue, fp16 out
    (benchmarks/RESULTS.md, forty-ninth round).
    """
    x = xq.cpu().to(torch.float64).reshape(-1, xq.shape[-1])
    w = wq.cpu().to(torch.float64)
    xs64 = xs.cpu().to(torch.float64).reshape(-1, 1)
    s = xs64 * ws.cpu().to(torch.float64).reshape(1, -1)
    dot = x @ w.T
    p = dot * s
    b = bias.cpu().to(torch.float64) if bias is not None else torch.zeros(())
    ref = p + b
    eps_t = torch.finfo(out.dtype).eps
    if exact_acc:
        rounded = p.abs() + (ref.abs() if bias is not None else 0)  # the bias add's rounding only where there is one
        tol = eps_t / 2 * rounded + 4 * 2.0**-24 * p.abs()
    else:
        # scaled-mm kernels may apply the two scales in either order and round once more
        mag = (x.abs() @ w.abs().T) * s
        k = x.shape[1]
        acc = (k + 4) * 2.0**-24
        if out.is_cuda:
            # FP8 tensor cores sum their products in an accumulator of about 14 significant bits
            # (DeepSeek-V3 technical report, arXiv 2412.19437, section 3.3.2) before the sums reach
            # fp32. One truncation of up to 2^-13 of the partial sum per k-block of 32 products, and
            # partial sums promoted to fp32 at least every 128 products (the report's interval; on the
            # H200 the worst error relative to sum |x||w| falls with K, 2^-13.4 at K = 512 to 2^-16.8
            # at 14336: benchmarks/results/fp8_gemm_accumulation_H200.txt), so per promoted block at
            # most 4 truncations of its own magnitude: 4 * 2^-13 of sum |x||w| in all, whatever K
            acc += 4 * 2.0**-13
        tol = 2 * eps_t * (p.abs() + ref.abs()) + acc * mag
    tol = tol + torch.finfo(out.dtype).tiny
    o = out.detach().cpu().to(torch.float64).reshape(ref.shape)
    # non-finite values must sit where the reference has them (a NaN compares False to any bound)
    nan_o, nan_r = torch.isnan(o), torch.isnan(ref)
    assert torch.equal(nan_o, nan_r), (f"{what}: NaN positions differ from the reference: extra at "
                                       f"{(nan_o & ~nan_r).nonzero()[:5].tolist()}, missing at "
                                       f"{(nan_r & ~nan_o).nonzero()[:5].tolist()}")
    inf_r = torch.isinf(ref)
    assert torch.equal(o[inf_r], ref[inf_r]), f"{what}: infinities of the reference not reproduced"
    # out of range (adversarial rows of huge values, whose per-token scales are huge too): a result beyond
    # the output dtype's range by more than the bound must round to +-Inf; one within the bound of that
    # limit, or whose fp32 product acc * xs (the spec's epilogue's first product, in its order) may pass
    # fp32's, may round to +-Inf or stay within the bound
    out_max, f32_max, inf = torch.finfo(out.dtype).max, torch.finfo(torch.float32).max, float("inf")
    first = (dot * xs64).abs()
    finite = torch.isfinite(ref)
    must = finite & (ref.abs() - tol > out_max)
    fp32_over = first * (1 + 2.0**-20) > f32_max
    may = finite & ((ref.abs() + tol > out_max) | fp32_over)
    assert torch.equal(o[must], ref[must].sign() * inf), f"{what}: results beyond {out.dtype}'s range not +-Inf"
    err = (o - ref).abs()
    # where acc * xs passes fp32's range the epilogue's product is +-Inf with the product's sign, which a finite
    # bias added after it keeps, whatever the float64 sum with the bias says
    inf_ok = torch.where(fp32_over, o == p.sign() * inf, o == ref.sign() * inf)
    bad = finite & ~must & ~(err <= tol) & ~(may & inf_ok)
    assert not bad.any(), (f"{what}: {int(bad.sum())}/{o.numel()} elements outside the float64 bound; "
                           f"worst excess {float((err - tol)[bad].max()):.3e}")


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
