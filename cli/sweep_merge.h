// `umlab merge DIR`: the results of a sweep (cli/sweep.h) in one JSON and one
// CSV, DIR/merged.json and DIR/merged.csv.
//
// merged.json is the compare contract (docs/json-contract.md), one run per
// case in grid order, each run starting with its `case` name and its `grid`
// coordinates (axis key to value), then the keys of its own result. The
// results' other top-level keys (a contract version) come first, from the
// first result. `failed` lists the cases whose run failed, each with the
// error it printed; `missing` the cases with no result, with a `reason`:
// not run, or started and not finished (a .part file remains: still running,
// or killed). Nothing in
// it depends on where or how the cases ran, so two engines that ran the same
// grid merge into the same bytes.
//
// merged.csv has one row per case: case, status (ok, failed, missing), the
// grid coordinates (columns grid.AXIS), each scalar key of the runs, and the
// error or reason of a case without a result.
//
// Exit 0 when every case has a result, 1 when some failed or are missing
// (both files are written either way), 2 when DIR is not a sweep.
#ifndef UMLAB_CLI_SWEEP_MERGE_H_
#define UMLAB_CLI_SWEEP_MERGE_H_

#include <ostream>
#include <string>

#include "cli/sweep.h"

namespace umlab::cli {

SweepOutcome MergeSweep(const std::string& dir, std::ostream& out);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SWEEP_MERGE_H_
