// One *_perf tool from start to exit status: options, communicator, header, the benchmark, the
// footer, the JSON report. Every rank runs it; rank 0 prints.
//
// Exit status: 0 success; 2 usage error; 3 communication or other error; 4 the -T bound passed;
// 7 wrong values or average bus bandwidth below 0.9 x NCCL_TESTS_MIN_BW (nccl-tests' codes for
// timeout and failed results). Every rank exits with the same status when the run completes.
#pragma once

#include "perf/collective.h"

namespace weft::perf {

int RunPerfTool(int argc, char** argv, const Collective& collective);

}  // namespace weft::perf
