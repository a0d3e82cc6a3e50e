// main() of every *_perf tool: the harness runs the collective its spec file defines.
#include "perf/collective.h"
#include "perf/perf_tool.h"

int main(int argc, char** argv) {
  return weft::perf::RunPerfTool(argc, argv, weft::perf::PerfCollective());
}
