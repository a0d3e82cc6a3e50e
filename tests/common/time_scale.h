// How much longer than usual a test may let things take. Sanitizer builds run several times
// slower, so scripts/run-sanitizers sets WEFT_TEST_TIME_SCALE and every time bound of a test
// (job limits, "within N seconds" checks) is multiplied by it.
#pragma once

namespace weft::testing {

// WEFT_TEST_TIME_SCALE as a positive whole number; 1 when unset or not a positive number.
int TimeScale();

// An upper bound on wall-clock time (absl::Duration or std::chrono), multiplied by TimeScale().
// Lower bounds ("took at least") stay as they are.
template <typename Duration>
Duration Scaled(Duration bound) {
  return bound * TimeScale();
}

}  // namespace weft::testing
