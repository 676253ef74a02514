#include "client/runtime/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

namespace kiln {
namespace {

template <typename T>
bool IsNan(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(value);
  } else {
    return false;
  }
}

// NaN the largest: a before b in ascending order.
template <typename T>
bool Ascending(T a, T b) {
  return (!IsNan(a) && IsNan(b)) || a < b;
}
template <typename T>
bool Descending(T a, T b) {
  return (IsNan(a) && !IsNan(b)) || a > b;
}

// torch's quick_select_template (kthvalue): median-of-three quickselect
// that leaves the k-th (from 0) smallest at values[k], NaN the largest.
template <typename T>
void QuickSelect(std::vector<std::pair<T, int64_t>>& row, int64_t k) {
  auto greater = [](T a, T b) { return Descending(a, b); };
  auto swap = [&](int64_t i, int64_t j) { std::swap(row[i], row[j]); };
  int64_t left = 0, right = static_cast<int64_t>(row.size()) - 1;
  while (true) {
    if (right <= left) return;
    if (right == left + 1) {
      if (greater(row[left].first, row[right].first)) swap(left, right);
      return;
    }
    swap(left + (right - left) / 2, left + 1);
    if (greater(row[left + 1].first, row[right].first)) swap(left + 1, right);
    if (greater(row[left].first, row[right].first)) swap(left, right);
    if (greater(row[left + 1].first, row[left].first)) swap(left + 1, left);
    int64_t i = left + 1, j = right;
    const T pivot = row[left].first;
    while (true) {
      do ++i;
      while (greater(pivot, row[i].first));
      do --j;
      while (greater(row[j].first, pivot));
      if (j < i) break;
      swap(i, j);
    }
    swap(left, j);
    if (j <= k) left = i;
    if (j >= k) right = j - 1;
  }
}

// One row: `row` holds (value, position) for j in [0, n); writes the
// positions `select` asks for to `out`.
template <typename T>
void SelectRow(const kiln_select& select, std::vector<std::pair<T, int64_t>>& row, int64_t* out) {
  using Pair = std::pair<T, int64_t>;
  const int64_t n = static_cast<int64_t>(row.size());
  auto ascending = [](const Pair& a, const Pair& b) { return Ascending(a.first, b.first); };
  auto descending = [](const Pair& a, const Pair& b) { return Descending(a.first, b.first); };
  switch (select.select) {
    case KILN_SELECT_SORT:
      if (select.descending) {
        std::stable_sort(row.begin(), row.end(), descending);
      } else {
        std::stable_sort(row.begin(), row.end(), ascending);
      }
      for (int64_t j = 0; j < n; ++j) out[j] = row[j].second;
      return;
    case KILN_SELECT_TOPK: {  // torch's topk_impl_loop, step for step
      const int64_t k = select.k;
      if (k == 0) return;
      auto topk = [&](auto before) {
        if (k * 64 <= n) {
          std::partial_sort(row.begin(), row.begin() + k, row.end(), before);
        } else {
          std::nth_element(row.begin(), row.begin() + k - 1, row.end(), before);
          if (select.sorted) std::sort(row.begin(), row.begin() + k - 1, before);
        }
      };
      if (select.descending) {
        topk(descending);
      } else {
        topk(ascending);
      }
      for (int64_t j = 0; j < k; ++j) out[j] = row[j].second;
      return;
    }
    case KILN_SELECT_KTHVALUE:
      QuickSelect(row, select.k - 1);
      out[0] = row[select.k - 1].second;
      return;
    case KILN_SELECT_MEDIAN:
    case KILN_SELECT_NANMEDIAN: {
      // torch's: a NaN is median's answer; else std::nth_element with ties
      // broken by position (the middle of the stable sort), NaN after every
      // number. A row of only NaN leaves nanmedian whichever NaN
      // nth_element leaves first, as in torch.
      const bool skip_nan = select.select == KILN_SELECT_NANMEDIAN;
      int64_t count = n;
      for (const Pair& element : row) {
        if (IsNan(element.first)) {
          if (!skip_nan) {
            out[0] = element.second;
            return;
          }
          --count;
        }
      }
      const auto middle = row.begin() + (count > 0 ? (count - 1) / 2 : 0);
      std::nth_element(row.begin(), middle, row.end(), [](const Pair& a, const Pair& b) {
        return a.first < b.first || (a.first == b.first && a.second < b.second) ||
               (IsNan(b.first) && !IsNan(a.first));
      });
      out[0] = middle->second;
      return;
    }
    case KILN_SELECT_MODE: {
      // torch's mode: a sort by value alone, then the longest run (the
      // first of equal length); its position is the run's last pair's.
      // torch sorts by `<` even when NaN makes it no ordering, which lets
      // std::sort read outside the row; here a row with NaN sorts NaN as
      // the largest instead (each NaN a run of its own, as in torch).
      if (std::any_of(row.begin(), row.end(), [](const Pair& e) { return IsNan(e.first); })) {
        std::sort(row.begin(), row.end(), ascending);
      } else {
        std::sort(row.begin(), row.end(),
                  [](const Pair& a, const Pair& b) { return a.first < b.first; });
      }
      int64_t run = 0, longest = 0, position = 0;
      for (int64_t j = 0; j < n; ++j) {
        ++run;
        if (j == n - 1 || row[j].first != row[j + 1].first) {
          if (run > longest) {
            longest = run;
            position = row[j].second;
          }
          run = 0;
        }
      }
      out[0] = position;
      return;
    }
  }
}

int64_t Width(const kiln_select& select) {
  switch (select.select) {
    case KILN_SELECT_SORT:
      return select.n;
    case KILN_SELECT_TOPK:
      return select.k;
    default:
      return 1;
  }
}

template <typename T>
void SelectRowsOf(ThreadPool& pool, const kiln_select& select, const T* x, int64_t* out) {
  const int64_t width = Width(select);
  // Rows in chunks of about 64K elements, so short rows share a task.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, select.n));
  pool.ParallelFor(select.rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<T, int64_t>> row(select.n);
    for (int64_t r = begin; r < end; ++r) {
      const T* source = x + r * select.row_stride;
      for (int64_t j = 0; j < select.n; ++j) row[j] = {source[j * select.column_stride], j};
      SelectRow(select, row, out + r * width);
    }
  });
}

}  // namespace

void SelectRows(ThreadPool& pool, const kiln_select& select, const void* x, int64_t* out) {
  switch (select.element) {
    case KILN_ELEMENT_F32:
      return SelectRowsOf(pool, select, static_cast<const float*>(x), out);
    case KILN_ELEMENT_F64:
      return SelectRowsOf(pool, select, static_cast<const double*>(x), out);
    case KILN_ELEMENT_I64:
      return SelectRowsOf(pool, select, static_cast<const int64_t*>(x), out);
    case KILN_ELEMENT_BOOL:
      return SelectRowsOf(pool, select, static_cast<const uint8_t*>(x), out);
  }
}

}  // namespace kiln
