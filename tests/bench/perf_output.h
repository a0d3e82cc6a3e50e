// Reads a *_perf tool's output the way a user's script would, and checks it against the
// nccl-tests 2.19 format (shared/specs/nccl-tests.md) independently of the tools' own formatting
// code: fixed column widths, right alignment, the number rule, the exact header and footer lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::testing {

struct PerfHalf {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::optional<int64_t> wrong;  // empty for N/A
};

// -P's columns after nccl-tests' own; the texts are kept to know how much they were rounded.
struct PerfPrediction {
  std::string algorithm;
  std::string predicted_us;  // a number or "N/A"
  std::string ratio[2];      // measured/predicted, out-of-place and in-place: numbers or "N/A"
};

// --compression's columns after nccl-tests' own: wire bytes per operation and their ratio to an
// uncompressed ring's (the text, "N/A" or "%.4f").
struct PerfWire {
  int64_t bytes = 0;
  std::string ratio;
};

struct PerfRow {
  int64_t size = 0;
  int64_t count = 0;
  std::string type;
  std::string redop;
  int root = 0;
  PerfHalf half[2];  // out-of-place, in-place
  std::optional<PerfPrediction> prediction;
  std::string variant;           // -V's column, after -P's; empty without -V
  std::optional<PerfWire> wire;  // with --compression
};

struct PerfOutput {
  std::string program;           // from "# Collective test starting:"
  bool parameters_line = false;  // "# nThread 1 nGpus 1 minBytes ..."
  int device_lines = 0;
  std::vector<int> device_ranks;   // the Rank column of "# Using devices", in order
  bool result_header = false;      // the three header lines, exactly
  bool predicted_header = false;   // and they carry -P's columns
  bool variants_header = false;    // and -V's
  bool compressed_header = false;  // and --compression's (then every row has its columns)
  std::vector<PerfRow> rows;
  std::optional<int> out_of_bounds;
  std::optional<double> average_busbw;
  std::string bandwidth_verdict;      // "", "OK" or "FAILED"
  bool concluded = false;             // "# Collective test concluded: <program>" and the "#" after
  bool ended = false;                 // the empty line or "# error:" line after the footer
  std::optional<std::string> error;   // the text after "# error: "
  std::vector<std::string> problems;  // every deviation from the format, with the line
  std::vector<std::string> other;     // lines that are not the tool's (launcher messages)
};

PerfOutput ParsePerfOutput(const std::string& text);

// The three result-header lines of nccl-tests 2.19, as the spec shows them; with -C (report
// cputime) the middle line names the time columns "cputime".
extern const char* const kResultHeader[3];
extern const char* const kResultHeaderCputime;
// The same three lines with -P's columns.
extern const char* const kPredictedHeader[3];
// The middle one with -V's column too.
extern const char* const kVariantsHeader;
// The three lines with --compression's columns.
extern const char* const kCompressedHeader[3];

}  // namespace weft::testing
