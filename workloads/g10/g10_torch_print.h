// PyTorch's print(model) text as G10 reads it (its src/scanner.l and
// src/parser.y): `Model(` then `(label): Type(...)` entries, where a Type is
// one of G10's operators (Conv2d, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear,
// Dropout, BatchNorm2d) with its arguments, or a container (a named block or
// a Sequential) holding further entries. This file only parses the text into
// a tree; g10_cnn_graph.h gives it G10's meaning.
#ifndef UMLAB_WORKLOADS_G10_G10_TORCH_PRINT_H_
#define UMLAB_WORKLOADS_G10_G10_TORCH_PRINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace umlab {

// The advice every error about a net file ends with.
inline constexpr char kG10RecopyNet[] = "re-copy the file from G10's frontend/Nets";

// Integers above this (channels, features, kernels, strides, paddings) are
// rejected as corrupt.
inline constexpr int64_t kG10MaxNetInteger = int64_t{1} << 24;

// An argument's value: 3, 0.5 (only its kind is kept), True, or (3, 3).
struct TorchValue {
  enum class Kind { kInt, kFloat, kBool, kPair };
  Kind kind = Kind::kInt;
  int64_t first = 0, second = 0;  // kInt: first; kPair: both
  bool flag = false;              // kBool
};

// `key=value`, or a positional value.
struct TorchArg {
  std::string key;  // empty: positional
  TorchValue value;
};

// One `(label): Type(...)` entry of the print (the root has no label): an
// operator with arguments, or a container (a block or a Sequential) with
// entries.
struct TorchModule {
  std::string label;
  std::string type;
  int line = 0;
  bool is_operator = false;
  std::vector<TorchArg> args;         // operators
  std::vector<TorchModule> children;  // blocks and Sequentials
};

// Parses the whole text into `root`. Errors are one line, "<source>:<line>:
// what; what to do". An unknown module type with arguments or without
// entries (e.g. `Sigmoid()`) is an error: G10's grammar has no such layer.
absl::Status ParseTorchPrint(const std::string& text, const std::string& source,
                             TorchModule& root);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_G10_TORCH_PRINT_H_
