#include "daemon/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kiln {
namespace {

using google::protobuf::FieldDescriptor;

// One StatsResponse field exported as one sample, or (a map field) one
// sample per entry. Store totals and remembered failures are gauges: they
// fall on eviction and expiry, and outlive the process.
struct Metric {
  const char* field;
  const char* name;
  const char* type;
  // nullptr: another sample of the family of the row above (same name).
  const char* help;
  // A numeric field: its sample's label (`path="daemon"`), or none. A map
  // field: the label name its keys are the values of.
  const char* label = "";
  double divisor = 1;  // 1000 turns a field in milliseconds into seconds
};

constexpr Metric kMetrics[] = {
    {"hits", "kiln_hits_total", "counter",
     "Compile requests answered from the cache, by path: daemon (kilnd found it in its store), "
     "local_index (a client found it in the local index with no RPC, as clients report them), "
     "remote (kilnd missed and the fleet tier had it).",
     "path=\"daemon\""},
    {"local_index_hits", "kiln_hits_total", "counter", nullptr, "path=\"local_index\""},
    {"remote.hits", "kiln_hits_total", "counter", nullptr, "path=\"remote\""},
    {"misses", "kiln_misses_total", "counter", "Compile requests kilnd did not find stored."},
    {"coalesced", "kiln_coalesced_total", "counter",
     "Misses that waited on a compile of the same key already running."},
    {"compiles", "kiln_compiles_total", "counter", "Compile pipeline runs, failed ones included."},
    {"compile_failures", "kiln_compile_failures_total", "counter",
     "Compile pipeline runs that failed."},
    {"failures_by_kind", "kiln_failures_total", "counter",
     "Compile requests answered with an error, by kind: invalid_graph, unsupported, "
     "resource_limit, timeout, compiler_error, unavailable, internal.",
     "kind"},
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
    {"uptime_ms", "kiln_uptime_seconds", "gauge", "Seconds since kilnd started.", "", 1000},
    // The fleet tier's, only when kilnd has one.
    {"remote.available", "kiln_remote_available", "gauge",
     "1 when the fleet tier's last command reached Redis, 0 when it is down."},
    {"remote.misses", "kiln_remote_misses_total", "counter",
     "Local misses the fleet tier did not have either."},
    {"remote.errors", "kiln_remote_errors_total", "counter",
     "Commands to the fleet tier that failed (Redis down, slow or refusing)."},
    {"remote.refused", "kiln_remote_refused_total", "counter",
     "Fleet-tier entries refused: unsigned, badly signed or damaged."},
    {"remote.bytes_read", "kiln_remote_bytes_total", "counter",
     "Bytes of entries read from and written to the fleet tier.", "direction=\"read\""},
    {"remote.bytes_written", "kiln_remote_bytes_total", "counter", nullptr,
     "direction=\"written\""},
    {"remote.publishes", "kiln_remote_publishes_total", "counter",
     "Entries this kilnd compiled and wrote to the fleet tier."},
    {"remote.publishes_dropped", "kiln_remote_publishes_dropped_total", "counter",
     "Writes to the fleet tier given up (queue full or Redis failed)."},
    {"remote.lease_waits", "kiln_remote_lease_waits_total", "counter",
     "Misses that waited on another machine's compile of the same key."},
    {"remote.lease_takeovers", "kiln_remote_lease_takeovers_total", "counter",
     "Waits whose lease holder lapsed, so this kilnd compiled."},
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

// A field of the message by its path: "hits", or "remote.hits" for one of
// its RemoteStats. The table names fields of the messages it was written
// for; the test checks every one exists.
struct FieldRef {
  const google::protobuf::Message* message;
  const FieldDescriptor* field;
};
FieldRef Resolve(const kiln::v1::StatsResponse& stats, absl::string_view path) {
  const size_t dot = path.find('.');
  if (dot == absl::string_view::npos) {
    return {&stats, stats.GetDescriptor()->FindFieldByName(std::string(path))};
  }
  // Only RemoteStats is nested.
  return {&stats.remote(),
          stats.remote().GetDescriptor()->FindFieldByName(std::string(path.substr(dot + 1)))};
}

std::string FormatValue(const kiln::v1::StatsResponse& stats, const Metric& metric) {
  const auto [message, field] = Resolve(stats, metric.field);
  const auto* reflection = message->GetReflection();
  int64_t integer = 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return FormatDouble(reflection->GetDouble(*message, field) / metric.divisor);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FormatDouble(reflection->GetFloat(*message, field) / metric.divisor);
    case FieldDescriptor::CPPTYPE_BOOL:
      integer = reflection->GetBool(*message, field) ? 1 : 0;
      break;
    case FieldDescriptor::CPPTYPE_INT32:
      integer = reflection->GetInt32(*message, field);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      integer = reflection->GetUInt32(*message, field);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      integer = static_cast<int64_t>(reflection->GetUInt64(*message, field));
      break;
    default:
      integer = reflection->GetInt64(*message, field);
  }
  if (metric.divisor == 1) return absl::StrCat(integer);  // exact, never 1e+06
  return FormatDouble(integer / metric.divisor);
}

void AppendHeader(const char* name, const char* type, const char* help, std::string* text) {
  absl::StrAppend(text, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

// `value` as a label value: backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value) {
  std::string escaped;
  for (const char c : value) {
    if (c == '\\' || c == '"') escaped += '\\';
    escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return escaped;
}

// A map<string, int64> field: one sample per entry, sorted by key.
void AppendMapSamples(const kiln::v1::StatsResponse& stats, const Metric& metric,
                      std::string* text) {
  const FieldDescriptor& field = *Resolve(stats, metric.field).field;
  const auto* reflection = stats.GetReflection();
  std::map<std::string, int64_t> entries;
  for (int i = 0; i < reflection->FieldSize(stats, &field); ++i) {
    const google::protobuf::Message& entry = reflection->GetRepeatedMessage(stats, &field, i);
    const auto* entry_reflection = entry.GetReflection();
    const auto* descriptor = entry.GetDescriptor();
    entries[entry_reflection->GetString(entry, descriptor->map_key())] =
        entry_reflection->GetInt64(entry, descriptor->map_value());
  }
  for (const auto& [key, value] : entries) {
    absl::StrAppend(text, metric.name, "{", metric.label, "=\"", EscapeLabelValue(key), "\"} ",
                    value, "\n");
  }
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
    const bool remote = absl::StartsWith(metric.field, "remote.");
    if (remote && !stats.has_remote()) continue;
    if (metric.help != nullptr) AppendHeader(metric.name, metric.type, metric.help, &text);
    if (Resolve(stats, metric.field).field->is_map()) {
      AppendMapSamples(stats, metric, &text);
    } else if (*metric.label != '\0') {
      absl::StrAppend(&text, metric.name, "{", metric.label, "} ", FormatValue(stats, metric),
                      "\n");
    } else {
      absl::StrAppend(&text, metric.name, " ", FormatValue(stats, metric), "\n");
    }
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
