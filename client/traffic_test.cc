#include "client/traffic.h"

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// A histogram as "5x4x5:2 8x4x8:1 other:0", rows in the order given.
std::string Print(const kiln::v1::TrafficHistogram& histogram) {
  std::string text;
  for (const auto& row : histogram.rows()) {
    absl::StrAppend(&text, absl::StrJoin(row.sizes(), "x"), ":", row.calls(), " ");
  }
  absl::StrAppend(&text, "other:", histogram.other_calls());
  return text;
}

// The inputs of one call: x [b, 4] and y [b]. Only sizes matter to Record.
struct Call {
  explicit Call(int64_t b) : x_sizes{b, 4}, y_sizes{b} {
    inputs[0].sizes = x_sizes;
    inputs[1].sizes = y_sizes;
  }
  std::vector<int64_t> x_sizes, y_sizes;
  TensorView inputs[2];
};

kiln::v1::Graph ScaleGraph(double factor) {
  kiln::v1::Graph graph;
  kiln::v1::Input* input = graph.add_inputs();
  input->set_value(0);
  input->set_name("x");
  input->mutable_type()->set_dtype(kiln::v1::FLOAT32);
  input->mutable_type()->add_sizes()->set_symbol("B");
  input->mutable_type()->add_sizes()->set_constant(4);
  kiln::v1::Node* node = graph.add_nodes();
  node->set_op("aten.mul.Tensor");
  node->set_name("mul");
  node->add_inputs(0);
  kiln::v1::Argument* other = node->add_args();
  other->set_name("other");
  other->set_float_value(factor);
  node->add_outputs(1);
  *node->add_output_types() = input->type();
  graph.add_outputs(1);
  return graph;
}

TEST(TrafficTest, TakeNewReturnsTheCallsSinceTheLastTake) {
  const kiln::v1::Graph graph;
  TrafficRecorder recorder(&graph);
  Call five(5), eight(8);
  for (int i = 0; i < 3; ++i) recorder.Record(10, five.inputs);
  recorder.Record(11, eight.inputs);
  // Rows come in table order: hash 10's row before hash 11's.
  EXPECT_EQ(Print(recorder.TakeNew()), "5x4x5:3 8x4x8:1 other:0");
  EXPECT_EQ(Print(recorder.TakeNew()), "other:0");

  recorder.Record(11, eight.inputs);
  recorder.Record(11, eight.inputs);
  Call sixteen(16);
  recorder.Record(12, sixteen.inputs);
  EXPECT_EQ(Print(recorder.TakeNew()), "8x4x8:2 16x4x16:1 other:0");
  EXPECT_EQ(Print(recorder.TakeNew()), "other:0");
}

TEST(TrafficTest, AHashWhoseHomeRowIsTakenProbesTheNextRow) {
  const kiln::v1::Graph graph;
  TrafficRecorder recorder(&graph);
  Call five(5), six(6), seven(7);
  recorder.Record(3, five.inputs);
  recorder.Record(3 + TrafficRecorder::kRows, six.inputs);  // home row 3: taken
  recorder.Record(4, seven.inputs);                         // row 4: taken by six
  recorder.Record(3 + TrafficRecorder::kRows, six.inputs);
  EXPECT_EQ(Print(recorder.TakeNew()), "5x4x5:1 6x4x6:2 7x4x7:1 other:0");
}

TEST(TrafficTest, SizesPastTheTableCountInOtherCalls) {
  const kiln::v1::Graph graph;
  TrafficRecorder recorder(&graph);
  const int rows = TrafficRecorder::kRows;
  std::vector<std::unique_ptr<Call>> calls;
  // Hashes 1..kRows have distinct home rows (kRows % kRows is row 0): they
  // fill the table exactly.
  for (int b = 1; b <= rows; ++b) {
    calls.push_back(std::make_unique<Call>(b));
    recorder.Record(b, calls.back()->inputs);
  }
  // Every probe window is full now: two new sizes, three calls.
  Call past(1000), further(1001);
  recorder.Record(rows + 1, past.inputs);
  recorder.Record(rows + 1, past.inputs);
  recorder.Record(2 * rows + 7, further.inputs);
  recorder.Record(5, calls[4]->inputs);  // a size with a row still counts there

  const kiln::v1::TrafficHistogram histogram = recorder.TakeNew();
  ASSERT_EQ(histogram.rows_size(), rows);
  EXPECT_EQ(histogram.other_calls(), 3);
  // Row 0 holds hash kRows, row r hash r.
  EXPECT_EQ(absl::StrJoin(histogram.rows(0).sizes(), "x"), absl::StrCat(rows, "x4x", rows));
  for (int r = 1; r < rows; ++r) {
    EXPECT_EQ(absl::StrJoin(histogram.rows(r).sizes(), "x"), absl::StrCat(r, "x4x", r));
    EXPECT_EQ(histogram.rows(r).calls(), r == 5 ? 2 : 1) << r;
  }
  EXPECT_EQ(Print(recorder.TakeNew()), "other:0");
  recorder.Record(rows + 1, past.inputs);
  EXPECT_EQ(Print(recorder.TakeNew()), "other:1");
}

TEST(TrafficTest, GraphDigestIsTheSha256OfTheGraph) {
  EXPECT_EQ(GraphDigest(kiln::v1::Graph()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
      << "an empty graph encodes as no bytes";
  const std::string digest = GraphDigest(ScaleGraph(2.0));
  EXPECT_EQ(digest.size(), 64);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
  EXPECT_EQ(GraphDigest(ScaleGraph(2.0)), digest);
  EXPECT_NE(GraphDigest(ScaleGraph(3.0)), digest) << "a node's argument differs";

  const kiln::v1::Graph graph = ScaleGraph(2.0);
  TrafficRecorder recorder(&graph);
  EXPECT_EQ(recorder.graph_digest(), digest);
}

// Threads recording at once, each at a size of its own: each row has one
// writer, so every count is exact, also across TakeNew calls made while
// the threads run.
TEST(TrafficTest, ThreadsRecordingAtDistinctSizesAreCountedExactly) {
  const kiln::v1::Graph graph;
  TrafficRecorder recorder(&graph);
  constexpr int kThreads = 4;
  constexpr int kCallsPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&recorder, t] {
      Call call(t + 2);
      for (int i = 0; i < kCallsPerThread; ++i) recorder.Record(100 + t, call.inputs);
    });
  }
  std::map<std::string, int64_t> totals;
  int64_t other_calls = 0;
  auto take = [&] {
    const kiln::v1::TrafficHistogram histogram = recorder.TakeNew();
    for (const auto& row : histogram.rows()) totals[absl::StrJoin(row.sizes(), "x")] += row.calls();
    other_calls += histogram.other_calls();
  };
  for (int i = 0; i < 100; ++i) take();
  for (std::thread& thread : threads) thread.join();
  take();

  std::map<std::string, int64_t> expected;
  for (int t = 0; t < kThreads; ++t) {
    expected[absl::StrCat(t + 2, "x4x", t + 2)] = kCallsPerThread;
  }
  EXPECT_EQ(totals, expected);
  EXPECT_EQ(other_calls, 0);
}

}  // namespace
}  // namespace kiln
