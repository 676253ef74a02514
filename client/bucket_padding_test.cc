#include "client/bucket_padding.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Symbol B in dim 0 of both inputs (x [B, 4], y [B]) and of the output.
PaddableSymbol SymbolB() { return PaddableSymbol{"B", {0, 0}, {0}, {2, 4, 8}}; }

// A padded shape as "inputs [8x4, 8] values [5] buckets [8]".
std::string Print(const std::optional<PaddedShape>& shape) {
  if (!shape.has_value()) return "nullopt";
  std::vector<std::string> inputs;
  for (const auto& sizes : shape->input_sizes) inputs.push_back(absl::StrJoin(sizes, "x"));
  return absl::StrCat("inputs [", absl::StrJoin(inputs, ", "), "] values [",
                      absl::StrJoin(shape->values, ", "), "] buckets [",
                      absl::StrJoin(shape->bucket_values, ", "), "]");
}

// Contiguous views of the given sizes (no data: PadShape reads only shapes).
class Views {
 public:
  explicit Views(std::vector<std::vector<int64_t>> sizes) : sizes_(std::move(sizes)) {
    for (const auto& s : sizes_) strides_.push_back(ContiguousStrides(s));
    for (size_t i = 0; i < sizes_.size(); ++i) {
      TensorView view;
      view.sizes = sizes_[i];
      view.strides = strides_[i];
      views_.push_back(view);
    }
  }
  std::vector<TensorView>& views() { return views_; }
  std::vector<int64_t>& strides(int i) { return strides_[i]; }

 private:
  std::vector<std::vector<int64_t>> sizes_, strides_;
  std::vector<TensorView> views_;
};

std::optional<PaddedShape> Pad(std::vector<std::vector<int64_t>> sizes) {
  Views views(std::move(sizes));
  const PaddableSymbol symbol = SymbolB();
  return PadShape({&symbol, 1}, views.views());
}

TEST(PadShapeTest, AValueBetweenBucketsPadsToTheNextOne) {
  EXPECT_EQ(Print(Pad({{5, 4}, {5}})), "inputs [8x4, 8] values [5] buckets [8]");
  EXPECT_EQ(Print(Pad({{3, 4}, {3}})), "inputs [4x4, 4] values [3] buckets [4]");
  EXPECT_EQ(Print(Pad({{1, 4}, {1}})), "inputs [2x4, 2] values [1] buckets [2]");
}

TEST(PadShapeTest, AnInputWithoutTheSymbolKeepsItsSizes) {
  Views views({{5, 4}, {3}});
  const PaddableSymbol symbol{"B", {0, -1}, {0}, {2, 4, 8}};
  EXPECT_EQ(Print(PadShape({&symbol, 1}, views.views())), "inputs [8x4, 3] values [5] buckets [8]");
}

TEST(PadShapeTest, PaddingDoesNotApply) {
  EXPECT_EQ(Print(Pad({{4, 4}, {4}})), "nullopt") << "an exact bucket";
  EXPECT_EQ(Print(Pad({{9, 4}, {9}})), "nullopt") << "past the largest bucket";
  EXPECT_EQ(Print(Pad({{5, 4}, {6}})), "nullopt") << "inputs disagree on B";
  EXPECT_EQ(Print(PadShape({}, Views({{5, 4}, {5}}).views())), "nullopt") << "no symbols";
}

TEST(PadShapeTest, ANonContiguousInputIsNotPadded) {
  Views views({{5, 4}, {5}});
  views.strides(0) = {1, 5};  // x is the transpose of a [4, 5] tensor
  const PaddableSymbol symbol = SymbolB();
  EXPECT_EQ(Print(PadShape({&symbol, 1}, views.views())), "nullopt");
}

TEST(PadShapeTest, OneSymbolAtABucketAndAnotherPadded) {
  // x [B, S], B in {2, 4}, S in {16, 32}: B = 4 is a bucket, S = 20 pads.
  Views views({{4, 20}});
  const PaddableSymbol symbols[] = {{"B", {0}, {0}, {2, 4}}, {"S", {1}, {1}, {16, 32}}};
  EXPECT_EQ(Print(PadShape(symbols, views.views())),
            "inputs [4x32] values [4, 20] buckets [4, 32]");
}

TEST(UnpaddedOutputSizesTest, TheSymbolsDimShrinksByValueOverBucket) {
  PaddedShape shape;
  shape.values = {5};
  shape.bucket_values = {8};
  shape.output_dims = {SymbolB().output_dims};
  // Dim 0 is B * 3 (B outermost) in the bucket: 24 -> 15.
  EXPECT_EQ(UnpaddedOutputSizes(shape, 0, {24, 7}), (std::vector<int64_t>{15, 7}));
  EXPECT_EQ(UnpaddedOutputSizes(shape, 0, {8}), (std::vector<int64_t>{5}));
  shape.output_dims = {{-1}};  // the output does not hold B
  EXPECT_EQ(UnpaddedOutputSizes(shape, 0, {24, 7}), (std::vector<int64_t>{24, 7}));
}

// A float tensor filled with 1, 2, 3, ... in memory order.
Tensor Iota(std::vector<int64_t> sizes) {
  Tensor tensor(kiln::v1::FLOAT32, std::move(sizes));
  for (int64_t i = 0; i < tensor.NumElements(); ++i) tensor.data<float>()[i] = i + 1;
  return tensor;
}

std::string Elements(const Tensor& tensor) {
  std::vector<std::string> rows;
  const int64_t width = tensor.sizes().empty() ? 1 : tensor.sizes().back();
  std::string row;
  for (int64_t i = 0; i < tensor.NumElements(); ++i) {
    absl::StrAppend(
        &row, row.empty() ? "" : " ",
        tensor.dtype() == kiln::v1::FLOAT64 ? tensor.data<double>()[i] : tensor.data<float>()[i]);
    if ((i + 1) % width == 0) rows.push_back(std::exchange(row, ""));
  }
  return absl::StrJoin(rows, " | ");
}

TEST(CopyLeadingRegionTest, IntoALargerTensorLeavesTheRestAsItWas) {
  const Tensor from = Iota({2, 3});
  const Tensor to(kiln::v1::FLOAT32, {4, 5});
  CopyLeadingRegion(from.view(), to.view());
  EXPECT_EQ(Elements(to), "1 2 3 0 0 | 4 5 6 0 0 | 0 0 0 0 0 | 0 0 0 0 0");
}

TEST(CopyLeadingRegionTest, FromALargerTensorTakesItsLeadingPart) {
  const Tensor from = Iota({4, 5});
  const Tensor to(kiln::v1::FLOAT32, {2, 3});
  CopyLeadingRegion(from.view(), to.view());
  EXPECT_EQ(Elements(to), "1 2 3 | 6 7 8");
}

TEST(CopyLeadingRegionTest, WholeInnerDimsAreOneRun) {
  const Tensor from = Iota({2, 2, 3});
  const Tensor to(kiln::v1::FLOAT32, {3, 2, 3});
  CopyLeadingRegion(from.view(), to.view());
  EXPECT_EQ(Elements(to), "1 2 3 | 4 5 6 | 7 8 9 | 10 11 12 | 0 0 0 | 0 0 0");
  const Tensor back(kiln::v1::FLOAT32, {2, 2, 3});
  CopyLeadingRegion(to.view(), back.view());
  EXPECT_EQ(Elements(back), Elements(from));
}

TEST(CopyLeadingRegionTest, AnOuterDimSmallerThanAnInnerOne) {
  const Tensor from = Iota({3, 2, 2});
  const Tensor to(kiln::v1::FLOAT32, {2, 3, 2});
  CopyLeadingRegion(from.view(), to.view());
  EXPECT_EQ(Elements(to), "1 2 | 3 4 | 0 0 | 5 6 | 7 8 | 0 0");
}

TEST(CopyLeadingRegionTest, RankZeroCopiesTheOneElement) {
  const Tensor from = Iota({});
  const Tensor to(kiln::v1::FLOAT32, {});
  CopyLeadingRegion(from.view(), to.view());
  EXPECT_EQ(to.data<float>()[0], 1.0f);
}

TEST(CopyLeadingRegionTest, AnEmptyRegionCopiesNothing) {
  const Tensor from(kiln::v1::FLOAT32, {0, 3});
  const Tensor to = Iota({2, 3});
  CopyLeadingRegion(from.view(), to.view());
  EXPECT_EQ(Elements(to), "1 2 3 | 4 5 6");
}

TEST(CopyLeadingRegionTest, Float64ElementsAreCopiedWhole) {
  Tensor from(kiln::v1::FLOAT64, {2, 2});
  const double values[] = {0.1, -2.5, 1e300, 3.25};
  for (int i = 0; i < 4; ++i) from.data<double>()[i] = values[i];
  const Tensor to(kiln::v1::FLOAT64, {3, 3});
  CopyLeadingRegion(from.view(), to.view());
  const double expected[] = {0.1, -2.5, 0, 1e300, 3.25, 0, 0, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(to.data<double>()[i], expected[i]) << i;
}

// --- PaddableSymbols ---------------------------------------------------------

// kilnd's proof, with the entry's sizes as each symbol's buckets.
TEST(PaddableSymbolsTest, KilndsProofWithTheEntrysBuckets) {
  kiln::v1::PaddingResponse proof;
  kiln::v1::PaddedSymbol* padded = proof.add_symbols();
  padded->set_symbol("B");
  padded->add_input_dims(0);
  padded->add_input_dims(-1);
  padded->add_output_dims(1);
  kiln::v1::WarmupGraph entry;
  kiln::v1::SymbolSizes* sizes = entry.add_symbols();
  sizes->set_symbol("B");
  for (int64_t size : {8, 2, 4}) sizes->add_sizes(size);
  sizes->set_paddable(true);
  auto symbols = PaddableSymbols(proof, entry);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  ASSERT_EQ(symbols->size(), 1);
  const PaddableSymbol& symbol = (*symbols)[0];
  EXPECT_EQ(symbol.name, "B");
  EXPECT_EQ(symbol.input_dims, (std::vector<int>{0, -1}));
  EXPECT_EQ(symbol.output_dims, (std::vector<int>{1}));
  EXPECT_EQ(symbol.buckets, (std::vector<int64_t>{2, 4, 8})) << "sorted";

  padded->set_symbol("S");
  EXPECT_EQ(PaddableSymbols(proof, entry).status(),
            absl::InvalidArgumentError("symbol S is not one of the warmup entry's"));
}

}  // namespace
}  // namespace kiln
