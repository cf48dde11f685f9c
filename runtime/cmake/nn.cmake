# deltac::nn (runtime/include/deltac/nn.h): the PyTorch layers in C++ on the
# CPU, and the safetensors reader. A library of its own, so that the runtime
# (and the Python package's deltac_c) keep no OpenBLAS dependency.
find_path(DELTAC_NN_CBLAS_INCLUDE cblas.h
  PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread
        /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas
  PATH_SUFFIXES openblas)
find_library(DELTAC_NN_OPENBLAS_LIB NAMES openblas)
if(NOT DELTAC_NN_CBLAS_INCLUDE OR NOT DELTAC_NN_OPENBLAS_LIB)
  message(STATUS "deltac: OpenBLAS not found, deltac_nn (C++ layers) not built")
  return()
endif()
find_package(nlohmann_json 3.10 REQUIRED)
add_library(deltac_nn STATIC src/safetensors.cpp src/nn_common.cpp
            src/nn_deltanet.cpp src/nn_gated.cpp src/nn_kda.cpp src/nn_conv.cpp
            src/bitlinear.cpp
            src/bitlinear_generic.cpp src/bitlinear_avx2.cpp src/bitlinear_avx512vnni.cpp
            src/nn_rows_generic.cpp src/nn_rows_avx2.cpp)
target_include_directories(deltac_nn
  PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src ${DELTAC_NN_CBLAS_INCLUDE})
target_link_libraries(deltac_nn PUBLIC deltac_runtime ${DELTAC_NN_OPENBLAS_LIB}
  PRIVATE $<BUILD_INTERFACE:nlohmann_json::nlohmann_json> OpenMP::OpenMP_CXX)
include(${CMAKE_CURRENT_LIST_DIR}/nn_cuda.cmake)
