#include "time_scale.h"

#include <cstdlib>

namespace weft::testing {

int TimeScale() {
  const char* scale = std::getenv("WEFT_TEST_TIME_SCALE");
  const int value = scale == nullptr ? 1 : std::atoi(scale);
  return value > 0 ? value : 1;
}

}  // namespace weft::testing
