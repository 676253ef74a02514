// malformed_requests: generated invalid CompileRequests and raw gRPC
// garbage; each must be refused with the right code, kilnd must live.
#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/stress/main_util.h"

ABSL_FLAG(int, requests, 10000, "Generated malformed CompileRequests.");
ABSL_FLAG(int, raw_calls, 2000, "Raw gRPC calls with damaged or random bytes.");
ABSL_FLAG(int, batch, 500, "Liveness and RSS are sampled after every this many calls.");
ABSL_FLAG(int64_t, max_rss_growth_mib, 256, "kilnd's RSS may grow this much over the campaign.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "malformed_requests: invalid graphs and raw gRPC garbage against kilnd; each must be\n"
      "refused (InvalidArgument, Unimplemented, FailedPrecondition, or gRPC's parse error), and\n"
      "kilnd must stay alive with bounded RSS. Exits 1 on a violation. Usage:\n"
      "  bazel run -c opt //tools/stress:malformed_requests -- --requests=10000 [--json]");
  absl::ParseCommandLine(argc, argv);
  kiln::stress::MalformedOptions options;
  options.common = kiln::stress::CommonOptionsFromFlags();
  options.requests = absl::GetFlag(FLAGS_requests);
  options.raw_calls = absl::GetFlag(FLAGS_raw_calls);
  options.batch = std::max(1, absl::GetFlag(FLAGS_batch));
  options.max_rss_growth_kib = absl::GetFlag(FLAGS_max_rss_growth_mib) << 10;
  return kiln::stress::Finish("malformed_requests", kiln::stress::RunMalformedRequests(options),
                              absl::GetFlag(FLAGS_json));
}
