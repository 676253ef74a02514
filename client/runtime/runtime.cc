#include "client/runtime/runtime.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/runtime/convolution.h"
#include "client/runtime/eig.h"
#include "client/runtime/fft.h"
#include "client/runtime/ldl.h"
#include "client/runtime/linalg.h"
#include "client/runtime/linalg_errors.h"
#include "client/runtime/lstsq.h"
#include "client/runtime/matmul.h"
#include "client/runtime/matrix_exp.h"
#include "client/runtime/qr.h"
#include "client/runtime/random.h"
#include "client/runtime/sort.h"

namespace kiln {
namespace {

// OpenBLAS (Debian's libopenblas0-pthread) has one thread count for the
// whole process, which eager PyTorch shares when Kiln runs inside it. Kiln
// splits large GEMMs across its own pool, so while a GEMM callback runs
// OpenBLAS is held at one thread; the process's own count is back once the
// last of them returns (eager keeps its BLAS threads between Kiln's GEMMs).
class OneBlasThread {
 public:
  OneBlasThread() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (active_++ == 0) {
      saved_ = openblas_get_num_threads();
      if (saved_ != 1) openblas_set_num_threads(1);
    }
  }
  ~OneBlasThread() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0 && saved_ != 1) openblas_set_num_threads(saved_);
  }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  static inline std::mutex mutex_;
  static inline int active_ = 0;  // callbacks running
  static inline int saved_ = 1;   // the count before the first of them
};

// GEMMs with fewer multiply-adds than this stay on the calling thread.
constexpr long long kParallelGemmWork = 1LL << 21;

// Where an operand is copied when it is packed: this thread's buffer for
// that operand slot (0: A, 1: B), grown as needed and reused across calls,
// so a steady-state GEMM allocates nothing. It keeps the largest operand
// it ever held for the thread's life.
template <typename T>
T* PackBuffer(int slot, long long count) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& buffer = buffers[slot];
  if (static_cast<long long>(buffer.size()) < count) buffer.resize(count);
  return buffer.data();
}

// dst (rows x cols, row-major) = the transpose of src (cols x rows,
// leading dimension `leading`), by OpenBLAS's out-of-place copy.
void TransposeCopy(const float* src, long long rows, long long cols, long long leading,
                   float* dst) {
  cblas_somatcopy(CblasRowMajor, CblasTrans, cols, rows, 1.0f, src, leading, dst, cols);
}
void TransposeCopy(const double* src, long long rows, long long cols, long long leading,
                   double* dst) {
  cblas_domatcopy(CblasRowMajor, CblasTrans, cols, rows, 1.0, src, leading, dst, cols);
}

// Whether the rows x cols matrix whose element (i, j) is at
// data[i * row + j * col] is row-major as it is (BLAS's NoTrans), or
// transposed (Trans): each a unit stride BLAS and oneDNN take as they are.
bool RowMajor(long long rows, long long cols, long long row, long long col) {
  return (col == 1 || cols == 1) && row >= std::max(1LL, cols);
}
bool Transposed(long long rows, long long cols, long long row, long long col) {
  return (row == 1 || rows == 1) && col >= std::max(1LL, rows);
}

// A BLAS operand layout for a logical rows x cols matrix whose element
// (i, j) is at data[i * row + j * col]: row-major as is, transposed, or a
// packed row-major copy in this thread's buffer `slot` when neither stride
// is unit or when `prefer_row_major`.
template <typename T>
struct Operand {
  const T* data;
  CBLAS_TRANSPOSE transpose;
  blasint leading;
};

template <typename T>
Operand<T> MakeOperand(const T* data, long long rows, long long cols, long long row, long long col,
                       int slot, bool prefer_row_major = false) {
  if (RowMajor(rows, cols, row, col)) {
    return {data, CblasNoTrans, static_cast<blasint>(std::max(1LL, row))};
  }
  if (Transposed(rows, cols, row, col) && !prefer_row_major) {
    return {data, CblasTrans, static_cast<blasint>(std::max(1LL, col))};
  }
  T* packed = PackBuffer<T>(slot, rows * cols);
  if (row == 1 && col >= std::max(1LL, rows)) {
    TransposeCopy(data, rows, cols, col, packed);
    return {packed, CblasNoTrans, static_cast<blasint>(std::max(1LL, cols))};
  }
  // Neither stride is unit: in 32 x 32 tiles.
  constexpr long long kTile = 32;
  for (long long i0 = 0; i0 < rows; i0 += kTile) {
    for (long long j0 = 0; j0 < cols; j0 += kTile) {
      const long long i_end = std::min(rows, i0 + kTile), j_end = std::min(cols, j0 + kTile);
      for (long long i = i0; i < i_end; ++i) {
        for (long long j = j0; j < j_end; ++j) packed[i * cols + j] = data[i * row + j * col];
      }
    }
  }
  return {packed, CblasNoTrans, static_cast<blasint>(std::max(1LL, cols))};
}

// Whether MakeOperand takes the k x n B whose element (i, j) is at
// b[i * row + j * col] as stored transposed (or copies it row-major).
bool StoredTransposed(long long k, long long n, long long row, long long col) {
  return !RowMajor(k, n, row, col) && Transposed(k, n, row, col);
}

template <typename T>
GemmWays::Shape ShapeOf(long long batch, long long m, long long n, long long k, long long a_row,
                        long long a_col, long long b_row, long long b_col, T alpha, T beta,
                        int threads) {
  return {batch,
          m,
          k,
          n,
          static_cast<int>(sizeof(T)),
          threads,
          StoredTransposed(k, n, b_row, b_col),
          std::is_same_v<T, float> && alpha == T(1) && beta == T(0) &&
              (RowMajor(m, k, a_row, a_col) || Transposed(m, k, a_row, a_col)) &&
              (RowMajor(k, n, b_row, b_col) || Transposed(k, n, b_row, b_col))};
}

// The beta to pass OpenBLAS for C (m x n, rows c_row apart) = alpha A.B +
// beta C. For beta = 0 some of OpenBLAS's kernel sets first clear C one
// element at a time; clearing it here by rows and passing beta = 1 starts
// the same sums from the same zeros, and is never slower
// (docs/BENCHMARKS.md "GEMM choices").
template <typename T>
T ClearForBeta(T beta, T* c, long long m, long long n, long long c_row) {
  if (beta != T(0)) return beta;
  if (c_row == n) {
    std::memset(c, 0, sizeof(T) * m * n);
  } else {
    for (long long i = 0; i < m; ++i) std::memset(c + i * c_row, 0, sizeof(T) * n);
  }
  return T(1);
}

void OpenBlasGemm(const Operand<float>& a, const Operand<float>& b, long long m, long long n,
                  long long k, float alpha, float beta, float* c, long long c_row) {
  cblas_sgemm(CblasRowMajor, a.transpose, b.transpose, m, n, k, alpha, a.data, a.leading, b.data,
              b.leading, beta, c, c_row);
}
void OpenBlasGemm(const Operand<double>& a, const Operand<double>& b, long long m, long long n,
                  long long k, double alpha, double beta, double* c, long long c_row) {
  cblas_dgemm(CblasRowMajor, a.transpose, b.transpose, m, n, k, alpha, a.data, a.leading, b.data,
              b.leading, beta, c, c_row);
}

// y = alpha M.x + beta y for the rows x cols row-major M (`transpose`:
// M's transpose), x and y `x_step` and `y_step` elements apart.
void Gemv(CBLAS_TRANSPOSE transpose, long long rows, long long cols, float alpha, const float* m,
          blasint leading, const float* x, long long x_step, float beta, float* y,
          long long y_step) {
  cblas_sgemv(CblasRowMajor, transpose, rows, cols, alpha, m, leading, x, x_step, beta, y, y_step);
}
void Gemv(CBLAS_TRANSPOSE transpose, long long rows, long long cols, double alpha, const double* m,
          blasint leading, const double* x, long long x_step, double beta, double* y,
          long long y_step) {
  cblas_dgemv(CblasRowMajor, transpose, rows, cols, alpha, m, leading, x, x_step, beta, y, y_step);
}

// C = alpha A.B + beta C by OpenBLAS. A C of one row (or one column) is a
// matrix-vector product: GEMV reads B (or A) once where it is, where GEMM
// would first pack the whole of it into panels, which costs more than the
// product itself when A has one row.
template <typename T>
void CallGemm(const Operand<T>& a, const Operand<T>& b, long long m, long long n, long long k,
              T alpha, T beta, T* c, long long c_row) {
  beta = ClearForBeta(beta, c, m, n, c_row);
  if (m == 1) {  // c = B^T a; a's elements are a.leading apart when it is stored transposed
    const long long step = a.transpose == CblasNoTrans ? 1 : a.leading;
    if (b.transpose == CblasNoTrans) {
      Gemv(CblasTrans, k, n, alpha, b.data, b.leading, a.data, step, beta, c, 1);
    } else {
      Gemv(CblasNoTrans, n, k, alpha, b.data, b.leading, a.data, step, beta, c, 1);
    }
  } else if (n == 1) {  // c = A b
    const long long step = b.transpose == CblasNoTrans ? b.leading : 1;
    if (a.transpose == CblasNoTrans) {
      Gemv(CblasNoTrans, m, k, alpha, a.data, a.leading, b.data, step, beta, c, c_row);
    } else {
      Gemv(CblasTrans, k, m, alpha, a.data, a.leading, b.data, step, beta, c, c_row);
    }
  } else {
    OpenBlasGemm(a, b, m, n, k, alpha, beta, c, c_row);
  }
}

// C = alpha A.B + beta C by OpenBLAS, with B copied row-major first when
// `copy_b`: on the calling thread when `pool` is null, else split along
// C's longer side, each block an independent GEMM on a slice of A (rows)
// or of B (columns), so no thread packs the whole of the larger operand
// twice.
template <typename T>
void BlasGemm(ThreadPool* pool, bool copy_b, long long m, long long n, long long k, T alpha,
              const T* a, long long a_row, long long a_col, const T* b, long long b_row,
              long long b_col, T beta, T* c, long long c_row) {
  const Operand<T> left = MakeOperand(a, m, k, a_row, a_col, 0);
  if (pool == nullptr) {
    CallGemm(left, MakeOperand(b, k, n, b_row, b_col, 1, copy_b), m, n, k, alpha, beta, c, c_row);
  } else if (m >= n) {
    const Operand<T> right = MakeOperand(b, k, n, b_row, b_col, 1, copy_b);
    pool->ParallelFor(m, std::max(1LL, m / pool->threads()), [&](int64_t begin, int64_t end) {
      Operand<T> slice = left;
      slice.data += left.transpose == CblasNoTrans ? begin * left.leading : begin;
      CallGemm(slice, right, end - begin, n, k, alpha, beta, c + begin * c_row, c_row);
    });
  } else {
    // Each block lays out (copies, if asked) its own columns of B.
    pool->ParallelFor(n, std::max(1LL, n / pool->threads()), [&](int64_t begin, int64_t end) {
      CallGemm(left, MakeOperand(b + begin * b_col, k, end - begin, b_row, b_col, 1, copy_b), m,
               end - begin, k, alpha, beta, c + begin, c_row);
    });
  }
}

// C = A.B by oneDNN, split as BlasGemm splits it; a block oneDNN does not
// run, OpenBLAS does.
void DnnlGemm(ThreadPool* pool, long long m, long long n, long long k, const float* a,
              long long a_row, long long a_col, const float* b, long long b_row, long long b_col,
              float* c, long long c_row) {
  auto block = [&](long long row, long long rows, long long col, long long cols) {
    const float* block_a = a + row * a_row;
    const float* block_b = b + col * b_col;
    float* block_c = c + row * c_row + col;
    if (!MatmulF32({rows, cols, k, a_row, a_col, b_row, b_col, c_row}, block_a, block_b, block_c)) {
      BlasGemm<float>(nullptr, false, rows, cols, k, 1.0f, block_a, a_row, a_col, block_b, b_row,
                      b_col, 0.0f, block_c, c_row);
    }
  };
  if (pool == nullptr) {
    block(0, m, 0, n);
  } else if (m >= n) {
    pool->ParallelFor(m, std::max(1LL, m / pool->threads()),
                      [&](int64_t begin, int64_t end) { block(begin, end - begin, 0, n); });
  } else {
    pool->ParallelFor(n, std::max(1LL, n / pool->threads()),
                      [&](int64_t begin, int64_t end) { block(0, m, begin, end - begin); });
  }
}

// C = alpha A.B + beta C the way `way`, as BlasGemm splits it.
template <typename T>
void Multiply(GemmWay way, ThreadPool* pool, long long m, long long n, long long k, T alpha,
              const T* a, long long a_row, long long a_col, const T* b, long long b_row,
              long long b_col, T beta, T* c, long long c_row) {
  if constexpr (std::is_same_v<T, float>) {
    if (way == GemmWay::kOneDnn) {  // only offered for alpha 1, beta 0
      DnnlGemm(pool, m, n, k, a, a_row, a_col, b, b_row, b_col, c, c_row);
      return;
    }
  }
  BlasGemm(pool, way == GemmWay::kOpenBlasCopiedB, m, n, k, alpha, a, a_row, a_col, b, b_row, b_col,
           beta, c, c_row);
}

template <typename T>
void Gemm(void* context, long long m, long long n, long long k, T alpha, const T* a,
          long long a_row, long long a_col, const T* b, long long b_row, long long b_col, T beta,
          T* c, long long c_row) {
  const OneBlasThread one_blas_thread;
  if (m <= 0 || n <= 0) return;
  Runtime& runtime = *static_cast<Runtime*>(context);
  ThreadPool& pool = runtime.pool();
  const bool serial = m * n * k < kParallelGemmWork || pool.threads() == 1 || std::max(m, n) < 2;
  const GemmWays::Shape shape =
      ShapeOf(1, m, n, k, a_row, a_col, b_row, b_col, alpha, beta, serial ? 1 : pool.threads());
  runtime.gemm_ways().Run(shape, [&](GemmWay way) {
    Multiply(way, serial ? nullptr : &pool, m, n, k, alpha, a, a_row, a_col, b, b_row, b_col, beta,
             c, c_row);
  });
}

// C[i] = A[i].B[i]. A batch of small products (each below the split
// threshold, together worth splitting) is spread across the pool by batch
// element, each one single-threaded GEMM, the way chosen for the batch;
// otherwise one Gemm per element, each split as Gemm sees fit.
template <typename T>
void BatchedGemm(void* context, long long batch, long long m, long long n, long long k, const T* a,
                 long long a_batch, long long a_row, long long a_col, const T* b, long long b_batch,
                 long long b_row, long long b_col, T* c, long long c_batch, long long c_row) {
  const OneBlasThread one_blas_thread;
  Runtime& runtime = *static_cast<Runtime*>(context);
  ThreadPool& pool = runtime.pool();
  if (batch <= 0 || m <= 0 || n <= 0) return;
  if (batch < 2 || pool.threads() == 1 || m * n * k >= kParallelGemmWork ||
      batch * m * n * k < kParallelGemmWork / 4) {
    for (long long i = 0; i < batch; ++i) {
      Gemm<T>(context, m, n, k, T(1), a + i * a_batch, a_row, a_col, b + i * b_batch, b_row, b_col,
              T(0), c + i * c_batch, c_row);
    }
    return;
  }
  const GemmWays::Shape shape =
      ShapeOf(batch, m, n, k, a_row, a_col, b_row, b_col, T(1), T(0), pool.threads());
  runtime.gemm_ways().Run(shape, [&](GemmWay way) {
    pool.ParallelFor(batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        Multiply<T>(way, nullptr, m, n, k, T(1), a + i * a_batch, a_row, a_col, b + i * b_batch,
                    b_row, b_col, T(0), c + i * c_batch, c_row);
      }
    });
  });
}

// C = A.A^T: the upper triangle by BLAS (half the multiplies), mirrored.
void SyrkF32(void* context, long long n, long long k, const float* a, long long a_row,
             long long a_col, float* c, long long c_row) {
  const OneBlasThread one_blas_thread;
  if (n <= 0) return;
  const Operand<float> left = MakeOperand(a, n, k, a_row, a_col, 0);
  ThreadPool* pool = &static_cast<Runtime*>(context)->pool();
  if (n * n * k < 2 * kParallelGemmWork || pool->threads() == 1) {
    const float beta = ClearForBeta(0.0f, c, n, n, c_row);
    cblas_ssyrk(CblasRowMajor, CblasUpper, left.transpose, n, k, 1.0f, left.data, left.leading,
                beta, c, c_row);
  } else {
    // Row blocks of the upper triangle, one per thread, of equal work (rows
    // near the top are longer: rows [0, r) hold n r - r^2 / 2 elements, so
    // block t ends at n (1 - sqrt(1 - (t + 1) / T))). Block [begin, end)
    // is a syrk on its diagonal tile and a GEMM against the columns right
    // of it.
    const int blocks = pool->threads();
    auto row = [&](int t) {
      return t >= blocks ? n : std::llround(n * (1 - std::sqrt(1 - double(t) / blocks)));
    };
    pool->ParallelFor(blocks, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        const long long begin = row(t), end = row(t + 1);
        if (begin == end) continue;
        Operand<float> rows = left;
        rows.data += left.transpose == CblasNoTrans ? begin * left.leading : begin;
        const float beta =
            ClearForBeta(0.0f, c + begin * c_row + begin, end - begin, n - begin, c_row);
        cblas_ssyrk(CblasRowMajor, CblasUpper, rows.transpose, end - begin, k, 1.0f, rows.data,
                    rows.leading, beta, c + begin * c_row + begin, c_row);
        if (end < n) {
          Operand<float> rest = left;
          rest.data += left.transpose == CblasNoTrans ? end * left.leading : end;
          // C[begin:end, end:n] = A[begin:end] . A[end:n]^T
          const CBLAS_TRANSPOSE flip = rest.transpose == CblasNoTrans ? CblasTrans : CblasNoTrans;
          cblas_sgemm(CblasRowMajor, rows.transpose, flip, end - begin, n - end, k, 1.0f, rows.data,
                      rows.leading, rest.data, rest.leading, beta, c + begin * c_row + end, c_row);
        }
      }
    });
  }
  // Mirror the upper triangle into the lower one, in 8 x 8 tiles: a column
  // walk of a row-major matrix whose rows are a multiple of 4 KiB apart
  // maps every element to one L1 set, which holds 8 lines, so a tile
  // wider than 8 rows evicts its own lines. Tile row ti copies ti + 1
  // tiles, so the first r tile rows hold ~r^2 of the work: thread t takes
  // tile rows up to tiles sqrt((t + 1) / T).
  constexpr long long kTile = 8;
  const long long tiles = (n + kTile - 1) / kTile;
  auto mirror = [&](int64_t first_tile, int64_t last_tile) {
    for (long long ti = first_tile; ti < last_tile; ++ti) {
      const long long i_end = std::min(n, (ti + 1) * kTile);
      for (long long j0 = 0; j0 <= ti * kTile; j0 += kTile) {
        for (long long i = ti * kTile; i < i_end; ++i) {
          const long long j_end = std::min(i, j0 + kTile);
          for (long long j = j0; j < j_end; ++j) c[i * c_row + j] = c[j * c_row + i];
        }
      }
    }
  };
  if (n * n < kParallelGemmWork / 8 || pool->threads() == 1) {
    mirror(0, tiles);
  } else {
    const int parts = pool->threads();
    auto tile_row = [&](int t) {
      return t >= parts ? tiles : std::llround(tiles * std::sqrt(double(t) / parts));
    };
    pool->ParallelFor(parts, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) mirror(tile_row(t), tile_row(t + 1));
    });
  }
}

// Python's modulo, as eager's remainder: fmod moved to the divisor's sign.
template <typename T>
T Remainder(T a, T b) {
  T mod = std::fmod(a, b);
  if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
  return mod;
}

// Python's floor division, as eager's floor_divide and div(rounding_mode=
// "floor") on floating types (c10's div_floor_floating): the quotient of
// a - fmod(a, b), rounded to the nearer integer when it is off by more than
// a half; IEEE's a / b for a zero divisor; a zero takes the sign of a / b.
template <typename T>
T FloorDivide(T a, T b) {
  if (b == 0) return a / b;
  const T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
  if (div == 0) return std::copysign(T(0), a / b);
  T floor = std::floor(div);
  if (div - floor > T(0.5)) floor += T(1);
  return floor;
}

void ParallelFor(void* context, long long n, long long grain, kiln_parallel_body body,
                 void* closure) {
  static_cast<Runtime*>(context)->pool().ParallelFor(
      n, grain, [&](int64_t begin, int64_t end) { body(closure, begin, end); });
}

// The calling thread's scratch for row buffers of symbolic length. A
// kernel cannot report an error: out of memory here ends the process, as
// std::bad_alloc would.
void* ThreadScratch(void*, long long bytes) {
  thread_local GrowingBuffer rows;
  void* block = rows.Get(bytes);
  if (block == nullptr && bytes > 0) {
    fprintf(stderr, "kiln runtime: out of memory for %lld bytes of row buffers\n", bytes);
    abort();
  }
  return block;
}

// What the last index_error, linalg_error or check_error on this thread said
// (Runtime::TakeRunError).
thread_local absl::Status run_error;

// An IndexError, as eager's, but for gather's, which eager raises as a
// RuntimeError.
void IndexError(void*, const char* op, long long dim, long long index, long long size) {
  const std::string message = std::string(op) + ": index " + std::to_string(index) +
                              " is out of bounds for dim " + std::to_string(dim) + " with size " +
                              std::to_string(size);
  run_error =
      std::string(op) == "gather" ? EagerRuntimeError(message) : absl::OutOfRangeError(message);
}

// ValueError and IndexError are the codes the Python client raises them
// for (InvalidArgument, OutOfRange).
void CheckError(void*, int error, const char* message) {
  if (error == KILN_CHECK_VALUE_ERROR) {
    run_error = absl::InvalidArgumentError(message);
  } else if (error == KILN_CHECK_INDEX_ERROR) {
    run_error = absl::OutOfRangeError(message);
  } else {
    run_error = EagerRuntimeError(message);
  }
}

void LinalgErrorOf(void*, const char* api_name, long long batch_index, int info) {
  run_error = LinalgError(api_name, batch_index, info);
}

int ConvF32(void* context, const kiln_conv* conv, const float* src, const float* weights,
            const float* bias, float* dst) {
  return ConvolveF32(static_cast<Runtime*>(context)->pool(), *conv, src, weights, bias, dst);
}

int FftF32(void*, const kiln_fft* fft, const float* in, float* out) { return Fft(*fft, in, out); }
int FftF64(void*, const kiln_fft* fft, const double* in, double* out) { return Fft(*fft, in, out); }
int Linalg(void* context, const kiln_linalg* call, const void* const* operands,
           void* const* results) {
  const OneBlasThread one_blas_thread;
  ThreadPool& pool = static_cast<Runtime*>(context)->pool();
  if (IsQrRoutine(call->routine)) return RunQr(pool, *call, operands, results);
  if (call->routine == KILN_LINALG_LSTSQ) return RunLstsq(pool, *call, operands, results);
  if (call->routine == KILN_LINALG_MATRIX_EXP) return RunMatrixExp(pool, *call, operands, results);
  if (IsLdlRoutine(call->routine)) return RunLdl(pool, *call, operands, results);
  if (call->routine == KILN_LINALG_EIG) return RunEig(pool, *call, operands, results);
  return RunLinalg(pool, *call, operands, results);
}

void RandomOf(void*, const kiln_random* call, const unsigned char* state, unsigned char* state_out,
              void* values) {
  DrawRandom(*call, state, state_out, values);
}

void SelectRowsOf(void* context, const kiln_select* select, const void* x, long long* out) {
  SelectRows(static_cast<Runtime*>(context)->pool(), *select, x, reinterpret_cast<int64_t*>(out));
}

int DefaultThreads() {
  if (const char* env = getenv("KILN_NUM_THREADS")) {
    const int threads = atoi(env);
    if (threads > 0) return threads;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

void* GrowingBuffer::Get(int64_t bytes) {
  if (bytes > size_) {
    char* grown = static_cast<char*>(malloc(bytes + 63));  // aligned by hand below
    if (grown == nullptr) return nullptr;
    free(block_);
    block_ = grown;
    size_ = bytes;
  }
  return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(block_) + 63) & ~uintptr_t{63});
}

Runtime::Runtime(int threads, GemmLibraries gemm_libraries)
    : pool_(threads > 0 ? threads : DefaultThreads()), gemm_ways_(gemm_libraries) {
  table_.abi_version = KILN_ABI_VERSION;
  table_.reserved = 0;
  table_.context = this;
  table_.parallel_for = ParallelFor;
  table_.gemm_f32 = Gemm<float>;
  table_.gemm_f64 = Gemm<double>;
  table_.syrk_f32 = SyrkF32;
  table_.bmm_f32 = BatchedGemm<float>;
  table_.bmm_f64 = BatchedGemm<double>;
  // glibc's libm: the one source of transcendentals (see kiln_abi.h).
  static_assert(KILN_MATH_COUNT <= 32 && KILN_MATH2_COUNT <= 8, "grow the math tables");
  float (*const f32[KILN_MATH_COUNT])(float) = {
      expf,  expm1f, logf,  log1pf, tanhf,  erff,   sinf,   cosf,  tanf,   asinf,
      acosf, atanf,  sinhf, coshf,  asinhf, acoshf, atanhf, log2f, log10f, exp2f};
  double (*const f64[KILN_MATH_COUNT])(double) = {exp,   expm1, log,   log1p, tanh,  erf,  sin,
                                                  cos,   tan,   asin,  acos,  atan,  sinh, cosh,
                                                  asinh, acosh, atanh, log2,  log10, exp2};
  for (int i = 0; i < KILN_MATH_COUNT; ++i) {
    table_.math_f32[i] = f32[i];
    table_.math_f64[i] = f64[i];
  }
  float (*const f32_2[KILN_MATH2_COUNT])(float, float) = {powf, atan2f, fmodf, Remainder<float>,
                                                          FloorDivide<float>};
  double (*const f64_2[KILN_MATH2_COUNT])(double, double) = {pow, atan2, fmod, Remainder<double>,
                                                             FloorDivide<double>};
  for (int i = 0; i < KILN_MATH2_COUNT; ++i) {
    table_.math2_f32[i] = f32_2[i];
    table_.math2_f64[i] = f64_2[i];
  }
  table_.thread_scratch = ThreadScratch;
  table_.conv_f32 = ConvF32;
  table_.fft_f32 = FftF32;
  table_.fft_f64 = FftF64;
  table_.index_error = IndexError;
  table_.linalg = Linalg;
  table_.select_rows = SelectRowsOf;
  table_.linalg_error = LinalgErrorOf;
  table_.random = RandomOf;
  table_.check_error = CheckError;
}

absl::Status Runtime::TakeRunError() { return std::exchange(run_error, absl::OkStatus()); }

Runtime& Runtime::Default() {
  static Runtime* const runtime = new Runtime();
  return *runtime;
}

}  // namespace kiln
