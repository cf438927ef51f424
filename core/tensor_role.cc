#include "core/tensor_role.h"

namespace umlab {

const char* TensorRoleName(TensorRole role) {
  switch (role) {
    case TensorRole::kParameter: return "parameter";
    case TensorRole::kOptimizerState: return "optimizer state";
    case TensorRole::kData: return "data";
    case TensorRole::kActivation: return "activation";
    case TensorRole::kGradient: return "gradient";
    case TensorRole::kWorkspace: return "workspace";
  }
  return "?";
}

const char* TensorRoleKey(TensorRole role) {
  switch (role) {
    case TensorRole::kParameter: return "parameters";
    case TensorRole::kOptimizerState: return "optimizer_state";
    case TensorRole::kData: return "data";
    case TensorRole::kActivation: return "activations";
    case TensorRole::kGradient: return "gradients";
    case TensorRole::kWorkspace: return "workspace";
  }
  return "unknown";
}

}  // namespace umlab
