// What the campaign binaries share: flags common to all, the summary's
// printing and the exit code.
#ifndef KILN_TOOLS_STRESS_MAIN_UTIL_H_
#define KILN_TOOLS_STRESS_MAIN_UTIL_H_

#include <iostream>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "tools/stress/campaigns.h"

ABSL_DECLARE_FLAG(uint32_t, seed);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, verbose);
ABSL_DECLARE_FLAG(std::string, kilnd);
ABSL_DECLARE_FLAG(std::string, examples);

namespace kiln::stress {

CommonOptions CommonOptionsFromFlags();

// Prints the report (JSON with --json) and returns the exit code: 0 with
// no violation, 1 with any, 2 when the campaign could not run.
template <typename Report>
int Finish(const char* campaign, const absl::StatusOr<Report>& report, bool json) {
  if (!report.ok()) {
    std::cerr << campaign << ": cannot run: " << report.status() << "\n";
    return 2;
  }
  std::cout << (json ? report->Json() + "\n" : report->Text());
  if (!report->violations.empty()) {
    std::cerr << campaign << ": " << report->violations.size()
              << " violations (listed above); the cache is not robust here\n";
    return 1;
  }
  return 0;
}

}  // namespace kiln::stress

#endif  // KILN_TOOLS_STRESS_MAIN_UTIL_H_
