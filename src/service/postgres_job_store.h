// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL job store (postgres_job_store.cc), for open_job_store.
// Internal to the service module.
#pragma once

#include <memory>
#include <string>

#include "joule/service/job_store.h"

namespace joule::service {

// url: a libpq connection URI (postgresql://[user[:password]@]host[:port]/dbname[?...]).
std::unique_ptr<JobStore> open_postgres_job_store(const std::string& url);

}  // namespace joule::service
