"""The one runtime state and its one reset (``fused_quant.runtime``).

Every cache (validated call signatures, bound launches, compiled kernels, GEMM provider
choices) and every state value (probe result, backend choice, env snapshot) is emptied by one
``reset``, which every way of changing routing reaches; a value computed from the state before a
reset is never filed after it.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch import nn

import fused_quant as fq
from fused_quant import gemm, registry, runtime, selection
from fused_quant import keys as K
from fused_quant.platforms import probe

pytestmark = pytest.mark.torch


def _warm() -> None:
    """Fill the state and the caches the way a model's first forward does (torch backend, CPU)."""
    layer = fq.QuantLinear.from_float(nn.Linear(32, 16), K.kInt8DynamicTokenSym)
    x = torch.randn(4, 64)
    qa = fq.maybe_fused_act_quant(fq.SiluAndMul(), x, layer)
    layer(qa)
    fq.fused_act_quant("relu2", torch.randn(4, 32), K.kInt8DynamicTokenSym)


def _filled() -> dict[str, bool]:
    return {"platform": runtime.peek("platform") is not None, "backend": runtime.peek("backend") is not None,
            "calls": len(registry._CALLS) > 0,
            "gemm": len(gemm._SELECTED) > 0}


@pytest.mark.parametrize("how", ["reset", "probe_refresh", "reset_current_backend", "register_producer",
                                 "register_gemm_provider", "unregister_gemm_provider", "reset_plans"])
def test_every_way_in_empties_every_cache(how, monkeypatch):
    from fused_quant.kernels import launch

    monkeypatch.setattr(registry, "_PRODUCERS", {**registry._PRODUCERS, "torch": dict(registry._PRODUCERS["torch"])})
    # on a copy of the provider table, restored after the test
    monkeypatch.setattr(gemm, "_PROVIDERS", {name: list(chain) for name, chain in gemm._PROVIDERS.items()})
    if how == "unregister_gemm_provider":  # a provider to take out, registered before the caches fill
        fq.register_gemm_provider("test_runtime_noop", lambda *a: None, kind="int8", backends=("triton_fp8",),
                                  first=False)
    _warm()
    assert all(_filled().values()), _filled()
    generation = runtime.generation()
    if how == "reset":
        fq.reset()
    elif how == "probe_refresh":
        probe(refresh=True)
    elif how == "reset_current_backend":
        selection.reset_current_backend()
    elif how == "register_producer":
        p = registry._PRODUCERS["torch"][("relu2", "int8_dynamic_token")]
        fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend="torch", replace=True)(p.fn)
    elif how == "register_gemm_provider":
        fq.register_gemm_provider("test_runtime_noop", lambda *a: None, kind="int8", backends=("triton_fp8",),
                                  first=False)
    elif how == "unregister_gemm_provider":
        gemm.unregister_gemm_provider("test_runtime_noop")
    else:
        launch.reset_plans()
    assert runtime.generation() > generation
    filled = _filled()
    if how == "probe_refresh":  # probes again right away: only the platform is back
        assert filled.pop("platform")
    assert not any(filled.values()), filled
    _warm()  # and everything works again from the fresh state
    assert all(_filled().values())


def test_once_computes_once_per_generation():
    made = []
    runtime.reset()
    assert runtime.once("test.value", lambda: made.append(1) or len(made)) == 1
    assert runtime.once("test.value", lambda: made.append(1) or len(made)) == 1
    runtime.reset()
    assert runtime.once("test.value", lambda: made.append(1) or len(made)) == 2


def test_a_value_computed_across_a_reset_is_not_kept():
    """A factory (or a cache fill) that started before a reset computed from the old state."""
    cache = runtime.Cache("test")

    def factory():
        runtime.reset()  # another thread's reset, mid-computation
        return "stale"

    assert runtime.once("test.stale", factory) == "stale"
    assert runtime.peek("test.stale") is None
    started = runtime.generation()
    runtime.reset()
    assert cache.put("k", "stale", started) == "stale" and cache.get("k") is None
    cache.put("k", "fresh", runtime.generation())
    assert cache.get("k") == "fresh"


def test_a_factory_that_raises_stores_nothing():
    def broken():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        runtime.once("test.broken", broken)
    assert runtime.peek("test.broken") is None


def test_caches_are_bounded():
    cache = runtime.Cache("test", max_size=4)
    for i in range(10):
        cache.put(i, i, runtime.generation())
    assert len(cache) <= 4 and cache.get(9) == 9


def test_concurrent_resets_and_fills_stay_consistent():
    """8 threads fill a cache while another resets: every value found was filed in the generation
    it was computed in (the generation is part of the value here)."""
    cache = runtime.Cache("test")
    errors = []

    def fill():
        for i in range(2000):
            g = runtime.generation()
            cache.put(i % 64, g, g)
            got = cache.get(i % 64)
            if got is not None and got > runtime.generation():
                errors.append(got)

    def resets():
        for _ in range(200):
            runtime.reset()

    threads = [threading.Thread(target=fill) for _ in range(8)] + [threading.Thread(target=resets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_the_name_asked_for_and_the_name_selected_come_from_one_read(monkeypatch):
    """FUSED_QUANT_BACKEND changed by another thread while a selection runs: the selection reports the value it
    selected by as the one asked for (the environment and each later read say "auto")."""
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "auto")
    reads = iter([" Torch "])
    monkeypatch.setattr(selection.envs, "backend_as_set", lambda: next(reads, "auto"))
    fq.reset()
    chosen = fq.current_backend()
    assert (chosen.name, chosen.requested) == ("torch", "torch")


def _race(work, threads: int = 8) -> list[BaseException]:
    """``work(i)`` on ``threads`` threads at once, Python switching threads every microsecond (where a
    read-then-write without a lock loses), each thread's exception kept."""
    import sys

    errors: list[BaseException] = []

    def run(i):
        try:
            work(i)
        except BaseException as exc:  # kept for the assertion, with its type
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(60)
        assert not any(t.is_alive() for t in pool), "a registration never returned (a deadlock?)"
    finally:
        sys.setswitchinterval(interval)
    return errors


def _exact(xq, xs, w, ws, bias, out_dtype):
    return gemm.dequant_epilogue(xq.double() @ w.double().T, xs, ws, bias, out_dtype)


def test_registrations_from_several_threads_are_each_whole(monkeypatch):
    """Threads registering and unregistering providers of their own names on one chain, and producers on one slot:
    every registration is there until its own unregistration, and the tables end as they began. Each change read
    a chain and wrote a copy back without a lock: registrations vanished (their unregistration raised), providers
    unregistered came back and served later GEMMs, the slot kept a user's producer, and a chain's first provider
    for a new backend key failed another thread's iteration (dictionary changed size)."""
    monkeypatch.setattr(gemm, "_PROVIDERS", dict(gemm._PROVIDERS))
    monkeypatch.setattr(registry, "_PRODUCERS", dict(registry._PRODUCERS))
    before = (dict(gemm._PROVIDERS), dict(registry._PRODUCERS["torch"]))

    def providers(i):
        for n in range(400):
            name = f"race_{i}_{n}"
            fq.register_gemm_provider(name, _exact, kind="int8", backends=None if n % 3 == 0 else ("torch",),
                                      first=n % 2 == 0)
            fq.unregister_gemm_provider(name)

    def producers(i):
        for _ in range(100):
            fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend="torch", replace=True)(
                lambda x, scale, *, numerics, fp8_dtype: (x, scale))  # a new one each time: never run here
            fq.unregister_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend="torch")

    assert _race(providers) == []
    assert _race(producers) == []
    assert {k: v for k, v in gemm._PROVIDERS.items() if v} == {k: v for k, v in before[0].items() if v}
    assert registry._PRODUCERS["torch"] == before[1]


def test_a_provider_registered_again_serves_without_a_gap(monkeypatch):
    """Registering a name again replaces its entry: a GEMM running meanwhile finds it (or the entry it replaces),
    never no provider. Before, the old entry was taken out and the new one put in as two changes: with the
    backend's other int8 provider disabled, GEMMs in between had none (BackendUnavailableError)."""
    monkeypatch.setattr(gemm, "_PROVIDERS", dict(gemm._PROVIDERS))
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "torch_int8_f64")
    fq.reset()
    try:
        fq.register_gemm_provider("mine", _exact, kind="int8", backends=("torch",))
        layer = fq.QuantLinear.from_float(nn.Linear(64, 32), K.kInt8DynamicTokenSym)
        x = torch.randn(1, 64)
        want = layer(x)
        done = threading.Event()

        def work(i):
            if i == 0:
                for _ in range(2000):
                    fq.register_gemm_provider("mine", _exact, kind="int8", backends=("torch",))
                done.set()
            else:
                with torch.no_grad():
                    while not done.is_set():
                        assert torch.equal(layer(x), want)

        assert _race(work, threads=9) == []
    finally:
        fq.unregister_gemm_provider("mine")
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fq.reset()


def test_a_provider_moved_to_every_backend_is_never_missing_between_the_chains(monkeypatch):
    """A GEMM's chain is three chains read together (every backend's first, the backend's own, those after each
    backend's): read under the registration lock, a re-registration that moves a provider from the backend's
    chain to every backend's cannot come between the reads. Forced here: the first read starts the re-registration
    on another thread and gives it half a second. Before, it ran in between and the chain had no such provider."""
    monkeypatch.setattr(gemm, "_PROVIDERS", dict(gemm._PROVIDERS))  # the test's providers stay in its copy
    fq.register_gemm_provider("moving", _exact, kind="int8", backends=("torch",))
    main, armed = threading.current_thread(), [True]

    class Table(dict):
        def get(self, key, default=None):
            value = super().get(key, default)
            if key is None and armed[0] and threading.current_thread() is main:  # every backend's chain, read
                armed[0] = False
                mover = threading.Thread(target=fq.register_gemm_provider, args=("moving", _exact),
                                         kwargs={"kind": "int8", "backends": None, "first": True})
                mover.start()
                mover.join(0.5)  # blocked on the lock the read holds, where the reads are one
            return value

    monkeypatch.setattr(gemm, "_PROVIDERS", Table(gemm._PROVIDERS))
    try:
        assert "moving" in [p.name for p in gemm._chain("torch")]
    finally:
        deadline = time.monotonic() + 10
        while "moving" not in [p.name for p in gemm._PROVIDERS[None]] and time.monotonic() < deadline:
            time.sleep(0.01)  # the move, once the read let it
        fq.unregister_gemm_provider("moving")
