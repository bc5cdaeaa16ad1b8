#include "joule/version.h"

namespace joule {

const char* version() { return JOULE_VERSION; }

}  // namespace joule
