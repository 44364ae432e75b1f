#pragma once
/// Simulated time: integer nanoseconds everywhere. Nothing in sim/, protocols/ or scenarios/ reads a real
/// clock.
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

namespace locksim {

/// A span of simulated time (signed 64-bit nanoseconds).
using Duration = std::chrono::nanoseconds;
/// A point in true simulated time, as the duration since the world started.
using Time = std::chrono::nanoseconds;

using namespace std::chrono_literals;

inline constexpr Time kTimeMax = Time{std::numeric_limits<std::int64_t>::max()};

/// "12.345678s"-style rendering with trailing zeros trimmed (for reports and the trace).
std::string format_time(Duration d);

/// Seconds with a fixed number of decimals ("15.020").
std::string format_seconds(Duration d, int decimals = 3);

}  // namespace locksim
