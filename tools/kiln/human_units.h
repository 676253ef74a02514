// Sizes, times and durations as the kiln CLI prints them to people (JSON
// output keeps the raw numbers).
#ifndef KILN_TOOLS_KILN_HUMAN_UNITS_H_
#define KILN_TOOLS_KILN_HUMAN_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln {

// "512 B", "1.5 KiB", "12.0 MiB": powers of 1024, one decimal.
std::string HumanBytes(int64_t bytes);

// "2026-12-02 04:36:53" in `zone`; "-" for the Unix epoch (never set).
std::string HumanTime(absl::Time time, absl::TimeZone zone = absl::LocalTimeZone());

// "45s", "12m 5s", "3h 2m", "2d 4h": the two largest units.
std::string HumanDuration(absl::Duration duration);

// What people type: "1.5G", "500M", "64K", "1024" (bytes, powers of 1024),
// and "30d", "12h", "1h30m" (absl's durations, plus days). InvalidArgument
// naming the text otherwise, or for a negative one.
absl::StatusOr<int64_t> ParseBytes(const std::string& text);
absl::StatusOr<absl::Duration> ParseAge(const std::string& text);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_HUMAN_UNITS_H_
