// Latency of the one-thread walk's pieces on the GPU (bench/NOTES-mas.md v21): cycles per
// iteration of dependent chains, from clock64 in thread 0 of one CTA.
//   lop: x = lop3(x, c)                      (LOP3 latency)
//   flo: x = bfind(x) | 0x80000000           (FLO + LOP3)
//   move: the walk's move: bmsk -> and/or -> bfind, a branch on mv < 2
//   move+sts: the same with a predicated st.shared of the move's frame
//   move+sts, bulk: the same while warp 1 streams 256 KB of zeros from shared memory to global
//   by cp.async.bulk (the band kernel's zero_bulk)
//   lds: x = ld.shared [x]                   (a pointer chase: LDS latency)
// nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o mas_walk_micro bench/mas_walk_micro.cu
#include <cstdint>
#include <cstdio>

__global__ void micro(int mode, int n, uint32_t seed, char* gdst, long long* out) {
  __shared__ uint32_t sm[4096];
  __shared__ __align__(16) uint4 zbuf[256];
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) sm[i] = (i * 7 + 1) & 4095;
  for (int i = threadIdx.x; i < 256; i += blockDim.x) zbuf[i] = make_uint4(0, 0, 0, 0);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(sm));
  if (threadIdx.x == 32 && mode == 4) {  // warp 1, lane 0: the bulk zeros
    const uint32_t src = static_cast<uint32_t>(__cvta_generic_to_shared(zbuf));
    for (int off = 0; off < 262144; off += 4096)
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                       reinterpret_cast<uint64_t>(gdst + off)),
                   "r"(src), "r"(4096)
                   : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
  if (threadIdx.x != 0) return;
  uint32_t x = seed | 1u;
  const long long t0 = clock64();
  if (mode == 0) {
    for (int i = 0; i < n; ++i)
      asm volatile("lop3.b32 %0, %0, %1, 0x5a5a5a5a, 0x96;" : "+r"(x) : "r"(seed));
  } else if (mode == 1) {
    for (int i = 0; i < n; ++i) {
      asm volatile("bfind.u32 %0, %0;" : "+r"(x));
      x |= 0x80000000u;
    }
  } else if (mode == 5) {
    for (int i = 0; i < n; ++i)
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(x) : "r"(sbase + 4 * (x & 4095)));
  } else {
    uint32_t lim = 31, acc = 0;
    for (int i = 0; i < n; ++i) {
      uint32_t mask, hsb;
      asm volatile("bmsk.clamp.b32 %0, 0, %1;" : "=r"(mask) : "r"(lim));
      const uint32_t mv = (seed & mask) | (1u << (i & 1));
      asm volatile("bfind.u32 %0, %1;" : "=r"(hsb) : "r"(mv));
      if (mode >= 3)
        asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.u32 [%1], %2; }" ::"r"(mv),
                     "r"(sbase + 4 * (i & 255)), "r"(hsb)
                     : "memory");
      if (mv < 2u) break;
      lim = hsb + 30u;  // 31 or 32: stays in the word
      acc += hsb;
    }
    x = lim + acc;
  }
  const long long t1 = clock64();
  out[mode] = t1 - t0;
  out[8 + mode] = x;
}

int main() {
  long long* out;
  char* g;
  cudaMalloc(&out, 16 * sizeof(long long));
  cudaMalloc(&g, 262144);
  const int n = 4096;
  const char* names[] = {
      "lop3", "bfind+lop3", "move", "move+sts", "move+sts, bulk zeros beside", "lds chase"};
  for (int rep = 0; rep < 2; ++rep)
    for (int mode = 0; mode < 6; ++mode) {
      micro<<<1, 64>>>(mode, n, 0x12345u + rep, g, out);
      long long h[16];
      cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
      if (rep == 1)
        std::printf("%-30s %6.1f cycles an iteration\n", names[mode], double(h[mode]) / n);
    }
  return cudaDeviceSynchronize() != cudaSuccess;
}
