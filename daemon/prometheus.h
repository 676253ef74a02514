// kilnd's counters in the Prometheus text exposition format (version
// 0.0.4), served on /metrics (daemon/metrics_server.h) and printed by
// `kiln stats --format=prometheus`.
//
//   text     := { family }
//   family   := "# HELP " name " " help "\n" "# TYPE " name " " type "\n"
//               { sample }
//   sample   := name [ "{" label "=\"" value "\"}" ] " " value "\n"
//
// Metric names start with `kiln_`; counters end in `_total`. Labels, one
// per sample, take values from fixed sets: a histogram bucket's `le`, a
// hit's `path` (daemon, local_index) and a failure's `kind`
// (daemon/failure_kind.h). No cache key or graph name ever appears in a
// label or anywhere else (any local user may read a loopback port).
// Durations are in seconds.
#ifndef KILN_DAEMON_PROMETHEUS_H_
#define KILN_DAEMON_PROMETHEUS_H_

#include <string>
#include <vector>

#include "proto/service.pb.h"

namespace kiln {

// Every numeric StatsResponse field as a sample, in a fixed order (fields
// that are one family's samples, such as hits by path, together), and
// failures_by_kind as one sample per kind, sorted.
// The compile-time histogram (kiln_compile_duration_seconds) is left out
// when its counts are not one more than its bounds (a kilnd from before it
// existed sends neither).
std::string PrometheusText(const kiln::v1::StatsResponse& stats);

// The StatsResponse fields the exposition describes, by name: a test checks
// that this covers every numeric field of the message.
std::vector<std::string> PrometheusDescribedFields();

}  // namespace kiln

#endif  // KILN_DAEMON_PROMETHEUS_H_
