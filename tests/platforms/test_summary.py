"""``PlatformInfo.summary()``: the one line ``fused-quant probe`` starts with, saying what was found."""

from __future__ import annotations

import pytest

from fused_quant.platforms import PlatformInfo


@pytest.mark.parametrize("info,line", [
    (PlatformInfo("cpu"), "no GPU found"),
    (PlatformInfo("nvidia", "sm_90", "NVIDIA H200", 8), "8 x NVIDIA H200 (nvidia sm_90)"),
    # /proc/driver/nvidia gives a name but no compute capability
    (PlatformInfo("nvidia", None, "NVIDIA A100-SXM4-80GB", 2), "2 x NVIDIA A100-SXM4-80GB (nvidia, arch unknown)"),
    # KFD sysfs nodes may have no name file
    (PlatformInfo("hygon", "gfx936", None, 1), "1 x unnamed GPU (hygon gfx936)"),
    (PlatformInfo("amd", "gfx942", "AMD Instinct MI300X", 8), "8 x AMD Instinct MI300X (amd gfx942)"),
])
def test_summary(info, line):
    assert info.summary() == line
    assert info.as_dict()["summary"] == line
