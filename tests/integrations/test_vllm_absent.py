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


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "fused_quant"]
    assert [ep.value for ep in eps] == ["fused_quant.integrations.vllm:register"]


def test_probe_vllm_flag_runs():
    out = subprocess.run([sys.executable, "-m", "fused_quant", "probe", "--vllm"], capture_output=True, text=True)
    assert out.returncode == 0 and "vllm     :" in out.stdout
