#include "client/runtime/sort.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

kiln_select Select(int select, int64_t rows, int64_t n, int64_t k = 0, bool descending = false) {
  kiln_select s{};
  s.select = select;
  s.element = KILN_ELEMENT_F32;
  s.rows = rows;
  s.n = n;
  s.row_stride = n;
  s.column_stride = 1;
  s.k = k;
  s.descending = descending;
  s.sorted = 1;
  return s;
}

// Whether a precedes b in a stable ascending (descending) sort, NaN largest.
bool Precedes(float a, int64_t i, float b, int64_t j, bool descending) {
  if (std::isnan(a) || std::isnan(b)) {
    if (std::isnan(a) && std::isnan(b)) return i < j;
    return std::isnan(a) == descending;
  }
  if (a != b) return descending ? a > b : a < b;
  return i < j;
}

// Rows of 100,000 elements, far past what comparing every pair allows:
// few distinct values (many ties) and NaNs at scattered positions.
std::vector<float> LongRows(int64_t rows, int64_t n) {
  std::mt19937 random(36);
  std::vector<float> x(rows * n);
  for (float& value : x) value = static_cast<float>(random() % 50) - 25;
  for (int64_t i = 0; i < rows * n; i += 97) x[i] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

TEST(SelectRowsTest, SortsLongRowsStablyWithNanLargest) {
  ThreadPool pool(2);
  const int64_t rows = 3, n = 100000;
  const std::vector<float> x = LongRows(rows, n);
  for (bool descending : {false, true}) {
    std::vector<int64_t> out(rows * n, -1);
    SelectRows(pool, Select(KILN_SELECT_SORT, rows, n, 0, descending), x.data(), out.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * n;
      const int64_t* order = out.data() + r * n;
      std::vector<bool> seen(n, false);
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_GE(order[j], 0);
        ASSERT_LT(order[j], n);
        ASSERT_FALSE(seen[order[j]]) << "position " << order[j] << " twice";
        seen[order[j]] = true;
        if (j > 0) {
          ASSERT_TRUE(
              Precedes(row[order[j - 1]], order[j - 1], row[order[j]], order[j], descending))
              << "row " << r << ", places " << j - 1 << " and " << j
              << (descending ? " (descending)" : "");
        }
      }
    }
  }
}

TEST(SelectRowsTest, StridedRowsOfEveryElementType) {
  ThreadPool pool(2);
  // A [4, 3] tensor read as its transpose: rows of 4 down the columns.
  const std::vector<int64_t> x = {3, 1, 2, 1, 1, 0, 2, 0, 1, 0, 2, 3};
  kiln_select select = Select(KILN_SELECT_SORT, 3, 4);
  select.element = KILN_ELEMENT_I64;
  select.row_stride = 1;
  select.column_stride = 3;
  std::vector<int64_t> out(12);
  SelectRows(pool, select, x.data(), out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{3, 1, 2, 0, 2, 0, 1, 3, 1, 2, 0, 3}));

  const std::vector<double> wide = {2.5, -1.0, 2.5, -7.0};
  select = Select(KILN_SELECT_SORT, 1, 4, 0, /*descending=*/true);
  select.element = KILN_ELEMENT_F64;
  SelectRows(pool, select, wide.data(), out.data());
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + 4), (std::vector<int64_t>{0, 2, 1, 3}));

  const std::vector<uint8_t> flags = {1, 0, 1, 0};
  select = Select(KILN_SELECT_SORT, 1, 4);
  select.element = KILN_ELEMENT_BOOL;
  SelectRows(pool, select, flags.data(), out.data());
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + 4), (std::vector<int64_t>{1, 3, 0, 2}));
}

TEST(SelectRowsTest, MedianIsTheMiddleOfTheStableSortOrTheFirstNan) {
  ThreadPool pool(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {4, 1,   4, 1,   4, 1,  // ties: the middle's first holder
                                2, nan, 0, nan, 5, 1};
  std::vector<int64_t> out(2);
  SelectRows(pool, Select(KILN_SELECT_MEDIAN, 2, 6), x.data(), out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{5, 1}));
  SelectRows(pool, Select(KILN_SELECT_NANMEDIAN, 2, 6), x.data(), out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{5, 5}));  // of {2, 0, 5, 1}: 1
  const std::vector<float> all_nan = {nan, nan, nan};
  SelectRows(pool, Select(KILN_SELECT_NANMEDIAN, 1, 3), all_nan.data(), out.data());
  EXPECT_EQ(out[0], 0);
}

TEST(SelectRowsTest, KthValueTopkAndModeOfLongRows) {
  ThreadPool pool(2);
  const int64_t n = 100000;
  std::vector<float> x(n);
  for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>((j * 7919) % n);  // a permutation
  std::vector<int64_t> out(n);
  SelectRows(pool, Select(KILN_SELECT_KTHVALUE, 1, n, 12345), x.data(), out.data());
  EXPECT_EQ(x[out[0]], 12344.0f);
  SelectRows(pool, Select(KILN_SELECT_TOPK, 1, n, 5, /*descending=*/true), x.data(), out.data());
  for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(x[out[j]], static_cast<float>(n - 1 - j));
  SelectRows(pool, Select(KILN_SELECT_TOPK, 1, n, 3000), x.data(), out.data());
  for (int64_t j = 0; j < 3000; ++j) EXPECT_EQ(x[out[j]], static_cast<float>(j));
  x[10] = x[20] = x[30] = 99.0f;  // 99 three times, every other value at most twice
  SelectRows(pool, Select(KILN_SELECT_MODE, 1, n), x.data(), out.data());
  EXPECT_EQ(x[out[0]], 99.0f);
}

}  // namespace
}  // namespace kiln
