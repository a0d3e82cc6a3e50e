// libweft.so's own translation unit (the rest comes whole from the static libraries): it holds
// weft.h's version to the project's, which CMake passes in.
#include "weft/comm/weft.h"

static_assert(WEFT_MAJOR == WEFT_PROJECT_VERSION_MAJOR &&
                  WEFT_MINOR == WEFT_PROJECT_VERSION_MINOR &&
                  WEFT_PATCH == WEFT_PROJECT_VERSION_PATCH,
              "weft.h's WEFT_MAJOR/MINOR/PATCH differ from project(weft VERSION ...)");
