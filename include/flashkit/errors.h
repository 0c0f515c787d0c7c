// flashkit::Error — the one exception every entry point throws.
// Messages name the argument, what was expected and what came, e.g.
// "k: expected hdim 128 like q, got 64". On an error no output has been written.
#pragma once
#include <stdexcept>
#include <string>

namespace flashkit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace flashkit
