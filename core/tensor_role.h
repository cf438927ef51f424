// What a tensor is: parameters, gradients, optimizer state, activations...
// A program's kActivate events may carry it (Event::cause), so the engine
// can account device memory by role (MemFerry's metric is peak device
// memory, and which part of it is parameters) and planners can tell
// weights from activations.
#ifndef UMLAB_CORE_TENSOR_ROLE_H_
#define UMLAB_CORE_TENSOR_ROLE_H_

#include <cstdint>
#include <optional>

#include "core/event.h"

namespace umlab {

enum class TensorRole : uint8_t {
  kParameter,       // weights, biases, embedding tables
  kOptimizerState,  // exp_avg, exp_avg_sq, momentum_buffer
  kData,            // input batch, labels
  kActivation,      // forward outputs, saved or not
  kGradient,        // .grad of parameters and of activations
  kWorkspace,       // scratch (masks, statistics, cuDNN workspace)
};
inline constexpr int kTensorRoleCount = 6;
const char* TensorRoleName(TensorRole role);
// A name without spaces, for JSON keys and table columns.
const char* TensorRoleKey(TensorRole role);

// kActivate's Event::cause: 0 when the program does not say (a recorded
// PyTorch run, an old trace), else the role + 1.
inline uint8_t ActivateCause(TensorRole role) { return static_cast<uint8_t>(role) + 1; }
inline std::optional<TensorRole> RoleOfActivation(const Event& event) {
  if (event.kind != EventKind::kActivate || event.cause == 0 ||
      event.cause > kTensorRoleCount) {
    return std::nullopt;
  }
  return static_cast<TensorRole>(event.cause - 1);
}

}  // namespace umlab

#endif  // UMLAB_CORE_TENSOR_ROLE_H_
