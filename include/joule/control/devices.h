// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The devices a program uses, with the way their settings change decided:
// directly through the driver (root), through jouled (its socket exists and
// the process is not root; the GPUs are wrapped so each change is a lease), or
// not at all (limits can only be read). Device discovery itself is the
// hardware layer's (joule/device/discovery.h); this floor decides control, and
// later knobs (clock locks) share it.
#pragma once

#include "joule/device/discovery.h"

namespace joule {

// discover_hardware(), then the control path (Devices::control_path says which
// and why). Throws what discovery throws, UsageError for an unknown control
// mode, and DaemonError when jouled was chosen but cannot be reached.
Devices discover_devices(const DiscoveryOptions& options = {});

}  // namespace joule
