/// @file host_device.h
/// @brief FH_HD marks scalar math compiled by both nvcc (device) and g++ (the CPU twins).
#pragma once

#if defined(__CUDACC__)
#define FH_HD __host__ __device__ __forceinline__
#else
#define FH_HD inline
#endif
