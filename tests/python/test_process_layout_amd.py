# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.meter.process_layout on AMD and mixed nodes (issue 35): a launcher's
HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES name AMD GPUs, numbered among
AMD GPUs (vendor_index), CUDA_VISIBLE_DEVICES the NVIDIA ones, by the C++
side's rules (joule.cluster_visible_gpus_of: ROCR's list first, HIP's indices
within it); the monitor made from the layout measures those GPUs, on the fake
NVML, the fake ROCm SMI and both at once."""
import pytest

import joule
from conftest import FAKE_DRIVERS, fake_driver_environment

JOB = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4"}


def layout(**variables):
    return joule.meter.process_layout({**JOB, **variables})


def test_local_rank_0_of_an_amd_node_measures_its_ranks_amd_gpus():
    node = layout(HIP_VISIBLE_DEVICES="0,1,2,3,4,5,6,7")
    assert node.mode == "node" and node.gpus == ["amd:0", "amd:1", "amd:2", "amd:3"] and node.ranks_covered == 4
    # ROCR picks among the node's GPUs, HIP's indices count within what it left.
    node = layout(ROCR_VISIBLE_DEVICES="4,5,6,7", HIP_VISIBLE_DEVICES="3,2,1,0")
    assert node.gpus == ["amd:7", "amd:6", "amd:5", "amd:4"]
    other = layout(ROCR_VISIBLE_DEVICES="0,1,2,3", LOCAL_RANK="1", RANK="1")
    assert other.mode == "node" and not other.measuring


def test_a_rank_given_its_own_amd_gpu_measures_it():
    assert layout(HIP_VISIBLE_DEVICES="3").gpus == ["amd:3"]
    assert layout(ROCR_VISIBLE_DEVICES="5,6", HIP_VISIBLE_DEVICES="1").gpus == ["amd:6"]
    own = layout(ROCR_VISIBLE_DEVICES="GPU-18ee07be9b5d9d3c", LOCAL_RANK="2", RANK="2")
    assert own.mode == "rank" and own.gpus == ["amd:GPU-18ee07be9b5d9d3c"] and own.ranks_covered == 1


def test_a_mixed_node_numbers_each_vendors_gpus_by_its_own_runtime():
    # As joule sweep gives a run its GPUs on a node of NVIDIA GPUs, then AMD ones.
    assert layout(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="1").gpus == ["amd:1"]
    node = layout(CUDA_VISIBLE_DEVICES="0,1", HIP_VISIBLE_DEVICES="0", LOCAL_WORLD_SIZE="3")
    assert node.mode == "node" and node.gpus == ["0", "1", "amd:0"]
    # CUDA_VISIBLE_DEVICES alone restricts the NVIDIA GPUs only, as before.
    assert layout(CUDA_VISIBLE_DEVICES="2,3,4,5").gpus == ["2", "3", "4", "5"]


def test_a_hip_index_past_rocrs_list_is_refused():
    with pytest.raises(joule.UsageError, match="HIP_VISIBLE_DEVICES names 2, but ROCR_VISIBLE_DEVICES"):
        layout(ROCR_VISIBLE_DEVICES="0,1", HIP_VISIBLE_DEVICES="2")


def vendor_variable(driver):
    return "HIP_VISIBLE_DEVICES" if driver.name == "rocm" else "CUDA_VISIBLE_DEVICES"


def measured(monitor):
    return [(g["backend"], g["vendor_index"]) for g in monitor.gpus]


def test_a_rank_measures_the_gpu_its_vendors_variable_names(fake_driver_gpus):
    driver = fake_driver_gpus.driver
    rank = layout(**{vendor_variable(driver): "1"}, LOCAL_RANK="1", RANK="1")
    monitor = joule.meter.make_monitor(layout=rank)
    assert measured(monitor) == [(driver.name, 1)]


def test_on_a_mixed_node_each_layout_measures_its_vendors_gpus(monkeypatch, tmp_path):
    nvml, rocm = FAKE_DRIVERS
    env = fake_driver_environment(nvml, tmp_path / "nvml")
    amd = fake_driver_environment(rocm, tmp_path / "rocm")
    env.update({name: amd[name] for name in (rocm.library_env, rocm.config_env, rocm.log_env)})
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rank = layout(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="1", LOCAL_RANK="3", RANK="3")
    assert measured(joule.meter.make_monitor(layout=rank)) == [("rocm", 1)]
    node = layout(CUDA_VISIBLE_DEVICES="1", ROCR_VISIBLE_DEVICES="1,0", HIP_VISIBLE_DEVICES="1", LOCAL_WORLD_SIZE="2")
    assert measured(joule.meter.make_monitor(layout=node)) == [("nvml", 1), ("rocm", 0)]
