// An integer environment knob for A/B runs (FLASHKIT_*), read at every call (a getenv, ~0.1 us),
// so one process can time the choices side by side on the same inputs (bench/decode.py
// --variants, bench/l2_group_ab.py). Unset or empty: `fallback`.
#pragma once
#include <cstdlib>

namespace flashkit::detail {

inline int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

}  // namespace flashkit::detail
