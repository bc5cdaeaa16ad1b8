// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/version.h"

namespace joule {

const char* version() { return JOULE_VERSION; }

}  // namespace joule
