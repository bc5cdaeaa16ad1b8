# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""packaging/kubernetes: the manifests say what the exporter needs, and what
they run works.

The DaemonSet's arguments are joule exporter's own options; the kubelet's
socket and the ledger lie in the host paths it mounts; the node's pids (hostPID)
and the port agree from container to Service to ServiceMonitor. And the real
binary, started with the DaemonSet's very arguments (only the host paths moved
into a scratch directory and the port made free), serves /healthz and says
that no kubelet answers.
"""
import os
import re
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "packaging" / "kubernetes"


def documents(name):
    with open(KUBERNETES / name) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def of_kind(docs, kind):
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"one {kind} expected, got {len(found)}"
    return found[0]


def exporter_container():
    daemonset = of_kind(documents("joule-exporter.yaml"), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return daemonset, pod, container


def options(container):
    """--name=value and --name value arguments as a dict (the first argument is the command)."""
    args = container["args"]
    assert args[0] == "exporter"
    result, i = {}, 1
    while i < len(args):
        assert args[i].startswith("--"), f"{args[i]!r} is no option"
        name, equals, value = args[i].partition("=")
        if not equals:
            i += 1
            value = args[i]
        result[name] = value
        i += 1
    return result


def joule_binary():
    binary = os.environ.get("JOULE_TEST_BINARY")
    assert binary, "JOULE_TEST_BINARY names the joule to run"
    return binary


def test_every_argument_is_an_option_of_joule_exporter():
    _, _, container = exporter_container()
    help_text = subprocess.run([joule_binary(), "exporter", "--help"], capture_output=True, text=True, check=True).stdout
    for name in options(container):
        assert re.search(rf"(^|\s){re.escape(name)}\b", help_text), f"{name} is no option of joule exporter"


def test_the_kubelet_socket_and_the_ledger_are_in_mounted_host_paths():
    _, pod, container = exporter_container()
    args = options(container)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}

    def mount_of(path):
        for mount_path, mount in mounts.items():
            if path.startswith(mount_path.rstrip("/") + "/"):
                return mount, volumes[mount["name"]]
        raise AssertionError(f"{path} is in no mounted volume")

    mount, volume = mount_of(args["--kubelet-socket"])
    assert volume["hostPath"]["path"] == mount["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert mount.get("readOnly") is True
    mount, volume = mount_of(args["--ledger"])
    assert volume["hostPath"]["type"] == "DirectoryOrCreate"
    assert not mount.get("readOnly", False)
    # NVML lists processes by the node's pids: only the node's /proc names their pods.
    assert pod["hostPID"] is True


def test_the_port_agrees_from_container_to_service_to_servicemonitor():
    daemonset, pod, container = exporter_container()
    listen_port = int(options(container)["--listen"].rsplit(":", 1)[1])
    (port,) = container["ports"]
    assert port["containerPort"] == listen_port
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    service = of_kind(documents("joule-exporter.yaml"), "Service")
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]
    monitor = of_kind(documents("servicemonitor.yaml"), "ServiceMonitor")
    assert all(service["metadata"]["labels"].get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service_port["name"] and endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True  # the series' own pod labels, not the exporter pod's


def test_the_daemonsets_arguments_start_an_exporter_that_says_no_kubelet_answers():
    _, _, container = exporter_container()
    fake_nvml = os.environ.get("JOULE_TEST_FAKE_NVML")
    assert fake_nvml, "JOULE_TEST_FAKE_NVML names the fake libnvidia-ml.so.1"
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch, "fake.conf")
        config.write_text("device power_w=300\n")
        port_file = Path(scratch, "port")
        args = []
        for arg in container["args"]:
            arg = arg.replace("/var/lib/kubelet/pod-resources", scratch).replace("/var/lib/joule-exporter", scratch)
            args.append("--listen=127.0.0.1:0" if arg.startswith("--listen=") else arg)
        env = dict(os.environ, JOULE_NVML_LIBRARY=fake_nvml, JOULE_FAKE_NVML_CONFIG=str(config),
                   JOULE_ROCM_SMI_LIBRARY="/nonexistent/librocm_smi64.so.1", JOULE_POWERCAP_ROOT="/nonexistent")
        exporter = subprocess.Popen([joule_binary(), *args, "--port-file", str(port_file)], env=env,
                                    stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(100):
                if port_file.exists() and port_file.read_text().strip():
                    break
                time.sleep(0.1)
            base = f"http://127.0.0.1:{port_file.read_text().strip()}"
            assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200
            text = ""
            for _ in range(50):
                text = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
                if "joule_kubelet_down_info{" in text:
                    break
                time.sleep(0.1)
            assert re.search(r"^joule_kubelet_up\{[^}]*\} 0$", text, re.M), text
            assert "no such socket" in text
        finally:
            exporter.terminate()
            assert exporter.wait(timeout=10) == 0, exporter.stderr.read()
        assert Path(scratch, "ledger.json").exists()
