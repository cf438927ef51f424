// A path in the test temporary directory that no other process uses. ctest
// runs test cases as separate processes, in parallel, and two checkouts'
// suites may run on one machine at once: a fixed name in the shared
// directory lets one test overwrite another's file mid-run.
#ifndef UMLAB_TESTS_TEMP_PATH_H_
#define UMLAB_TESTS_TEMP_PATH_H_

#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace umlab::testing {

inline std::string PrivateTempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/umlab_", ::getpid(), "_", name);
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_TEMP_PATH_H_
