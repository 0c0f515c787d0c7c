// The CPU MAS (cpu/mas.h). Per item the DP runs column by column over the mel axis y with the
// text axis x as the SIMD vector (Q[:, y] needs only Q[:, y-1]); two columns live in L1 and each
// max decision is kept as one bit, which the backtrack reads instead of the fp32 table.
// OpenMP threads take whole items. Bit-identical to the Cython code: same fp32 adds, same max.
#include "cpu/mas.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/dtype_bits.h"
#include "common/half.h"
#include "common/mas_likelihood.h"

#ifndef __AVX2__
#error "src/cpu/mas.cpp needs AVX2 + F16C (the library builds with -march=x86-64-v3)"
#endif

namespace flashkit::cpu {
namespace {

constexpr int kLanes = 8;   // fp32 lanes of an AVX2 register: one x chunk
constexpr int kPanel = 16;  // mel columns converted to fp32 at a time: one 64-byte line of fp32
constexpr int kAhead = 4;   // panels prefetched ahead: rows are kPanel*4 bytes apart streams

int round_up(int n, int m) { return (n + m - 1) / m * m; }

// Element types of `value`; all convert to fp32 exactly.
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};
inline float to_float(float v) { return v; }
inline float to_float(F16 v) { return fp16_to_float(v.bits); }
inline float to_float(BF16 v) { return bf16_to_float(v.bits); }

// 8 consecutive elements as fp32.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const F16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const BF16* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Transposes the 8x8 tile p[i * sx + j] (8 rows of 8 consecutive elements) into
// out[j * ld + i]. fp16/bf16 rows are widened first; the 4x4 steps run inside 128-bit lanes.
inline void transpose4x2(__m256 a0, __m256 a1, __m256 a2, __m256 a3, float* out, int ld) {
  __m256 u0 = _mm256_unpacklo_ps(a0, a1), u1 = _mm256_unpackhi_ps(a0, a1);
  __m256 u2 = _mm256_unpacklo_ps(a2, a3), u3 = _mm256_unpackhi_ps(a2, a3);
  _mm256_storeu_ps(out, _mm256_shuffle_ps(u0, u2, 0x44));
  _mm256_storeu_ps(out + ld, _mm256_shuffle_ps(u0, u2, 0xEE));
  _mm256_storeu_ps(out + 2 * ld, _mm256_shuffle_ps(u1, u3, 0x44));
  _mm256_storeu_ps(out + 3 * ld, _mm256_shuffle_ps(u1, u3, 0xEE));
}

// fp32: rows i and i+4 meet in one register straight from memory (insertf128 with a load
// operand), which spares the cross-lane shuffles of a full 8x8 transpose.
inline void transpose_tile(const float* p, int64_t sx, float* out, int ld) {
  auto pair = [&](int i, int half) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + i * sx + half)),
                                _mm_loadu_ps(p + (i + 4) * sx + half), 1);
  };
  transpose4x2(pair(0, 0), pair(1, 0), pair(2, 0), pair(3, 0), out, ld);
  transpose4x2(pair(0, 4), pair(1, 4), pair(2, 4), pair(3, 4), out + 4 * ld, ld);
}

template <class E>
inline void transpose_tile(const E* p, int64_t sx, float* out, int ld) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = load8(p + i * sx);
  auto lanes = [&](int i, int sel) { return _mm256_permute2f128_ps(r[i], r[i + 4], sel); };
  transpose4x2(lanes(0, 0x20), lanes(1, 0x20), lanes(2, 0x20), lanes(3, 0x20), out, ld);
  transpose4x2(lanes(0, 0x31), lanes(1, 0x31), lanes(2, 0x31), lanes(3, 0x31), out + 4 * ld, ld);
}

// The band of column y: cells x in [lo, hi) are the ones the Cython loop computes.
struct Band {
  int tx, ty;
  int lo(int y) const { return std::max(0, tx + y - ty); }
  int hi(int y) const { return std::min(tx, y + 1); }
};

// Per-thread scratch, sized for the largest item the thread sees.
struct Scratch {
  std::vector<float> col[2];  // Q[:, y-1] and Q[:, y], with a slot for x = -1 in front
  std::vector<float> panel;   // value[:, y0 .. y0+kPanel) as fp32, one row per column
  std::vector<uint8_t> bits;  // bit x of column y: Q[x-1, y-1] > Q[x, y-1] ("came from x-1")
  std::vector<int32_t> row;   // the path: row[y] = x
};

// Converts value[xa..xb, y0..y0+ny) of one item into panel[j * ld + x] (fp32, column j = y - y0).
// Rows past tx are never read by the band, they get 0 so that no garbage is loaded.
template <class E>
void fill_panel(const E* v, int64_t sx, int64_t sy, int tx, int y0, int ny, int xa, int xb,
                float* panel, int ld) {
  for (int x = xa; x < xb; x += kLanes) {
    const bool full_rows = x + kLanes <= tx;
    if (full_rows && ny == kPanel && sy == 1) {  // glow-tts layout: rows contiguous in y
      // Each of the T rows is its own stream, too many for the hardware prefetcher.
      const E* rows = v + x * sx + y0;
      for (int i = 0; i < 8; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(rows + i * sx + kAhead * kPanel), _MM_HINT_T0);
      for (int h = 0; h < kPanel; h += 8) transpose_tile(rows + h, sx, panel + h * ld + x, ld);
    } else if (full_rows && sx == 1) {  // VITS layout (transposed view): columns contiguous in x
      for (int j = 0; j < ny; ++j)
        _mm256_storeu_ps(panel + j * ld + x, load8(v + x + (y0 + j) * sy));
    } else {
      for (int j = 0; j < ny; ++j)
        for (int i = 0; i < kLanes; ++i)
          panel[j * ld + x + i] = x + i < tx ? to_float(v[(x + i) * sx + (y0 + j) * sy]) : 0.f;
    }
  }
}

// Forward DP over the band and backtrack of one item (tx >= 1); fills s.row[0..ty).
template <class E>
void align_item(const E* v, int64_t sx, int64_t sy, int tx, int ty, float neg, Scratch& s) {
  const Band band{tx, ty};
  const int ld = round_up(tx, kLanes);  // x extent of every buffer
  const int bytes_per_col = ld / kLanes;
  for (auto& c : s.col) c.assign(static_cast<size_t>(ld + kLanes), neg);
  if (s.panel.size() < static_cast<size_t>(kPanel * ld)) s.panel.resize(kPanel * ld);
  if (s.bits.size() < static_cast<size_t>(ty) * bytes_per_col)
    s.bits.resize(static_cast<size_t>(ty) * bytes_per_col);
  s.row.resize(ty);
  // Buffers start kLanes floats in so that index -1 (the x = -1 slot) is valid.
  float* prev = s.col[0].data() + kLanes;
  float* cur = s.col[1].data() + kLanes;
  uint8_t* bits = s.bits.data();

  for (int y0 = 0; y0 < ty; y0 += kPanel) {
    const int ny = std::min(kPanel, ty - y0);
    const int xa_blk = band.lo(y0) / kLanes * kLanes;
    const int xb_blk = round_up(band.hi(y0 + ny - 1), kLanes);
    fill_panel(v, sx, sy, tx, y0, ny, xa_blk, xb_blk, s.panel.data(), ld);
    for (int j = 0; j < ny; ++j) {
      const int y = y0 + j;
      // v_prev at x = 0 and v_cur at x = y are constants in the Cython code; writing them into
      // Q[:, y-1] makes every lane the same max. Both slots lie outside column y-1's band, so
      // no value the band needs is lost.
      prev[-1] = y == 0 ? 0.f : neg;
      if (y < tx) prev[y] = neg;
      const float* vcol = s.panel.data() + j * ld;
      uint8_t* bcol = bits + static_cast<size_t>(y) * bytes_per_col;
      // Cells of the rounded range outside the band compute values no band cell reads.
      const int xa = band.lo(y) / kLanes * kLanes, xb = round_up(band.hi(y), kLanes);
      for (int x = xa; x < xb; x += kLanes) {
        __m256 v_cur = _mm256_loadu_ps(prev + x);
        __m256 v_prev = _mm256_loadu_ps(prev + x - 1);
        // Cython's max(v_cur, v_prev) is (v_prev > v_cur) ? v_prev : v_cur: exactly maxps.
        __m256 m = _mm256_max_ps(v_prev, v_cur);
        _mm256_storeu_ps(cur + x, _mm256_add_ps(m, _mm256_loadu_ps(vcol + x)));
        bcol[x / kLanes] =
            static_cast<uint8_t>(_mm256_movemask_ps(_mm256_cmp_ps(v_prev, v_cur, _CMP_GT_OQ)));
      }
      std::swap(prev, cur);
    }
  }

  // Backtrack: Cython's `value[index, y-1] < value[index-1, y-1]` is column y's bit at index.
  int index = tx - 1;
  for (int y = ty - 1; y >= 0; --y) {
    s.row[y] = index;
    if (index != 0 &&
        (index == y ||
         ((bits[static_cast<size_t>(y) * bytes_per_col + index / kLanes] >> (index % kLanes)) & 1)))
      --index;
  }
}

// Writes n elements of size es at `line` (contiguous), 1 in [a, b) and 0 elsewhere. The aligned
// body goes out with streaming stores: the path is written once and not read back, and skipping
// the read-for-ownership halves its memory traffic (the path is as large as value).
void write_line(char* line, int64_t n, size_t es, int64_t a, int64_t b, uint32_t one) {
  const int64_t bytes = n * static_cast<int64_t>(es);
  int64_t i = 0;  // byte offset
  auto put = [&](int64_t off) {
    const int64_t e = off / static_cast<int64_t>(es);
    const uint32_t v = e >= a && e < b ? one : 0u;
    std::memcpy(line + off, &v, es);
  };
  const int64_t head = std::min<int64_t>(bytes, (32 - reinterpret_cast<uintptr_t>(line) % 32) % 32);
  for (; i < head; i += static_cast<int64_t>(es)) put(i);
  const int64_t a_byte = a * static_cast<int64_t>(es), b_byte = b * static_cast<int64_t>(es);
  for (; i + 32 <= bytes; i += 32) {
    __m256i chunk = _mm256_setzero_si256();
    if (i < b_byte && i + 32 > a_byte) {
      alignas(32) char tmp[32] = {};
      for (int64_t off = std::max(i, a_byte); off < std::min(i + 32, b_byte);
           off += static_cast<int64_t>(es))
        std::memcpy(tmp + (off - i), &one, es);
      chunk = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
    }
    _mm256_stream_si256(reinterpret_cast<__m256i*>(line + i), chunk);
  }
  for (; i < bytes; i += static_cast<int64_t>(es)) put(i);
}

// Writes item b of `path`: 1 at (row[y], y) for y < ty, 0 everywhere else. A monotonic path
// covers one run of frames per text row and one row per frame, so whichever of the two dims is
// contiguous is written line by line.
void write_path(const TensorView& path, int64_t b, const int32_t* row, int ty) {
  const size_t es = dtype_size(path.dtype);
  const int64_t T = path.shape[1], S = path.shape[2], s1 = path.stride[1], s2 = path.stride[2];
  char* base = static_cast<char*>(path.data) + b * path.stride[0] * static_cast<int64_t>(es);
  auto at = [&](int64_t x, int64_t y) {
    return base + (x * s1 + y * s2) * static_cast<int64_t>(es);
  };
  const uint32_t one = one_bits(path.dtype);
  if (s2 == 1 || S == 1) {
    int y = 0;  // frames [y, y_end) sit on text row x
    for (int64_t x = 0; x < T; ++x) {
      int y_end = y;
      while (y_end < ty && row[y_end] == x) ++y_end;
      write_line(at(x, 0), S, es, y, y_end, one);
      y = y_end;
    }
  } else if (s1 == 1 || T == 1) {
    for (int64_t y = 0; y < S; ++y)
      write_line(at(0, y), T, es, y < ty ? row[y] : 0, y < ty ? row[y] + 1 : 0, one);
  } else {
    for (int64_t x = 0; x < T; ++x)
      for (int64_t y = 0; y < S; ++y) std::memset(at(x, y), 0, es);
    for (int y = 0; y < ty; ++y) std::memcpy(at(row[y], y), &one, es);
  }
  _mm_sfence();  // order the streaming stores before the caller reads the path
}

void write_durations(const TensorView& d, int64_t b, const int32_t* row, int ty) {
  int32_t* base = d.ptr<int32_t>() + b * d.stride[0];
  for (int64_t x = 0; x < d.shape[1]; ++x) base[x * d.stride[1]] = 0;
  for (int y = 0; y < ty; ++y) ++base[row[y] * d.stride[1]];
}

// Threads only where there is work for them: waking a team costs more than a small batch.
int threads_for(int64_t B, const int32_t* tx, const int32_t* ty) {
  int64_t cells = 0;
  for (int64_t b = 0; b < B; ++b) cells += int64_t{tx[b]} * ty[b];
  return cells < (int64_t{1} << 18) ? 1
                                    : static_cast<int>(std::min<int64_t>(B, omp_get_max_threads()));
}

void write_outputs(const TensorView& path, const TensorView& durations, int64_t b, int tx, int ty,
                   const Scratch& s) {
  const int n = tx > 0 ? ty : 0;  // tx == 0: nothing to align, an all-zero path
  if (path.defined()) write_path(path, b, s.row.data(), n);
  if (durations.defined()) write_durations(durations, b, s.row.data(), n);
}

template <class E>
void run(const TensorView& value, const int32_t* tx, const int32_t* ty, const TensorView& path,
         const TensorView& durations, float neg) {
  const int64_t B = value.shape[0];
#pragma omp parallel num_threads(threads_for(B, tx, ty))
  {
    Scratch s;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < B; ++b) {
      if (tx[b] > 0)
        align_item(value.ptr<const E>() + b * value.stride[0], value.stride[1], value.stride[2],
                   tx[b], ty[b], neg, s);
      write_outputs(path, durations, b, tx[b], ty[b], s);
    }
  }
}

float element(const TensorView& t, int64_t b, int64_t i, int64_t j) {
  return load_as_float(t.data, t.dtype, b * t.stride[0] + i * t.stride[1] + j * t.stride[2]);
}

// value[x, y] of one item into `out` [tx, ty] row-major: channels summed in order c = 0, 1, ...
// like the GPU kernel; the loops run c outermost so that the y loop vectorises.
void fused_likelihood(const TensorView& z, const TensorView& m, const TensorView& logs, int64_t b,
                      int tx, int ty, std::vector<float>& zc, std::vector<float>& out) {
  const int64_t C = z.shape[1];
  zc.resize(static_cast<size_t>(ty));
  out.assign(static_cast<size_t>(tx) * ty, 0.f);
  for (int64_t c = 0; c < C; ++c) {
    for (int y = 0; y < ty; ++y) zc[y] = element(z, b, c, y);
    for (int x = 0; x < tx; ++x) {
      const mas::Coeffs k = mas::coeffs(element(m, b, c, x), element(logs, b, c, x));
      float* row = out.data() + static_cast<size_t>(x) * ty;
      for (int y = 0; y < ty; ++y) row[y] = mas::add_rn(row[y], mas::term(k, zc[y]));
    }
  }
}

}  // namespace

void monotonic_alignment_search(const TensorView& value, const int32_t* tx, const int32_t* ty,
                                const TensorView& path, const TensorView& durations, float neg) {
  switch (value.dtype) {
    case DType::f16:
      return run<F16>(value, tx, ty, path, durations, neg);
    case DType::bf16:
      return run<BF16>(value, tx, ty, path, durations, neg);
    default:
      return run<float>(value, tx, ty, path, durations, neg);
  }
}

void monotonic_alignment_search_fused(const TensorView& z, const TensorView& m,
                                      const TensorView& logs, const int32_t* tx, const int32_t* ty,
                                      const TensorView& path, const TensorView& durations,
                                      float neg) {
  const int64_t B = z.shape[0];
#pragma omp parallel num_threads(threads_for(B, tx, ty))
  {
    Scratch s;
    std::vector<float> zc, value;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < B; ++b) {
      if (tx[b] > 0) {
        fused_likelihood(z, m, logs, b, tx[b], ty[b], zc, value);
        align_item(value.data(), ty[b], 1, tx[b], ty[b], neg, s);
      }
      write_outputs(path, durations, b, tx[b], ty[b], s);
    }
  }
}

}  // namespace flashkit::cpu
