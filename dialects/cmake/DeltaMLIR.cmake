# Finds LLVM/MLIR 22 and sets up the directory scope that includes this file
# for TableGen and MLIR libraries. Included by dialects/ and compiler/ (both
# need it; CMake directory scope does not flow between siblings).
if(NOT MLIR_DIR)
  set(MLIR_DIR /usr/lib/llvm-22/lib/cmake/mlir CACHE PATH "MLIR CMake package dir")
endif()
find_package(MLIR REQUIRED CONFIG)

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
include_directories(${DELTAC_DIALECTS_DIR}/include
                    ${CMAKE_BINARY_DIR}/dialects/include)
separate_arguments(_delta_llvm_defs NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_definitions(${_delta_llvm_defs})
