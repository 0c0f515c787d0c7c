// How decode turns q.k into scores: the validated softmax scale, softcap and sliding window of
// DecodeOptions (include/flashkit/decode.h), handed from src/api to the CPU and CUDA backends.
#pragma once

namespace flashkit {

struct DecodeScores {
  float scale;      // natural-log domain: s = scale * q.k
  float softcap;    // > 0: s = softcap * tanh(s / softcap)
  int window_left;  // >= 0: token at cache position p sees keys p - window_left .. p; -1: all
};

}  // namespace flashkit
