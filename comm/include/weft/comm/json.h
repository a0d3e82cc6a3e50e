// JSON for the files Weft writes and reads: flight-recorder dumps (written by comm, read by
// weft-trace), the perf tools' reports, and the trainer's configs. One quoting rule and one
// reader, so whatever one part writes the others accept.
//
// The reader takes untrusted input (dumps and configs are files anyone may hand over, and it is
// fuzzed): it bounds nesting, rejects anything that is not strict JSON, and never reads past the
// text. Integers without fraction or exponent are kept exactly as int64 (nanosecond timestamps
// do not fit a double's mantissa).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  bool is_integer = false;  // `integer` holds the exact value
  int64_t integer = 0;
  std::string text;              // kString: the value; kNumber: the literal as written
  std::vector<JsonValue> items;  // kArray
  // kObject, in document order (two vectors: a pair would need JsonValue complete here).
  std::vector<std::string> names;
  std::vector<JsonValue> values;

  // The member named `key` of an object, or nullptr (also for non-objects).
  const JsonValue* Find(absl::string_view key) const;
};

inline constexpr int kMaxJsonDepth = 64;

// Parses one JSON document (surrounding whitespace allowed). Errors say where (line and column)
// and why.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// `text` as a JSON string literal, quotes included: '"' and '\' escaped, newline and tab as \n and
// \t, other control characters as \u00XX. Bytes >= 0x80 pass through (UTF-8 stays UTF-8).
std::string JsonQuote(absl::string_view text);

// `value` as compact JSON text that ParseJson reads back to an equal value (numbers keep the
// literal they were parsed from; a number built in code without one is written from `integer` or
// `number`).
std::string JsonText(const JsonValue& value);

}  // namespace weft
