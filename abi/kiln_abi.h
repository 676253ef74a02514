/* The artifact ABI: what a Kiln artifact exports and what it calls back.
 *
 * Plain C, no includes: the code generator pastes this header verbatim into
 * every generated source (artifacts are freestanding), and the client's
 * loader and runtime include it. Change anything here -> bump
 * KILN_ABI_VERSION (it enters every cache key).
 *
 * Entry points (extern "C", visibility default; everything else hidden):
 *   const kiln_artifact_info* kiln_info(void);
 *   int64_t kiln_scratch_bytes(const int64_t* symbols);
 *   int32_t kiln_run(const kiln_runtime* rt, const int64_t* symbols,
 *                    void* const* inputs, void* const* outputs, void* scratch);
 * `symbols` holds the value of each size symbol, in the signature's order.
 * kiln_run returns 0 on success. Inputs follow the strides the artifact's
 * guards state; outputs are contiguous, caller-allocated, and never overlap
 * an input; an output the signature's output_aliases pair with input i is
 * written in input i's memory, and outputs[k] is ignored for it. Scratch is
 * kiln_scratch_bytes(symbols) bytes (info->scratch_bytes when the graph has
 * no symbols; -1 there when it depends on them), 64-byte aligned. kiln_run
 * returns 2 when a runtime service failed (the runtime has told stderr why:
 * no oneDNN for a convolution), and KILN_RUN_INDEX_ERROR when an index
 * tensor named a position outside its dim (after calling the runtime's
 * index_error on the calling thread; the kernel that checks it has written
 * nothing), and KILN_RUN_LINALG_ERROR when a LAPACK call's info said its
 * matrix was singular (or not positive definite, or did not converge) where
 * eager raises (after calling the runtime's linalg_error), and
 * KILN_RUN_CHECK_ERROR when a value failed a check eager makes (after
 * calling the runtime's check_error).
 */
#ifndef KILN_ABI_H_
#define KILN_ABI_H_

#define KILN_ABI_VERSION 12
#define KILN_RUN_INDEX_ERROR 3
#define KILN_RUN_LINALG_ERROR 4
#define KILN_RUN_CHECK_ERROR 5

typedef long long kiln_int64;
typedef unsigned int kiln_uint32;
typedef int kiln_int32;

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_artifact_info {
  kiln_uint32 abi_version;
  kiln_uint32 num_inputs;
  kiln_uint32 num_outputs;
  kiln_uint32 num_symbols;
  kiln_int64 scratch_bytes;
} kiln_artifact_info;

/* Runs body(closure, begin, end) over chunks covering [0, n), each at least
 * `grain` long except the last, possibly on several threads; returns when
 * all chunks are done. */
typedef void (*kiln_parallel_body)(void* closure, kiln_int64 begin, kiln_int64 end);

/* A convolution as torch's (dilation 1 is dense) over `spatial` (1 to 3)
 * dims. Every tensor is plain and strided, strides in elements: src is
 * [batch, in_channels, in_size...], weights [out_channels, in_channels /
 * groups, kernel...], dst [batch, out_channels, out_size...]; bias is
 * [out_channels] with stride 1, or null. Padding is the same on both sides.
 *
 * transposed = 1 makes it torch's transposed convolution (conv_transpose1d
 * to 3d: the gradient of a convolution with respect to its input). Then
 * weights are [in_channels, out_channels / groups, kernel...], padding is
 * cut from both ends of each spatial dim of the full result, and
 * out_size = (in_size - 1) * stride - 2 * padding + dilation * (kernel - 1)
 * + 1 + output_padding, where torch's output_padding (at least 0, less than
 * stride or dilation) adds positions at the high end; out_size implies it.
 * transposed = 0 is the forward convolution above. */
typedef struct kiln_conv {
  kiln_int64 spatial;
  kiln_int64 batch, in_channels, out_channels, groups;
  kiln_int64 in_size[3], out_size[3], kernel[3];
  kiln_int64 stride[3], padding[3], dilation[3];
  kiln_int64 src_strides[5], weight_strides[5], dst_strides[5];
  kiln_int64 transposed;
} kiln_conv;

/* A batch of discrete Fourier transforms over `rank` (1 to 8) dims, as
 * FFTW's guru interface states one: dims[d] is the logical length of
 * transformed dim d (for c2r, the real result's), batch[b] the extent of
 * each other dim; strides are in elements of the array's own type (a
 * complex element is a (real, imaginary) pair). kind 0 is complex to
 * complex (sign -1 forward, +1 backward), 1 real to complex and 2 complex
 * to real, where the last transformed dim holds dims[rank - 1] / 2 + 1
 * complex elements. Every result is multiplied by `scale`. */
typedef struct kiln_fft {
  kiln_int32 kind, sign, rank, batch_rank;
  kiln_int64 dims[8], in_strides[8], out_strides[8];
  kiln_int64 batch[8], batch_in_strides[8], batch_out_strides[8];
  double scale;
} kiln_fft;
/* Random numbers (kiln_runtime.random; client/runtime/random.h): `count`
 * contiguous values drawn as torch's CPU generator draws them, from its
 * state (torch.get_rng_state()'s 5056 bytes). */
typedef struct kiln_random {
  kiln_int32 distribution; /* KILN_RANDOM_* */
  kiln_int32 float64;      /* 0: float32 values, 1: float64 */
  kiln_int64 count;
  kiln_int64 seed; /* SEED's */
  double a, b;     /* UNIFORM: from, to; NORMAL: mean, std */
} kiln_random;
enum { KILN_RANDOM_SEED = 0, KILN_RANDOM_UNIFORM, KILN_RANDOM_NORMAL };
/* SERIAL_NORMAL: float64 values, torch's normal_distribution<double> (one
 * pair per two values, the second cached) at any count; a: mean, b: std.
 * INTEGER: int64 values, each a 32-bit output (a 64-bit pair when range is 0
 * or at least 2^28) modulo range; seed holds range's uint64 bits, 0 for
 * 2^64 (no modulo). */
enum { KILN_RANDOM_SERIAL_NORMAL = KILN_RANDOM_NORMAL + 1, KILN_RANDOM_INTEGER };

/* A LAPACK factorization or solve over a batch of matrices
 * (client/runtime/linalg.h lists the routines, their operands and results).
 * Operand i's element (b, r, c) is at operands[i][b * strides[i][0] +
 * r * strides[i][1] + c * strides[i][2]], strides in elements; a vector
 * operand (pivots) uses strides[i][0] and [1]. Results are contiguous; a
 * null result is not written. */
typedef struct kiln_linalg {
  kiln_int64 routine; /* KILN_LINALG_* */
  kiln_int64 float64; /* 0: float32 operands and results, 1: float64 */
  kiln_int64 batch, m, n, k;
  kiln_int64 flags; /* KILN_LINALG_UPPER, ... */
  kiln_int64 strides[3][3];
} kiln_linalg;

/* Services an artifact may call. The runtime owns every thread. */
/* A selection along the rows of a [rows, n] tensor whose element (r, j) is
 * at x[r * row_stride + j * column_stride] (strides in elements), in eager
 * PyTorch's order for its op: NaN sorts as the largest. `out` is
 * [rows, width] int64, row-major: the positions along each row of
 *   SORT       every element (width n), stable, descending if asked;
 *   TOPK       the k largest (descending) or smallest, torch's partial
 *              sort or selection (width k; `sorted` as topk's);
 *   KTHVALUE   the k-th smallest, k from 1 (width 1);
 *   MEDIAN     the lower median, or the first NaN (width 1);
 *   NANMEDIAN  the lower median of the non-NaN elements (width 1);
 *   MODE       the most frequent value, the smallest among equally frequent
 *              ones (width 1).
 * Equal elements come in eager's order (client/runtime/sort.h). */
typedef struct kiln_select {
  kiln_int32 select;  /* KILN_SELECT_* */
  kiln_int32 element; /* KILN_ELEMENT_* */
  kiln_int64 rows, n;
  kiln_int64 row_stride, column_stride;
  kiln_int64 k;
  kiln_int32 descending;
  kiln_int32 sorted;
} kiln_select;

enum {
  KILN_SELECT_SORT = 0,
  KILN_SELECT_TOPK,
  KILN_SELECT_KTHVALUE,
  KILN_SELECT_MEDIAN,
  KILN_SELECT_NANMEDIAN,
  KILN_SELECT_MODE
};
enum { KILN_ELEMENT_F32 = 0, KILN_ELEMENT_F64, KILN_ELEMENT_I64, KILN_ELEMENT_BOOL };

typedef struct kiln_runtime {
  kiln_uint32 abi_version;
  kiln_uint32 reserved;
  void* context;
  void (*parallel_for)(void* context, kiln_int64 n, kiln_int64 grain, kiln_parallel_body body,
                       void* closure);
  /* C = alpha * A.B + beta * C, where element (i, j) of A is
   * a[i * a_row + j * a_col] (likewise B), and C is row-major with row
   * stride c_row. Any strides; the runtime picks the BLAS layout. */
  void (*gemm_f32)(void* context, kiln_int64 m, kiln_int64 n, kiln_int64 k, float alpha,
                   const float* a, kiln_int64 a_row, kiln_int64 a_col, const float* b,
                   kiln_int64 b_row, kiln_int64 b_col, float beta, float* c, kiln_int64 c_row);
  void (*gemm_f64)(void* context, kiln_int64 m, kiln_int64 n, kiln_int64 k, double alpha,
                   const double* a, kiln_int64 a_row, kiln_int64 a_col, const double* b,
                   kiln_int64 b_row, kiln_int64 b_col, double beta, double* c, kiln_int64 c_row);
  /* C = A.A^T (n x n), A is n x k with element (i, j) at a[i*a_row + j*a_col]:
   * half the multiplies of the GEMM (x @ x.T). C is row-major, c_row. */
  void (*syrk_f32)(void* context, kiln_int64 n, kiln_int64 k, const float* a, kiln_int64 a_row,
                   kiln_int64 a_col, float* c, kiln_int64 c_row);
  /* C[i] = A[i].B[i] for i in [0, batch): A[i] starts at a + i * a_batch
   * (likewise B, C), each as in gemm_f32. The runtime spreads the batch
   * across its threads. */
  void (*bmm_f32)(void* context, kiln_int64 batch, kiln_int64 m, kiln_int64 n, kiln_int64 k,
                  const float* a, kiln_int64 a_batch, kiln_int64 a_row, kiln_int64 a_col,
                  const float* b, kiln_int64 b_batch, kiln_int64 b_row, kiln_int64 b_col, float* c,
                  kiln_int64 c_batch, kiln_int64 c_row);
  void (*bmm_f64)(void* context, kiln_int64 batch, kiln_int64 m, kiln_int64 n, kiln_int64 k,
                  const double* a, kiln_int64 a_batch, kiln_int64 a_row, kiln_int64 a_col,
                  const double* b, kiln_int64 b_batch, kiln_int64 b_row, kiln_int64 b_col,
                  double* c, kiln_int64 c_batch, kiln_int64 c_row);
  float (*math_f32[32])(float); /* indexed by KILN_MATH_* */
  double (*math_f64[32])(double);
  float (*math2_f32[8])(float, float); /* indexed by KILN_MATH2_* */
  double (*math2_f64[8])(double, double);
  /* At least `bytes` bytes, 64-byte aligned, private to the calling thread
   * and valid until that thread calls again: where a kernel group keeps
   * its row buffers when their length is symbolic (one call per chunk). */
  void* (*thread_scratch)(void* context, kiln_int64 bytes);
  /* dst = conv(src, weights) + bias, float32, transposed when
   * conv->transposed is 1 (client/runtime/convolution.h: oneDNN, loaded on
   * first use). Returns 0, or nonzero when the runtime cannot convolve. */
  kiln_int32 (*conv_f32)(void* context, const kiln_conv* conv, const float* src,
                         const float* weights, const float* bias, float* dst);
  /* out = fft(in) (client/runtime/fft.h: FFTW), in float32 or float64
   * parts. `in` is only read; in and out never overlap. Returns 0, or
   * nonzero when the runtime cannot transform. */
  kiln_int32 (*fft_f32)(void* context, const kiln_fft* fft, const float* in, float* out);
  kiln_int32 (*fft_f64)(void* context, const kiln_fft* fft, const double* in, double* out);
  /* Told, on the thread that called kiln_run, that `op` found `index`
   * outside [0, size) of dim `dim`; kiln_run then returns
   * KILN_RUN_INDEX_ERROR. `op` is a static string ("index_copy"). */
  void (*index_error)(void* context, const char* op, kiln_int64 dim, kiln_int64 index,
                      kiln_int64 size);
  /* call->routine on each matrix of the batch (kiln_linalg). Returns 0, or
   * nonzero when the runtime has no memory for LAPACK's workspace. A
   * singular or indefinite matrix is not an error: the routine's info
   * result says so, as eager's does. */
  kiln_int32 (*linalg)(void* context, const kiln_linalg* call, const void* const* operands,
                       void* const* results);
  /* kiln_select above, rows spread across the runtime's threads. */
  void (*select_rows)(void* context, const kiln_select* select, const void* x, kiln_int64* out);
  /* Told, on the thread that called kiln_run, that the LAPACK info of
   * matrix `batch_index` (-1: the op's one matrix) of the op `api_name`
   * ("linalg.inv", as eager's _linalg_check_errors names it) is `info`,
   * not 0; kiln_run then returns KILN_RUN_LINALG_ERROR. `api_name` is a
   * static string. */
  void (*linalg_error)(void* context, const char* api_name, kiln_int64 batch_index,
                       kiln_int32 info);
  /* Random numbers: `call` on the generator `state` holds, serially on the
   * calling thread; the values drawn go to `values` and the generator after
   * them to `state_out`, each when not null (kiln_random). */
  void (*random)(void* context, const kiln_random* call, const unsigned char* state,
                 unsigned char* state_out, void* values);
  /* Told, on the thread that called kiln_run, that a check eager makes on
   * values failed (kiln_check.check: negative weights, a start outside its
   * dim); kiln_run then returns KILN_RUN_CHECK_ERROR. `error` is the
   * exception eager raises (KILN_CHECK_*), `message` its static text. */
  void (*check_error)(void* context, kiln_int32 error, const char* message);
} kiln_runtime;

/* The exception a failed kiln_check.check raises, as eager's. */
enum { KILN_CHECK_RUNTIME_ERROR = 0, KILN_CHECK_VALUE_ERROR, KILN_CHECK_INDEX_ERROR };

/* Transcendentals: one named source for every artifact (the client
 * runtime's table, glibc's libm today), so an artifact's numerics do not
 * depend on the compiler's choices. Indices into kiln_runtime.math_f32/f64. */
enum {
  KILN_MATH_EXP = 0,
  KILN_MATH_EXPM1,
  KILN_MATH_LOG,
  KILN_MATH_LOG1P,
  KILN_MATH_TANH,
  KILN_MATH_ERF,
  KILN_MATH_SIN,
  KILN_MATH_COS,
  KILN_MATH_TAN,
  KILN_MATH_ASIN,
  KILN_MATH_ACOS,
  KILN_MATH_ATAN,
  KILN_MATH_SINH,
  KILN_MATH_COSH,
  KILN_MATH_ASINH,
  KILN_MATH_ACOSH,
  KILN_MATH_ATANH,
  KILN_MATH_LOG2,
  KILN_MATH_LOG10,
  KILN_MATH_EXP2,
  KILN_MATH_COUNT
};
/* Functions of two arguments: kiln_runtime.math2_f32/f64. REMAINDER and
 * FLOOR_DIVIDE are eager PyTorch's (Python's modulo and floor division,
 * from fmod). */
enum {
  KILN_MATH2_POW = 0,
  KILN_MATH2_ATAN2,
  KILN_MATH2_FMOD,
  KILN_MATH2_REMAINDER,
  KILN_MATH2_FLOOR_DIVIDE,
  KILN_MATH2_COUNT
};

/* kiln_linalg.routine. */
enum {
  KILN_LINALG_LU = 0,
  KILN_LINALG_LU_SOLVE,
  KILN_LINALG_CHOLESKY,
  KILN_LINALG_CHOLESKY_SOLVE,
  KILN_LINALG_CHOLESKY_INVERSE,
  KILN_LINALG_TRIANGULAR_SOLVE,
  KILN_LINALG_SVD,
  KILN_LINALG_GEQRF,
  KILN_LINALG_HOUSEHOLDER_PRODUCT,
  KILN_LINALG_ORMQR,
  KILN_LINALG_LSTSQ,
  KILN_LINALG_MATRIX_EXP,
  KILN_LINALG_EIGH,
  /* Bunch-Kaufman LDL^T and the general eigendecomposition
   * (client/runtime/ldl.h, eig.h). */
  KILN_LINALG_LDL_FACTOR,
  KILN_LINALG_LDL_SOLVE,
  KILN_LINALG_EIG,
  KILN_LINALG_COUNT
};
/* kiln_linalg.flags. */
enum {
  KILN_LINALG_UPPER = 1,   /* the upper triangle holds the factor, or EIGH's A (else the lower) */
  KILN_LINALG_UNIT = 2,    /* a triangular solve's diagonal is taken as ones */
  KILN_LINALG_ADJOINT = 4, /* solve A^T X = B (LU_SOLVE); Q^T C (ORMQR) */
  KILN_LINALG_FULL = 8,    /* SVD: U m x m and Vh n x n (else m x k and k x n) */
  KILN_LINALG_VECTORS = 16, /* SVD: U and Vh too (else S only); EIGH: the eigenvectors too */
  KILN_LINALG_GELS = 32,    /* LSTSQ's driver (gelsy without one of these) */
  KILN_LINALG_GELSD = 64,
  KILN_LINALG_GELSS = 128
};

typedef const kiln_artifact_info* (*kiln_info_fn)(void);
typedef kiln_int64 (*kiln_scratch_bytes_fn)(const kiln_int64* symbols);
typedef kiln_int32 (*kiln_run_fn)(const kiln_runtime* rt, const kiln_int64* symbols,
                                  void* const* inputs, void* const* outputs, void* scratch);

#ifdef __cplusplus
}
#endif

#endif /* KILN_ABI_H_ */
