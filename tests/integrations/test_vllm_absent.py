"""Without vLLM (or with it hidden), the plugin does nothing, says why once, and never raises;
importing fused_quant never imports it."""

from __future__ import annotations

import logging
import subprocess
import sys

from fused_quant.integrations import vllm as plugin


def test_register_without_vllm_is_a_logged_no_op(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    monkeypatch.setitem(plugin._state, "done", False)
    monkeypatch.setitem(plugin._state, "active", False)
    with caplog.at_level(logging.WARNING, logger="fused_quant"):
        plugin.register()
        plugin.register()
    assert not plugin.status()["active"]
    assert "not installed" in plugin.status()["reason"]
    assert len([r for r in caplog.records if "inactive" in r.message]) == 1


def test_describe_without_vllm(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    report = plugin.describe()
    assert report["would_register"] is False and "not installed" in report["reason"]
    assert report["tested"] == plugin.TESTED_VLLM


def test_version_gate():
    assert plugin.version_supported("0.32.0") == (True, "")
    assert plugin.version_supported("0.32.5")[0]
    assert not plugin.version_supported("0.33.0")[0]
    assert not plugin.version_supported("0.31.2")[0]
    assert not plugin.version_supported("banana")[0]
    # a nightly or source build (dev, rc, post of a dev) in the range is refused by name, whatever packaging's
    # version (its default for prereleases in a range changed); a local build of a release is that release
    for build in ("0.32.1.dev57+g1a2b3c", "0.32.1rc1.dev57+g1a2b3c", "0.32.2rc0", "0.32.0.post1.dev3"):
        ok, reason = plugin.version_supported(build)
        assert not ok and reason == (f"vLLM {build} is a development or pre-release build; the plugin is tested on "
                                     f"the releases {plugin.TESTED_VLLM}")
    assert plugin.version_supported("0.32.0+cu130") == (True, "")
    assert "outside the tested range" in plugin.version_supported("0.33.0.dev1")[1]
    assert plugin.version_supported("") == (False, "vLLM version '' cannot be parsed")


def test_an_empty_vllm_version_is_named(monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__=""))
    monkeypatch.setitem(plugin._state, "done", False)
    monkeypatch.setitem(plugin._state, "reason", "register() not called")
    plugin.register()
    assert plugin.status()["reason"] == "vLLM version '' cannot be parsed"
    assert plugin.describe()["reason"] == "vLLM version '' cannot be parsed"


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "fused_quant"]
    assert [ep.value for ep in eps] == ["fused_quant.integrations.vllm:register"]


def test_probe_vllm_flag_runs():
    out = subprocess.run([sys.executable, "-m", "fused_quant", "probe", "--vllm"], capture_output=True, text=True)
    assert out.returncode == 0 and "vllm     :" in out.stdout
