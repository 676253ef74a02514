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

// Across daylight-saving changes (New York's clocks went forward at
// 2026-03-08 07:00 UTC and back at 2026-11-01 06:00 UTC, and Lord Howe's
// by half an hour), second by second around each, and before 1970.
TEST(HumanUnitsTest, TimesFollowTheZonesChanges) {
  for (const char* name : {"America/New_York", "Australia/Lord_Howe"}) {
    absl::TimeZone zone;
    ASSERT_TRUE(absl::LoadTimeZone(name, &zone)) << name << ": is Debian's tzdata installed?";
    for (int64_t around : {int64_t{1772953200}, int64_t{1793512800}, int64_t{1775314800},
                           int64_t{1791041400}, int64_t{-86400 * 400}}) {
      for (int64_t seconds = around - 1000; seconds <= around + 1000; seconds += 7) {
        const absl::Time time = absl::FromUnixSeconds(seconds);
        ASSERT_EQ(HumanTime(time, zone), absl::FormatTime("%Y-%m-%d %H:%M:%S", time, zone))
            << name << " at " << seconds;
      }
    }
  }
}

TEST(HumanUnitsTest, SizesHaveOneDecimalRoundedAsPrintfDoes) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(1280), "1.2 KiB");  // 1.25: half to even
  EXPECT_EQ(HumanBytes(1305), "1.3 KiB");
  EXPECT_EQ(HumanBytes((int64_t{1} << 20) - 1), "1024.0 KiB");
  EXPECT_EQ(HumanBytes(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(HumanBytes(int64_t{5} << 40), "5.0 TiB");
}

}  // namespace
}  // namespace kiln
