"""The platform probe on fake NVML / amdsmi / sysfs inputs, and for real on this CPU machine."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fused_quant.platforms import PlatformInfo, current_platform, probe
from fused_quant.platforms.probe import (
    Sighting,
    classify_amd_like,
    decode_gfx_target_version,
    dtk_marker,
    gfx_name,
    hidden_by,
    installed_triton_version,
    probe_amdsmi,
    probe_kfd_sysfs,
    probe_nvidia_procfs,
    probe_nvml,
    probe_with,
    read_kfd_properties,
    torch_build_of,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

CPU_TORCH = SimpleNamespace(cuda=None, hip=None, __version__="2.13.0+cpu")
CUDA_TORCH = SimpleNamespace(cuda="12.8", hip=None, __version__="2.13.0+cu128")
ROCM_TORCH = SimpleNamespace(cuda=None, hip="6.3.42131", __version__="2.13.0+rocm6.3")
DTK_TORCH = SimpleNamespace(cuda=None, hip="5.7.24164", __version__="2.1.0+das.opt1.dtk24042")


# --- fakes -----------------------------------------------------------------------------


class FakeNVMLError(Exception):
    pass


class FakeNVML:
    """pynvml's surface that the probe uses; records init/shutdown calls."""

    def __init__(self, devices=(), init_error=None):
        self.devices = list(devices)  # (name, (major, minor))
        self.init_error = init_error
        self.calls: list[str] = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return self.devices[handle][0]

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return self.devices[handle][1]


class FakeAmdSmi:
    def __init__(self, asics=(), handles_error=None):
        self.asics = list(asics)
        self.handles_error = handles_error
        self.calls: list[str] = []

    def amdsmi_init(self):
        self.calls.append("init")

    def amdsmi_shut_down(self):
        self.calls.append("shutdown")

    def amdsmi_get_processor_handles(self):
        if self.handles_error is not None:
            raise self.handles_error
        return list(range(len(self.asics)))

    def amdsmi_get_gpu_asic_info(self, handle):
        return self.asics[handle]


def h200(n=1):
    return FakeNVML([("NVIDIA H200", (9, 0))] * n)


def make_loader(**modules):
    """A ``load`` for probe_with: the given fake modules, every other one 'not installed'."""

    def load(name):
        return modules.get(name) or Sighting(None, f"{name} not installed")

    return load


def write_kfd_node(root: Path, index: int, gfx_target_version: int, vendor_id: int = 0,
                   device_id: int = 0, name: str | None = None) -> None:
    node = root / "nodes" / str(index)
    node.mkdir(parents=True)
    (node / "properties").write_text(
        "cpu_cores_count 0\n"
        "simd_count 304\n"
        f"gfx_target_version {gfx_target_version}\n"
        f"vendor_id {vendor_id}\n"
        f"device_id {device_id}\n"
        "location_id 0\n"
    )
    if name is not None:
        (node / "name").write_text(name + "\n")


def kfd_tree(root: Path, gpus: list[tuple[int, int, str | None]]) -> Path:
    """Node 0 is a CPU node (gfx_target_version 0), then one node per (gfx, vendor, name)."""
    write_kfd_node(root, 0, 0)
    for index, (gfx, vendor_id, name) in enumerate(gpus, start=1):
        write_kfd_node(root, index, gfx, vendor_id, device_id=0x74A1, name=name)
    return root


def run_probe(tmp_path, version=CPU_TORCH, env=None, sysfs=None, proc=None, **modules) -> PlatformInfo:
    return probe_with(version, env or {}, make_loader(**modules), proc or tmp_path / "no-proc",
                      sysfs or tmp_path / "no-sysfs", triton_version="3.7.1")


# --- torch build info ------------------------------------------------------------------


@pytest.mark.parametrize(("version", "expected"), [
    (CPU_TORCH, "cpu"), (CUDA_TORCH, "cuda 12.8"), (ROCM_TORCH, "hip 6.3.42131"), (DTK_TORCH, "hip 5.7.24164"),
])
def test_torch_build(version, expected):
    assert torch_build_of(version) == expected


def test_dtk_marker_sources():
    assert dtk_marker(DTK_TORCH) == "torch.version.__version__=2.1.0+das.opt1.dtk24042"
    assert dtk_marker(SimpleNamespace(hip="6.2", dtk="25.04")) == "torch.version.dtk=25.04"
    assert dtk_marker(SimpleNamespace(hip="5.7.dtk2404", __version__="2.1.0")) == "torch.version.hip=5.7.dtk2404"
    assert dtk_marker(ROCM_TORCH) is None
    assert dtk_marker(CPU_TORCH) is None


# --- gfx_target_version ----------------------------------------------------------------


@pytest.mark.parametrize(("value", "arch"), [
    (90402, "gfx942"), (90010, "gfx90a"), (90500, "gfx950"), (90306, "gfx936"), (90208, "gfx928"),
    (90006, "gfx906"), (110000, "gfx1100"), (120001, "gfx1201"), (100300, "gfx1030"), (0, None),
])
def test_decode_gfx_target_version(value, arch):
    assert decode_gfx_target_version(value) == arch


# --- NVIDIA ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "cap", "arch", "fp8"), [
    ("NVIDIA H200", (9, 0), "sm_90", torch.float8_e4m3fn),
    ("NVIDIA A100-SXM4-80GB", (8, 0), "sm_80", None),
    ("NVIDIA L40S", (8, 9), "sm_89", torch.float8_e4m3fn),
    ("NVIDIA B200", (10, 0), "sm_100", torch.float8_e4m3fn),
])
def test_nvml_devices(tmp_path, name, cap, arch, fp8):
    nvml = FakeNVML([(name, cap)] * 8)
    info = run_probe(tmp_path, CUDA_TORCH, pynvml=nvml)
    assert (info.vendor, info.arch, info.device_name, info.device_count) == ("nvidia", arch, name, 8)
    assert info.capability == cap
    assert info.fp8_dtype == fp8
    assert info.has_fp8 is (fp8 is not None)
    assert info.torch_build == "cuda 12.8"
    assert info.triton_version == "3.7.1"
    assert info.reason == f"NVML: 8 x {name}, compute capability {cap[0]}.{cap[1]}; torch cuda 12.8"
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_bytes_name():
    sighting = probe_nvml(FakeNVML([(b"NVIDIA H200", (9, 0))]))
    assert (sighting.vendor, sighting.device_name, sighting.arch) == ("nvidia", "NVIDIA H200", "sm_90")


def test_nvml_zero_devices_is_cpu(tmp_path):
    nvml = FakeNVML([])
    info = run_probe(tmp_path, CUDA_TORCH, pynvml=nvml)
    assert (info.vendor, info.arch, info.device_count) == ("cpu", None, 0)
    assert info.reason.startswith("NVML: 0 devices; ")
    assert info.reason.endswith("; no GPU found; torch cuda 12.8")
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_init_error_is_recorded(tmp_path):
    nvml = FakeNVML(init_error=FakeNVMLError("Driver Not Loaded"))
    info = run_probe(tmp_path, CUDA_TORCH, pynvml=nvml)
    assert info.vendor == "cpu"
    assert info.reason.startswith("NVML init failed (FakeNVMLError: Driver Not Loaded); ")
    assert nvml.calls == ["init"]  # no shutdown without a successful init


def nvidia_proc_tree(root: Path, names: list[str]) -> Path:
    for index, name in enumerate(names):
        gpu = root / "gpus" / f"0000:{index:02x}:00.0"
        gpu.mkdir(parents=True)
        (gpu / "information").write_text(
            f"Model: \t\t {name}\nIRQ:   \t\t 16\nGPU UUID: \t GPU-1234\nBus Type: \t PCIe\n")
    return root


def test_procfs_without_pynvml(tmp_path):
    proc = nvidia_proc_tree(tmp_path / "proc", ["NVIDIA H200", "NVIDIA H200"])
    info = run_probe(tmp_path, CUDA_TORCH, proc=proc)
    assert (info.vendor, info.arch, info.device_name, info.device_count) == ("nvidia", None, "NVIDIA H200", 2)
    assert (info.fp8_dtype, info.has_fp8) == (None, False)
    assert info.reason == (f"{proc}: 2 x NVIDIA H200; compute capability needs NVML (install nvidia-ml-py); "
                           "torch cuda 12.8")


def test_nvml_init_error_falls_back_to_procfs(tmp_path):
    proc = nvidia_proc_tree(tmp_path / "proc", ["NVIDIA H200"])
    info = run_probe(tmp_path, CUDA_TORCH, proc=proc, pynvml=FakeNVML(init_error=FakeNVMLError("boom")))
    assert (info.vendor, info.arch, info.device_name) == ("nvidia", None, "NVIDIA H200")
    assert info.reason.startswith("NVML init failed (FakeNVMLError: boom); ")


def test_procfs_missing_root(tmp_path):
    sighting = probe_nvidia_procfs(tmp_path / "absent")
    assert (sighting.vendor, sighting.note) == (None, f"no NVIDIA GPUs under {tmp_path / 'absent'}")


@pytest.mark.parametrize("value", ["", "-1", " -1 "])
def test_cuda_visible_devices_hides_all(tmp_path, value):
    nvml = h200()
    info = run_probe(tmp_path, CUDA_TORCH, env={"CUDA_VISIBLE_DEVICES": value}, pynvml=nvml)
    assert info.vendor == "cpu"
    assert info.reason.startswith(f"NVIDIA GPUs hidden by CUDA_VISIBLE_DEVICES={value!r}; ")
    assert nvml.calls == []


def test_cuda_visible_devices_list_is_not_interpreted(tmp_path):
    info = run_probe(tmp_path, CUDA_TORCH, env={"CUDA_VISIBLE_DEVICES": "1"}, pynvml=h200(4))
    assert (info.vendor, info.arch, info.device_count) == ("nvidia", "sm_90", 4)


def test_hidden_by():
    assert hidden_by({"HIP_VISIBLE_DEVICES": "-1"}, ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")) \
        == "HIP_VISIBLE_DEVICES='-1'"
    assert hidden_by({"CUDA_VISIBLE_DEVICES": "0,1"}, ("CUDA_VISIBLE_DEVICES",)) is None
    assert hidden_by({}, ("CUDA_VISIBLE_DEVICES",)) is None


# --- AMD / Hygon via amdsmi ------------------------------------------------------------


MI300X_ASIC = {"market_name": "AMD Instinct MI300X", "vendor_id": 0x1002, "device_id": 0x74A1,
               "target_graphics_version": "gfx942"}


def test_amdsmi_gfx942(tmp_path):
    smi = FakeAmdSmi([MI300X_ASIC] * 8)
    info = run_probe(tmp_path, ROCM_TORCH, amdsmi=smi)
    assert (info.vendor, info.arch, info.device_name, info.device_count) == (
        "amd", "gfx942", "AMD Instinct MI300X", 8)
    assert (info.fp8_dtype, info.has_fp8) == (torch.float8_e4m3fnuz, True)
    assert info.torch_build == "hip 6.3.42131"
    assert info.reason == ("amdsmi: 8 x AMD Instinct MI300X (gfx942), amd by PCI vendor 0x1002; "
                           "torch hip 6.3.42131")
    assert smi.calls == ["init", "shutdown"]


def test_amdsmi_string_ids_and_feature_suffix():
    asic = {"market_name": "K100_AI", "vendor_id": "0x1d94", "target_graphics_version": "gfx928:sramecc+:xnack-"}
    sighting = probe_amdsmi(FakeAmdSmi([asic]), dtk=None)
    assert (sighting.vendor, sighting.arch, sighting.device_name) == ("hygon", "gfx928", "K100_AI")


def test_amdsmi_numeric_target_version():
    asic = {"market_name": "N/A", "vendor_id": 4098, "target_graphics_version": "90010"}
    sighting = probe_amdsmi(FakeAmdSmi([asic]), dtk=None)
    assert (sighting.vendor, sighting.arch) == ("amd", "gfx90a")


def test_broken_amdsmi_falls_back_to_sysfs(tmp_path):
    sysfs = kfd_tree(tmp_path / "kfd", [(90402, 4098, "gfx942")])
    smi = FakeAmdSmi(handles_error=RuntimeError("AMDSMI_STATUS_DRIVER_NOT_LOADED"))
    info = run_probe(tmp_path, ROCM_TORCH, sysfs=sysfs, amdsmi=smi)
    assert (info.vendor, info.arch, info.device_name, info.device_count) == ("amd", "gfx942", "gfx942", 1)
    assert info.fp8_dtype == torch.float8_e4m3fnuz
    assert info.reason == ("amdsmi query failed (RuntimeError: AMDSMI_STATUS_DRIVER_NOT_LOADED); "
                           "KFD sysfs: 1 x gfx942 (gfx942), amd by PCI vendor 0x1002; torch hip 6.3.42131")
    assert smi.calls == ["init", "shutdown"]


@pytest.mark.parametrize("arch", [None, "gfx" + "f" * 16, "N/A", "", 2370], ids=["no-field", "not-supported",
                                                                             "n/a", "empty", "no-major"])
def test_an_amdsmi_without_a_usable_arch_lets_the_kfd_tree_name_it(tmp_path, arch):
    """ROCm 6.0-6.2's amdsmi has no target_graphics_version, 6.3's says "not supported" with all ones: the probe
    took the sighting as it was, arch unknown, so an MI300X lost FP8 (e4m3fnuz) and its FP8 GEMMs, with the KFD tree
    that names gfx942 never read."""
    asic = {k: v for k, v in MI300X_ASIC.items() if k != "target_graphics_version"}
    if arch is not None:
        asic["target_graphics_version"] = arch
    sysfs = kfd_tree(tmp_path / "kfd", [(90402, 4098, "gfx942")] * 8)
    info = run_probe(tmp_path, ROCM_TORCH, sysfs=sysfs, amdsmi=FakeAmdSmi([asic] * 8))
    assert (info.vendor, info.arch, info.device_name, info.device_count, info.fp8_dtype) == (
        "amd", "gfx942", "AMD Instinct MI300X", 8, torch.float8_e4m3fnuz)
    assert info.reason.startswith("amdsmi: 8 x AMD Instinct MI300X (no usable arch: "), info.reason
    assert "; its arch from the KFD tree: KFD sysfs: 8 x gfx942 (gfx942), amd by PCI vendor 0x1002" in info.reason
    # no KFD tree either: amdsmi's sighting stands, its arch unknown and said so
    info = run_probe(tmp_path, ROCM_TORCH, amdsmi=FakeAmdSmi([asic] * 8))
    assert (info.vendor, info.arch, info.fp8_dtype) == ("amd", None, None)
    assert f"(no usable arch: {asic.get('target_graphics_version')!r})" in info.reason


def test_an_amdsmi_without_an_arch_keeps_its_hygon_evidence_with_the_kfd_arch(tmp_path):
    """amdsmi names a Hygon DCU but no arch, the KFD tree a gfx906 under AMD's PCI vendor: the arch is the tree's,
    the name and vendor amdsmi's (the tree's sighting alone said AMD)."""
    asic = {"market_name": "Hygon DCU Z100", "vendor_id": 0x1002}
    sysfs = kfd_tree(tmp_path / "kfd", [(90006, 0x1002, None)])
    info = run_probe(tmp_path, ROCM_TORCH, sysfs=sysfs, amdsmi=FakeAmdSmi([asic]))
    assert (info.vendor, info.arch, info.device_name) == ("hygon", "gfx906", "Hygon DCU Z100")


@pytest.mark.parametrize("raw, arch", [("GFX942", "gfx942"), (" gfx90a:xnack- ", "gfx90a"), ("gfx1201", "gfx1201"),
                                       ("120001", "gfx1201"), ("sm_94", None), ("gfx", None), ("gfx94", None)])
def test_gfx_name_reads_an_arch_as_the_sources_report_it(raw, arch):
    assert gfx_name(raw) == arch
    asic = {"market_name": "GPU", "vendor_id": 4098, "target_graphics_version": raw}
    assert probe_amdsmi(FakeAmdSmi([asic]), dtk=None).arch == arch


@pytest.mark.parametrize("answer", [None, SimpleNamespace(market_name="GPU")], ids=["none", "object"])
def test_an_amdsmi_answer_that_is_no_dict_lets_sysfs_try(tmp_path, answer):
    """The fields were read after the query's try: an answer of another type crashed the probe."""
    sysfs = kfd_tree(tmp_path / "kfd", [(90402, 4098, "gfx942")])
    info = run_probe(tmp_path, ROCM_TORCH, sysfs=sysfs, amdsmi=FakeAmdSmi([answer]))
    assert (info.vendor, info.arch) == ("amd", "gfx942")
    assert info.reason.startswith("amdsmi query failed (AttributeError: "), info.reason


def test_amdsmi_import_failure_is_recorded(tmp_path):
    sysfs = kfd_tree(tmp_path / "kfd", [(90402, 4098, None)])

    def load(name):
        if name == "amdsmi":
            return Sighting(None, "amdsmi import failed (OSError: libamd_smi.so missing)", error=True)
        return Sighting(None, f"{name} not installed")

    info = probe_with(ROCM_TORCH, {}, load, tmp_path / "no-proc", sysfs, triton_version=None)
    assert (info.vendor, info.arch, info.device_name, info.triton_version) == ("amd", "gfx942", None, None)
    assert info.reason.startswith("amdsmi import failed (OSError: libamd_smi.so missing); KFD sysfs: 1 x gfx942")


# --- AMD / Hygon via KFD sysfs ---------------------------------------------------------


@pytest.mark.parametrize(("gfx", "vendor_id", "name", "version", "vendor", "arch", "fp8"), [
    (90010, 4098, "gfx90a", ROCM_TORCH, "amd", "gfx90a", None),
    (90402, 4098, "gfx942", ROCM_TORCH, "amd", "gfx942", torch.float8_e4m3fnuz),
    (90500, 4098, None, ROCM_TORCH, "amd", "gfx950", torch.float8_e4m3fn),
    (90208, 4098, None, DTK_TORCH, "hygon", "gfx928", None),  # Hygon-only arch, whatever the vendor id
    (90306, 7572, None, DTK_TORCH, "hygon", "gfx936", torch.float8_e4m3fn),  # 7572 == 0x1d94
    (90006, 4098, None, ROCM_TORCH, "amd", "gfx906", None),  # MI50/MI60
    (90006, 4098, None, DTK_TORCH, "hygon", "gfx906", None),  # same arch, DTK build
    (90006, 4098, "Hygon DCU Z100", ROCM_TORCH, "hygon", "gfx906", None),  # named DCU
])
def test_kfd_sysfs(tmp_path, gfx, vendor_id, name, version, vendor, arch, fp8):
    sysfs = kfd_tree(tmp_path / "kfd", [(gfx, vendor_id, name)] * 2)
    info = run_probe(tmp_path, version, sysfs=sysfs)
    assert (info.vendor, info.arch, info.device_name, info.device_count) == (vendor, arch, name, 2)
    assert info.fp8_dtype == fp8
    assert info.has_fp8 is (fp8 is not None)
    assert info.torch_build == torch_build_of(version)


def test_kfd_sysfs_reasons(tmp_path):
    sighting = probe_kfd_sysfs(kfd_tree(tmp_path / "a", [(90306, 7572, None)]), dtk=None)
    assert sighting.note == "KFD sysfs: 1 x gfx936 (gfx936), hygon by PCI vendor 0x1d94"
    sighting = probe_kfd_sysfs(kfd_tree(tmp_path / "b", [(90006, 4098, None)]), dtk="torch.version.dtk=24.04")
    assert sighting.note == "KFD sysfs: 1 x gfx906 (gfx906), hygon by gfx906 with DTK build (torch.version.dtk=24.04)"
    sighting = probe_kfd_sysfs(kfd_tree(tmp_path / "c", [(90006, 4098, None)]), dtk=None)
    assert sighting.note == "KFD sysfs: 1 x gfx906 (gfx906), amd by PCI vendor 0x1002"


def test_kfd_sysfs_cpu_only_tree(tmp_path):
    root = tmp_path / "kfd"
    write_kfd_node(root, 0, 0)
    write_kfd_node(root, 1, 0)
    info = run_probe(tmp_path, ROCM_TORCH, sysfs=root)
    assert (info.vendor, info.arch, info.device_count) == ("cpu", None, 0)
    assert (info.fp8_dtype, info.has_fp8) == (torch.float8_e4m3fn, True)  # torch backend emulates e4m3fn
    assert f"KFD sysfs {root}: CPU nodes only" in info.reason
    assert info.reason.endswith("no GPU found; torch hip 6.3.42131")


def test_kfd_sysfs_missing_tree(tmp_path):
    sighting = probe_kfd_sysfs(tmp_path / "absent", dtk=None)
    assert (sighting.found, sighting.note) == (False, f"KFD sysfs {tmp_path / 'absent'}: no nodes")


def test_kfd_nodes_sorted_numerically(tmp_path):
    root = tmp_path / "kfd"
    for index in range(12):
        write_kfd_node(root, index, 0 if index == 0 else 90402, 4098, name=f"card{index}")
    sighting = probe_kfd_sysfs(root, dtk=None)
    assert (sighting.device_name, sighting.device_count) == ("card1", 11)


def test_read_kfd_properties_skips_non_integers(tmp_path):
    path = tmp_path / "properties"
    path.write_text("gfx_target_version 90402\nmarketing_name MI300X\nvendor_id 4098\n\n")
    assert read_kfd_properties(path) == {"gfx_target_version": 90402, "vendor_id": 4098}


def test_hip_visible_devices_hides_rocm(tmp_path):
    sysfs = kfd_tree(tmp_path / "kfd", [(90402, 4098, None)])
    info = run_probe(tmp_path, ROCM_TORCH, env={"HIP_VISIBLE_DEVICES": ""}, sysfs=sysfs)
    assert info.vendor == "cpu"
    assert info.reason.startswith("ROCm GPUs hidden by HIP_VISIBLE_DEVICES=''; ")


def test_classify_amd_like():
    assert classify_amd_like(0x1002, ["AMD Instinct MI50"], "gfx906", None) == ("amd", "PCI vendor 0x1002")
    assert classify_amd_like(None, ["dcu k100"], "gfx928", None) == ("hygon", "device name 'dcu k100'")
    assert classify_amd_like(None, [None], "gfx938", None) == ("hygon", "gfx938 is a Hygon-only arch")
    assert classify_amd_like(None, [], "gfx906", None) == ("amd", "no Hygon evidence")


# --- source order ----------------------------------------------------------------------


def test_torch_build_vendor_is_asked_first(tmp_path):
    sysfs = kfd_tree(tmp_path / "kfd", [(90402, 4098, None)])
    hip_info = run_probe(tmp_path, ROCM_TORCH, sysfs=sysfs, pynvml=h200())
    cuda_info = run_probe(tmp_path, CUDA_TORCH, sysfs=sysfs, pynvml=h200())
    assert (hip_info.vendor, hip_info.arch) == ("amd", "gfx942")
    assert (cuda_info.vendor, cuda_info.arch) == ("nvidia", "sm_90")


# --- triton version --------------------------------------------------------------------


def test_installed_triton_version_lookup_order():
    def lookup(dist):
        if dist == "pytorch-triton-rocm":
            return "3.2.0"
        raise importlib.metadata.PackageNotFoundError(dist)

    assert installed_triton_version(lookup) == "3.2.0"

    def nothing(dist):
        raise importlib.metadata.PackageNotFoundError(dist)

    assert installed_triton_version(nothing) is None


# --- the real probe on this machine ----------------------------------------------------


@pytest.fixture
def cuda_forbidden(monkeypatch):
    """Make every CUDA-initializing torch.cuda call fail loudly during the test."""

    def forbidden(*args, **kwargs):
        raise AssertionError("probe must not touch torch.cuda")

    for name in ("is_available", "device_count", "get_device_capability", "get_device_properties",
                 "get_device_name", "init", "current_device"):
        monkeypatch.setattr(torch.cuda, name, forbidden)


@pytest.fixture
def fresh_probe():
    probe(refresh=True)
    yield
    probe(refresh=True)  # later tests see this machine, not anything a test left behind


def test_real_probe_leaves_cuda_uninitialized(cuda_forbidden, fresh_probe):
    info = probe(refresh=True)
    assert info.vendor in ("nvidia", "amd", "hygon", "cpu")
    assert torch.cuda.is_initialized() is False


def _dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").exists() or Path("/sys/class/kfd").exists(),
                    reason="a GPU driver is loaded here; the CPU-host expectations do not apply")
def test_real_probe_on_cpu_host(cuda_forbidden, fresh_probe):
    info = probe(refresh=True)
    assert (info.vendor, info.arch, info.device_name, info.device_count) == ("cpu", None, None, 0)
    assert info.torch_build == torch_build_of(torch.version)
    assert (info.fp8_dtype, info.has_fp8) == (torch.float8_e4m3fn, True)
    assert info.triton_version == (_dist_version("triton") or _dist_version("pytorch-triton-rocm")
                                   or _dist_version("pytorch-triton"))
    assert info.reason.endswith(f"no GPU found; torch {info.torch_build}")
    assert torch.cuda.is_initialized() is False


def test_probe_is_cached(fresh_probe):
    first = probe()
    assert probe() is first
    assert current_platform() is first
    refreshed = probe(refresh=True)
    assert refreshed is not first
    assert refreshed == first
    assert current_platform() is refreshed


def test_import_is_lean_and_probe_leaves_cuda_alone():
    # A fresh interpreter, and a bare parent package so that only fused_quant.platforms
    # is measured: fused_quant/__init__ pulls in other modules with their own imports.
    code = (
        "import sys, types, torch\n"
        "parent = types.ModuleType('fused_quant')\n"
        f"parent.__path__ = [{str(REPO_ROOT / 'fused_quant')!r}]\n"
        "sys.modules['fused_quant'] = parent\n"
        "import fused_quant.platforms as p\n"
        "print(sorted(m for m in ('triton', 'vllm', 'pynvml', 'amdsmi') if m in sys.modules))\n"
        "p.probe()\n"
        "print(torch.cuda.is_initialized())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120, check=True)
    assert result.stdout.split() == ["[]", "False"]


def test_a_failing_shutdown_changes_nothing_reported_and_is_logged(caplog):
    """NVML's and amdsmi's shutdown after a query: a failure there changes nothing the probe found, so it is not
    raised, and not silenced either: the ``fused_quant`` logger tells it at debug level."""
    import logging

    class NoShutdownNVML(FakeNVML):
        def nvmlShutdown(self):
            raise FakeNVMLError("NVML_ERROR_UNINITIALIZED")

    class NoShutdownAmdSmi(FakeAmdSmi):
        def amdsmi_shut_down(self):
            raise RuntimeError("amdsmi: not initialized")

    with caplog.at_level(logging.DEBUG, logger="fused_quant"):
        sighting = probe_nvml(NoShutdownNVML([("NVIDIA H200", (9, 0))]))
        amd = probe_amdsmi(NoShutdownAmdSmi([{"target_graphics_version": "gfx942", "market_name": "MI300X"}]),
                           dtk=None)
    assert (sighting.vendor, sighting.arch) == ("nvidia", "sm_90") and amd.vendor is not None
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert said == ["platform probe: nvml.nvmlShutdown() failed (FakeNVMLError: NVML_ERROR_UNINITIALIZED)",
                    "platform probe: amdsmi.amdsmi_shut_down() failed (RuntimeError: amdsmi: not initialized)"]
