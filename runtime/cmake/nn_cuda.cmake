# deltac::nn on CUDA (runtime/include/deltac/nn_cuda.h), a library of its
# own so that deltac_nn (and whatever links it) never needs cuBLAS. Without
# CUDA a stub whose constructors throw "no CUDA support". cuBLAS is linked
# shared (this toolkit ships no static cuBLAS): a binary linking
# deltac_nn_cuda needs libcublas.so.13 and libcublasLt.so.13 at run time.
if(DELTAC_HAVE_CUDA AND TARGET CUDA::cublas)
  add_library(deltac_nn_cuda STATIC src/nn_cuda_common.cpp src/nn_cuda_deltanet.cpp
              src/nn_cuda_gated.cpp src/nn_cuda_kda.cpp)
  target_link_libraries(deltac_nn_cuda PUBLIC deltac_nn CUDA::cudart_static
                        PRIVATE CUDA::cublas)
else()
  add_library(deltac_nn_cuda STATIC src/nn_cuda_none.cpp)
  target_link_libraries(deltac_nn_cuda PUBLIC deltac_nn)
endif()
target_include_directories(deltac_nn_cuda PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
