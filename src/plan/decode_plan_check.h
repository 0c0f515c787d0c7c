// The DecodePlan invariants as a function: tests/cpp/test_plan.cpp runs it over random problems,
// and it documents in code what the CPU and CUDA executors rely on.
#pragma once
#include <string>

#include "flashkit/plan.h"

namespace flashkit {

// Empty string if every invariant holds, else a sentence saying which one broke and where:
// each (sequence, KV head, row block, LeanTile) covered exactly once; Lean CTA loads differ by at
// most one LeanTile; grid <= sm_count * ctas_per_sm for Lean (co-resident, so spin-waits end);
// each tile has one host CTA holding its first LeanTile and one finishing CTA holding its last;
// peers' partial slots distinct and consecutive; split-KV splits cover each sequence exactly.
std::string check_decode_plan(const DecodePlan& plan);

}  // namespace flashkit
