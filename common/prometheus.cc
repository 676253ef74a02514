#include "common/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

using google::protobuf::FieldDescriptor;

// One StatsResponse field exported as one sample. Store totals and
// remembered failures are gauges: they fall on eviction and expiry, and
// outlive the process.
struct Metric {
  const char* field;
  const char* name;
  const char* type;
  const char* help;
  double divisor = 1;  // 1000 turns a field in milliseconds into seconds
};

constexpr Metric kMetrics[] = {
    {"hits", "kiln_hits_total", "counter",
     "Compile requests kilnd answered from the store (same-host hits from the local index never "
     "reach kilnd)."},
    {"misses", "kiln_misses_total", "counter", "Compile requests kilnd did not find stored."},
    {"coalesced", "kiln_coalesced_total", "counter",
     "Misses that waited on a compile of the same key already running."},
    {"compiles", "kiln_compiles_total", "counter", "Compile pipeline runs, failed ones included."},
    {"compile_failures", "kiln_compile_failures_total", "counter",
     "Compile pipeline runs that failed."},
    {"failures_replayed", "kiln_failures_replayed_total", "counter",
     "Misses answered with a remembered compile failure."},
    {"evictions", "kiln_evictions_total", "counter",
     "Entries evicted by size or age (kiln gc and the background eviction)."},
    {"remembered_failures", "kiln_remembered_failures", "gauge",
     "Keys whose deterministic compile failure is remembered."},
    {"queue_length", "kiln_compile_queue_length", "gauge",
     "Compiles waiting for a compile thread (not running)."},
    {"entries", "kiln_store_entries", "gauge", "Entries in the store."},
    {"blobs", "kiln_store_blobs", "gauge", "Shared-object blobs in the store."},
    {"bytes_stored", "kiln_store_bytes", "gauge", "Shared-object bytes in the store."},
    {"max_cache_bytes", "kiln_store_max_bytes", "gauge",
     "The size cap eviction keeps the store within, in bytes (0: none)."},
    {"corrupt_blobs", "kiln_store_quarantined_blobs", "gauge",
     "Blobs found damaged and quarantined."},
    {"corrupt_entries", "kiln_store_quarantined_entries", "gauge",
     "Entries found damaged and quarantined."},
    {"unreadable_ranges", "kiln_store_unreadable_ranges", "gauge",
     "Damaged stretches of the store its scans skipped since kilnd started."},
    {"uptime_ms", "kiln_uptime_seconds", "gauge", "Seconds since kilnd started.", 1000},
};

// The histogram: bounds and counts as StatsResponse documents them, and the
// sum of the observations, all in milliseconds.
constexpr char kHistogramName[] = "kiln_compile_duration_seconds";
constexpr char kHistogramHelp[] = "Time the compiler (clang and lld) took per successful compile.";
constexpr char kBoundsField[] = "compile_ms_bounds";
constexpr char kCountsField[] = "compile_ms_counts";
constexpr char kSumField[] = "compile_ms_total";

// The shortest text that reads back as `value` ("0.25", "1e-05"); "+Inf".
std::string FormatDouble(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

const FieldDescriptor& Field(const char* name) {
  // The table names fields of the message it was written for; the test
  // checks every one exists.
  return *kiln::v1::StatsResponse::descriptor()->FindFieldByName(name);
}

std::string FormatValue(const kiln::v1::StatsResponse& stats, const Metric& metric) {
  const FieldDescriptor& field = Field(metric.field);
  const auto* reflection = stats.GetReflection();
  int64_t integer = 0;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return FormatDouble(reflection->GetDouble(stats, &field) / metric.divisor);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FormatDouble(reflection->GetFloat(stats, &field) / metric.divisor);
    case FieldDescriptor::CPPTYPE_INT32:
      integer = reflection->GetInt32(stats, &field);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      integer = reflection->GetUInt32(stats, &field);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      integer = static_cast<int64_t>(reflection->GetUInt64(stats, &field));
      break;
    default:
      integer = reflection->GetInt64(stats, &field);
  }
  if (metric.divisor == 1) return absl::StrCat(integer);  // exact, never 1e+06
  return FormatDouble(integer / metric.divisor);
}

void AppendHeader(const char* name, const char* type, const char* help, std::string* text) {
  absl::StrAppend(text, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void AppendHistogram(const kiln::v1::StatsResponse& stats, std::string* text) {
  const auto& bounds = stats.compile_ms_bounds();
  const auto& counts = stats.compile_ms_counts();
  if (counts.size() != bounds.size() + 1) return;
  AppendHeader(kHistogramName, "histogram", kHistogramHelp, text);
  int64_t cumulative = 0;
  for (int i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    const std::string bound = i < bounds.size() ? FormatDouble(bounds[i] / 1000) : "+Inf";
    absl::StrAppend(text, kHistogramName, "_bucket{le=\"", bound, "\"} ", cumulative, "\n");
  }
  absl::StrAppend(text, kHistogramName, "_sum ", FormatDouble(stats.compile_ms_total() / 1000),
                  "\n", kHistogramName, "_count ", cumulative, "\n");
}

}  // namespace

std::string PrometheusText(const kiln::v1::StatsResponse& stats) {
  std::string text;
  for (const Metric& metric : kMetrics) {
    AppendHeader(metric.name, metric.type, metric.help, &text);
    absl::StrAppend(&text, metric.name, " ", FormatValue(stats, metric), "\n");
  }
  AppendHistogram(stats, &text);
  return text;
}

std::vector<std::string> PrometheusDescribedFields() {
  std::vector<std::string> fields;
  for (const Metric& metric : kMetrics) fields.push_back(metric.field);
  fields.insert(fields.end(), {kBoundsField, kCountsField, kSumField});
  return fields;
}

}  // namespace kiln
