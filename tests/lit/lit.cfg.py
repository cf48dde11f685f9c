# lit configuration of the delta dialect / deltac tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "DELTA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.delta_obj_root
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "gen"]

llvm_config.with_system_environment(["HOME", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["delta-opt", "deltac"], [config.delta_tools_dir])
llvm_config.add_tool_substitutions(
    ["FileCheck", "not", "count", "split-file", "mlir-translate"],
    [config.llvm_tools_dir])

config.substitutions.append(("%examples",
                             os.path.join(config.delta_src_root, "examples",
                                          "specs")))
config.substitutions.append(("%inputs",
                             os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%templates",
                             os.path.join(config.delta_src_root, "templates")))
config.substitutions.append(("%catalogue",
                             os.path.join(config.delta_src_root, "catalogue",
                                          "include")))
config.substitutions.append(("%host_cxx", config.host_cxx))
if config.nvcc:
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", config.nvcc))
