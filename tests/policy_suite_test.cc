// The project's policy regression suite (tests/suites/policies.json) runs in
// CI through `umlab regress`, exactly as a user would run it.
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/commands.h"

namespace umlab::cli {
namespace {

TEST(PolicySuiteTest, EveryBoundHolds) {
  const std::string suite = UMLAB_SOURCE_DIR "/tests/suites/policies.json";
  std::ostringstream out, err;
  const int code = Main({"regress", suite}, out, err);
  EXPECT_EQ(code, kExitOk) << out.str() << err.str();
  EXPECT_NE(out.str().find("bounds passed"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace umlab::cli
