"""A QuantLinear binds its checked call once per input signature (the lean eager path): later calls
with the same metadata skip the checks and give the same bits; anything the binding depends on
(the runtime state, the layer's tensors, dtype or device, the input's form or metadata) binds again,
and inputs the checks would refuse are still refused."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn

import fused_quant
from fused_quant import QuantLinear, ShapeMismatchError, UnsupportedError, gemm
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.errors import QuantKeyMismatchError
from fused_quant.modules import MAX_BOUND
from fused_quant.registry import fused_act_quant, quantize
from tests.helpers import assert_bits_equal

pytestmark = pytest.mark.usefixtures("torch_backend")

KEYS = [K.kInt8DynamicTokenSym, K.kInt8StaticTensorSym, K.kFp8DynamicTokenSym, K.kFp8StaticTensorSym]


@pytest.fixture
def checks(monkeypatch):
    """How many times the checked entry's operand checks ran."""
    count = [0]
    real = gemm.check_gemm_operands

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(gemm, "check_gemm_operands", counting)
    return count


def _layer(key, k=48, n=24, out_dtype=torch.bfloat16, seed=0):
    torch.manual_seed(seed)
    lin = nn.Linear(k, n).to(out_dtype)
    return QuantLinear.from_float(lin, key, 0.05 if K.is_static(key) else None, name="proj")


def _unbound(layer, x):
    """What the checked path computes: the backend's quantizer, then the checked GEMM entry."""
    qa = quantize(x, layer.input_key, layer.input_scale)
    return gemm.quant_gemm(qa, layer.weight, layer.weight_scale, layer.bias, out_dtype=layer.out_dtype)


@pytest.mark.parametrize("key", KEYS, ids=K.key_name)
def test_second_call_skips_the_checks_and_gives_the_same_bits(key, checks):
    layer = _layer(key)
    x = torch.randn(5, 48).to(torch.bfloat16)
    first = layer(x)
    ran = checks[0]
    assert ran >= 1
    for _ in range(3):
        assert_bits_equal(layer(x), first, "bound call")
    assert checks[0] == ran, "a bound call ran the checks again"
    assert_bits_equal(first, _unbound(layer, x), "bound vs checked path")
    x2 = torch.randn(5, 48).to(torch.bfloat16)  # new values, same metadata: still bound, new result
    assert_bits_equal(layer(x2), _unbound(layer, x2), "bound call on new values")


@pytest.mark.parametrize("shape", [(1, 48), (2, 3, 48), (48,)])
def test_each_signature_binds_once(shape, checks):
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(shape).to(torch.bfloat16)
    out = layer(x)
    assert out.shape == (*shape[:-1], 24)
    ran = checks[0]
    assert_bits_equal(layer(x), out, "bound")
    assert checks[0] == ran
    layer(torch.randn(7, 48).to(torch.bfloat16))  # another token count: checked, then bound
    assert checks[0] > ran


def test_reset_and_layer_changes_bind_again(checks):
    layer = _layer(K.kInt8StaticTensorSym)
    x = torch.randn(4, 48).to(torch.bfloat16)
    layer(x)
    ran = checks[0]
    fused_quant.reset()
    layer(x)
    assert checks[0] > ran, "a reset must drop bound calls"
    other = _layer(K.kInt8StaticTensorSym, seed=3)
    layer.weight = other.weight.clone()  # a new tensor: the bound GEMM must not keep the old one
    layer.weight_scale = other.weight_scale.clone()
    assert_bits_equal(layer(x), _unbound(layer, x), "after new weights")
    layer.set_input_scale(0.2)
    assert_bits_equal(layer(x), _unbound(layer, x), "after set_input_scale")
    with torch.no_grad():
        layer.input_scale.copy_(torch.tensor([0.01]))  # in place: the bound call reads the tensor each call
    assert_bits_equal(layer(x), _unbound(layer, x), "after an in-place scale update")


@pytest.mark.parametrize("key", [K.kInt8StaticTensorSym, K.kFp8StaticTensorSym], ids=K.key_name)
def test_static_scale_written_in_place_is_checked_again(key, checks):
    """A bound call's static input scale written in place (its version counter moved) goes through the
    checked path once: a good value binds again and is used, a bad one is refused at the next call,
    before anything is computed with it."""
    layer = _layer(key)
    x = torch.randn(4, 48).to(torch.bfloat16)

    def checked(call) -> bool:  # whether ``call`` ran the checked entry's operand checks
        ran = checks[0]
        call()
        return checks[0] > ran

    layer(x)
    assert not checked(lambda: layer(x)), "bound, nothing written: no checks"
    with torch.no_grad():
        layer.input_scale.copy_(torch.tensor([0.01]))
    assert checked(lambda: layer(x)), "a scale written in place must be checked again"
    want = _unbound(layer, x)
    assert not checked(lambda: assert_bits_equal(layer(x), want, "after a good value in place")), "bound again"
    for bad in (0.0, float("nan"), float("inf"), -0.5):
        with torch.no_grad():
            layer.input_scale.fill_(bad)
        with pytest.raises(fused_quant.ScaleError, match="proj: input_scale \\(changed in place\\)"):
            layer(x)
    with torch.no_grad():
        layer.input_scale.fill_(0.02)
    assert_bits_equal(layer(x), _unbound(layer, x), "a good value again")


def test_copied_layer_checks_its_scale_at_first_use():
    """A copy of a layer (deepcopy, pickle, torch.save) has its own scale tensor with its own version
    counter: its value is checked at the copy's first call, so a bad value written in place before the
    copy, never checked since, is refused there."""
    layer = _layer(K.kInt8StaticTensorSym)
    x = torch.randn(4, 48).to(torch.bfloat16)
    with torch.no_grad():
        layer.input_scale.copy_(torch.tensor([0.04]))  # version 1
    layer(x)  # checked at version 1
    assert layer._scale_seen[0]() is layer.input_scale, "the checked tensor itself is remembered"
    with torch.no_grad():
        layer.input_scale.fill_(float("nan"))  # version 2, never checked
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer)), torch.load(buf, weights_only=False)):
        with pytest.raises(fused_quant.ScaleError, match="proj: input_scale \\(first use\\)"):
            clone(x)


def test_scale_first_seen_under_capture_is_checked_at_the_next_eager_call(monkeypatch):
    """While a CUDA graph is captured a scale's value cannot be read (no sync): a bad one written before
    or during the capture goes unchecked there, and the next eager call checks and refuses it."""
    from fused_quant import modules

    layer = _layer(K.kFp8StaticTensorSym)
    x = torch.randn(4, 48).to(torch.bfloat16)
    layer(x)
    for how, write in (("changed in place", lambda t: t.fill_(0.0)),
                       ("first use", lambda t: layer._buffers.__setitem__("input_scale", torch.tensor([0.0])))):
        monkeypatch.setattr(modules, "_no_sync_now", lambda t: True)  # as under capture
        with torch.no_grad():
            write(layer.input_scale)
        layer(x)  # captured: not checked (and bound, but not to a checked value)
        layer(x)
        monkeypatch.setattr(modules, "_no_sync_now", lambda t: False)
        with pytest.raises(fused_quant.ScaleError, match=f"proj: input_scale \\({how}\\)"):
            layer(x)
        layer.set_input_scale(0.05)


def test_static_scale_put_in_place_without_setattr_is_checked_at_first_use():
    """A new input scale written into ``_buffers`` (as offloading hooks do, past ``__setattr__``'s check)
    is checked at the layer's next call, whatever its id: the layer remembers the checked tensor itself."""
    layer = _layer(K.kFp8StaticTensorSym)
    x = torch.randn(4, 48).to(torch.bfloat16)
    layer(x)
    for bad in (0.0, float("nan")):
        layer._buffers["input_scale"] = torch.tensor([bad])
        with pytest.raises(fused_quant.ScaleError, match="proj: input_scale \\(first use\\)"):
            layer(x)
    layer._buffers["input_scale"] = torch.tensor([0.03])
    assert_bits_equal(layer(x), _unbound(layer, x), "a good scale through _buffers")


def test_tensors_put_in_place_without_setattr_are_used_and_never_kept():
    """Offloading hooks (accelerate's set_module_tensor_to_device) write module._buffers directly, moving a
    layer's tensors in before each call and out after it: the new tensors are used, and the layer binds no more
    (a bound call would keep the tensors it was bound to alive: the offloaded copies) until its tensors are set."""
    import gc
    import weakref

    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(4, 48).to(torch.bfloat16)
    layer(x)
    first = weakref.ref(layer.weight)
    other = _layer(K.kInt8DynamicTokenSym, seed=7)
    for _ in range(3):  # in and out, as a hook does each call
        for name in ("weight", "weight_scale", "bias"):
            layer._buffers[name] = getattr(other, name).clone()
        assert_bits_equal(layer(x), _unbound(layer, x), "after _buffers writes")
        assert_bits_equal(layer(x), other(x), "the new weights are used")
        assert layer._bound == {}, "a bound call would keep the swapped-in tensors alive"
    gc.collect()
    assert first() is None, "the first weight is kept alive"
    layer.weight = other.weight.clone()  # set: the layer binds again
    layer(x)
    assert len(layer._bound) == 1


def _call_while(monkeypatch, step: str, meanwhile, layer, x):
    """``layer(x)`` with ``meanwhile()`` run when the call reaches ``modules.<step>`` (what another thread does then)."""
    from fused_quant import modules

    real = getattr(modules, step)

    def step_with_meanwhile(*args, **kwargs):
        meanwhile()
        return real(*args, **kwargs)

    monkeypatch.setattr(modules, step, step_with_meanwhile)
    layer(x)
    monkeypatch.setattr(modules, step, real)


def test_a_tensor_set_while_a_call_binds_is_never_bound_stale(monkeypatch):
    """Another thread sets the weight while this call binds (simulated inside bind_gemm): the call computes and
    binds with the tensors it read, and the binding, now stale, is never used: the next call has the new weight."""
    layer, other = _layer(K.kInt8DynamicTokenSym), _layer(K.kInt8DynamicTokenSym, seed=7)
    x = torch.randn(4, 48).to(torch.bfloat16)
    # what the other thread does, mid-bind
    _call_while(monkeypatch, "bind_gemm", lambda: setattr(layer, "weight", other.weight.clone()), layer, x)
    want = QuantLinear(other.weight, layer.weight_scale, K.kInt8DynamicTokenSym, bias=layer.bias)(x)
    for _ in range(2):
        assert_bits_equal(layer(x), want, "the weight set mid-bind")


def test_a_setattr_finishing_while_a_call_runs_leaves_the_layer_binding(monkeypatch):
    """Another thread's ``layer.weight = w``: the buffer is written, and while this call (begun with the old table,
    reading the new weight) is in its GEMM, the setter gives the layer a new table. The call finds its old table's
    binding stale, but the layer's tensors were set as they should be: it binds again at the next call rather than
    take the checked path for good."""
    layer, other = _layer(K.kInt8DynamicTokenSym), _layer(K.kInt8DynamicTokenSym, seed=7)
    x = torch.randn(4, 48).to(torch.bfloat16)
    layer(x)
    nn.Module.__setattr__(layer, "weight", other.weight.clone())  # the setter's first half: the buffer written
    _call_while(monkeypatch, "quant_gemm", layer._unbind, layer, x)  # its second half, while this call runs
    want = QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, bias=layer.bias)(x)
    for _ in range(2):
        assert_bits_equal(layer(x), want, "the weight set meanwhile")
    assert len(layer._bound) == 1, "the layer stopped binding"


def test_a_setattr_landing_just_before_the_stale_mark_leaves_the_layer_binding():
    """A call begun with the old table finds a binding of other tensors there and marks the layer as swapped, while
    another thread's setattr gives the layer a new table in between its look at the table and the mark: the layer
    was marked for good (the checked path for every later call). The mark is the old table's now."""
    from fused_quant import runtime
    from fused_quant.modules import _signature

    layer, other = _layer(K.kInt8DynamicTokenSym), _layer(K.kInt8DynamicTokenSym, seed=7)
    x1, x2 = torch.randn(3, 48).to(torch.bfloat16), torch.randn(5, 48).to(torch.bfloat16)
    generation, old_table = runtime.generation(), layer._bound
    old = tuple(layer._buffers[name] for name in ("weight", "weight_scale", "bias", "input_scale"))
    layer._buffers["weight_scale"] = other.weight_scale.clone()  # the setter's first half: the buffer written
    layer(x1)  # another call binds the new tensor into the old table

    class SetterLandsFirst(dict):  # the setter's second half (_unbind) runs just before the mark is written
        armed = True

        def __setitem__(self, name, value):
            if name == "_swapped" and SetterLandsFirst.armed:
                SetterLandsFirst.armed = False
                layer._unbind()
            dict.__setitem__(self, name, value)

    layer.__dict__ = SetterLandsFirst(layer.__dict__)
    layer._bind(_signature(x2, None), generation, old_table, old, x2, quantize(x2, K.kInt8DynamicTokenSym))
    layer.__dict__ = dict(layer.__dict__)
    assert not SetterLandsFirst.armed
    for _ in range(2):
        layer(x1)
        layer(x2)
    assert len(layer._bound) == 2, "the layer stopped binding"


def test_dtype_change_and_state_dict_assign_bind_again():
    layer = _layer(K.kFp8DynamicTokenSym)
    x = torch.randn(3, 48).to(torch.bfloat16)
    layer(x)
    layer.to(torch.float16)
    out = layer(x)
    assert out.dtype == torch.float16
    src = _layer(K.kFp8DynamicTokenSym, seed=5).to(torch.float16)
    layer.load_state_dict(src.state_dict(), assign=True)
    assert_bits_equal(layer(x), src(x), "after load_state_dict(assign=True)")


def test_bound_layer_copies_and_pickles():
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(3, 48).to(torch.bfloat16)
    out = layer(x)
    assert layer._bound
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert not clone._bound
        assert_bits_equal(clone(x), out, "copy")
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    assert_bits_equal(torch.load(buf, weights_only=False)(x), out, "torch.save / torch.load")


def test_quantized_activation_and_hcu_pair_are_bound(checks):
    key = K.kInt8DynamicTokenSym
    layer = _layer(key)
    x = torch.randn(6, 48).to(torch.bfloat16)
    qa = fused_act_quant("identity", x, key)
    out = layer(qa)
    ran = checks[0]
    assert_bits_equal(layer(qa), out, "QuantizedActivation, bound")
    assert_bits_equal(layer(x, x_and_scale_quanted=(qa.data, qa.scale)), out, "HCU pair, first")
    ran = checks[0]
    assert_bits_equal(layer(x, x_and_scale_quanted=(qa.data, qa.scale)), out, "HCU pair, bound")
    assert checks[0] == ran
    # inputs the checks refuse are refused after binding too: the signature differs, so they are checked
    other = fused_act_quant("identity", x, K.kInt8StaticTensorSym, torch.tensor([0.1]))
    with pytest.raises(QuantKeyMismatchError):
        layer(other)
    with pytest.raises(ShapeMismatchError):
        layer(torch.randn(6, 47).to(torch.bfloat16))
    with pytest.raises(ShapeMismatchError, match="token-count mismatch"):
        layer(torch.randn(5, 48), x_and_scale_quanted=(qa.data, qa.scale))
    bad = QuantizedActivation(qa.data, qa.scale[:3], qa.orig_dtype, qa.orig_shape, key)
    with pytest.raises(ShapeMismatchError):
        layer(bad)


def test_bound_calls_per_layer_are_capped():
    layer = _layer(K.kInt8DynamicTokenSym, k=16, n=8)
    for m in range(1, MAX_BOUND + 10):
        layer(torch.randn(m, 16))
        assert len(layer._bound) <= MAX_BOUND


@pytest.mark.parametrize("key", list(K.KEYS.values()), ids=list(K.KEYS))
def test_linear_act_quant_is_the_layer_then_maybe_fused_act_quant(key):
    """``linear_act_quant`` gives what the layer's call then ``maybe_fused_act_quant`` give, call after call (on
    this backend, which binds no one-kernel call, it is those two calls); a consumer that needs the raw
    activation (LoRA) gets it; a float linear composes the same way; the producer is counted once a call."""
    from fused_quant import SiluAndMul, fusion_counts, linear_act_quant, maybe_fused_act_quant, reset_fusion_counts

    torch.manual_seed(3)
    scale = 0.05 if K.is_static(key) else None
    gate_up = QuantLinear.from_float(nn.Linear(32, 64, dtype=torch.bfloat16), key, scale, name="gate_up")
    down = QuantLinear.from_float(nn.Linear(32, 16, dtype=torch.bfloat16), key, scale, name="down")
    act = SiluAndMul()
    x = torch.randn(2, 3, 32, dtype=torch.bfloat16)
    want = maybe_fused_act_quant(act, gate_up(x), down)
    reset_fusion_counts()
    for i in range(3):
        got = linear_act_quant(gate_up, x, act, down)
        assert type(got) is QuantizedActivation and got.quant_key is want.quant_key, i
        assert_bits_equal(got.data, want.data, f"call {i}")
        assert_bits_equal(got.scale, want.scale, f"call {i}")
    assert sum(n for k, n in fusion_counts().items() if k[1] == "silu_and_mul") == 3
    # the torch GEMM binds no one-kernel call: the layer's bound call records that it runs the two calls
    assert [[p.call for p in b.producing.values()] for b in gate_up._bound.values()] == [[None]]
    seen = []
    hook = gate_up.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    for i in range(3):  # a hooked layer's call runs (its hooks see every output), the same bits
        assert_bits_equal(linear_act_quant(gate_up, x, act, down).data, want.data, f"hooked call {i}")
    hook.remove()
    assert seen == [(2, 3, 64)] * 3
    down.requires_unquantized_input = True
    assert_bits_equal(linear_act_quant(gate_up, x, act, down), act(gate_up(x)), "LoRA consumer: the activation")
    down.requires_unquantized_input = False
    plain = nn.Linear(32, 64, dtype=torch.bfloat16)
    with pytest.raises(UnsupportedError, match="inference only"):  # its output requires grad: no quantizing it
        linear_act_quant(plain, x, act, down)
    with torch.no_grad():
        got = linear_act_quant(plain, x, act, down)
        assert_bits_equal(got.data, maybe_fused_act_quant(act, plain(x), down).data, "a float linear")


@pytest.fixture
def producing_provider():
    """A torch GEMM provider (first in the torch backend's chain) with a ``bind_producing`` that runs the GEMM
    and then the bound producer it is given, in torch: the one-kernel path of ``linear_act_quant`` on a CPU.
    Yields the list its producing calls append to; unregistered after the test."""
    from fused_quant.gemm import dequant_epilogue, register_gemm_provider, unregister_gemm_provider

    runs = []

    def gemm(xq, xs, w, ws, bias, out_dtype):
        acc = xq.to(torch.float64) @ w.to(torch.float64).T
        return dequant_epilogue(acc, xs.reshape(-1, 1) if xs.numel() > 1 else xs.reshape(1, 1), ws, bias, out_dtype)

    def bind_producing(p, w, ws, bias, producer, quantizer=None):
        def call(x, xs, scale):
            if quantizer is not None:  # a float input: the layer's own quantizer first
                x, xs = quantizer(x, xs)
            runs.append(quantizer is not None)
            h = gemm(x.reshape(p.m, p.k), xs, w, ws, bias, p.out_dtype)
            return producer(h, scale)[0]

        call.under_capture = True
        return call

    register_gemm_provider("test_producing_int8", gemm, kind="int8", backends=("torch",), first=True,
                           bind_producing=bind_producing)
    try:
        yield runs
    finally:
        unregister_gemm_provider("test_producing_int8")


def test_linear_act_quant_one_kernel_path_follows_every_change(producing_provider):
    """Where the provider binds a producing call, ``linear_act_quant`` runs it once the layer's call and then the
    producer's are bound for an input's metadata, with the two calls' bits, and stops using it when anything the two calls read changes: the
    consumer's scale or LoRA flag, another numerics profile, the layer's weight, a hook or an instance forward
    added after binding."""
    from fused_quant import SiluAndMul, linear_act_quant, maybe_fused_act_quant

    runs = producing_provider
    torch.manual_seed(4)
    key = K.kInt8StaticTensorSym
    gate_up = QuantLinear.from_float(nn.Linear(32, 64, dtype=torch.bfloat16), key, 0.05, name="gate_up")
    down = QuantLinear.from_float(nn.Linear(32, 16, dtype=torch.bfloat16), key, 0.02, name="down")
    act = SiluAndMul()
    x = torch.randn(2, 3, 32, dtype=torch.bfloat16)

    def check(what, numerics=None, kernel=True):
        runs.clear()
        want = maybe_fused_act_quant(act, gate_up(x), down, numerics=numerics)
        got = linear_act_quant(gate_up, x, act, down, numerics=numerics)
        if isinstance(want, QuantizedActivation):
            assert_bits_equal(got.data, want.data, what)
            assert got.scale is want.scale and got.quant_key is want.quant_key, what
        else:
            assert_bits_equal(got, want, what)
        assert runs == ([True] if kernel else []), (what, runs)

    check("first call", kernel=False)  # the layer's call bound by check's own call of it; here the producer's
    check("bound")
    down.set_input_scale(0.03)  # a new scale tensor: bound again for it
    check("the consumer's new scale", kernel=False)
    check("bound to the new scale")
    check("hcu numerics", numerics="hcu", kernel=False)
    check("hcu numerics bound", numerics="hcu")
    down.requires_unquantized_input = True
    check("LoRA consumer: the activation", kernel=False)
    down.requires_unquantized_input = False
    check("consumer back")
    hook = gate_up.register_forward_hook(lambda module, args, out: None)
    check("a hooked layer", kernel=False)
    hook.remove()
    gate_up.forward = gate_up.forward  # an instance forward (a wrapper's place)
    check("an instance forward", kernel=False)
    del gate_up.forward
    check("class forward again")
    gate_up.weight = gate_up.weight.clone()
    check("a new weight", kernel=False)
    check("bound to the new weight")


def test_calls_bound_before_a_reset_are_dropped_when_the_layer_binds_again():
    layer = _layer(K.kInt8DynamicTokenSym)
    for m in (1, 2, 3):
        layer(torch.randn(m, 48).to(torch.bfloat16))
    assert len(layer._bound) == 3
    fused_quant.reset()
    x = torch.randn(2, 48).to(torch.bfloat16)
    assert_bits_equal(layer(x), _unbound(layer, x), "after reset")
    assert len(layer._bound) == 1  # the two other signatures' calls, bound before the reset, are gone


def test_tensors_put_in_place_for_calls_of_varying_token_counts_are_never_kept():
    """Offloading hooks move a fresh copy of the layer's tensors in for each call, and a server's token count varies
    from call to call: no signature binds to a moved-in copy (each would keep one alive)."""
    import gc
    import weakref

    layer = _layer(K.kInt8DynamicTokenSym)
    home = {name: getattr(layer, name) for name in ("weight", "weight_scale", "bias")}
    moved_in = []

    def move_in(module, args):
        for name, t in home.items():
            module._buffers[name] = t.clone()
        moved_in.append(weakref.ref(module._buffers["weight"]))

    def move_out(module, args, out):
        for name, t in home.items():
            module._buffers[name] = torch.empty(0, dtype=t.dtype)

    layer.register_forward_pre_hook(move_in)
    layer.register_forward_hook(move_out)
    for m in range(1, 9):
        x = torch.randn(m, 48).to(torch.bfloat16)
        want = gemm.quant_gemm(quantize(x, layer.input_key, None), home["weight"], home["weight_scale"], home["bias"],
                               out_dtype=layer.out_dtype)
        assert_bits_equal(layer(x), want, f"M={m}")
    gc.collect()
    assert not layer._bound and sum(ref() is not None for ref in moved_in) == 0


def test_a_strided_scale_put_in_place_is_never_bound(checks):
    """A provider would bind a contiguous copy of a strided weight scale or bias, which a write into the layer's
    tensor would leave stale: such a layer (its tensors put into ``_buffers``, past ``__setattr__``, which holds
    them contiguous) takes the checked path at every call and sees each write."""
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(3, 48).to(torch.bfloat16)
    for name in ("weight_scale", "bias"):
        held = getattr(layer, name)
        wide = torch.stack([held, held], -1)
        layer._buffers[name] = wide[..., 0]  # the same values, strided
        ran = checks[0]
        first = layer(x)
        wide.mul_(2)  # a write into the layer's tensor
        assert_bits_equal(layer(x), _unbound(layer, x), f"{name} written")
        assert not torch.equal(layer(x), first) and not layer._bound
        ran = checks[0]
        layer(x)
        assert checks[0] > ran, "a call skipped the checks"
        layer._buffers[name] = held


def test_a_one_element_activation_scale_of_any_rank_reaches_a_bound_provider_as_rank_two_at_most(checks):
    """A bound provider takes a per-tensor scale of one element and rank <= 2 (``bind_gemm``); a ``[1, 1, 1]`` one,
    which the checked entry accepts, is viewed as ``[1, 1]`` (an epilogue would broadcast it to a 3-D output)."""
    from fused_quant.gemm import dequant_epilogue, register_gemm_provider, unregister_gemm_provider

    seen = []

    def bind(p, w, ws, bias):
        def call(xq, xs):
            seen.append(tuple(xs.shape))
            return dequant_epilogue(xq.to(torch.float64) @ w.to(torch.float64).T, xs, ws, bias, p.out_dtype)

        return call

    register_gemm_provider("test_bound_int8", lambda *a: None, kind="int8", backends=("torch",), first=True, bind=bind)
    try:
        layer = _layer(K.kInt8StaticTensorSym)
        xq = torch.randint(-127, 128, (2, 5, 48), dtype=torch.int8)
        qa = QuantizedActivation(xq, torch.full((1, 1, 1), 0.05), torch.bfloat16, xq.shape, K.kInt8StaticTensorSym)
        first = layer(qa)
        assert layer._bound, "the call was not bound"
        assert_bits_equal(layer(qa), first, "bound")
        assert first.shape == (2, 5, 24) and all(len(shape) <= 2 for shape in seen), seen
    finally:
        unregister_gemm_provider("test_bound_int8")
