/* cub/cub.cuh - the CPU executor's CUB subset (tests/cuda-exec). */
#include "device/device_radix_sort.cuh"
