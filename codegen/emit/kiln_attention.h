/* Single-query attention (codegen/ops/attention.cc), pasted into a generated
 * source that calls it: for each (batch, head) row,
 *   out = softmax(q.K^T * scale + mask) V,  lse = logsumexp(q.K^T * scale + mask)
 * in one pass over the keys with an online softmax (flash decoding): keys in
 * blocks of KILN_ATTENTION_BLOCK, the running maximum and sum rescaled once
 * per block. The rows, and for few rows also ranges of keys, are spread
 * across the runtime's threads; the ranges of a row merge at the end.
 *
 * A key whose mask entry is -inf is never read, from K or from V: its
 * softmax weight is exp(-inf) = 0 exactly, so skipping it changes no sum.
 * With `length`, a row attends to its keys j < bound only, the bound read
 * from the position tensor (length[n * length_stride], plus one when
 * `inclusive`, clamped to [0, keys]): neither keys, values nor mask entries
 * past it are read, so a step costs O(bound). It is the prefix mask's
 * result exactly: the keys past the bound would have weight exp(-inf) = 0.
 * A row whose every key is masked (or whose bound is 0) gives zeros and
 * lse = -inf, as eager's kernel does.
 *
 * Paged (key_table non-null): keys and values live in pools of blocks of
 * `block` positions shared by the batch, and batch row n's key j is row
 * j % block of pool block key_table[(n * blocks + j / block) *
 * key_table_stride] (values likewise through value_table): strides k[0]
 * and v[0] step blocks of the pool, k[2] and v[2] positions in a block.
 * The bound is at most keys = blocks * block, the table row's capacity, so
 * a length past it reads no entry past the row. The graph checked every
 * entry against the pool before (kiln.check_index, eager's IndexError); an
 * entry outside [0, pool_blocks) would read zeros here, never memory. Only
 * the blocks below a row's bound are read: no copy of the table's blocks.
 * Uses kiln_math.h. */
#define KILN_ATTENTION_BLOCK 32
#define KILN_ATTENTION_MAX_SPLITS 16
#define KILN_ATTENTION_MAX_SPLIT_WIDTH 256
#define KILN_ATTENTION_MAX_WIDTH 1024 /* value_width at most (the op's rule) */

typedef struct kiln_attention {
  kiln_int64 batch, heads, keys, width, value_width;
  float scale;
  const float* query; /* [batch, heads, width]: strides q[0..2] */
  const float* key;   /* [batch, heads, keys, width]: strides k[0..3] */
  const float* value; /* [batch, heads, keys, value_width]: strides v[0..3] */
  const float* mask;  /* [batch, heads, keys] (strides m[0..2], 0 broadcast), or null */
  float* out;         /* [batch, heads, value_width]: strides o[0..2], or null */
  float* lse;         /* [batch, heads]: strides l[0..1], or null */
  kiln_int64 q[3], k[4], v[4], m[3], o[3], l[2];
  kiln_int64 splits; /* key ranges per row */
  float* partials;   /* splits > 1: per task, max, sum and value_width sums; null after the call */
  const kiln_int64* length; /* [batch] positions (stride length_stride), or null: every key */
  kiln_int64 length_stride, inclusive;
  const kiln_int64 *key_table, *value_table; /* [batch * blocks] pool blocks, or null */
  kiln_int64 key_table_stride, value_table_stride, block, blocks, pool_blocks;
} kiln_attention;

/* Key or value j of batch row n: base (the head's) plus the row's offset
 * (strides s), through `table` when paged; null for a table entry outside
 * the pool. */
static inline const float* kiln_attention_row(const kiln_attention* a, const float* base,
                                              const kiln_int64* table, kiln_int64 table_stride,
                                              const kiln_int64* s, kiln_int64 n, kiln_int64 j) {
  if (!table) return base + n * s[0] + j * s[2];
  const kiln_int64 entry = table[(n * a->blocks + j / a->block) * table_stride];
  if (entry < 0 || entry >= a->pool_blocks) return 0;
  return base + entry * s[0] + (j % a->block) * s[2];
}

/* The keys row `row` attends to: [0, bound). */
static inline kiln_int64 kiln_attention_bound(const kiln_attention* a, kiln_int64 row) {
  if (!a->length) return a->keys;
  const kiln_int64 position = a->length[row / a->heads * a->length_stride];
  return position < 0 ? 0 : position >= a->keys ? a->keys : position + (a->inclusive != 0);
}

/* q.k over `width` elements; unit: both strides are 1 (vectorized). */
template <bool kUnit>
static inline float kiln_attention_dot(const float* __restrict q, const float* __restrict k,
                                       kiln_int64 width, kiln_int64 q_stride, kiln_int64 k_stride) {
#pragma clang fp reassociate(on)
  float sum = 0.0f;
  for (kiln_int64 e = 0; e < width; ++e) {
    sum += kUnit ? q[e] * k[e] : q[e * q_stride] * k[e * k_stride];
  }
  return sum;
}

/* The online softmax of row `row` over keys [begin, end): its maximum, its
 * sum of exp(score - max) and acc = sum of exp(score - max) v. */
template <bool kUnit>
static void kiln_attention_range(const kiln_attention* a, kiln_int64 row, kiln_int64 begin,
                                 kiln_int64 end, float* max_out, float* sum_out,
                                 float* __restrict acc) {
  const kiln_int64 n = row / a->heads, h = row % a->heads;
  const float* q = a->query + n * a->q[0] + h * a->q[1];
  const float* k = a->key + h * a->k[1];
  const float* v = a->value + h * a->v[1];
  const float* mask = a->mask ? a->mask + n * a->m[0] + h * a->m[1] : 0;
  const kiln_int64 width = a->width, value_width = a->value_width;
  const float minus_infinity = -__builtin_inff();
  float max = minus_infinity, sum = 0.0f, scores[KILN_ATTENTION_BLOCK];
  for (kiln_int64 e = 0; e < value_width; ++e) acc[e] = 0.0f;
  for (kiln_int64 block = begin; block < end; block += KILN_ATTENTION_BLOCK) {
    const kiln_int64 count =
        end - block < KILN_ATTENTION_BLOCK ? end - block : KILN_ATTENTION_BLOCK;
    float block_max = minus_infinity;
    for (kiln_int64 t = 0; t < count; ++t) {
      const kiln_int64 j = block + t;
      const float bias = mask ? mask[j * a->m[2]] : 0.0f;
      if (bias == minus_infinity) {
        scores[t] = minus_infinity;  // masked: K[j] is not read
        continue;
      }
      const float* kj = kiln_attention_row(a, k, a->key_table, a->key_table_stride, a->k, n, j);
      const float dot = kj ? kiln_attention_dot<kUnit>(q, kj, width, a->q[2], a->k[3]) : 0.0f;
      const float score = dot * a->scale + bias;
      scores[t] = score;
      block_max = score > block_max ? score : block_max;
    }
    if (block_max == minus_infinity) continue;  // every key of the block masked
    if (block_max > max) {
      const float rescale = kiln_expf_nonpositive(max - block_max);
      sum *= rescale;
      for (kiln_int64 e = 0; e < value_width; ++e) acc[e] *= rescale;
      max = block_max;
    }
    for (kiln_int64 t = 0; t < count; ++t) {
      if (scores[t] == minus_infinity) continue;  // weight 0: V[j] is not read
      const float p = kiln_expf_nonpositive(scores[t] - max);
      const float* vj =
          kiln_attention_row(a, v, a->value_table, a->value_table_stride, a->v, n, block + t);
      sum += p;
      if (!vj) continue;  // zeros
      if (kUnit) {
        for (kiln_int64 e = 0; e < value_width; ++e) acc[e] += p * vj[e];
      } else {
        for (kiln_int64 e = 0; e < value_width; ++e) acc[e] += p * vj[e * a->v[3]];
      }
    }
  }
  *max_out = max;
  *sum_out = sum;
}

/* Row `row`'s results from its online softmax. */
static void kiln_attention_finish(const kiln_attention* a, kiln_int64 row, float max, float sum,
                                  const float* acc) {
  const kiln_int64 n = row / a->heads, h = row % a->heads;
  if (a->out) {
    float* out = a->out + n * a->o[0] + h * a->o[1];
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;  // every key masked: zeros
    for (kiln_int64 e = 0; e < a->value_width; ++e) out[e * a->o[2]] = acc[e] * inverse;
  }
  if (a->lse) a->lse[n * a->l[0] + h * a->l[1]] = max + kiln_logf(sum);
}

static void kiln_attention_task(void* closure, kiln_int64 begin, kiln_int64 end) {
  const kiln_attention* a = (const kiln_attention*)closure;
  const bool unit = a->q[2] == 1 && a->k[3] == 1 && a->v[3] == 1;
  float own[KILN_ATTENTION_MAX_WIDTH];
  for (kiln_int64 task = begin; task < end; ++task) {
    const kiln_int64 row = task / a->splits, split = task % a->splits;
    const kiln_int64 keys = kiln_attention_bound(a, row);
    const kiln_int64 length = (keys + a->splits - 1) / a->splits;
    const kiln_int64 first = split * length < keys ? split * length : keys;
    const kiln_int64 last = first + length < keys ? first + length : keys;
    float max, sum;
    float* partial = a->splits > 1 ? a->partials + task * (a->value_width + 2) : 0;
    float* acc = partial ? partial + 2 : own;
    if (unit) {
      kiln_attention_range<true>(a, row, first, last, &max, &sum, acc);
    } else {
      kiln_attention_range<false>(a, row, first, last, &max, &sum, acc);
    }
    if (partial) {
      partial[0] = max;
      partial[1] = sum;
    } else {
      kiln_attention_finish(a, row, max, sum, acc);
    }
  }
}

static void kiln_attention_f32(const kiln_runtime* rt, kiln_attention* a) {
  const kiln_int64 rows = a->batch * a->heads;
  float partials[KILN_ATTENTION_MAX_SPLITS * (KILN_ATTENTION_MAX_SPLIT_WIDTH + 2)];
  /* Few rows over many keys: ranges of keys too, so every thread works. */
  a->splits = 1;
  if (rows > 0 && rows < 8 && a->value_width <= KILN_ATTENTION_MAX_SPLIT_WIDTH) {
    const kiln_int64 by_keys = a->keys / 512 > 0 ? a->keys / 512 : 1;
    const kiln_int64 wanted = (8 + rows - 1) / rows;
    a->splits = by_keys < wanted ? by_keys : wanted;
  }
  a->partials = partials;
  if (rows > 0) rt->parallel_for(rt->context, rows * a->splits, 1, kiln_attention_task, a);
  a->partials = 0; /* the stack buffer's lifetime ends here */
  if (a->splits == 1) return;
  float acc[KILN_ATTENTION_MAX_SPLIT_WIDTH];
  for (kiln_int64 row = 0; row < rows; ++row) {
    const float* first = partials + row * a->splits * (a->value_width + 2);
    float max = -__builtin_inff(), sum = 0.0f;
    for (kiln_int64 s = 0; s < a->splits; ++s) {
      const float m = first[s * (a->value_width + 2)];
      max = m > max ? m : max;
    }
    for (kiln_int64 e = 0; e < a->value_width; ++e) acc[e] = 0.0f;
    if (max != -__builtin_inff()) {
      for (kiln_int64 s = 0; s < a->splits; ++s) {
        const float* partial = first + s * (a->value_width + 2);
        if (partial[0] == -__builtin_inff()) continue;  // a range of masked keys only
        const float weight = kiln_expf_nonpositive(partial[0] - max);
        sum += partial[1] * weight;
        for (kiln_int64 e = 0; e < a->value_width; ++e) acc[e] += partial[2 + e] * weight;
      }
    }
    kiln_attention_finish(a, row, max, sum, acc);
  }
}
