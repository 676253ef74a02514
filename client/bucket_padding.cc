#include "client/bucket_padding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/warmup_plan.h"

namespace kiln {
bool IsContiguous(const TensorView& view) {
  int64_t expected = 1;
  for (int d = static_cast<int>(view.rank()) - 1; d >= 0; --d) {
    if (view.sizes[d] != 1 && view.strides[d] != expected) return false;
    expected *= view.sizes[d];
  }
  return true;
}

absl::StatusOr<std::vector<PaddableSymbol>> PaddableSymbols(const kiln::v1::PaddingResponse& proof,
                                                            const kiln::v1::WarmupGraph& entry) {
  std::vector<PaddableSymbol> result;
  for (const kiln::v1::PaddedSymbol& padded : proof.symbols()) {
    const auto sizes =
        std::find_if(entry.symbols().begin(), entry.symbols().end(),
                     [&](const kiln::v1::SymbolSizes& s) { return s.symbol() == padded.symbol(); });
    if (sizes == entry.symbols().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbol ", padded.symbol(), " is not one of the warmup entry's"));
    }
    absl::StatusOr<std::vector<int64_t>> buckets = ExpandSizes(*sizes);
    if (!buckets.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbol ", padded.symbol(), ": ", buckets.status().message()));
    }
    result.push_back(PaddableSymbol{padded.symbol(),
                                    {padded.input_dims().begin(), padded.input_dims().end()},
                                    {padded.output_dims().begin(), padded.output_dims().end()},
                                    *std::move(buckets)});
  }
  return result;
}

std::optional<PaddedShape> PadShape(absl::Span<const PaddableSymbol> symbols,
                                    absl::Span<const TensorView> inputs) {
  PaddedShape shape;
  for (const TensorView& input : inputs) {
    if (!IsContiguous(input)) return std::nullopt;
    shape.input_sizes.emplace_back(input.sizes.begin(), input.sizes.end());
  }
  bool padded = false;
  for (const PaddableSymbol& symbol : symbols) {
    int64_t value = -1;
    for (size_t i = 0; i < inputs.size() && i < symbol.input_dims.size(); ++i) {
      const int d = symbol.input_dims[i];
      if (d < 0 || d >= inputs[i].rank()) continue;
      if (value >= 0 && inputs[i].sizes[d] != value) return std::nullopt;
      value = inputs[i].sizes[d];
    }
    const auto bucket = std::lower_bound(symbol.buckets.begin(), symbol.buckets.end(), value);
    if (value < 0 || bucket == symbol.buckets.end()) return std::nullopt;
    padded |= *bucket != value;
    for (size_t i = 0; i < inputs.size() && i < symbol.input_dims.size(); ++i) {
      const int d = symbol.input_dims[i];
      if (d >= 0 && d < inputs[i].rank()) shape.input_sizes[i][d] = *bucket;
    }
    shape.values.push_back(value);
    shape.bucket_values.push_back(*bucket);
    shape.output_dims.push_back(symbol.output_dims);
  }
  if (!padded) return std::nullopt;
  return shape;
}

std::vector<int64_t> UnpaddedOutputSizes(const PaddedShape& shape, int k,
                                         std::vector<int64_t> bucket_sizes) {
  for (size_t s = 0; s < shape.output_dims.size(); ++s) {
    const int d = shape.output_dims[s][k];
    if (d < 0) continue;
    // The symbol is the dim's outermost factor: its size is value * inner.
    bucket_sizes[d] = bucket_sizes[d] / shape.bucket_values[s] * shape.values[s];
  }
  return bucket_sizes;
}

void CopyLeadingRegion(const TensorView& from, const TensorView& to) {
  const int rank = static_cast<int>(from.rank());
  const int64_t element = ElementSize(from.dtype);
  std::vector<int64_t> region(rank);
  for (int d = 0; d < rank; ++d) region[d] = std::min(from.sizes[d], to.sizes[d]);
  for (int64_t size : region) {
    if (size == 0) return;
  }
  // The innermost dims both tensors have whole make one run of bytes.
  int inner = rank;
  int64_t run = element;
  while (inner > 0 && from.sizes[inner - 1] == to.sizes[inner - 1]) {
    run *= from.sizes[--inner];
  }
  if (inner > 0) run *= region[--inner];
  // Odometer over the dims outside the run.
  std::vector<int64_t> index(inner, 0);
  const char* source = static_cast<const char*>(from.data);
  char* target = static_cast<char*>(to.data);
  while (true) {
    int64_t from_offset = 0, to_offset = 0;
    for (int d = 0; d < inner; ++d) {
      from_offset += index[d] * from.strides[d];
      to_offset += index[d] * to.strides[d];
    }
    std::memcpy(target + to_offset * element, source + from_offset * element, run);
    int d = inner - 1;
    while (d >= 0 && ++index[d] == region[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace kiln
