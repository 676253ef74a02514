#include "daemon/prometheus.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using google::protobuf::FieldDescriptor;
using ::testing::HasSubstr;
using ::testing::Not;

kiln::v1::StatsResponse FilledStats() {
  kiln::v1::StatsResponse stats;
  stats.set_hits(7);
  stats.set_misses(3);
  stats.set_compiles(3);
  stats.set_compile_failures(1);
  stats.set_compile_ms_total(512.5);
  stats.set_entries(2);
  stats.set_blobs(2);
  stats.set_bytes_stored(12345678);
  stats.set_coalesced(1);
  stats.set_corrupt_blobs(4);
  stats.set_uptime_ms(61500);
  stats.set_corrupt_entries(5);
  stats.set_unreadable_ranges(6);
  stats.set_remembered_failures(1);
  stats.set_failures_replayed(8);
  stats.set_queue_length(9);
  stats.set_evictions(10);
  stats.set_max_cache_bytes(int64_t{10} << 30);
  stats.set_local_index_hits(11);
  (*stats.mutable_failures_by_kind())["unsupported"] = 2;
  (*stats.mutable_failures_by_kind())["invalid_graph"] = 1;
  for (double bound : {10.0, 250.0, 1000.0}) stats.add_compile_ms_bounds(bound);
  for (int64_t count : {1, 0, 1, 0}) stats.add_compile_ms_counts(count);
  return stats;
}

TEST(PrometheusTest, ExactText) {
  EXPECT_EQ(PrometheusText(FilledStats()),
            "# HELP kiln_hits_total Compile requests answered from the cache, by path: daemon "
            "(kilnd found it in its store), local_index (a client found it in the local index "
            "with no RPC, as clients report them), remote (kilnd missed and the fleet tier had "
            "it).\n"
            "# TYPE kiln_hits_total counter\n"
            "kiln_hits_total{path=\"daemon\"} 7\n"
            "kiln_hits_total{path=\"local_index\"} 11\n"
            "# HELP kiln_misses_total Compile requests kilnd did not find stored.\n"
            "# TYPE kiln_misses_total counter\n"
            "kiln_misses_total 3\n"
            "# HELP kiln_coalesced_total Misses that waited on a compile of the same key already "
            "running.\n"
            "# TYPE kiln_coalesced_total counter\n"
            "kiln_coalesced_total 1\n"
            "# HELP kiln_compiles_total Compile pipeline runs, failed ones included.\n"
            "# TYPE kiln_compiles_total counter\n"
            "kiln_compiles_total 3\n"
            "# HELP kiln_compile_failures_total Compile pipeline runs that failed.\n"
            "# TYPE kiln_compile_failures_total counter\n"
            "kiln_compile_failures_total 1\n"
            "# HELP kiln_failures_total Compile requests answered with an error, by kind: "
            "invalid_graph, unsupported, resource_limit, timeout, compiler_error, unavailable, "
            "internal.\n"
            "# TYPE kiln_failures_total counter\n"
            "kiln_failures_total{kind=\"invalid_graph\"} 1\n"
            "kiln_failures_total{kind=\"unsupported\"} 2\n"
            "# HELP kiln_failures_replayed_total Misses answered with a remembered compile "
            "failure.\n"
            "# TYPE kiln_failures_replayed_total counter\n"
            "kiln_failures_replayed_total 8\n"
            "# HELP kiln_evictions_total Entries evicted by size or age (kiln gc and the "
            "background eviction).\n"
            "# TYPE kiln_evictions_total counter\n"
            "kiln_evictions_total 10\n"
            "# HELP kiln_remembered_failures Keys whose deterministic compile failure is "
            "remembered.\n"
            "# TYPE kiln_remembered_failures gauge\n"
            "kiln_remembered_failures 1\n"
            "# HELP kiln_compile_queue_length Compiles waiting for a compile thread (not "
            "running).\n"
            "# TYPE kiln_compile_queue_length gauge\n"
            "kiln_compile_queue_length 9\n"
            "# HELP kiln_store_entries Entries in the store.\n"
            "# TYPE kiln_store_entries gauge\n"
            "kiln_store_entries 2\n"
            "# HELP kiln_store_blobs Shared-object blobs in the store.\n"
            "# TYPE kiln_store_blobs gauge\n"
            "kiln_store_blobs 2\n"
            "# HELP kiln_store_bytes Shared-object bytes in the store.\n"
            "# TYPE kiln_store_bytes gauge\n"
            "kiln_store_bytes 12345678\n"
            "# HELP kiln_store_max_bytes The size cap eviction keeps the store within, in bytes "
            "(0: none).\n"
            "# TYPE kiln_store_max_bytes gauge\n"
            "kiln_store_max_bytes 10737418240\n"
            "# HELP kiln_store_quarantined_blobs Blobs found damaged and quarantined.\n"
            "# TYPE kiln_store_quarantined_blobs gauge\n"
            "kiln_store_quarantined_blobs 4\n"
            "# HELP kiln_store_quarantined_entries Entries found damaged and quarantined.\n"
            "# TYPE kiln_store_quarantined_entries gauge\n"
            "kiln_store_quarantined_entries 5\n"
            "# HELP kiln_store_unreadable_ranges Damaged stretches of the store its scans "
            "skipped since kilnd started.\n"
            "# TYPE kiln_store_unreadable_ranges gauge\n"
            "kiln_store_unreadable_ranges 6\n"
            "# HELP kiln_uptime_seconds Seconds since kilnd started.\n"
            "# TYPE kiln_uptime_seconds gauge\n"
            "kiln_uptime_seconds 61.5\n"
            "# HELP kiln_compile_duration_seconds Time the compiler (clang and lld) took per "
            "successful compile.\n"
            "# TYPE kiln_compile_duration_seconds histogram\n"
            "kiln_compile_duration_seconds_bucket{le=\"0.01\"} 1\n"
            "kiln_compile_duration_seconds_bucket{le=\"0.25\"} 1\n"
            "kiln_compile_duration_seconds_bucket{le=\"1\"} 2\n"
            "kiln_compile_duration_seconds_bucket{le=\"+Inf\"} 2\n"
            "kiln_compile_duration_seconds_sum 0.5125\n"
            "kiln_compile_duration_seconds_count 2\n");
}

TEST(PrometheusTest, HistogramLeftOutWhenCountsDoNotMatchBounds) {
  kiln::v1::StatsResponse stats = FilledStats();
  stats.clear_compile_ms_counts();  // what a kilnd from before the histogram sends
  const std::string text = PrometheusText(stats);
  EXPECT_FALSE(absl::StrContains(text, "kiln_compile_duration_seconds")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nkiln_hits_total{path=\"daemon\"} 7\n")) << text;
}

// A kind is a name from kilnd's fixed set; should one ever hold a quote, a
// backslash or a newline, the line still parses.
TEST(PrometheusTest, LabelValuesAreEscaped) {
  kiln::v1::StatsResponse stats;
  (*stats.mutable_failures_by_kind())["a\"b\\c\nd"] = 3;
  EXPECT_TRUE(absl::StrContains(PrometheusText(stats),
                                "\nkiln_failures_total{kind=\"a\\\"b\\\\c\\nd\"} 3\n"))
      << PrometheusText(stats);
}

// A numeric StatsResponse field the table does not describe would never be
// exported: add a row to daemon/prometheus.cc's table (or to the histogram).
TEST(PrometheusTest, EveryNumericStatsFieldIsDescribed) {
  const std::vector<std::string> described = PrometheusDescribedFields();
  // StatsResponse's fields by name, RemoteStats's as "remote.NAME".
  auto check = [&](const google::protobuf::Descriptor* descriptor, const std::string& prefix) {
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const FieldDescriptor* field = descriptor->field(i);
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
        case FieldDescriptor::CPPTYPE_INT64:
        case FieldDescriptor::CPPTYPE_UINT32:
        case FieldDescriptor::CPPTYPE_UINT64:
        case FieldDescriptor::CPPTYPE_DOUBLE:
        case FieldDescriptor::CPPTYPE_FLOAT:
          EXPECT_NE(std::find(described.begin(), described.end(), prefix + field->name()),
                    described.end())
              << prefix + field->name()
              << " is not exported: add it to the table in daemon/prometheus.cc";
          break;
        default:
          break;
      }
    }
  };
  check(kiln::v1::StatsResponse::descriptor(), "");
  check(kiln::v1::RemoteStats::descriptor(), "remote.");
  for (const std::string& name : described) {
    const bool remote = name.rfind("remote.", 0) == 0;
    const auto* descriptor =
        remote ? kiln::v1::RemoteStats::descriptor() : kiln::v1::StatsResponse::descriptor();
    EXPECT_NE(descriptor->FindFieldByName(remote ? name.substr(7) : name), nullptr)
        << "daemon/prometheus.cc names " << name << ", which does not exist";
  }
}

TEST(PrometheusTest, TheFleetTiersSamplesAppearOnlyWithOne) {
  kiln::v1::StatsResponse stats;
  EXPECT_THAT(PrometheusText(stats), Not(HasSubstr("kiln_remote_")));
  EXPECT_THAT(PrometheusText(stats), Not(HasSubstr("path=\"remote\"")));
  stats.mutable_remote()->set_hits(3);
  stats.mutable_remote()->set_available(true);
  stats.mutable_remote()->set_bytes_written(4096);
  const std::string text = PrometheusText(stats);
  EXPECT_THAT(text, HasSubstr("kiln_hits_total{path=\"remote\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("kiln_remote_available 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_remote_bytes_total{direction=\"written\"} 4096\n"));
}

}  // namespace
}  // namespace kiln
