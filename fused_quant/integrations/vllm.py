"""vLLM general plugin: vLLM's own models fuse activation + int8/FP8 quantization through fused-quant.

Entry point ``vllm.general_plugins: fused_quant = fused_quant.integrations.vllm:register``.
``register()`` is idempotent (vLLM calls it in every process) and, for a vLLM inside
``TESTED_VLLM`` whose internals it needs are present, adds:

- rows to vLLM's producer registry (``_FUSED_ACT_QUANT`` / ``_FUSED_ACT_QUANT_SUPPORT``) for
  ``SiluAndMul`` and ``ReLUSquaredActivation`` x int8 per-token, FP8 per-token and FP8 static,
  where vLLM has no row or its row cannot run here (its CUDA op is missing); a working vLLM row
  is never replaced. Producers run on the current fused-quant backend and return vLLM's
  ``QuantizedActivation``.
- an int8 ScaledMM linear kernel (``FusedQuantInt8ScaledMMLinearKernel``) for CPU, CUDA and
  ROCm, placed by FUSED_QUANT_VLLM_KERNEL (``last`` by default: behind vLLM's kernels, so an
  existing deployment keeps its kernel). It exposes ``kInt8DynamicTokenSym`` after loading,
  consumes ``QuantizedActivation`` (or quantizes a plain tensor with the backend's quantizer)
  and reaches the GEMM only through fused-quant's checked entry.

Outside the tested range, when a needed vLLM internal is missing or changed, or when a fused-quant
setting its calls read is bad (a FUSED_QUANT_* value, a backend this node cannot run), it logs one
line and registers nothing, so vLLM keeps working. In every case the FUSED_QUANT_* variables join vLLM's compile
cache key (``_join_compile_cache_key``): a graph compiled with the plugin active is not loaded without it.
Importing ``fused_quant`` never imports this module.
"""

from __future__ import annotations

import functools
import logging

import torch

from fused_quant import envs, runtime
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.errors import FusedQuantError
from fused_quant.validation import (
    ACT_DTYPES,
    QuantDTypeError,
    QuantKeyMismatchError,
    ScaleError,
    check_activation_k,
    check_plain_input_dtype,
    check_weight_scale_shape,
    check_weight_scale_values,
)

logger = logging.getLogger("fused_quant")

TESTED_VLLM = ">=0.32.0,<0.33"
KERNEL_NAME = "FusedQuantInt8ScaledMMLinearKernel"
ENTRY_POINT = "vllm.general_plugins: fused_quant"  # pyproject's [project.entry-points]
# (vLLM activation class name, our activation) x our keys: the rows the plugin may add
ROW_ACTIVATIONS = (("SiluAndMul", "silu_and_mul"), ("ReLUSquaredActivation", "relu2"))
ROW_KEYS = (K.kInt8DynamicTokenSym, K.kFp8DynamicTokenSym, K.kFp8StaticTensorSym)
PLATFORMS = ("CPU", "CUDA", "ROCM")

_state: dict[str, object] = {"done": False, "active": False, "reason": "register() not called", "rows": [],
                             "kernel": None, "placement": None}


def _vllm_version() -> tuple[str | None, str]:
    """(version or None, reason)."""
    try:
        import vllm
    except ImportError as exc:
        return None, f"vLLM is not installed ({exc})"
    except Exception as exc:  # an install that is there but broken (a missing CUDA library, say): the probe says so
        return None, f"vLLM import failed ({type(exc).__name__}: {exc})"
    return str(getattr(vllm, "__version__", "unknown")), ""


def version_supported(version: str | None) -> tuple[bool, str]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if version is None:
        return False, "vLLM is not installed"
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False, f"vLLM version {version!r} cannot be parsed"
    # prereleases stated: packaging's default for a dev / rc build in the range has changed between its versions
    if not SpecifierSet(TESTED_VLLM).contains(parsed, prereleases=True):
        return False, f"vLLM {version} is outside the tested range {TESTED_VLLM}"
    if parsed.is_prerelease:  # a nightly or source build: code written after the release the range was tested on
        return False, (f"vLLM {version} is a development or pre-release build; the plugin is tested on the releases "
                       f"{TESTED_VLLM}")
    return True, ""


def _version_check() -> tuple[str | None, bool, str]:
    """vLLM's version (None where it cannot be imported), whether the plugin supports it, and why not."""
    version, why = _vllm_version()
    ok, reason = version_supported(version) if version is not None else (False, why)
    return version, ok, reason


class _Internals:
    """The vLLM internals the plugin needs, imported together (AttributeError/ImportError if missing)."""

    def __init__(self):
        from vllm.model_executor.kernels import linear as kernels_linear
        from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import Int8ScaledMMLinearKernel
        from vllm.model_executor.layers import activation
        from vllm.model_executor.layers.fusion import fused_act_quant as registry
        from vllm.model_executor.layers.fusion import quant_activation
        from vllm.model_executor.layers.quantization.utils import quant_utils, replace_parameter
        from vllm.model_executor.layers.quantization.utils.w8a8_utils import convert_to_channelwise
        from vllm.platforms import PlatformEnum, current_platform

        self.acts = {name: getattr(activation, name) for name, _ in ROW_ACTIVATIONS}
        self.producers = registry._FUSED_ACT_QUANT
        self.supports = registry._FUSED_ACT_QUANT_SUPPORT
        self.QuantizedActivation = quant_activation.QuantizedActivation
        self.expose_input_quant_key = quant_activation.expose_input_quant_key
        self.QuantKey, self.ScaleDesc, self.GroupShape = quant_utils.QuantKey, quant_utils.ScaleDesc, quant_utils.GroupShape
        self.fp8_dtype = quant_utils.FP8_DTYPE
        self.Int8Kernel = Int8ScaledMMLinearKernel
        self.possible_int8 = kernels_linear._POSSIBLE_INT8_KERNELS
        self.replace_parameter = replace_parameter
        self.convert_to_channelwise = convert_to_channelwise
        self.platforms = {name: getattr(PlatformEnum, name) for name in PLATFORMS}
        self.current_platform = current_platform


@functools.cache
def internals() -> _Internals:
    return _Internals()


def to_vllm_key(key: K.QuantKey):
    """Our key as vLLM's QuantKey, field for field (FP8 keys take vLLM's platform FP8 dtype)."""
    v = internals()
    dtype = v.fp8_dtype if K.is_fp8(key) else key.dtype
    gs = key.scale.group_shape
    scale = v.ScaleDesc(key.scale.dtype, key.scale.static, v.GroupShape(gs.row, gs.col))
    return v.QuantKey(dtype, scale, None, key.symmetric)


def _vllm_row_runs(act_name: str, key: K.QuantKey) -> bool:
    """Whether vLLM's own row for (act, key) can run on this platform."""
    if act_name == "SiluAndMul" and key == K.kFp8StaticTensorSym:
        return hasattr(torch.ops._C, "silu_and_mul_quant")  # vLLM's CUDA op; absent on CPU builds
    return True


def _declines(act_fn: torch.nn.Module, x: torch.Tensor, linear: torch.nn.Module) -> bool:
    """A producer row's support predicate with FUSED_QUANT_VLLM_FUSION=off: vLLM runs the activation and its own
    quantization (A/B comparisons)."""
    return False


def _make_producer(act: str, key: K.QuantKey, vkey, fusion: bool = True):
    from fused_quant.registry import _env_numerics, fused_act_quant

    v = internals()
    static = K.is_static(key)

    def produce(x: torch.Tensor, linear: torch.nn.Module):
        scale = linear.input_scale if static else None
        qa = fused_act_quant(act, x, key, scale, numerics=_env_numerics())
        return v.QuantizedActivation(data=qa.data, scale=qa.scale, orig_dtype=x.dtype,
                                     orig_shape=qa.data.shape, quant_key=vkey)

    def supported(act_fn: torch.nn.Module, x: torch.Tensor, linear: torch.nn.Module) -> bool:
        if not isinstance(x, torch.Tensor) or x.dtype not in ACT_DTYPES or x.dim() == 0 or x.shape[-1] == 0:
            return False
        if act == "silu_and_mul" and x.shape[-1] % 2:
            return False
        if static:
            s = getattr(linear, "input_scale", None)
            return (isinstance(s, torch.Tensor) and s.dtype == torch.float32 and s.numel() == 1
                    and s.device == x.device)
        return True

    produce.__qualname__ = f"fused_quant_{act}_{K.key_name(key)}"
    return produce, supported if fusion else _declines


def plan_rows() -> list[dict[str, str]]:
    """What the producer rows would be: one entry per (activation, key) with action add/keep."""
    v = internals()
    rows = []
    for vname, act in ROW_ACTIVATIONS:
        for key in ROW_KEYS:
            existing = v.producers.get((v.acts[vname], to_vllm_key(key)))
            ours = getattr(existing, "__qualname__", "").startswith("fused_quant_")
            if existing is not None and not ours and _vllm_row_runs(vname, key):
                action = "keep vLLM's row"
            else:
                action = "add fused-quant row" if existing is None or ours else "replace (vLLM's op is missing here)"
            rows.append({"activation": vname, "key": K.key_name(key), "action": action})
    return rows


def _producer_entries(rows: list[dict[str, str]], fusion: bool = True) -> dict[tuple, tuple]:
    """(vLLM activation class, vLLM key) -> (producer, support predicate) for each row to add or replace."""
    v = internals()
    entries = {}
    for row in rows:
        if row["action"].startswith("keep"):
            continue
        key = K.key_from_name(row["key"])
        vkey = to_vllm_key(key)
        entries[(v.acts[row["activation"]], vkey)] = _make_producer(dict(ROW_ACTIVATIONS)[row["activation"]], key, vkey,
                                                                    fusion)
    return entries


@functools.cache
def kernel_class() -> type:
    """The vLLM int8 ScaledMM kernel backed by fused-quant (built on first use: needs vLLM)."""
    from fused_quant.gemm import quant_gemm
    from fused_quant.registry import quantize

    v = internals()
    vkey = to_vllm_key(K.kInt8DynamicTokenSym)

    class FusedQuantInt8ScaledMMLinearKernel(v.Int8Kernel):
        """Symmetric dynamic per-token int8 activations x per-channel (or per-tensor) int8 weights."""

        @classmethod
        def is_supported(cls, compute_capability: int | None = None) -> tuple[bool, str | None]:
            p = v.current_platform
            if not (p.is_cpu() or p.is_cuda_alike()):
                return False, "fused-quant serves CPU, CUDA and ROCm platforms"
            return True, None

        @classmethod
        def can_implement(cls, c) -> tuple[bool, str | None]:
            why = None
            if not c.input_symmetric:
                why = "asymmetric (zero-point) activations are left to vLLM's kernels"
            elif c.is_static_input_scheme:
                why = "static activation scales are left to vLLM's kernels (this one is per-token)"
            if why is not None:
                _declined(why)
                return False, why
            return True, None

        def input_quant_key(self):
            return vkey if envs.vllm_fusion() else None

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            w_name, ws_name = self.layer_param_names[:2]
            w, ws = getattr(layer, w_name), getattr(layer, ws_name)
            self.layer_name = getattr(layer, "prefix", "") or type(layer).__name__
            if w.dtype != torch.int8 or w.dim() != 2:
                raise QuantDTypeError(f"{self.layer_name}: expected int8 [N, K] weights, got {w.dtype} "
                                      f"{tuple(w.shape)}")
            if not self.config.is_channelwise:
                # one scale per fused part (q / k / v, gate / up): vLLM's helper drops extra ones, or fails
                # unnamed on too few
                widths = list(layer.logical_widths)
                if ws.numel() != len(widths):
                    raise ScaleError(f"{self.layer_name}: a per-tensor weight_scale holds one scale per part "
                                     f"({len(widths)}: {widths}), got {ws.numel()}")
                ws = v.convert_to_channelwise(ws, layer.logical_widths)
            # once, at load, as every way a weight scale comes in: a NaN or negative scale gave NaN or sign-flipped
            # outputs, a scale of another N failed in the first call
            check_weight_scale_shape(ws, w.shape[0], layer=self.layer_name)
            check_weight_scale_values(ws, layer=self.layer_name)
            v.replace_parameter(layer, w_name, torch.nn.Parameter(w.data.contiguous(), requires_grad=False))
            v.replace_parameter(layer, ws_name, torch.nn.Parameter(
                ws.data.to(torch.float32).reshape(-1, 1).contiguous(), requires_grad=False))
            v.expose_input_quant_key(layer, self)

        def apply_weights(self, layer: torch.nn.Module, x, bias: torch.Tensor | None = None) -> torch.Tensor:
            w, ws = self._get_layer_params(layer)[:2]
            if isinstance(x, v.QuantizedActivation):
                if x.quant_key != vkey:
                    raise QuantKeyMismatchError(f"{self.layer_name}: QuantizedActivation carries "
                                                f"{K.label(x.quant_key)}, this kernel consumes {K.label(vkey)}")
                qa = QuantizedActivation(x.data, x.scale, x.orig_dtype, x.orig_shape, K.kInt8DynamicTokenSym)
                out_dtype = x.orig_dtype
            else:
                try:
                    qa = quantize(x, K.kInt8DynamicTokenSym)
                except FusedQuantError as exc:  # said as QuantLinear says it: the layer, and the K it expects
                    raise _plain_input_error(x, w, self.layer_name, exc) from None
                out_dtype = x.dtype
            # vLLM makes biases plain Parameters and never trains them; it runs under inference_mode, where
            # quant_gemm reads no grad flag (a detach there would cost every call)
            if bias is not None and bias.requires_grad and torch.is_grad_enabled():
                bias = bias.detach()
            return quant_gemm(qa, w, ws, bias, out_dtype=out_dtype, layer=self.layer_name)

    FusedQuantInt8ScaledMMLinearKernel.__name__ = KERNEL_NAME
    FusedQuantInt8ScaledMMLinearKernel.__qualname__ = KERNEL_NAME
    return FusedQuantInt8ScaledMMLinearKernel


_AFTER_DECLINE = {  # what vLLM does with a layer the kernel declines, by its place in vLLM's int8 kernel chain
    "first": "vLLM's own int8 kernels are asked next",
    "last": "it comes after vLLM's own int8 kernels, which declined the layer too: vLLM has no kernel left for it",
}


def _plain_input_error(x, w: torch.Tensor, layer: str, exc: Exception) -> Exception:
    """The kernel's refusal of a plain input its quantizer refused (``exc``, which names no layer): a dtype, a rank
    or a K as ``QuantLinear`` says them, else ``exc``'s own words under the layer."""
    if isinstance(x, torch.Tensor):
        try:
            check_plain_input_dtype(x, K.kInt8DynamicTokenSym, layer)
            check_activation_k(x, w, layer)
        except FusedQuantError as named:
            return named
    return type(exc)(f"{layer}: {exc}")


def _declined(why: str) -> None:
    """One log line per reason the kernel declines a layer, per runtime generation (``runtime.once``): the reason,
    and what follows it where the kernel's place is known (first: vLLM asks its own kernels, and says no more;
    last: vLLM's own declined already, and the engine fails on the layer)."""
    after = _AFTER_DECLINE.get(_state.get("placement"), "")
    runtime.once(f"vllm_declined:{why}", lambda: logger.warning(
        "fused-quant vLLM plugin: %s declines a layer: %s%s", KERNEL_NAME, why, f"; {after}" if after else ""))


def _kernel_chains(placement: str) -> dict:
    """vLLM platform -> its int8 kernel chain with ours placed (none for ``off``), without changing vLLM's."""
    v = internals()
    cls = kernel_class()
    chains = {}
    for platform in v.platforms.values():
        chain = [k for k in v.possible_int8.get(platform, []) if k.__name__ != KERNEL_NAME]
        if placement == "first":
            chain.insert(0, cls)
        elif placement == "last":
            chain.append(cls)
        chains[platform] = chain
    return chains


def _settings() -> tuple[str, bool, str]:
    """(kernel placement, fusion, a warning or '') from FUSED_QUANT_VLLM_*, after every fused-quant setting the
    plugin's calls read
    is checked: a bad value of any variable (ValueError: ``FUSED_QUANT_PDL``'s is read at the first Triton launch),
    a backend this node cannot run (BackendUnavailableError), or, with the int8 kernel, a
    ``FUSED_QUANT_DISABLED_GEMMS`` that leaves it no int8 GEMM would otherwise fail the engine's first request.
    The platform probe reads no CUDA state. The warning names ``FUSED_QUANT_DISABLED_GEMMS`` entries that are no
    provider's name (a misspelt one disables nothing), as ``fused-quant probe`` does."""
    from fused_quant.gemm import kinds_without_gemms, provider_names, unknown_disabled_gemms_told_elsewhere
    from fused_quant.selection import current_backend

    placement, fusion = envs.vllm_kernel(), envs.vllm_fusion()
    bad = envs.errors()
    if bad:
        raise ValueError("; ".join(bad.values()))
    backend = current_backend().name
    with unknown_disabled_gemms_told_elsewhere():  # the plugin's log line names a misspelt entry (below)
        empty = kinds_without_gemms(backend)
    if placement != "off" and "int8" in empty:
        raise ValueError(f"FUSED_QUANT_DISABLED_GEMMS leaves the int8 kernel no int8 GEMM provider on backend "
                         f"{backend}; enable one, or set FUSED_QUANT_VLLM_KERNEL=off")
    return placement, fusion, envs.unknown_disabled_gemms(provider_names())


def register() -> None:
    """vLLM general-plugin entry point: idempotent, never raises, logs one line. It changes vLLM's tables only once
    everything it adds is built, and puts them back if a change fails: active with all of it, or inactive with
    none of it."""
    if _state["done"]:
        return
    _state["done"] = True
    _join_compile_cache_key()
    version, ok, reason = _version_check()
    if not ok:
        _state["reason"] = reason
        logger.warning("fused-quant vLLM plugin inactive: %s", reason)
        return
    try:
        placement, fusion, warning = _settings()
        v = internals()
        rows = plan_rows()
        producers = _producer_entries(rows, fusion)  # FUSED_QUANT_VLLM_FUSION read once here, not per call
        chains = _kernel_chains(placement)
    except (ImportError, AttributeError, KeyError, TypeError) as exc:
        return _inactive(f"a vLLM internal it needs is missing or changed: {type(exc).__name__}: {exc}")
    except (ValueError, RuntimeError) as exc:  # a bad FUSED_QUANT_* value, a backend this node cannot run
        return _inactive(str(exc))
    except Exception as exc:  # anything else (an import of vLLM's internals that fails its own way): vLLM calls
        # plugins unguarded, and nothing of vLLM's has been changed yet
        return _inactive(f"building what it registers failed: {type(exc).__name__}: {exc}")
    saved = (dict(v.producers), dict(v.supports), {p: list(c) for p, c in v.possible_int8.items()})
    try:
        for where, (produce, supported) in producers.items():
            v.producers[where], v.supports[where] = produce, supported
        for platform, chain in chains.items():
            v.possible_int8.setdefault(platform, [])[:] = chain
    except Exception as exc:  # a vLLM table that is not the dict / list of lists it was: put all back
        for table, before in zip((v.producers, v.supports, v.possible_int8), saved):
            table.clear()
            table.update(before)
        return _inactive(f"vLLM's tables could not be changed: {type(exc).__name__}: {exc}")
    kernel = (f"{placement} among vLLM's int8 kernels on {', '.join(v.platforms)}" if placement != "off"
              else "off (FUSED_QUANT_VLLM_KERNEL=off)")
    _state.update(active=True, reason="", rows=rows, kernel=kernel, placement=placement)
    added = [f"{r['activation']}->{r['key']}" for r in rows if not r["action"].startswith("keep")]
    logger.warning("fused-quant vLLM plugin active (vLLM %s): producer rows %s; int8 kernel %s %s; fusion %s%s",
                   version, ", ".join(added) or "none", KERNEL_NAME, kernel, "on" if fusion else "off",
                   f"; warning: {warning}" if warning else "")


def _join_compile_cache_key() -> None:
    """vLLM keys the graphs it compiles and caches on disk by its config and the variables of its environment
    table (``vllm.envs.compile_factors``), not by fused-quant's: a graph compiled with one kernel placement, fusion
    or backend would be loaded under another (the plugin active or not). Every ``FUSED_QUANT_*`` variable joins that
    table, read through ``envs``; where the table is not there (another vLLM), the log says so."""
    try:
        from vllm import envs as vllm_envs

        table = vllm_envs.environment_variables
        for name in envs.VARIABLES:
            table.setdefault(name, functools.partial(_raw_setting, name))
    except Exception as exc:  # noqa: BLE001  (vLLM calls plugins unguarded: said, never raised)
        logger.warning("fused-quant vLLM plugin: vLLM's compile cache cannot be keyed by FUSED_QUANT_* (%s: %s); "
                       "set VLLM_DISABLE_COMPILE_CACHE=1 when changing them", type(exc).__name__, exc)


def _raw_setting(name: str) -> str | None:
    return envs.snapshot()[name]


def _inactive(reason: str) -> None:
    _state["reason"] = reason
    logger.warning("fused-quant vLLM plugin inactive: %s", reason)


def status() -> dict[str, object]:
    """What ``register()`` did in this process."""
    return dict(_state)


def _loaded_by_vllm() -> tuple[bool, str]:
    """Whether vLLM will call ``register()``: the entry point is installed (a checkout on PYTHONPATH has none) and
    VLLM_PLUGINS, where set, names it (vLLM's own reading of it)."""
    import importlib.metadata

    name = ENTRY_POINT.split(":")[1].strip()
    if not any(ep.name == name for ep in importlib.metadata.entry_points(group="vllm.general_plugins")):
        return False, (f"no '{ENTRY_POINT}' entry point is installed (fused-quant imported from a checkout?): "
                       "pip install it where vLLM runs, or vLLM never loads the plugin")
    try:
        import vllm.envs

        allowed = vllm.envs.VLLM_PLUGINS
    except Exception as exc:  # vLLM imported but cannot read its own settings: it would fail at startup as well
        return False, f"vLLM's settings (vllm.envs.VLLM_PLUGINS) could not be read ({type(exc).__name__}: {exc})"
    if allowed is not None and name not in allowed:
        return False, f"VLLM_PLUGINS={','.join(allowed)!r} does not name {name}: vLLM will not load the plugin"
    return True, ""


def describe() -> dict[str, object]:
    """What the plugin would register here, without registering (``fused-quant probe --vllm``)."""
    version, ok, reason = _version_check()
    report: dict[str, object] = {"vllm": version, "tested": TESTED_VLLM, "would_register": ok,
                                 "reason": reason, "entry_point": ENTRY_POINT}
    if not ok:
        return report
    loaded, why = _loaded_by_vllm()
    if not loaded:
        report.update(would_register=False, reason=why)
        return report
    try:
        placement, fusion, _ = _settings()  # the probe reports the warning from the variables itself
        rows = plan_rows()
    except Exception as exc:  # what register() would stay inactive for, said the same way
        report.update(would_register=False, reason=f"{type(exc).__name__}: {exc}")
        return report
    report.update(rows=rows, kernel=f"{KERNEL_NAME}: {placement}", fusion="on" if fusion else "off")
    return report
