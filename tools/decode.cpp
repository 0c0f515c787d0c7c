// PLACEHOLDER: replaced by the decode family's real demo/check/bench.
#include "cli.h"
namespace flashkit::cli {
std::vector<Row> run_decode(const Context&) { return {}; }
int bench_decode(const std::vector<std::string>&, const Context&) { return 2; }
}  // namespace flashkit::cli
