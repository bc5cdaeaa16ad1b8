// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// joule's version, as the build set it (CMake's project version): what
// `joule --version` prints and what JSON outputs and reports carry.
#pragma once

namespace joule {

const char* version();

}  // namespace joule
