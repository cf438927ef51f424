// `go-memferry`: GO-MemFerry (Yao et al., §IV-D), MemFerry that also writes
// parameter gradients straight into host memory by DHA, keeping on the
// device at most the user's share of their bytes (the reserve factor
// S_req). It is the memferry policy with a gradient reserve (memferry.h);
// this file only gives it its name and its parameter.
#include <memory>

#include "policies/memferry/memferry.h"

namespace umlab {
namespace {

std::vector<ParamInfo> GoMemferryParams() {
  std::vector<ParamInfo> params = MemferryParams();
  params.push_back({"reserve", ParamType::kDouble, "0",
                    "S_req: the share of the parameter gradients' bytes that may stay on the "
                    "device; the rest, the layers whose backward the host write slows least "
                    "first, is written to host memory (0, the paper's default: every gradient)",
                    ParamRange::Closed(0, 1)});
  return params;
}

}  // namespace

UMLAB_REGISTER_POLICY(
    go_memferry,
    {"go-memferry",
     "GO-MemFerry (Yao et al.): memferry, with the backward writing parameter gradients "
     "straight into host memory through remote mappings, all but a reserve share of their "
     "bytes chosen by a knapsack over the layers' backward slowdowns",
     GoMemferryParams(),
     [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
       MemferryPolicyOptions options = MemferryOptionsFrom(params);
       options.gradient_reserve = params.Double("reserve");
       return std::make_unique<MemferryPolicy>(options);
     }});

}  // namespace umlab
