#include "tools/kiln/human_units.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(HumanUnitsTest, SizesAndAgesParseAsPeopleWriteThem) {
  EXPECT_EQ(*ParseBytes("1024"), 1024);
  EXPECT_EQ(*ParseBytes("64K"), 64 << 10);
  EXPECT_EQ(*ParseBytes("1.5g"), int64_t{3} << 29);
  EXPECT_EQ(
      ParseBytes("2GT").status(),
      absl::InvalidArgumentError("'2GT' is not a size: give bytes, or a number with K, M, G or T"));
  EXPECT_FALSE(ParseBytes("-1M").ok());
  EXPECT_EQ(*ParseAge("30d"), absl::Hours(720));
  EXPECT_EQ(*ParseAge("1h30m"), absl::Minutes(90));
  EXPECT_EQ(ParseAge("soon").status(),
            absl::InvalidArgumentError("'soon' is not an age: give e.g. 30d, 12h or 90m"));
  EXPECT_EQ(ParseAge("-2h").status(), absl::InvalidArgumentError("age -2h is negative"));
}

// As FormatTime("%Y-%m-%d %H:%M:%S") in the given zone; the epoch (never
// used) is "-".
TEST(HumanUnitsTest, TimesPrintAsCivilSecondsInTheZone) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  EXPECT_EQ(HumanTime(absl::FromCivil(absl::CivilSecond(2026, 12, 2, 7, 5, 9), utc), utc),
            "2026-12-02 07:05:09");
  EXPECT_EQ(HumanTime(absl::UnixEpoch(), utc), "-");
  const absl::TimeZone offset = absl::FixedTimeZone(-(3 * 3600 + 30 * 60));
  for (int64_t seconds : {1, 86399, 951782400, 1796193047}) {
    const absl::Time time = absl::FromUnixSeconds(seconds);
    EXPECT_EQ(HumanTime(time, offset), absl::FormatTime("%Y-%m-%d %H:%M:%S", time, offset));
  }
}

}  // namespace
}  // namespace kiln
