// cat(args...): builds a message from strings and numbers without iostreams. The library keeps
// <sstream> out because a process that loaded PyTorch first can crash inside libstdc++'s locale
// code when an extension formats numbers through an ostream (pytorch issue 109923); the Python
// extension links this code, so error messages must format safely there.
#pragma once
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace flashkit::detail {

inline void append(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }
inline void append(std::string& s, const char* v) { s += v ? v : "(null)"; }
inline void append(std::string& s, char v) { s += v; }
inline void append(std::string& s, bool v) { s += v ? "true" : "false"; }
inline void append(std::string& s, const void* p) {
  char buf[24] = "0x";
  auto r = std::to_chars(buf + 2, buf + sizeof buf, reinterpret_cast<uintptr_t>(p), 16);
  s.append(buf, r.ptr);
}
template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
void append(std::string& s, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}
template <class T>
  requires std::is_floating_point_v<T>
void append(std::string& s, T v) {
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6);
  s.append(buf, r.ptr);
}

template <class... Args>
std::string cat(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

}  // namespace flashkit::detail
