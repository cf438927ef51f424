// The one exception the module raises, umlab.Error (a RuntimeError), whose
// message is umlab's own one-line error: what the CLI would print.
#ifndef UMLAB_PYTHON_ERROR_H_
#define UMLAB_PYTHON_ERROR_H_

#include <stdexcept>
#include <string>

namespace umlab::python {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace umlab::python

#endif  // UMLAB_PYTHON_ERROR_H_
