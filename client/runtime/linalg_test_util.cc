#include "client/runtime/linalg_test_util.h"

#include "client/runtime/runtime.h"
#include "gtest/gtest.h"

namespace kiln {

kiln_linalg LinalgCall(int64_t routine, int64_t batch, int64_t m, int64_t n, int64_t k,
                       int64_t flags, bool float64) {
  kiln_linalg call = {};
  call.routine = routine;
  call.float64 = float64 ? 1 : 0;
  call.batch = batch;
  call.m = m;
  call.n = n;
  call.k = k;
  call.flags = flags;
  return call;
}

void SetStrides(kiln_linalg& call, int operand, int64_t batch, int64_t row, int64_t col) {
  call.strides[operand][0] = batch;
  call.strides[operand][1] = row;
  call.strides[operand][2] = col;
}

void RowMajor(kiln_linalg& call, int operand, int64_t rows, int64_t cols) {
  SetStrides(call, operand, rows * cols, cols, 1);
}

int CallLinalg(const kiln_linalg& call, std::vector<const void*> operands,
               std::vector<void*> results) {
  static Runtime* const runtime = new Runtime(2);
  const kiln_runtime* table = runtime->table();
  return table->linalg(table->context, &call, operands.data(), results.data());
}

void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

}  // namespace kiln
