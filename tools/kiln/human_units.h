// Sizes, times and durations as the kiln CLI prints them to people (JSON
// output keeps the raw numbers).
#ifndef KILN_TOOLS_KILN_HUMAN_UNITS_H_
#define KILN_TOOLS_KILN_HUMAN_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace kiln {

// "512 B", "1.5 KiB", "12.0 MiB": powers of 1024, one decimal.
std::string HumanBytes(int64_t bytes);

// "2026-12-02 04:36:53" in `zone`; "-" for the Unix epoch (never set).
std::string HumanTime(absl::Time time, absl::TimeZone zone = absl::LocalTimeZone());

// "45s", "12m 5s", "3h 2m", "2d 4h": the two largest units.
std::string HumanDuration(absl::Duration duration);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_HUMAN_UNITS_H_
