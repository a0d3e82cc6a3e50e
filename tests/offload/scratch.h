// Scratch directories and engine parameters shared by the offload tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "weft/offload/io_engine.h"

namespace weft::offload::testing {

// A directory for the running test under `root` (not created): one per test and parameter.
inline std::string ScratchDir(const std::string& root = OFFLOAD_TEST_DIR) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return root + "/" + name;
}

// "io_uring" or "threads", for parameterized test names.
inline std::string EngineName(const ::testing::TestParamInfo<IoEngineKind>& info) {
  return info.param == IoEngineKind::kIoUring ? "io_uring" : "threads";
}

// The engine of `kind`, or a skip where this kernel refuses io_uring.
#define WEFT_MAKE_ENGINE_OR_SKIP(engine, engine_kind)                         \
  auto engine##_or = MakeIoEngine({.kind = (engine_kind), .queue_depth = 8}); \
  if ((engine_kind) == IoEngineKind::kIoUring && !engine##_or.ok()) {         \
    GTEST_SKIP() << "io_uring unavailable: " << engine##_or.status();         \
  }                                                                           \
  ASSERT_TRUE(engine##_or.ok()) << engine##_or.status();                      \
  std::unique_ptr<IoEngine> engine = *std::move(engine##_or)

}  // namespace weft::offload::testing
