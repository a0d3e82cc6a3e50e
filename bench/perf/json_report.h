// -J file.json: the run and every measurement as one JSON document, written by rank 0.
//
// Schema (version 1):
//   {
//     "version": 1,
//     "program": "all_reduce_perf",            "weft_version": "0.1.0",
//     "start_time": "2024-05-01 12:00:00",     "end_time": "...",   (local time)
//     "args": ["all_reduce_perf", "-b", "8", ...],
//     "config": {
//       "ranks": 4, "minimum_bytes": 8, "maximum_bytes": 67108864,
//       "step_factor": 4 | "step_bytes": 1048576,      (whichever -f / -i chose)
//       "warmup_iters": 1, "iterations": 20, "aggregated_iterations": 1, "run_cycles": 1,
//       "validation": 1, "blocking": 0, "average": 1, "report_cputime": false, "unalign": 0,
//       "timeout_s": 0, "algorithm": "", "inject_errors": 0, "predicted": false,
//       "compression": "int8", "compression_block": 256, "topk_ratio": 0.01  (--compression only)
//     },
//     "devices": [ {"rank": 0, "group": 0, "pid": 123, "hostname": "node1", "device": 0,
//                   "device_info": "Intel(R) Xeon(R) ..."}, ... ],
//     "results": [   (one per size, type, operator, root, placement and cycle, in table order)
//       {"cycle": 1, "size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
//        "placement": "out-of-place" | "in-place",
//        "time_us": 7.5, "algbw": 0.001, "busbw": 0.002,   (time_us is the -C time with -C)
//        "wrong": 0 | null,                               (null: not checked, the table's N/A)
//        "algorithm": "shm_direct",                       (these three with -P only: the
//        "predicted_us": 1.2 | null,                       table's -P columns, exact; null
//        "measured_over_predicted": 1.1 | null,            where the table shows N/A)
//        "wire_bytes": 1032, "uncompressed_bytes": 4096,  (these three with --compression only:
//        "wire_ratio": 0.252 | null},                      per operation, from this rank)
//       ...
//     ],
//     "out_of_bounds": {"count": 0, "okay": true},
//     "average_bus_bandwidth": {"bandwidth": 1.5, "minimum": null | 10.0, "okay": true},
//     "errors": [] | ["rank 1: all_reduce #12 ...: ..."]
//   }
// Numbers that are not finite are written as null.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "perf/device_report.h"
#include "perf/measurement.h"
#include "perf/options.h"

namespace weft::perf {

class JsonReport {
 public:
  // Creates the file without overwriting anything, as nccl-tests does: `path`, else `path`.0,
  // `path`.1, ... Fails when the file cannot be created.
  static absl::StatusOr<std::unique_ptr<JsonReport>> Create(const std::string& path);
  ~JsonReport();
  JsonReport(const JsonReport&) = delete;
  JsonReport& operator=(const JsonReport&) = delete;

  const std::string& path() const { return path_; }

  void SetRun(const Options& options, const std::string& program, int ranks);
  void SetDevices(const std::vector<RankInfo>& devices);
  void Add(const Measurement& measurement);

  // Writes the document and closes the file.
  absl::Status Finish(int out_of_bounds, double average_busbw, std::optional<double> min_bw,
                      bool bandwidth_ok, const std::vector<std::string>& errors);

 private:
  JsonReport(std::FILE* file, std::string path);

  std::FILE* file_;
  std::string path_;
  std::string start_time_;
  std::string run_;      // "program" through "config", without braces
  std::string devices_;  // the array's members
  std::string results_;  // the array's members
};

}  // namespace weft::perf
