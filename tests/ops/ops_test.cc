// Every per-op case tests/ops/op_cases.py traced from eager PyTorch,
// compiled through one real kilnd and run from the C++ client. Each case is
// one test named after it ("aten_add_Tensor_float32_broadcast"); failures
// name the case, the output and the first differing element.
//
// How a case compares (tests/ops/op_case.proto): assert_close's default
// tolerances; bit for bit (edge values of relu, abs, neg, where, clamp,
// maximum, minimum, comparisons, ...); or within the ulp bound that
// codegen/ops/numerics.h states for each transcendental; or, for graphs
// Kiln must refuse, the status code and message. At the end the test prints
// the worst ulp distance it measured per function and dtype. A case marked
// with a known bug (outside the op table) is skipped while it fails and
// fails once it passes, so the mark goes with the fix.
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/compiled_graph.h"
#include "codegen/ops/numerics.h"
#include "gtest/gtest.h"
#include "tests/daemon_fixture.h"
#include "tests/ops/compare.h"
#include "tests/ops/op_case.pb.h"
#include "tools/reference/tensor_data.h"

namespace kiln {
namespace {

using kiln::test::OpCase;

constexpr char kCasesPath[] = "tests/ops/op_cases.jsonl";

// All cases, parsed once. A line that does not parse fails
// OpCasesTest.LoadAndCoverEveryCheck rather than crashing registration.
struct Cases {
  std::vector<OpCase> cases;
  std::string error;
};

const Cases& AllCases() {
  static const Cases* const all = [] {
    auto* loaded = new Cases();
    std::ifstream file(kCasesPath);
    if (!file) {
      loaded->error = absl::StrCat("cannot open ", kCasesPath);
      return loaded;
    }
    std::string line;
    for (int number = 1; std::getline(file, line); ++number) {
      OpCase one;
      const auto status = google::protobuf::util::JsonStringToMessage(line, &one);
      if (!status.ok()) {
        loaded->error = absl::StrCat(kCasesPath, ":", number, ": ", status.message().as_string());
        return loaded;
      }
      loaded->cases.push_back(std::move(one));
    }
    return loaded;
  }();
  return *all;
}

std::vector<int> CaseIndices() {
  std::vector<int> indices(AllCases().cases.size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int>(i);
  return indices;
}

// gtest names allow [A-Za-z0-9_] only.
std::string TestName(const ::testing::TestParamInfo<int>& info) {
  std::string name = AllCases().cases[info.param].name();
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

std::optional<int> UlpBound(const std::string& function, DType dtype) {
  switch (dtype) {
    case kiln::v1::FLOAT32:
      return ops::UlpBoundFor(function, ir::DType::kFloat32);
    case kiln::v1::FLOAT64:
      return ops::UlpBoundFor(function, ir::DType::kFloat64);
    case kiln::v1::FLOAT16:
      return ops::UlpBoundFor(function, ir::DType::kFloat16);
    case kiln::v1::BFLOAT16:
      return ops::UlpBoundFor(function, ir::DType::kBFloat16);
    default:
      return std::nullopt;
  }
}

// Worst ulp distance measured per (function, dtype), printed at the end.
std::map<std::pair<std::string, std::string>, int64_t>& MeasuredUlps() {
  static auto* const measured = new std::map<std::pair<std::string, std::string>, int64_t>();
  return *measured;
}

class OpsTest : public SharedDaemonTest<int> {
 protected:
  static void TearDownTestSuite() {
    SharedDaemonTest::TearDownTestSuite();
    if (MeasuredUlps().empty()) return;
    std::string table = "worst ulp distance from eager, per function and dtype:\n";
    for (const auto& [key, ulps] : MeasuredUlps()) {
      absl::StrAppendFormat(&table, "  %-10s %-9s %d\n", key.first, key.second, ulps);
    }
    printf("%s", table.c_str());
  }
};

// One output against eager's, by the case's check.
absl::Status CheckOutput(const OpCase& one, const std::string& what, const Tensor& got,
                         const kiln::v1::TensorData& want_data) {
  auto want = ToTensor(want_data);
  if (!want.ok()) return want.status();
  switch (one.check()) {
    case OpCase::BIT_EXACT:
      return CompareBits(what, got, *want);
    case OpCase::ULP: {
      const std::optional<int> bound = UlpBound(one.function(), got.dtype());
      if (!bound.has_value()) {
        return absl::NotFoundError(
            absl::StrCat(what, ": codegen/ops/numerics.h states no ulp bound for '", one.function(),
                         "' in ", kiln::v1::DType_Name(got.dtype())));
      }
      const absl::StatusOr<UlpReport> report = MaxUlpDistance(what, got, *want);
      if (!report.ok()) return report.status();
      int64_t& worst = MeasuredUlps()[{one.function(), kiln::v1::DType_Name(got.dtype())}];
      worst = std::max(worst, report->ulps);
      if (report->ulps <= *bound) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: %d ulp from eager at element %d (%.17g vs eager %.17g); the stated bound for %s "
          "is %d",
          what, report->ulps, report->index, ElementAsDouble(got, report->index),
          ElementAsDouble(*want, report->index), one.function(), *bound));
    }
    default: {
      Tolerance tolerance = DefaultTolerance(got.dtype());
      if (one.has_tolerance()) tolerance = {one.tolerance().rtol(), one.tolerance().atol()};
      return CompareToReference(what, got, want_data, tolerance);
    }
  }
}

// Compiles and runs `one` through kilnd and compares: OK, or the first
// difference from what the case expects.
absl::Status RunCase(Client* client, const OpCase& one) {
  std::vector<Tensor> inputs;
  std::vector<TensorView> views;
  for (const auto& data : one.reference().inputs()) {
    auto tensor = ToTensor(data);
    if (!tensor.ok()) return tensor.status();
    inputs.push_back(*std::move(tensor));
  }
  for (const Tensor& input : inputs) views.push_back(input.view());
  CompiledGraph compiled(client, one.graph());
  auto outputs = compiled.Run(views);
  if (one.check() == OpCase::ERROR) {
    if (outputs.ok()) return absl::FailedPreconditionError("Kiln ran a graph it should refuse");
    if (absl::StatusCodeToString(outputs.status().code()) != one.error_code() ||
        outputs.status().message().find(one.error_substring()) == absl::string_view::npos) {
      return absl::FailedPreconditionError(absl::StrCat("expected ", one.error_code(), " with '",
                                                        one.error_substring(), "', got ",
                                                        outputs.status().ToString()));
    }
    return absl::OkStatus();
  }
  if (!outputs.ok()) return outputs.status();
  if (static_cast<int>(outputs->size()) != one.reference().outputs_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(outputs->size(), " outputs; eager gave ", one.reference().outputs_size()));
  }
  for (size_t k = 0; k < outputs->size(); ++k) {
    const absl::Status status = CheckOutput(one, absl::StrCat(one.name(), " output ", k),
                                            (*outputs)[k], one.reference().outputs(k));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

TEST(OpCasesTest, LoadAndCoverEveryCheck) {
  const Cases& all = AllCases();
  ASSERT_TRUE(all.error.empty()) << all.error;
  std::set<std::string> names;
  std::set<int> checks;
  for (const OpCase& one : all.cases) {
    EXPECT_TRUE(names.insert(one.name()).second) << "duplicate case " << one.name();
    checks.insert(one.check());
  }
  EXPECT_GT(all.cases.size(), 2000u);
  EXPECT_EQ(checks.size(), 4u) << "some check kind has no case";
}

TEST_P(OpsTest, MatchesEager) {
  const OpCase& one = AllCases().cases[GetParam()];
  const absl::Status status = RunCase(client_, one);
  if (one.known_bug().empty()) {
    EXPECT_TRUE(status.ok()) << one.name() << ": " << status;
  } else if (status.ok()) {
    ADD_FAILURE() << one.name() << " passes: the known bug (" << one.known_bug()
                  << ") is fixed; drop its mark in tests/ops/cases_*.py";
  } else {
    GTEST_SKIP() << one.name() << ": known bug: " << one.known_bug() << " (" << status << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, OpsTest, ::testing::ValuesIn(CaseIndices()), TestName);

}  // namespace
}  // namespace kiln
