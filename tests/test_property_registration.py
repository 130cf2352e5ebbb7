"""Property tests of what enters through registration and construction: random backend names,
predicate answers, producer outputs, key objects and static scales through every way into a
QuantLinear. Each example either works as documented or raises one of the library's errors (a
plain TypeError for an argument of the wrong type); nothing else escapes, nothing wrong is kept."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import fused_quant as fq
from fused_quant import keys as K
from fused_quant import registry, selection
from fused_quant.gemm import AFTER_EACH, _PROVIDERS, provider_names, register_gemm_provider, unregister_gemm_provider
from fused_quant.validation import MIN_STATIC_SCALE, FusedQuantError

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]

SETTINGS = settings(max_examples=120, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
NAMES = st.one_of(st.sampled_from(("torch", "triton_fp8", "hip_w8a8", "tritn", "", "TORCH", "torch ")),
                  st.text(max_size=8))
BACKENDS_ARG = st.one_of(NAMES, st.none(), st.lists(NAMES, max_size=3), st.tuples(NAMES), st.integers())
ANSWERS = st.one_of(st.booleans(), st.none(), st.integers(), st.text(max_size=3),
                    st.tuples(st.one_of(st.booleans(), st.integers(), st.none()), st.one_of(st.text(max_size=3),
                                                                                           st.none())),
                    st.tuples(st.booleans()), st.lists(st.booleans(), max_size=2))
KEY_LIKE = st.one_of(st.sampled_from([*K.KEYS.values(), *K.KEYS, "int8", "fp8", "", None, 3, 1.5,
                                      K.QuantKey(torch.int8, K.kDynamicTokenScale, symmetric=False)]),
                     st.text(max_size=12))
SCALES = st.one_of(st.sampled_from((0.0, -0.0, 1.0, math.inf, -math.inf, math.nan, MIN_STATIC_SCALE,
                                    MIN_STATIC_SCALE / 2, 1e-40, 3.4e38, -1.0)),
                   st.floats(allow_nan=True, allow_infinity=True, width=32))


class _Foreign:
    """Another library's key class with the same fields (vLLM's QuantKey)."""

    def __init__(self, key):
        self.dtype, self.scale, self.scale2, self.symmetric = key.dtype, key.scale, None, key.symmetric


@SETTINGS
@given(backends=BACKENDS_ARG)
def test_gemm_provider_backends(backends):
    valid = (isinstance(backends, (tuple, list)) and backends and all(b in selection.BACKENDS for b in backends)
             or backends is None)
    try:
        register_gemm_provider("prop_gemm", lambda *a: None, kind="int8", backends=backends, first=False)
    except (FusedQuantError, TypeError):
        assert not valid, f"refused valid backends {backends!r}"
        assert all(p.name != "prop_gemm" for chain in _PROVIDERS.values() for p in chain)
    else:
        assert valid, f"accepted {backends!r}"
        where = {name for name, chain in _PROVIDERS.items() if any(p.name == "prop_gemm" for p in chain)}
        assert where == ({AFTER_EACH} if backends is None else set(backends))  # first=False: after each backend's
    finally:
        if "prop_gemm" in provider_names():
            unregister_gemm_provider("prop_gemm")


@SETTINGS
@given(backend=st.one_of(NAMES, st.none(), st.integers()), key=KEY_LIKE)
def test_producer_registration(backend, key, monkeypatch):
    monkeypatch.setattr(registry, "_PRODUCERS", {k: dict(v) for k, v in registry._PRODUCERS.items()})
    key_ok = key in K.KEYS or (isinstance(key, K.QuantKey) and K.key_name_or_none(key) is not None)
    valid = isinstance(backend, str) and backend in selection.BACKENDS and key_ok
    try:
        fq.register_producer(fq.ReLUSquared, key, backend=backend, replace=True)(lambda x, s, **kw: None)
    except (FusedQuantError, TypeError):
        assert not valid, f"refused {backend!r}, {key!r}"
    else:
        assert valid, f"accepted {backend!r}, {key!r}"
    finally:
        fq.reset()


@SETTINGS
@given(answer=ANSWERS)
def test_predicate_answers(answer, monkeypatch):
    monkeypatch.setattr(registry, "_PRODUCERS", {k: dict(v) for k, v in registry._PRODUCERS.items()})
    key = K.kInt8DynamicTokenSym
    fq.register_producer(fq.ReLUSquared, key, backend="torch", supported=lambda x, s: answer, replace=True)(
        lambda x, s, **kw: (torch.zeros(x.shape, dtype=torch.int8), torch.ones(*x.shape[:-1], 1)))
    valid = type(answer) is tuple and len(answer) == 2 and isinstance(answer[0], bool) and isinstance(answer[1], str)
    try:
        qa = fq.fused_act_quant("relu2", torch.randn(3, 8), key)
    except TypeError as exc:
        assert not valid and "support predicate" in str(exc)
    except fq.BackendUnavailableError:
        assert valid and answer[0] is False  # declined on the torch backend: nothing runs it
    else:
        assert valid and answer[0] is True and torch.equal(qa.data, torch.zeros(3, 8, dtype=torch.int8))
    finally:
        fq.reset()


@SETTINGS
@given(q_dtype=st.sampled_from((torch.int8, torch.uint8, torch.float32, torch.float8_e4m3fn)),
       q_cut=st.sampled_from((0, 0, 1)), s_dtype=st.sampled_from((torch.float32, torch.float16)),
       s_rows=st.sampled_from((3, 3, 1)), pair=st.sampled_from(("pair", "pair", "bare", "triple", "list")))
def test_producer_outputs(q_dtype, q_cut, s_dtype, s_rows, pair, monkeypatch):
    monkeypatch.setattr(registry, "_PRODUCERS", {k: dict(v) for k, v in registry._PRODUCERS.items()})
    key = K.kInt8DynamicTokenSym

    def prod(x, scale, *, numerics, fp8_dtype):
        q = torch.zeros(x.shape[0], x.shape[1] - q_cut).to(q_dtype)
        s = torch.ones(s_rows, 1, dtype=s_dtype)
        return {"pair": (q, s), "bare": q, "triple": (q, s, s), "list": [q, s]}[pair]

    fq.register_producer(fq.ReLUSquared, key, backend="torch", replace=True)(prod)
    valid = q_dtype == torch.int8 and q_cut == 0 and s_dtype == torch.float32 and s_rows == 3 and pair == "pair"
    try:
        for _ in range(2):  # unbound first, bound afterwards: checked either way
            qa = fq.fused_act_quant("relu2", torch.randn(3, 8), key)
    except fq.ProducerError:
        assert not valid
    else:
        assert valid and qa.data.dtype == torch.int8
    finally:
        fq.reset()


@SETTINGS
@given(key=st.one_of(KEY_LIKE, st.sampled_from([_Foreign(k) for k in K.KEYS.values()])))
def test_keys_where_keys_are_taken(key):
    if isinstance(key, _Foreign):
        expected = K.as_key(K.QuantKey(key.dtype, key.scale, None, key.symmetric))
    elif isinstance(key, str):
        expected = K.KEYS.get(key)
    elif isinstance(key, K.QuantKey):
        expected = K.KEYS.get(K.key_name_or_none(key) or "")
    else:
        expected = None
    try:
        layer = fq.QuantLinear.from_float(nn.Linear(8, 4), key, 0.1 if expected is not None and
                                          K.is_static(expected) else None)
    except (FusedQuantError, TypeError):
        assert expected is None, f"refused {key!r}"
    else:
        assert expected is not None and layer.input_key is expected


@SETTINGS
@given(value=SCALES, way=st.sampled_from(("init", "set", "attribute", "state_dict")),
       key=st.sampled_from((K.kInt8StaticTensorSym, K.kFp8StaticTensorSym)))
def test_static_scales_through_every_way_in(value, way, key):
    valid = MIN_STATIC_SCALE <= value < math.inf
    lin = nn.Linear(8, 4)
    try:
        if way == "init":
            layer = fq.QuantLinear.from_float(lin, key, value)
        else:
            layer = fq.QuantLinear.from_float(lin, key, 0.5)
            if way == "set":
                layer.set_input_scale(value)
            elif way == "attribute":
                layer.input_scale = torch.tensor([value])
            else:
                layer.load_state_dict({**layer.state_dict(), "input_scale": torch.tensor([value])})
    except fq.ScaleError:
        assert not valid, f"refused {value!r} ({way})"
        if way != "init":
            assert layer.input_scale.item() == 0.5  # a refused value never takes the scale's place
    else:
        assert valid, f"accepted {value!r} ({way})"
        assert layer.input_scale.item() == torch.tensor(value).item()
