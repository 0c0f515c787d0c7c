// FK_HD marks small functions compiled for both the host and the device (plain inline in .cpp).
#pragma once
#if defined(__CUDACC__)
#define FK_HD __host__ __device__ __forceinline__
#else
#define FK_HD inline
#endif
