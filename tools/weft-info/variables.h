// The WEFT_* environment variables Weft reads, and the value each one has for this process.
//
// One table lists them all with their defaults, so `weft-info` can show the effective
// configuration and where each value came from, and a test checks that every WEFT_* name the
// source code reads appears in it.
#pragma once

#include <string>
#include <vector>

namespace weft::info {

struct Variable {
  const char* name;
  const char* default_value;  // as a user would write it; "" when unset means "not set"
  const char* meaning;
};

// Every variable, in the order weft-info prints them.
const std::vector<Variable>& KnownVariables();

struct Setting {
  const Variable* variable = nullptr;  // nullptr: set in the environment but not read by Weft
  std::string name;
  std::string value;  // the effective value
  bool from_environment = false;
};

// Each known variable with its value (the environment's, else the default), then every WEFT_*
// variable of the environment that Weft does not read (a typo, or one from a newer version).
std::vector<Setting> EffectiveSettings(char** environment);

}  // namespace weft::info
