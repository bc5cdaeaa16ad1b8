# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A torch C++ extension for bench/probes/hook_parts.py, compiled here against
the PyTorch this Python imports: add_prehook(tensor) puts an empty C++
autograd pre-hook (torch::autograd::FunctionPreHook) on the node that made
the tensor, so that autograd calls it with no GIL, no Python tuple of the
gradients and no Python frame. What a hook in C++ would cost at the least
(issue 53, item 3). Built with torch.utils.cpp_extension where ninja is at
hand, else with one g++ command."""
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile

import torch
import torch.utils.cpp_extension as cpp

SOURCE = r"""
#include <torch/extension.h>
#include <torch/csrc/autograd/function_hook.h>

namespace {
struct Empty final : torch::autograd::FunctionPreHook {
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override { return grads; }
};
void add_prehook(const at::Tensor& t) {
  if (t.grad_fn()) t.grad_fn()->add_pre_hook(std::make_unique<Empty>());
}
}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_prehook", &add_prehook); }
"""


def load(name="joule_probe_prehook"):
    try:
        cpp.verify_ninja_availability()
        return cpp.load_inline(name, cpp_sources=SOURCE, verbose=False)
    except RuntimeError:
        pass
    build = tempfile.mkdtemp(prefix="joule-probe-")
    src, out = os.path.join(build, "ext.cpp"), os.path.join(build, name + sysconfig.get_config_var("EXT_SUFFIX"))
    with open(src, "w") as f:
        f.write(SOURCE)
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    cmd = ["g++", "-O2", "-shared", "-fPIC", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
           f"-DTORCH_EXTENSION_NAME={name}", f"-I{sysconfig.get_paths()['include']}"]
    cmd += [f"-I{p}" for p in cpp.include_paths()] + [src, "-o", out]
    cmd += [f"-L{p}" for p in cpp.library_paths()] + ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    subprocess.run(cmd, check=True)
    spec = importlib.util.spec_from_file_location(name, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    ext = load()
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    ext.add_prehook(y)
    y.sum().backward()
    print("ok", x.grad.tolist(), file=sys.stderr)
