// An environment variable set for a scope and restored after it (the library's knobs, e.g.
// FLASHKIT_ATTENTION_PATH or FLASHKIT_DECODE_TMA, are read at every call).
#pragma once
#include <cstdlib>
#include <string>

namespace flashkit::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_.c_str(), old_.c_str(), 1) : unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace flashkit::testing
