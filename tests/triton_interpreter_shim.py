"""Test-only shim: make the Triton 3.7.1 interpreter (TRITON_INTERPRET=1) round like the GPU.

WARNING: this patches PRIVATE internals of ``triton.runtime.interpreter`` as shipped in
triton 3.7.1 exactly (``_convert_float``, ``InterpreterBuilder.create_extern_elementwise``,
``interpreter_semantic``) and the stub module ``triton.language.extra.libdevice``.
``install()`` refuses any other triton version; re-read the interpreter source before
bumping the pin. Never import this outside the test suite (tests/conftest.py installs it
when TRITON_INTERPRET=1, before any kernel module is imported).

What the stock 3.7.1 interpreter gets wrong, and what is patched:

1. ``_convert_float`` (every float<->float conversion: fp32->bf16 casts, ``.to(fp8)``, the
   fp8 path of ``tl.dot``) truncates fp32->bf16 and rounds fp32->fp8e4nv wrongly for ~2%
   of values and most subnormals. Replaced by a conversion through torch (round to
   nearest even; e4m3fn saturates to 448 like the GPU's ``cvt.rn.satfinite``, and every NaN
   gives 0x7F as on the GPU, where torch would keep the sign: 0xFF). Types torch lacks
   (fp8e4b15) and round-toward-zero keep the stock code.
2. libdevice: ``triton.language.extra.libdevice`` is a stub module whose functions return
   None under the interpreter (the compiler swaps in the backend's functions; the
   interpreter does not). Each stub is pointed at the CUDA backend's ``@core.extern``
   function, and ``create_extern_elementwise`` (stock: raises) evaluates the extern by
   symbol with torch on tensors of the argument dtype (float32 semantics for ``__nv_*f``:
   ``__nv_expf`` is ``torch.exp`` on a float32 tensor, ``__nv_rintf`` is ``torch.round``,
   half to even). Symbols not in ``_EXTERNS`` raise NotImplementedError naming the symbol.
3. Loop variables: the interpreter runs ``for i in range(a, b, c)`` as a Python loop, so
   ``i`` is a Python int and ``i.to(tl.int64)`` (legal on the GPU, where a non-static
   loop's induction variable is an int32 tensor) raises AttributeError. The AST rewriter
   gets a ``visit_For`` that rebinds the target of ``range``/``tl.range`` loops with
   ``interpreter_semantic.to_tensor`` (what the stock rewriter already does for every
   assignment); ``tl.static_range`` loops keep Python ints, as on the GPU (constexpr).

4. ``tl.fma``: ``create_fma`` computes ``x * y + z`` with two roundings. The fast-division
   paths of the kernels need a true fused multiply-add (an exact residual), so float32 FMA is
   computed exactly: the product in float64 (exact), the sum rounded to odd in float64 (two-sum
   error term), then one rounding to float32, which is the correctly rounded fma (53 >= 24 + 2
   bits, so round-to-odd followed by round-to-nearest does not double-round).

Not patched (checked in the 3.7.1 source): ``tl.math.div_rn`` is ``create_precise_divf``
= ``np.divide`` on float32 arrays, which is IEEE division; fp32->fp16 and fp->int casts
are numpy ``astype`` (RNE, resp. truncate-and-wrap, which is what the kernels expect).
``tl.float8e4b8`` (fnuz) is unsupported by this interpreter (``dtype.to_ir`` lacks it).
"""

from __future__ import annotations

import numpy as np
import torch

TRITON_VERSION = "3.7.1"

_installed = False


def _torch_float_dtypes():
    import triton.language as tl

    return {
        tl.float16: torch.float16, tl.bfloat16: torch.bfloat16, tl.float32: torch.float32,
        tl.float64: torch.float64, tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2,
        tl.float8e4b8: torch.float8_e4m3fnuz, tl.float8e5b16: torch.float8_e5m2fnuz,
    }


_SIGNED = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _make_convert_float(stock, ir):
    dtypes = _torch_float_dtypes()

    def _convert_float(input, input_dtype, output_dtype, rounding_mode):
        src, dst = dtypes.get(input_dtype), dtypes.get(output_dtype)
        if src is None or dst is None or rounding_mode not in (None, ir.ROUNDING_MODE.RTNE):
            return stock(input, input_dtype, output_dtype, rounding_mode)
        arr = np.array(input, copy=True)  # owned and writable for torch.from_numpy
        bits = torch.from_numpy(arr.view(f"u{arr.itemsize}").view(f"i{arr.itemsize}")).view(src)
        out = bits.to(dst).view(_SIGNED[dst.itemsize])
        if dst == torch.float8_e4m3fn:  # torch keeps a NaN's sign (0xFF); the GPU gives 0x7F for every NaN
            out = torch.where(torch.isnan(bits), torch.tensor(0x7F, dtype=torch.int8), out)
        out = out.numpy()
        return out.view(f"u{dst.itemsize}").reshape(arr.shape)  # what the stock function returns

    return _convert_float


def _float2int_rn(t: torch.Tensor) -> torch.Tensor:
    """PTX ``cvt.rni.s32.f32``: round half to even, saturate to int32, NaN -> 0."""
    r = torch.round(t.double()).clamp(-(2 ** 31), 2 ** 31 - 1)
    return torch.where(torch.isnan(r), torch.zeros_like(r), r).to(torch.int32)


# symbol -> torch function of torch tensors (all of the argument dtype); float32 symbols end in "f"
_EXTERNS = {
    "__nv_expf": torch.exp, "__nv_exp": torch.exp,
    "__nv_exp2f": torch.exp2, "__nv_exp2": torch.exp2,
    "__nv_logf": torch.log, "__nv_log": torch.log,
    "__nv_log2f": torch.log2, "__nv_log2": torch.log2,
    "__nv_rintf": torch.round, "__nv_rint": torch.round,  # torch.round is half-to-even, like rint
    "__nv_floorf": torch.floor, "__nv_floor": torch.floor,
    "__nv_ceilf": torch.ceil, "__nv_ceil": torch.ceil,
    "__nv_truncf": torch.trunc, "__nv_trunc": torch.trunc,
    "__nv_fabsf": torch.abs, "__nv_fabs": torch.abs,
    "__nv_sqrtf": torch.sqrt, "__nv_fsqrt_rn": torch.sqrt, "__nv_sqrt": torch.sqrt,
    "__nv_fdiv_rn": torch.div, "__nv_ddiv_rn": torch.div,
    "__nv_float2int_rn": _float2int_rn,
    "__nv_tanhf": torch.tanh, "__nv_tanh": torch.tanh,
}


def _make_extern(TensorHandle):
    def create_extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure):
        fn = _EXTERNS.get(symbol)
        if fn is None:
            raise NotImplementedError(f"libdevice extern {symbol} is not mapped in tests/triton_interpreter_shim.py")
        args = [torch.from_numpy(np.array(a.data, copy=True)) for a in argList]
        out = fn(*args).numpy()
        return TensorHandle(out, retType.scalar)

    return create_extern_elementwise


def fma_f32(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 ``x * y + z`` (see item 4 of the module docstring)."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.asarray(x, np.float64) * np.asarray(y, np.float64)
        c = np.asarray(z, np.float64)
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
        even = (s.view(np.int64) & 1) == 0
        fix = np.isfinite(s) & np.isfinite(err) & (err != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def _make_fma(TensorHandle, stock):
    def create_fma(self, x, y, z):
        if not (x.data.dtype == y.data.dtype == z.data.dtype == np.float32):
            return stock(self, x, y, z)
        return TensorHandle(fma_f32(*np.broadcast_arrays(x.data, y.data, z.data)), z.dtype.scalar)

    return create_fma


def _visit_for(self, node):
    """``for i in range(...)``: make ``i`` a scalar triton tensor at the top of each iteration."""
    import ast

    self.generic_visit(node)
    fn = node.iter.func if isinstance(node.iter, ast.Call) else None
    dynamic = (isinstance(fn, ast.Name) and fn.id == "range") or (isinstance(fn, ast.Attribute) and fn.attr == "range")
    if dynamic and isinstance(node.target, ast.Name):
        to_tensor = ast.Attribute(value=ast.Name(id="interpreter_semantic", ctx=ast.Load()), attr="to_tensor",
                                  ctx=ast.Load())
        rebind = ast.Assign(targets=[ast.Name(id=node.target.id, ctx=ast.Store())],
                            value=ast.Call(func=to_tensor, args=[ast.Name(id=node.target.id, ctx=ast.Load()),
                                                                 ast.Constant(value=False)], keywords=[]))
        node.body.insert(0, rebind)
    return node


def _point_libdevice_stubs(interpreter_semantic):
    from triton.language.extra import libdevice as stub
    from triton.language.extra.cuda import libdevice as cuda

    for name in dir(stub):
        impl = getattr(cuda, name, None)
        if name.startswith("_") or impl is None or not callable(getattr(stub, name)):
            continue
        wrapper = (lambda impl: lambda *args, **kwargs: impl(*args, **{k: v for k, v in kwargs.items() if k != "_semantic"},
                                                          _semantic=interpreter_semantic))(impl)
        wrapper.__module__ = stub.__name__  # jit's dependency hasher skips libdevice stubs by module
        wrapper.__name__ = name
        setattr(stub, name, wrapper)


def install() -> None:
    """Patch the interpreter (idempotent). Raises RuntimeError on a triton other than 3.7.1."""
    global _installed
    if _installed:
        return
    import triton

    if triton.__version__ != TRITON_VERSION:
        raise RuntimeError(
            f"tests/triton_interpreter_shim.py patches private internals of triton {TRITON_VERSION}'s "
            f"interpreter, but triton {triton.__version__} is installed: pin triton=={TRITON_VERSION} for "
            f"the interpreter tests or port the shim (read triton/runtime/interpreter.py first)")
    from triton.runtime import interpreter as interp

    interp._convert_float = _make_convert_float(interp._convert_float, interp._ir)
    interp.InterpreterBuilder.create_extern_elementwise = _make_extern(interp.TensorHandle)
    _point_libdevice_stubs(interp.interpreter_semantic)
    interp.ASTTransformer.visit_For = _visit_for
    interp.InterpreterBuilder.create_fma = _make_fma(interp.TensorHandle, interp.InterpreterBuilder.create_fma)
    _installed = True
