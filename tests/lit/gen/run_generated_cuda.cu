// The CUDA build of run_generated.cpp (nvcc compiles .cu files as CUDA).
#define DELTA_CUDA 1
#include "run_generated.cpp"
